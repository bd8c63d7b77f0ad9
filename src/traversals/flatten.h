// The flatten traversal: leaves (and optionally the spec nodes) of a tree,
// with the modes chosen once at the entry point as template parameters, and
// the entry points built on it.
//
//   ScratchArena b;
//   if (!FlattenInto(tree, is_leaf, /*with_spec=*/true, b.get())) return nullptr;
//   PyObject* spec = FinishSpec(b.get());
#ifndef CPYTREE_SRC_FLATTEN_H_
#define CPYTREE_SRC_FLATTEN_H_

#include "ground/spec_object.h"

namespace cpytree {

// Flattens `tree` into b->leaves (and b->nodes/b->items when `with_spec`).
// `is_leaf` may be null or None. False with an exception set.
bool FlattenInto(PyObject* tree, PyObject* is_leaf, bool with_spec, TraversalArena* b);

// Like FlattenInto with the spec, also recording (KeyPath, leaf) pairs in
// b->paths (keys from each node's flatten_with_keys_fn for custom nodes).
bool FlattenWithPathInto(PyObject* tree, PyObject* is_leaf, TraversalArena* b);
// The (KeyPath, leaf) pairs alone, into b->paths (torch's _generate_key_paths:
// flatten_with_keys_fn only); no spec, no b->leaves.
bool LeavesWithPathInto(PyObject* tree, PyObject* is_leaf, TraversalArena* b);

// The interned spec of a finished traversal (new reference).
PyObject* FinishSpec(TraversalArena* b);

// Moves the owned references of `v` into a new list (v is left empty).
// Inline, with the size and source read once: the list's stores may alias
// the vector for the compiler, which then reloaded both every item (about
// 600 instructions a call for a 600-leaf result).
inline PyObject* StealIntoList(std::vector<PyObject*>* v) {
  const std::size_t n = v->size();
  PyObject* const* src = v->data();
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
  if (list == nullptr) return nullptr;
  for (std::size_t i = 0; i < n; ++i) PyList_SET_ITEM(list, i, src[i]);
  v->clear();
  return list;
}

CPYTREE_FASTCALL(PyTreeFlatten);    // tree_flatten(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeLeaves);     // tree_leaves(tree, is_leaf=None)
CPYTREE_FASTCALL(PyArgTreeLeaves);  // arg_tree_leaves(*args, **kwargs)
CPYTREE_FASTCALL(PyTreeStructure);  // tree_structure(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeIsLeaf);     // tree_is_leaf(tree, is_leaf=None)

// The with-path entry points (flatten_with_path.cc).
CPYTREE_FASTCALL(PyTreeFlattenWithPath);  // tree_flatten_with_path(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeLeavesWithPath);   // tree_leaves_with_path(tree, is_leaf=None)
// torch.utils._pytree's tree_flatten_with_path / tree_leaves_with_path, with
// torch's key classes and torch's order of user calls (install() swaps them in).
CPYTREE_FASTCALL(PyTorchTreeFlattenWithPath);
CPYTREE_FASTCALL(PyTorchTreeLeavesWithPath);

}  // namespace cpytree

#endif  // CPYTREE_SRC_FLATTEN_H_
