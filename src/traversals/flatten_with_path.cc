// The with-path entry points, built on the flatten traversal:
// tree_flatten_with_path, tree_leaves_with_path and torch's two (install()
// swaps them into torch). The key entries they record come from key_entries.h.
#include "base/args.h"
#include "ground/key_entries.h"
#include "ground/spec_object.h"
#include "traversals/flatten.h"

namespace cpytree {

namespace {
const char* const kTreeArgs[] = {"tree", "is_leaf"};
}  // namespace

PyObject* PyTreeFlattenWithPath(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_flatten_with_path", args, nargs, kwnames, kTreeArgs, 2, 1, a)) {
    return nullptr;
  }
  KeyScope scope(KeyFlavor::kOwn);
  if (!KeyTypesReady()) return nullptr;
  ScratchArena b;
  if (!FlattenWithPathInto(a[0], a[1], b.get())) return nullptr;
  Ref spec(FinishSpec(b.get()));
  if (!spec) return nullptr;
  Ref pairs(StealIntoList(&b->paths));
  if (!pairs) return nullptr;
  return PyTuple_Pack(2, pairs.get(), spec.get());
}

PyObject* PyTreeLeavesWithPath(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_leaves_with_path", args, nargs, kwnames, kTreeArgs, 2, 1, a)) {
    return nullptr;
  }
  KeyScope scope(KeyFlavor::kOwn);
  if (!KeyTypesReady()) return nullptr;
  ScratchArena b;
  if (!LeavesWithPathInto(a[0], a[1], b.get())) return nullptr;
  return StealIntoList(&b->paths);
}

namespace {
// torch's _generate_key_paths((), tree, is_leaf) with torch's key classes: a
// new list of (key path, leaf) pairs, or null with an exception.
PyObject* TorchKeyPaths(PyObject* tree, PyObject* is_leaf) {
  KeyScope scope(KeyFlavor::kTorch);
  if (!KeyTypesReady()) return nullptr;
  ScratchArena b;
  if (!LeavesWithPathInto(tree, is_leaf, b.get())) return nullptr;
  return StealIntoList(&b->paths);
}
}  // namespace

PyObject* PyTorchTreeFlattenWithPath(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_flatten_with_path", args, nargs, kwnames, kTreeArgs, 2, 1, a)) {
    return nullptr;
  }
  // torch's two passes in torch's order: tree_flatten(tree, is_leaf) for the
  // spec (flatten_fn), then the key paths (flatten_with_keys_fn), so user
  // functions run in the same order and the first error is torch's.
  Ref spec;
  {
    ScratchArena b;
    if (!FlattenInto(a[0], a[1], true, b.get())) return nullptr;
    spec = Ref(FinishSpec(b.get()));
    if (!spec) return nullptr;
  }
  Ref pairs(TorchKeyPaths(a[0], a[1]));
  if (!pairs) return nullptr;
  return PyTuple_Pack(2, pairs.get(), spec.get());
}

PyObject* PyTorchTreeLeavesWithPath(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                    PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_leaves_with_path", args, nargs, kwnames, kTreeArgs, 2, 1, a)) {
    return nullptr;
  }
  return TorchKeyPaths(a[0], a[1]);
}

}  // namespace cpytree
