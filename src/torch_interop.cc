// Conversion from torch specs and the class handover of install(); see
// torch_interop.h.
#include "torch_interop.h"

#include "treespec.h"

namespace cpytree {

TorchSpecClasses g_torch;

namespace {

bool IsTorchSpec(PyObject* obj) {
  if (g_torch.tree_spec == nullptr || IsTreeSpec(obj)) return false;
  int r = PyObject_IsInstance(obj, g_torch.tree_spec);
  if (r < 0) PyErr_Clear();
  return r > 0;
}

// torch spec -> engine spec, through the TreeSpec(type, context, children)
// constructor (which interns). Recursive over children, depth-limited.
PyObject* FromTorch(PyObject* obj, int depth) {
  if (depth > kMaxDepth) {
    RaiseDepthError("converting a torch TreeSpec", kMaxDepth);
    return nullptr;
  }
  Ref type(PyObject_GetAttrString(obj, "type"));
  if (!type) return nullptr;
  if (type.get() == Py_None) {
    Py_INCREF(LeafSpec());
    return LeafSpec();
  }
  Ref context(PyObject_GetAttrString(obj, "_context"));
  Ref children(context ? PyObject_GetAttrString(obj, "_children") : nullptr);
  if (!children) return nullptr;
  Ref seq(PySequence_List(children.get()));
  if (!seq) return nullptr;
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(seq.get()); ++k) {
    PyObject* child = CoerceSpec(PyList_GET_ITEM(seq.get(), k), "a child spec");
    if (child == nullptr) return nullptr;
    PyList_SetItem(seq.get(), k, child);  // steals
  }
  (void)depth;
  return MakeSpec(type.get(), context.get(), seq.get());
}

}  // namespace

bool IsAnySpec(PyObject* obj) { return IsTreeSpec(obj) || IsTorchSpec(obj); }

PyObject* CoerceSpec(PyObject* obj, const char* what) {
  if (IsTreeSpec(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  if (IsTorchSpec(obj)) return FromTorch(obj, 0);
  PyErr_Format(PyExc_TypeError, "Expected %s to be an instance of PyTreeSpec but got item of type %R.",
               what, reinterpret_cast<PyObject*>(Py_TYPE(obj)));
  return nullptr;
}

PyObject* PySetTorchSpecClasses(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError,
                    "_set_torch_spec_classes(TreeSpec, LeafSpec, treespec_leaf, ConstantNode)");
    return nullptr;
  }
  PyObject** slots[] = {&g_torch.tree_spec, &g_torch.leaf_spec, &g_torch.treespec_leaf,
                        &g_torch.constant_node};
  for (int k = 0; k < 4; ++k) {
    PyObject* v = args[k] == Py_None ? nullptr : args[k];
    Py_XINCREF(v);
    Py_XSETREF(*slots[k], v);
  }
  g_torch.pickle_as_torch = g_torch.tree_spec != nullptr;
  Py_RETURN_NONE;
}

PyObject* PySetTorchPickling(PyObject*, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  g_torch.pickle_as_torch = on && g_torch.tree_spec != nullptr;
  Py_RETURN_NONE;
}

}  // namespace cpytree
