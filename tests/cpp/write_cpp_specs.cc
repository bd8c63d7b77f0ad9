// C++ -> Python: writes specs made by the C++ library (builders and Flatten of
// C++ values) with cpytree::Dumps into a JSON file that
// tests/python/test_cpp_roundtrip.py loads with torch's treespec_loads,
// checking that treespec_dumps reproduces the bytes and repr() the text.
//
//   write_cpp_specs build/cpp/cpp_specs.json
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpytree/cpytree.h"
#include "cpytree/json.h"

namespace {

using cpytree::TreeSpec;
using cpytree::Value;
using Tr = cpytree::Tree<int>;

TreeSpec L() { return TreeSpec::Leaf(); }

std::vector<std::pair<std::string, TreeSpec>> Specs() {
  std::map<std::string, std::vector<float>> params = {{"w", {1, 2}}, {"b", {3}}};
  std::unordered_map<int, std::optional<float>> by_id = {{3, 1.f}, {1, std::nullopt}};
  std::tuple<std::pair<int, int>, std::vector<std::vector<int>>> nested{{1, 2}, {{3}, {}}};
  Tr everything = Tr::List({
      Tr::Tuple({1, Tr::NamedTuple("cpytree_test.Point", {2, 3})}),
      Tr::OrderedDict({{"z", 4}, {"a", Tr::List({})}}),
      Tr::DefaultDict({"builtins", "list"}, {{"k", 5}, {2, Tr::Tuple({6})}}),
      Tr::Deque({7, 8}, 4),
      Tr::Deque({}),
      Tr::Custom("cpytree_test.Pair", "[\"tag\", 1]", {9, 10}),
      Tr::Dict({{"é\n'\"😀", 11}, {1.5, 12}, {true, 13}, {nullptr, 14},
                {Value::MakeBigInt("100000000000000000000"), 15}, {-7, 16}, {1e16, 17}}),
  });
  return {
      {"leaf", L()},
      {"empty_tuple", TreeSpec::Tuple({})},
      {"builders", TreeSpec::Tuple({TreeSpec::List({L(), L()}),
                                    TreeSpec::Dict({"a", 3}, {L(), TreeSpec::Dict({}, {})})})},
      {"deque_maxlen_zero", TreeSpec::Deque(0, {})},
      {"flatten_std_map", cpytree::Structure(params)},
      {"flatten_unordered_map_optional", cpytree::Structure(by_id)},
      {"flatten_nested_std", cpytree::Structure(nested)},
      {"flatten_tree_every_kind", cpytree::Structure(everything)},
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_cpp_specs OUT.json\n";
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, spec] : Specs()) {
    out.push_back({{"name", name},
                   {"dumps", cpytree::Dumps(spec)},
                   {"repr", spec.ToString()},
                   {"num_leaves", spec.num_leaves()},
                   {"num_nodes", spec.num_nodes()}});
  }
  std::ofstream file(argv[1]);
  file << out.dump(1) << "\n";
  if (!file) {
    std::cerr << "write_cpp_specs: cannot write " << argv[1] << "\n";
    return 1;
  }
  std::cout << "wrote " << out.size() << " specs to " << argv[1] << "\n";
  return 0;
}
