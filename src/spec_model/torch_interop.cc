// Recognising torch specs and the class handover of install(); see
// torch_interop.h (the conversion itself: FromTorchSpec and CoerceSpec,
// spec_model.cc).
#include "spec_model/torch_interop.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "base/ft.h"
#include "ground/spec_object.h"

namespace cpytree {

TorchSpecClasses g_torch;

bool IsTorchSpec(PyObject* obj) {
  if (g_torch.tree_spec == nullptr || IsTreeSpec(obj)) return false;
  int r = PyObject_IsInstance(obj, g_torch.tree_spec);
  if (r < 0) PyErr_Clear();
  return r > 0;
}

bool IsAnySpec(PyObject* obj) { return IsTreeSpec(obj) || IsTorchSpec(obj); }

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

namespace {

// The objects _find_bound_in_modules looks for: their pointers sorted, and their types.
class Wanted {
 public:
  explicit Wanted(PyObject* objects) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(objects); ++k) {
      PyObject* obj = PyTuple_GET_ITEM(objects, k);
      objects_.push_back(obj);
      if (std::find(types_.begin(), types_.end(), Py_TYPE(obj)) == types_.end()) {
        types_.push_back(Py_TYPE(obj));
      }
    }
    std::sort(objects_.begin(), objects_.end(), std::less<>());
  }
  // ~30,000 values after `import torch`, a handful of objects (functions):
  // most values are rejected by their type, the rest by a binary search of
  // the sorted pointers. No value's __eq__ or __hash__ runs.
  bool Has(PyObject* value) const {
    return std::find(types_.begin(), types_.end(), Py_TYPE(value)) != types_.end() &&
           std::binary_search(objects_.begin(), objects_.end(), value, std::less<>());
  }

 private:
  std::vector<PyObject*> objects_;
  std::vector<PyTypeObject*> types_;
};

// Appends (label(), key) to `out` for each item of the dict `ns` whose value
// is wanted. Free-threaded builds: the dict is read under its lock.
template <typename Label>
bool ScanNamespace(PyObject* ns, const Wanted& wanted, Label label, PyObject* out) {
  Ref hold = Ref::Borrow(ns);
  ft::CriticalSection cs(ns);
  Py_ssize_t pos = 0;
  PyObject* key;
  PyObject* value;
  while (PyDict_Next(ns, &pos, &key, &value)) {
    if (!wanted.Has(value)) continue;
    Ref item(label(key));
    if (!item || PyList_Append(out, item.get()) < 0) return false;
  }
  return true;
}

// Whether the str `name` is one of `names` or starts with one of `prefixes`
// (tuples of str); -1 with an exception set on failure.
int NameMatches(PyObject* name, PyObject* names, PyObject* prefixes) {
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(prefixes); ++k) {
    Py_ssize_t r = PyUnicode_Tailmatch(name, PyTuple_GET_ITEM(prefixes, k), 0, PY_SSIZE_T_MAX, -1);
    if (r != 0) return static_cast<int>(r);
  }
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); ++k) {
    int r = PyUnicode_Compare(name, PyTuple_GET_ITEM(names, k));
    if (r == 0) return 1;
    if (r == -1 && PyErr_Occurred()) return -1;
  }
  return 0;
}

}  // namespace

PyObject* PyFindBoundInModules(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) ||
      !PyTuple_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "_find_bound_in_modules(modules: dict, objects: tuple, names: tuple, "
                    "prefixes: tuple)");
    return nullptr;
  }
  PyObject* modules = args[0];
  PyObject* names = args[2];
  PyObject* prefixes = args[3];
  for (PyObject* t : {names, prefixes}) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(t); ++k) {
      if (!PyUnicode_Check(PyTuple_GET_ITEM(t, k))) {
        PyErr_SetString(PyExc_TypeError, "_find_bound_in_modules: names and prefixes are str");
        return nullptr;
      }
    }
  }
  Wanted wanted(args[1]);
  // The selected (name, module) pairs, held: reading a non-module's __dict__
  // below may run code, so `modules` is read in one go, under its lock.
  std::vector<std::pair<Ref, Ref>> selected;
  {
    ft::CriticalSection cs(modules);
    Py_ssize_t pos = 0;
    PyObject* name;
    PyObject* module;
    while (PyDict_Next(modules, &pos, &name, &module)) {
      if (!PyUnicode_Check(name)) continue;
      int match = NameMatches(name, names, prefixes);
      if (match < 0) return nullptr;
      if (match) selected.emplace_back(Ref::Borrow(name), Ref::Borrow(module));
    }
  }
  Ref out(PyList_New(0));
  if (!out) return nullptr;
  for (auto& [name, module] : selected) {
    Ref ns;
    if (PyModule_CheckExact(module.get())) {
      ns = Ref::Borrow(PyModule_GetDict(module.get()));
    } else {  // getattr(module, "__dict__", None), as Python reads it
      ns = Ref(PyObject_GetAttrString(module.get(), "__dict__"));
      if (!ns) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
        PyErr_Clear();
        continue;
      }
      if (!PyDict_Check(ns.get())) continue;
    }
    PyObject* label = name.get();
    if (!ScanNamespace(
            ns.get(), wanted, [label](PyObject* key) { return PyTuple_Pack(2, label, key); },
            out.get())) {
      return nullptr;
    }
  }
  return out.release();
}

}  // namespace cpytree
