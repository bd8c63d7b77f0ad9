// Shared helpers of the CPython extension: owned references, invariant checks,
// branch hints and the per-call depth guard.
#ifndef CPYTREE_SRC_COMMON_H_
#define CPYTREE_SRC_COMMON_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <utility>

#define CPYTREE_NOINLINE __attribute__((noinline))
#define CPYTREE_LIKELY(x) __builtin_expect(!!(x), 1)
#define CPYTREE_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace cpytree {

// Raises SystemError naming the failed internal invariant. Cold.
CPYTREE_NOINLINE void RaiseInternalError(const char* file, int line, const char* what);

}  // namespace cpytree

// Always-on invariant check: on failure raises SystemError with file:line and
// returns `ret` from the enclosing function.
#define CPYTREE_CHECK(cond, ret)                                   \
  do {                                                             \
    if (CPYTREE_UNLIKELY(!(cond))) {                               \
      ::cpytree::RaiseInternalError(__FILE__, __LINE__, #cond);    \
      return ret;                                                  \
    }                                                              \
  } while (0)

namespace cpytree {

// An owned (strong) reference, released on destruction.
class Ref {
 public:
  Ref() = default;
  // Takes ownership of a new reference (may be null).
  explicit Ref(PyObject* owned) : p_(owned) {}
  static Ref Borrow(PyObject* borrowed) {
    Py_XINCREF(borrowed);
    return Ref(borrowed);
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }

  PyObject* get() const { return p_; }
  // Gives up ownership to the caller.
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

// Bounds the recursion of one traversal. The limit is Python's recursion limit
// capped by kMaxDepth so that a raised sys.setrecursionlimit cannot overflow
// the C stack; past it the traversal raises RecursionError.
inline constexpr int kMaxDepth = 20000;

// Limit for one traversal call, read once at the entry point.
inline int DepthLimit() {
  int limit = Py_GetRecursionLimit();
  return limit < kMaxDepth ? limit : kMaxDepth;
}

// Raises RecursionError for a tree deeper than the limit (or cyclic). Cold.
CPYTREE_NOINLINE void RaiseDepthError(const char* op, int limit);

}  // namespace cpytree

#endif  // CPYTREE_SRC_COMMON_H_
