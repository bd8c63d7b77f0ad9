// CPython's private OrderedDict layout, read directly; see odict_layout.h.
#include "base/odict_layout.h"

#include "base/ft.h"

namespace cpytree {

namespace internal_odict {
namespace {

// The mirror of Objects/odictobject.c's structs (unchanged from 3.5 to 3.13).
struct NodeMirror {
  PyObject* key;
  Py_hash_t hash;
  NodeMirror* next;
  NodeMirror* prev;
};
struct ODictMirror {
  PyDictObject od_dict;
  NodeMirror* od_first;
  NodeMirror* od_last;
  NodeMirror** od_fast_nodes;
  Py_ssize_t od_fast_nodes_size;
  void* od_resize_sentinel;
  std::size_t od_state;
  PyObject* od_inst_dict;
  PyObject* od_weakreflist;
};

}  // namespace

bool g_layout_verified = false;

namespace {

// Snapshot's walk; the caller holds the critical section (free-threaded).
bool SnapshotLocked(PyObject* obj, std::vector<PyObject*>* keys, std::vector<PyObject*>* values) {
  const ODictMirror* od = reinterpret_cast<const ODictMirror*>(obj);
  Py_ssize_t pos = 0;
  bool lockstep = true;  // the dict's own order agrees so far: values for free
  for (const NodeMirror* node = od->od_first; node != nullptr; node = node->next) {
    PyObject* key = node->key;
    PyObject *k = nullptr, *v = nullptr;
    if (!(lockstep && PyDict_Next(obj, &pos, &k, &v) && k == key)) {
      lockstep = false;  // reordered (move_to_end): look values up from here on
      v = PyDict_GetItemWithError(obj, key);
      if (v == nullptr) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        return false;
      }
    }
    if (keys != nullptr) {
      Py_INCREF(key);
      keys->push_back(key);
    }
    Py_INCREF(v);
    values->push_back(v);
  }
  return true;
}

}  // namespace

bool Snapshot(PyObject* obj, std::vector<PyObject*>* keys, std::vector<PyObject*>* values) {
  // No user code runs during this walk (only borrowed reads and increfs),
  // so the list cannot change under it. Without the GIL: under the dict's
  // critical section, which CPython 3.13t's OrderedDict does not take around
  // its linked list (a concurrent OrderedDict mutation is unsafe in CPython
  // itself there), but does take for the dict part.
  ft::CriticalSection cs(obj);
  return SnapshotLocked(obj, keys, values);
}

KeyOrder SnapshotIfKeys(PyObject* obj, PyObject* const* expected, std::size_t n,
                        std::vector<PyObject*>* values) {
  // Without the GIL: the key check and the snapshot under one critical
  // section (as Snapshot), so the values are those of the keys checked.
  ft::CriticalSection cs(obj);
  const ODictMirror* od = reinterpret_cast<const ODictMirror*>(obj);
  if (static_cast<std::size_t>(PyDict_GET_SIZE(obj)) != n) return KeyOrder::kDifferent;
  // Compare all keys first: a user __eq__ may run (non-identical keys) and
  // change the OrderedDict, so nothing is read from the list after it.
  std::size_t k = 0;
  for (const NodeMirror* node = od->od_first; node != nullptr; node = node->next, ++k) {
    if (k >= n) return KeyOrder::kDifferent;
    if (node->key == expected[k]) continue;
    return KeyOrder::kNeedsEq;  // let the caller compare with == the slow way
  }
  if (k != n) return KeyOrder::kDifferent;
  std::size_t base = values->size();
  if (!SnapshotLocked(obj, nullptr, values)) return KeyOrder::kError;
  if (values->size() - base != n) {  // cannot happen without user code; be safe
    ReleaseFrom(values, base);
    return KeyOrder::kDifferent;
  }
  return KeyOrder::kSame;
}

bool VerifyLayout(PyObject* ordered_dict_type) {
  g_layout_verified = false;
  if (reinterpret_cast<PyTypeObject*>(ordered_dict_type)->tp_basicsize !=
      static_cast<Py_ssize_t>(sizeof(ODictMirror))) {
    return true;  // another layout: keep the public iterator
  }
  // OrderedDict(b=.., c=.., a=..) built as a, b, c then a moved to the end.
  Ref od(PyObject_CallNoArgs(ordered_dict_type));
  if (!od) return false;
  const char* names[] = {"a", "b", "c"};
  for (const char* name : names) {
    if (PyMapping_SetItemString(od.get(), name, Py_None) < 0) return false;
  }
  Ref moved(PyObject_CallMethod(od.get(), "move_to_end", "s", "a"));
  if (!moved) return false;
  const char* expected[] = {"b", "c", "a"};
  const NodeMirror* node = reinterpret_cast<const ODictMirror*>(od.get())->od_first;
  for (const char* name : expected) {
    if (node == nullptr || !PyUnicode_Check(node->key) ||
        PyUnicode_CompareWithASCIIString(node->key, name) != 0) {
      return true;
    }
    node = node->next;
  }
  g_layout_verified = node == nullptr;
  return true;
}

}  // namespace internal_odict

}  // namespace cpytree
