// The Python-facing entry points of cpytree._C. The hot ones are
// METH_FASTCALL | METH_KEYWORDS C functions bound directly as the public
// functions of the cpytree package: no Python frame between the caller and
// the traversal.
#ifndef CPYTREE_SRC_API_H_
#define CPYTREE_SRC_API_H_

#include "common.h"

namespace cpytree {

#define CPYTREE_FASTCALL(name) \
  PyObject* name(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames)

CPYTREE_FASTCALL(PyTreeFlatten);      // tree_flatten(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeLeaves);       // tree_leaves(tree, is_leaf=None)
CPYTREE_FASTCALL(PyArgTreeLeaves);    // arg_tree_leaves(*args, **kwargs)
CPYTREE_FASTCALL(PyTreeStructure);    // tree_structure(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeIsLeaf);       // tree_is_leaf(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeIter);         // tree_iter(tree, is_leaf=None): a lazy iterator
CPYTREE_FASTCALL(PyTreeUnflatten);    // tree_unflatten(leaves, treespec)
CPYTREE_FASTCALL(PyTreeMap);          // tree_map(func, tree, *rests, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapInplace);   // tree_map_(func, tree, *rests, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapOnly);  // tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapOnlyInplace);  // tree_map_only_(type_or_types_or_pred, /, func, ...)
CPYTREE_FASTCALL(PyTreeFlattenSpec);  // tree_flatten_spec(pytree, spec, registry=None)
CPYTREE_FASTCALL(PyTreeFlattenWithPath);  // tree_flatten_with_path(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeLeavesWithPath);   // tree_leaves_with_path(tree, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapWithPath);  // tree_map_with_path(func, tree, *rests, is_leaf=None)

#undef CPYTREE_FASTCALL

// keystr(kp), key_get(obj, kp), _set_key_types(SequenceKey, MappingKey, GetAttrKey)
PyObject* PyKeystr(PyObject*, PyObject* kp);
PyObject* PyKeyGet(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* PySetKeyTypes(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// Readies the iterator type of tree_iter (module init); false with an exception.
bool InitTreeIterType();

// TreeSpec.flatten(tree): the leaves of a tree whose structure must equal spec.
PyObject* SpecFlatten(PyObject* spec, PyObject* tree);

}  // namespace cpytree

#endif  // CPYTREE_SRC_API_H_
