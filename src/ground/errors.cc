// Cold error paths: key path formatting and the mismatch messages of the
// spec walks (see errors.h).
#include "ground/errors.h"

#include "ground/registry.h"

namespace cpytree {

PyObject* FormatKeyPath(const std::vector<PathEntry>& path) {
  Ref parts(PyList_New(0));
  if (!parts) return nullptr;
  Ref head(PyUnicode_FromString("tree"));
  if (!head || PyList_Append(parts.get(), head.get()) < 0) return nullptr;
  for (const PathEntry& e : path) {
    Ref part;
    if (IsDictKind(e.kind)) {
      part = Ref(PyUnicode_FromFormat("[%R]", e.key));
    } else if (e.kind == NodeKind::kNamedTuple) {
      Ref fields(PyObject_GetAttr(e.key, g_builtins.str_fields));
      if (fields && PyTuple_Check(fields.get()) && e.index < PyTuple_GET_SIZE(fields.get())) {
        part = Ref(PyUnicode_FromFormat(".%U", PyTuple_GET_ITEM(fields.get(), e.index)));
      } else {
        PyErr_Clear();
        part = Ref(PyUnicode_FromFormat("[%zd]", e.index));
      }
    } else {
      part = Ref(PyUnicode_FromFormat("[%zd]", e.index));
    }
    if (!part || PyList_Append(parts.get(), part.get()) < 0) return nullptr;
  }
  Ref empty(PyUnicode_FromString(""));
  if (!empty) return nullptr;
  return PyUnicode_Join(empty.get(), parts.get());
}

void RaiseAtPath(PyObject* exc, PyObject* message, const std::vector<PathEntry>& path) {
  Ref msg(message);
  if (!msg) return;  // formatting the message already raised
  Ref where(FormatKeyPath(path));
  if (!where) return;
  Ref full(PyUnicode_FromFormat("%U (at key path %U)", msg.get(), where.get()));
  if (!full) return;
  PyErr_SetObject(exc, full.get());
}

void PathError::Raise() {
  if (message_ == nullptr) return;  // nothing pending (or formatting already raised)
  std::vector<PathEntry> path(path_.rbegin(), path_.rend());
  PyObject* message = message_;
  message_ = nullptr;
  RaiseAtPath(PyExc_ValueError, message, path);
}

PyObject* NotALeafMessage(PyObject* got_type) {
  return PyUnicode_FromFormat("Node type mismatch; expected a leaf, but got %R.", got_type);
}

PyObject* TypeMismatchMessage(PyObject* expected, PyObject* got) {
  return PyUnicode_FromFormat("Node type mismatch; expected %R, but got %R.", expected, got);
}

PyObject* ArityMismatchMessage(std::uint32_t expected, Py_ssize_t got) {
  return PyUnicode_FromFormat("Node arity mismatch; expected %u, but got %zd.", expected, got);
}

PyObject* ContextMismatchMessage(const char* what, PyObject* expected, PyObject* got) {
  return PyUnicode_FromFormat("Node %s mismatch; expected %R, but got %R.", what, expected, got);
}

PyObject* KeysMismatchMessage(PyObject* const* expected, std::uint32_t n, PyObject* const* got,
                              std::size_t num_got) {
  Ref e(PyList_New(n)), g(PyList_New(static_cast<Py_ssize_t>(num_got)));
  if (!e || !g) return nullptr;
  for (std::uint32_t k = 0; k < n; ++k) {
    Py_INCREF(expected[k]);
    PyList_SET_ITEM(e.get(), k, expected[k]);
  }
  for (std::size_t k = 0; k < num_got; ++k) {
    Py_INCREF(got[k]);
    PyList_SET_ITEM(g.get(), k, got[k]);
  }
  return PyUnicode_FromFormat("Node keys mismatch; expected %R, but got %R.", e.get(), g.get());
}

PyObject* DictKeysMismatchMessage(PyObject* const* expected, std::uint32_t n, PyObject* dict) {
  std::vector<PyObject*> got;
  {
    ft::CriticalSection cs(dict);  // another thread may mutate it (no user code here)
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
      Py_INCREF(key);
      got.push_back(key);
    }
  }
  PyObject* message = KeysMismatchMessage(expected, n, got.data(), got.size());
  for (PyObject* k : got) Py_DECREF(k);
  return message;
}

PyObject* KeySetMismatchMessage(PyObject* expected, PyObject* got) {
  Ref missing(PyNumber_Subtract(expected, got));
  Ref extra(PyNumber_Subtract(got, expected));
  if (!missing || !extra) return nullptr;
  Ref message(PyUnicode_FromString("Node keys mismatch"));
  if (!message) return nullptr;
  if (PySet_GET_SIZE(missing.get()) > 0) {
    message = Ref(PyUnicode_FromFormat("%U; missing key(s): %S", message.get(), missing.get()));
    if (!message) return nullptr;
  }
  if (PySet_GET_SIZE(extra.get()) > 0) {
    message = Ref(PyUnicode_FromFormat("%U; extra key(s): %S", message.get(), extra.get()));
    if (!message) return nullptr;
  }
  return PyUnicode_FromFormat("%U.", message.get());
}

PyObject* CustomTypeMismatchMessage(PyObject* expected, PyObject* got) {
  return PyUnicode_FromFormat("Type mismatch; expected %R, but got %R.", expected, got);
}

PyObject* CustomContextMismatchMessage(PyObject* type) {
  return PyUnicode_FromFormat("Node context mismatch for custom node type %R.", type);
}

PyObject* NamedTupleContextMismatchMessage(PyObject* type, PyObject* expected, PyObject* got) {
  return PyUnicode_FromFormat("Node context mismatch for node type %R; expected %R, but got %R.",
                              type, expected, got);
}

void RaiseRealSpecMismatch(PyObject* real, PyObject* node, PyObject* spec) {
  PyErr_Format(PyExc_RuntimeError,
               "Real spec %S of object %S is different from expected spec %S. Please file "
               "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-"
               "report.yml",
               real, node, spec);
}

}  // namespace cpytree
