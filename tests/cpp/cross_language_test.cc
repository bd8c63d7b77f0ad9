// Python -> C++: every spec in fixtures/specs.json was written by torch's
// treespec_dumps (gen_fixtures.py). C++ must load it, dump the same bytes,
// agree on the counts and print Python's repr of the loaded spec.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpytree/cpytree.h"
#include "cpytree/json.h"
#include "gtest/gtest.h"

#ifndef CPYTREE_FIXTURES_DIR
#error "CPYTREE_FIXTURES_DIR must name tests/cpp/fixtures"
#endif

namespace cpytree {
namespace {

struct Fixture {
  std::string name, dumps, repr;
  bool repr_exact;
  std::int64_t num_leaves, num_nodes;
  std::size_t num_children;
};

std::vector<Fixture> LoadFixtures() {
  std::ifstream in(std::string(CPYTREE_FIXTURES_DIR) + "/specs.json");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<Fixture> out;
  for (const auto& j : nlohmann::json::parse(text.str())) {
    out.push_back({j.at("name"), j.at("dumps"), j.at("repr"), j.at("repr_exact"),
                   j.at("num_leaves"), j.at("num_nodes"), j.at("num_children")});
  }
  return out;
}

class PythonSpecsTest : public ::testing::TestWithParam<Fixture> {};

TEST_P(PythonSpecsTest, LoadsAndDumpsBackByteIdentically) {
  const Fixture& f = GetParam();
  TreeSpec spec = Loads(f.dumps);
  EXPECT_EQ(Dumps(spec), f.dumps);
  EXPECT_EQ(spec.num_leaves(), f.num_leaves);
  EXPECT_EQ(spec.num_nodes(), f.num_nodes);
  EXPECT_EQ(spec.num_children(), f.num_children);
  EXPECT_TRUE(internal::IsWellFormed(spec.raw_nodes(), spec.num_nodes()));
  if (f.repr_exact) {
    EXPECT_EQ(spec.ToString(), f.repr);
  }
  // A second trip through the API changes nothing either.
  TreeSpec again = Loads(Dumps(spec));
  EXPECT_EQ(again, spec);
  EXPECT_EQ(again.Hash(), spec.Hash());
  // Rebuilding from children preserves it (exercises subtree copies).
  if (!spec.is_leaf()) {
    std::vector<Value> items;
    for (std::size_t k = 0; k < spec.num_context_items(); ++k) items.push_back(spec.context_item(k));
    EXPECT_EQ(Dumps(TreeSpec::Make(spec.kind(), items, spec.children())), f.dumps);
  }
}

TEST_P(PythonSpecsTest, UnflattensIntoATreeWithTheSameSpec) {
  const Fixture& f = GetParam();
  TreeSpec spec = Loads(f.dumps);
  std::vector<std::int64_t> leaves(static_cast<std::size_t>(spec.num_leaves()));
  for (std::size_t k = 0; k < leaves.size(); ++k) leaves[k] = static_cast<std::int64_t>(k);
  Tree<std::int64_t> tree = Unflatten(spec, leaves);
  auto [back, spec2] = Flatten(tree);
  EXPECT_EQ(back, leaves);
  EXPECT_EQ(Dumps(spec2), f.dumps);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PythonSpecsTest, ::testing::ValuesIn(LoadFixtures()),
                         [](const ::testing::TestParamInfo<Fixture>& info) { return info.param.name; });

TEST(PythonSpecsFileTest, HasEveryNodeKind) {
  std::vector<bool> seen(kNumNodeKinds, false);
  for (const Fixture& f : LoadFixtures()) {
    TreeSpec s = Loads(f.dumps);
    for (std::int64_t i = 0; i < s.num_nodes(); ++i) {
      seen[static_cast<std::size_t>(s.raw_nodes()[i].kind)] = true;
    }
  }
  for (int k = 0; k < kNumNodeKinds; ++k) EXPECT_TRUE(seen[k]) << "kind " << k;
}

}  // namespace
}  // namespace cpytree
