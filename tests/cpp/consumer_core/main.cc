// Uses the installed core alone: build a spec, flatten against it, rebuild.
// No JSON library may come in with the core headers.
#include <cpytree/cpytree.h>

#if defined(SIMDJSON_H) || defined(INCLUDE_NLOHMANN_JSON_HPP_)
#error "the core headers included a JSON library"
#endif

#include <iostream>
#include <map>
#include <string>
#include <vector>

int main() {
  using cpytree::TreeSpec;
  TreeSpec spec = TreeSpec::Dict({"a", "b"}, {TreeSpec::Leaf(), TreeSpec::List({TreeSpec::Leaf()})});
  std::map<std::string, std::vector<int>> value = {{"b", {2}}};
  cpytree::Tree<int> t = cpytree::Tree<int>::Dict({{"b", cpytree::Tree<int>::List({2})}, {"a", 1}});
  std::vector<int> leaves = cpytree::FlattenSpec<int>(spec, t);
  cpytree::Tree<int> back = cpytree::Unflatten(spec, leaves);
  std::cout << back.ToString() << " " << spec.ToString().size() << "\n";
  return back.ToString() == "{'a': 1, 'b': [2]}" ? 0 : 1;
}
