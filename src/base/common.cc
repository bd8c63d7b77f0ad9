// The out-of-line parts of common.h: the shutdown flag and the cold raise
// helpers (the thread's stack bound: stack_probe.cc).
#include "base/common.h"

#include <new>
#include <stdexcept>

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

void RaiseInternalError(const char* file, int line, const char* what) {
  PyErr_Format(PyExc_SystemError, "cpytree internal error at %s:%d: check failed: %s", file, line,
               what);
}

void RaiseDepthError(const char* op, int limit) {
  PyErr_Format(PyExc_RecursionError,
               "maximum recursion depth exceeded in %s: the tree is nested deeper than %d "
               "levels or contains a reference cycle",
               op, limit);
}

}  // namespace cpytree
