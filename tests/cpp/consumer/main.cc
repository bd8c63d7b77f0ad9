// Uses the installed headers: load a spec as Python writes it, rebuild a tree.
#include <cpytree/cpytree.h>
#include <cpytree/json.h>

#include <iostream>
#include <vector>

int main() {
  const char* text =
      R"([1, {"type": "builtins.dict", "context": "[\"a\"]", "children_spec": [)"
      R"({"type": null, "context": null, "children_spec": []}]}])";
  cpytree::TreeSpec spec = cpytree::Loads(text);
  cpytree::Tree<int> tree = cpytree::Unflatten(spec, std::vector<int>{42});
  std::cout << tree.ToString() << "\n";
  return cpytree::Dumps(spec) == text && tree.ToString() == "{'a': 42}" ? 0 : 1;
}
