// The out-of-line parts of common.h: the shutdown flag, the thread's stack
// bound, and the cold raise helpers.
#include "base/common.h"

#include <pthread.h>

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
