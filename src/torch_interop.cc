// Recognising torch specs and the class handover of install(); see
// torch_interop.h (the conversion itself: FromTorchSpec, spec_model.cc).
#include "torch_interop.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "ft.h"
#include "spec_builder.h"
#include "spec_model.h"

namespace cpytree {

TorchSpecClasses g_torch;

bool IsTorchSpec(PyObject* obj) {
  if (g_torch.tree_spec == nullptr || IsTreeSpec(obj)) return false;
  int r = PyObject_IsInstance(obj, g_torch.tree_spec);
  if (r < 0) PyErr_Clear();
  return r > 0;
}

bool IsAnySpec(PyObject* obj) { return IsTreeSpec(obj) || IsTorchSpec(obj); }

PyObject* CoerceSpec(PyObject* obj, const char* what) {
  if (IsTreeSpec(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  if (IsTorchSpec(obj)) return FromTorchSpec(obj);
  PyErr_Format(PyExc_TypeError,
               "Expected %s to be an instance of PyTreeSpec but got item of type %R.", what,
               reinterpret_cast<PyObject*>(Py_TYPE(obj)));
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
    ft::ReplaceSetting(slots[k], args[k] == Py_None ? nullptr : args[k]);
  }
  g_torch.as_torch = g_torch.tree_spec != nullptr;
  Py_RETURN_NONE;
}

PyObject* PySetTorchPickling(PyObject*, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  g_torch.as_torch = on && g_torch.tree_spec != nullptr;
  Py_RETURN_NONE;
}

PyObject* PyFindBound(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyList_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_find_bound(namespaces: list, objects: tuple)");
    return nullptr;
  }
  PyObject* namespaces = args[0];
  PyObject* objects = args[1];
  // ~30,000 values after `import torch`, a handful of objects (functions):
  // most values are rejected by their type, the rest by a binary search of
  // the sorted pointers. No value's __eq__ or __hash__ runs.
  std::vector<PyObject*> wanted;
  std::vector<PyTypeObject*> types;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(objects); ++k) {
    PyObject* obj = PyTuple_GET_ITEM(objects, k);
    wanted.push_back(obj);
    if (std::find(types.begin(), types.end(), Py_TYPE(obj)) == types.end()) {
      types.push_back(Py_TYPE(obj));
    }
  }
  std::sort(wanted.begin(), wanted.end(), std::less<>());
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  // The list is re-read at each step: appending may run a GC finalizer.
  // Free-threaded builds: a snapshot of it, and each dict read under its lock.
  Ref stable(ft::StableSequence(namespaces));
  if (!stable) {
    Py_DECREF(out);
    return nullptr;
  }
  namespaces = stable.get();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(namespaces); ++i) {
    PyObject* ns = PySequence_Fast_ITEMS(namespaces)[i];
    if (!PyDict_Check(ns)) {
      Py_DECREF(out);
      PyErr_Format(PyExc_TypeError, "_find_bound: namespaces[%zd] is not a dict", i);
      return nullptr;
    }
    Py_INCREF(ns);
    ft::CriticalSection cs(ns);
    Py_ssize_t pos = 0;
    PyObject* key;
    PyObject* value;
    while (PyDict_Next(ns, &pos, &key, &value)) {
      if (std::find(types.begin(), types.end(), Py_TYPE(value)) == types.end() ||
          !std::binary_search(wanted.begin(), wanted.end(), value, std::less<>())) {
        continue;
      }
      PyObject* item = Py_BuildValue("(nO)", i, key);
      if (item == nullptr || PyList_Append(out, item) < 0) {
        Py_XDECREF(item);
        Py_DECREF(ns);
        Py_DECREF(out);
        return nullptr;
      }
      Py_DECREF(item);
    }
    Py_DECREF(ns);
  }
  return out;
}

}  // namespace cpytree
