// Cold error paths: key path formatting and the raise helpers of common.h.
#include "errors.h"

#include <pthread.h>

#include <new>
#include <stdexcept>

#include "registry.h"

namespace cpytree {

std::atomic<bool> g_exiting{false};
std::atomic<unsigned long> g_exiting_thread{0};

void SetPythonErrorFromCxx() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::length_error&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_SystemError, "cpytree internal error: C++ exception: %s", e.what());
  } catch (...) {
    PyErr_SetString(PyExc_SystemError, "cpytree internal error: unknown C++ exception");
  }
}

std::uintptr_t StackLow() {
  // Computed once per thread: pthread_getattr_np reads /proc for the main
  // thread. 1 means "not computed yet".
  thread_local std::uintptr_t low = 1;
  if (low == 1) {
    low = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      std::size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        low = reinterpret_cast<std::uintptr_t>(addr);
      }
      pthread_attr_destroy(&attr);
    }
  }
  return low;
}

void RaiseInternalError(const char* file, int line, const char* what) {
  PyErr_Format(PyExc_SystemError, "cpytree internal error at %s:%d: check failed: %s", file,
               line, what);
}

void RaiseDepthError(const char* op, int limit) {
  PyErr_Format(PyExc_RecursionError,
               "maximum recursion depth exceeded in %s: the tree is nested deeper than %d "
               "levels or contains a reference cycle",
               op, limit);
}

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
