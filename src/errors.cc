// Cold error paths: key path formatting (see errors.h).
#include "errors.h"

#include "registry.h"

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

}  // namespace cpytree
