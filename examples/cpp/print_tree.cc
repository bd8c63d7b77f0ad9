// print_tree: rebuilds a pytree from a spec written by Python and a JSON list
// of leaves, and prints it the way Python would.
//
//   $ python -c "import torch.utils._pytree as p; print(p.treespec_dumps(
//         p.tree_structure({'w': [0, 0], 'b': (0,)})))" > spec.json
//   $ echo '[1.5, 2, "bias"]' > leaves.json
//   $ print_tree spec.json leaves.json
//   {'w': [1.5, 2], 'b': ('bias',)}
//
// With `--spec` it prints the spec's repr instead of the tree.
#include <cpytree/cpytree.h>
#include <cpytree/json.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cpytree::Error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool spec_only = !args.empty() && args[0] == "--spec";
  if (spec_only) args.erase(args.begin());
  if (args.size() != (spec_only ? 1u : 2u)) {
    std::cerr << "usage: print_tree SPEC.json LEAVES.json\n"
                 "       print_tree --spec SPEC.json\n";
    return 2;
  }
  try {
    cpytree::TreeSpec spec = cpytree::Loads(ReadFile(args[0]));
    if (spec_only) {
      std::cout << spec.ToString() << "\n";
      return 0;
    }
    cpytree::Value leaves = cpytree::LoadsValue(ReadFile(args[1]));
    if (!leaves.is_list()) throw cpytree::Error("the leaves must be a JSON list");
    cpytree::Tree<cpytree::Value> tree = cpytree::Unflatten(spec, leaves.as_list());
    std::cout << tree.ToString([](const cpytree::Value& v) { return v.Repr(); }) << "\n";
  } catch (const cpytree::Error& e) {
    std::cerr << "print_tree: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
