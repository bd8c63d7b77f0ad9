// The out-of-line part of argument parsing (see args.h).
#include "base/args.h"

#include <cstring>

namespace cpytree {

bool ParseArgsSlow(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                   const char* const* names, int total, int required, PyObject** out) {
  if (nargs > total) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", fname,
                 total, nargs);
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
