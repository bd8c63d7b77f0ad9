// Child extraction helpers (see children.h).
#include "ground/children.h"

#include "base/ft.h"
#include "base/odict_layout.h"

namespace cpytree {

namespace {

// Flatten functions known to return (list(d.values()), list(d.keys())) for a
// dict subclass, and (d, None) for a list subclass: torch.fx's
// immutable_dict / immutable_list flatten through torch's _dict_flatten /
// _list_flatten. Tuples (strong), set by install(). Free-threaded builds:
// read lock-free while install() may replace them, so a replaced tuple is
// kept alive (install() runs a handful of times per process).
std::atomic<PyObject*> g_dict_like_flattens{nullptr};
std::atomic<PyObject*> g_list_like_flattens{nullptr};

bool IsIn(const std::atomic<PyObject*>& slot, PyObject* fn) {
  PyObject* tuple = slot.load(std::memory_order_acquire);
  if (tuple == nullptr) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    if (PyTuple_GET_ITEM(tuple, i) == fn) return true;
  }
  return false;
}

// The known functions' result, computed here; 0 if `reg` has none, -1 on error.
int KnownFlatten(const Registration* reg, PyObject* obj, Ref* children, Ref* context) {
  if (PyDict_Check(obj) && IsIn(g_dict_like_flattens, reg->flatten_fn)) {
    EndRegistryRead();            // reg is not read below (registry.h)
    ft::CriticalSection cs(obj);  // keys and values of one state of the dict
    *children = Ref(PyDict_Values(obj));
    *context = Ref(PyDict_Keys(obj));
    return *children && *context ? 1 : -1;
  }
  if (PyList_Check(obj) && IsIn(g_list_like_flattens, reg->flatten_fn)) {
    EndRegistryRead();  // reg is not read below; a list subclass's __iter__ may run
    *children = Ref(PySequence_List(obj));
    *context = Ref::Borrow(Py_None);
    return *children ? 1 : -1;
  }
  return 0;
}

}  // namespace

PyObject* PySetKnownFlattens(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_set_known_flattens(dict_like, list_like): two tuples");
    return nullptr;
  }
  PyObject* old_dict = g_dict_like_flattens.exchange(Py_NewRef(args[0]), std::memory_order_acq_rel);
  PyObject* old_list = g_list_like_flattens.exchange(Py_NewRef(args[1]), std::memory_order_acq_rel);
  if constexpr (!ft::kFreeThreaded) {  // with the GIL no reader is under way
    Py_XDECREF(old_dict);
    Py_XDECREF(old_list);
  }
  Py_RETURN_NONE;
}

bool CallCustomFlatten(const Registration* reg, PyObject* obj, Ref* children, Ref* context) {
  int known = KnownFlatten(reg, obj, children, context);
  if (known != 0) return known > 0;
  // Held for the call: it may deregister its own type (registry.h).
  Ref fn = Ref::Borrow(reg->flatten_fn);
  EndRegistryRead();  // reg is not read below
  Ref res(PyObject_CallOneArg(fn.get(), obj));
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
  if (ft::kFreeThreaded && PyList_CheckExact(kids)) {
    // The user's list may be mutated by another thread while the caller
    // reads it: read a snapshot (PyList_AsTuple locks the list).
    *children = Ref(PyList_AsTuple(kids));
    if (!*children) return false;
  } else if (PyList_CheckExact(kids) || PyTuple_CheckExact(kids)) {
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
    // dict and defaultdict: the dict's own insertion order, one state of it
    // (no user code runs in the loop; without the GIL, under its lock).
    ft::CriticalSection cs(obj);
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
  if (internal_odict::LayoutVerified()) return internal_odict::Snapshot(obj, keys, values);
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

PyObject* NewDictNode(NodeKind kind, PyObject* factory, PyObject* const* keys,
                      PyObject* const* values, std::size_t n) {
  Ref out;
  if (kind == NodeKind::kDict) {
    out = Ref(_PyDict_NewPresized(static_cast<Py_ssize_t>(n)));  // one allocation, no resizes
  } else if (kind == NodeKind::kOrderedDict) {
    out = Ref(PyObject_CallNoArgs(g_builtins.ordered_dict));
  } else {
    out = Ref(PyObject_CallOneArg(g_builtins.defaultdict, factory));
  }
  if (!out) return nullptr;
  bool exact = kind != NodeKind::kOrderedDict;  // OrderedDict needs __setitem__
  for (std::size_t k = 0; k < n; ++k) {
    int rc = exact ? PyDict_SetItem(out.get(), keys[k], values[k])
                   : PyObject_SetItem(out.get(), keys[k], values[k]);
    if (rc < 0) return nullptr;
  }
  return out.release();
}

PyObject* NewTupleNode(PyObject* const* values, std::size_t n) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(n));
  if (out == nullptr) {
    for (std::size_t k = 0; k < n; ++k) Py_XDECREF(values[k]);
    return nullptr;
  }
  for (std::size_t k = 0; k < n; ++k) PyTuple_SET_ITEM(out, k, values[k]);
  return out;
}

PyObject* NewListNode(PyObject* const* values, std::size_t n) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(n));
  if (out == nullptr) {
    for (std::size_t k = 0; k < n; ++k) Py_XDECREF(values[k]);
    return nullptr;
  }
  for (std::size_t k = 0; k < n; ++k) PyList_SET_ITEM(out, k, values[k]);
  return out;
}

PyObject* NewNamedTuple(PyObject* cls, PyObject** values, Py_ssize_t n) {
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
  if (PlainNamedTupleNew(type)) {
    // What `_tuple_new(cls, values)` does for a tuple subclass, minus the copy.
    PyObject* out = type->tp_alloc(type, n);
    if (out == nullptr) {
      for (Py_ssize_t k = 0; k < n; ++k) Py_DECREF(values[k]);
      return nullptr;
    }
    for (Py_ssize_t k = 0; k < n; ++k) PyTuple_SET_ITEM(out, k, values[k]);
    return out;
  }
  PyObject* out = PyObject_Vectorcall(cls, values, n, nullptr);  // cls(*values)
  for (Py_ssize_t k = 0; k < n; ++k) Py_DECREF(values[k]);
  return out;
}

PyObject* NewDequeNode(PyObject* const* values, std::size_t n, PyObject* maxlen) {
  Ref list(NewListNode(values, n));
  if (!list) return nullptr;
  Ref args(PyTuple_Pack(2, list.get(), maxlen));  // deque(values, maxlen)
  return args ? PyObject_Call(g_builtins.deque, args.get(), nullptr) : nullptr;
}

PyObject* NewCustomNode(const Registration* reg, PyObject* const* values, std::size_t n,
                        PyObject* context) {
  // Held before anything can run: with the GIL, a collection that building
  // the list starts may run a finalizer that deregisters the type.
  Ref fn = Ref::Borrow(reg->unflatten_fn);
  EndRegistryRead();  // reg is not read below (registry.h)
  Ref list(NewListNode(values, n));
  if (!list) return nullptr;
  return PyObject_CallFunctionObjArgs(fn.get(), list.get(), context, nullptr);
}

}  // namespace cpytree
