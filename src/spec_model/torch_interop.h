// Interoperation with torch.utils._pytree's own TreeSpec, for install().
//
// When install() hands torch's classes over (_set_torch_spec_classes), engine
// specs report torch's TreeSpec/LeafSpec as their __class__ (so isinstance
// checks in torch code, even against names bound at import, accept them and
// torch's __eq__ compares them structurally), pickle in torch's own form, and
// every entry point that takes a spec also accepts a torch spec (converted:
// CoerceSpec, spec_model.h).
// Without the classes set, nothing here changes behaviour.
#ifndef CPYTREE_SRC_TORCH_INTEROP_H_
#define CPYTREE_SRC_TORCH_INTEROP_H_

#include "base/common.h"

namespace cpytree {

// torch's classes, or null when not set. Borrowed; owned by torch_interop.cc.
struct TorchSpecClasses {
  PyObject* tree_spec = nullptr;      // torch.utils._pytree.TreeSpec
  PyObject* leaf_spec = nullptr;      // torch.utils._pytree.LeafSpec
  PyObject* treespec_leaf = nullptr;  // torch.utils._pytree.treespec_leaf
  PyObject* constant_node = nullptr;  // torch.utils._pytree.ConstantNode
  // Engine specs pose as torch's (pickled in torch's form, constant contexts
  // hashed by torch's rule): on while install() is in effect, off after
  // uninstall() (the classes stay: specs made while installed live on in
  // torch objects that torch's isinstance checks must still accept).
  bool as_torch = false;
};
extern TorchSpecClasses g_torch;

// True if obj is an engine spec or (with the classes set) a torch spec.
bool IsAnySpec(PyObject* obj);
// True if the classes are set and obj is a torch spec (not an engine spec).
bool IsTorchSpec(PyObject* obj);

// _set_torch_spec_classes(TreeSpec, LeafSpec, treespec_leaf, ConstantNode); all
// None to clear. Setting the classes also turns as_torch on.
PyObject* PySetTorchSpecClasses(PyObject*, PyObject* const* args, Py_ssize_t nargs);
// _set_torch_pickling(flag): as_torch (uninstall() turns it off).
PyObject* PySetTorchPickling(PyObject*, PyObject* flag);
// _find_bound_in_modules(modules, objects, names, prefixes): [(module name,
// key), ...] for the modules of the dict `modules` (name -> module: the
// caller's copy of sys.modules) whose str name is in the tuple `names` or
// starts with one of `prefixes`: every item of their `__dict__` (read as
// `getattr(m, "__dict__", None)`; those without a dict skipped) whose value
// *is* one of the tuple `objects` (identity: no __eq__ or __hash__ of a value
// runs), in dict order: install()'s filter and scan of torch modules'
// import-time bindings (python/cpytree/_torch/_patch.py) in one call.
PyObject* PyFindBoundInModules(PyObject*, PyObject* const* args, Py_ssize_t nargs);

}  // namespace cpytree

#endif  // CPYTREE_SRC_TORCH_INTEROP_H_
