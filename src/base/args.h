// Argument parsing of the METH_FASTCALL | METH_KEYWORDS entry points: the
// positional-only call handled inline, keywords and errors (CPython's
// messages) out of line.
//
//   static const char* const kNames[] = {"tree", "is_leaf"};
//   PyObject* a[2] = {nullptr, nullptr};
//   if (!ParseArgs("tree_leaves", args, nargs, kwnames, kNames, 2, 1, a)) return nullptr;
#ifndef CPYTREE_SRC_ARGS_H_
#define CPYTREE_SRC_ARGS_H_

#include "base/common.h"

namespace cpytree {

// Parses (positional-or-keyword) arguments of a METH_FASTCALL|METH_KEYWORDS
// function: `names` has `total` names, the first `required` are required;
// missing optional ones are left as they were in `out`. Borrowed results.
bool ParseArgsSlow(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                   const char* const* names, int total, int required, PyObject** out);
inline bool ParseArgs(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                      const char* const* names, int total, int required, PyObject** out) {
  // The common call: positional arguments only, all required ones present.
  if (kwnames == nullptr && nargs >= required && nargs <= total) {
    for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
    return true;
  }
  return ParseArgsSlow(fname, args, nargs, kwnames, names, total, required, out);
}

}  // namespace cpytree

#endif  // CPYTREE_SRC_ARGS_H_
