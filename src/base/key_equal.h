// `a == b` for a dict key and a spec's key, as PyObject_RichCompareBool(a, b,
// Py_EQ) answers it, without its calls when both are exact str.
//
//   int eq = KeyEquals(key, expected[k]);  // 1, 0, or -1 with an exception
//
// A tree built apart from its spec (every call of a compiled graph gets new
// dicts) has equal keys that are different str objects: the rich compare
// through PyObject_RichCompare and str's tp_richcompare cost about 140
// instructions a key (dict200 flatten_up_to: 28k of 98k). str.__eq__ on two
// exact str is length, kind and bytes (CPython's unicode_compare_eq): the
// canonical representation makes that exact. A str subclass or any other
// type takes the rich compare (its __eq__ may be user code).
#ifndef CPYTREE_SRC_BASE_KEY_EQUAL_H_
#define CPYTREE_SRC_BASE_KEY_EQUAL_H_

#include <Python.h>

#include <cstring>

namespace cpytree {

inline int KeyEquals(PyObject* a, PyObject* b) {
  if (a == b) return 1;
  if (PyUnicode_CheckExact(a) &&
      PyUnicode_CheckExact(b)
#if PY_VERSION_HEX < 0x030C0000
      // 3.10, 3.11: a legacy (not ready) str has no canonical form yet.
      && PyUnicode_IS_READY(a) && PyUnicode_IS_READY(b)
#endif
  ) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    if (n != PyUnicode_GET_LENGTH(b) || kind != static_cast<int>(PyUnicode_KIND(b))) return 0;
    return std::memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), static_cast<std::size_t>(n) * kind) ==
           0;
  }
  return PyObject_RichCompareBool(a, b, Py_EQ);
}

}  // namespace cpytree

#endif  // CPYTREE_SRC_BASE_KEY_EQUAL_H_
