// Child extraction helpers and argument parsing (see children.h).
#include "children.h"

#include <cstring>

namespace cpytree {

bool CallCustomFlatten(const Registration* reg, PyObject* obj, Ref* children, Ref* context) {
  Ref res(PyObject_CallOneArg(reg->flatten_fn, obj));
  if (!res) return false;
  Ref pair;
  if (PyTuple_CheckExact(res.get()) || PyList_CheckExact(res.get())) {
    pair = Ref(PySequence_List(res.get()));
  } else {
    Ref it(PyObject_GetIter(res.get()));
    if (!it) {
      if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object",
                     Py_TYPE(res.get())->tp_name);
      }
      return false;
    }
    pair = Ref(PySequence_List(it.get()));
  }
  if (!pair) return false;
  Py_ssize_t n = PyList_GET_SIZE(pair.get());
  if (n != 2) {
    if (n > 2) {
      PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
    } else {
      PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %zd)", n);
    }
    return false;
  }
  PyObject* kids = PyList_GET_ITEM(pair.get(), 0);
  if (PyList_CheckExact(kids) || PyTuple_CheckExact(kids)) {
    *children = Ref::Borrow(kids);
  } else {
    *children = Ref(PySequence_List(kids));
    if (!*children) return false;
  }
  *context = Ref::Borrow(PyList_GET_ITEM(pair.get(), 1));
  return true;
}

bool SnapshotDict(PyObject* obj, NodeKind kind, std::vector<PyObject*>* keys,
                  std::vector<PyObject*>* values) {
  if (kind != NodeKind::kOrderedDict) {
    // dict and defaultdict: the dict's own insertion order.
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(obj, &pos, &k, &v)) {
      if (keys != nullptr) {
        Py_INCREF(k);
        keys->push_back(k);
      }
      Py_INCREF(v);
      values->push_back(v);
    }
    return true;
  }
  // OrderedDict keeps its own order (move_to_end): iterate it, read values
  // from the underlying dict.
  Ref it(PyObject_GetIter(obj));
  if (!it) return false;
  while (PyObject* k = PyIter_Next(it.get())) {
    PyObject* v = PyDict_GetItemWithError(obj, k);
    if (v == nullptr) {
      if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, k);
      Py_DECREF(k);
      return false;
    }
    Py_INCREF(v);
    values->push_back(v);
    if (keys != nullptr) {
      keys->push_back(k);
    } else {
      Py_DECREF(k);
    }
  }
  return !PyErr_Occurred();
}

PyObject* DefaultFactoryOf(PyObject* obj) {
  return PyObject_GetAttr(obj, g_builtins.str_default_factory);
}

PyObject* MaxLenOf(PyObject* obj) { return PyObject_GetAttr(obj, g_builtins.str_maxlen); }

bool SnapshotDeque(PyObject* obj, std::vector<PyObject*>* values) {
  Ref list(PySequence_List(obj));
  if (!list) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
    PyObject* v = PyList_GET_ITEM(list.get(), i);
    Py_INCREF(v);
    values->push_back(v);
  }
  return true;
}

bool ParseArgs(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
               const char* const* names, int total, int required, PyObject** out) {
  if (nargs > total) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                 fname, total, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    const char* kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, j));
    if (kw == nullptr) return false;
    int slot = -1;
    for (int i = 0; i < total; ++i) {
      if (std::strcmp(kw, names[i]) == 0) slot = i;
    }
    if (slot < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fname, kw);
      return false;
    }
    if (slot < nargs) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, kw);
      return false;
    }
    out[slot] = args[nargs + j];
  }
  for (int i = 0; i < required; ++i) {
    if (out[i] == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
      return false;
    }
  }
  return true;
}

}  // namespace cpytree
