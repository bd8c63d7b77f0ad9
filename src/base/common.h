// Shared helpers of the CPython extension: owned references, invariant checks,
// branch hints, the guard every entry point is wrapped in, and the per-call
// depth guard (out-of-line parts: common.cc).
//
//   Ref list(PyList_New(0));                 // released on every return path
//   CPYTREE_CHECK(list.get() != nullptr || PyErr_Occurred(), nullptr);
//   {"f", CPYTREE_GUARDED(PyF), METH_O, doc}  // in a method table
#ifndef CPYTREE_SRC_COMMON_H_
#define CPYTREE_SRC_COMMON_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cxxabi.h>

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#define CPYTREE_NOINLINE __attribute__((noinline))
#define CPYTREE_LIKELY(x) __builtin_expect(!!(x), 1)
#define CPYTREE_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace cpytree {

// Raises SystemError naming the failed internal invariant. Cold.
CPYTREE_NOINLINE void RaiseInternalError(const char* file, int line, const char* what);

}  // namespace cpytree

// Always-on invariant check: on failure raises SystemError with file:line and
// returns `ret` from the enclosing function.
#define CPYTREE_CHECK(cond, ret)                                \
  do {                                                          \
    if (CPYTREE_UNLIKELY(!(cond))) {                            \
      ::cpytree::RaiseInternalError(__FILE__, __LINE__, #cond); \
      return ret;                                               \
    }                                                           \
  } while (0)

namespace cpytree {

// Set by an atexit hook (module.cc) once the interpreter starts shutting
// down, with the thread that runs the shutdown.
extern std::atomic<bool> g_exiting;
extern std::atomic<unsigned long> g_exiting_thread;

// Whether a destructor may release Python references. Always, except in a
// daemon thread that CPython (3.11 to 3.13) ends during finalization with
// pthread_exit: that unwinds the C++ frames below the Python call the thread
// was in, running their destructors without the GIL while the interpreter is
// torn down (SIGSEGV/abort in tests/python/test_limits.py before this). Once
// finalization has begun no other thread can hold the GIL, so a destructor
// running outside the finalizing thread then is such an unwind: its
// references are left alone (the process is exiting). PyGILState_Check()
// cannot tell: it answers 1 once finalization has deleted its TSS key.
// Costs one relaxed load until shutdown.
inline bool MayReleaseInDestructor() {
  if (CPYTREE_LIKELY(!g_exiting.load(std::memory_order_relaxed))) return true;
#if PY_VERSION_HEX >= 0x030D0000
  bool finalizing = Py_IsFinalizing();
#else
  bool finalizing = _Py_IsFinalizing();
#endif
  return !finalizing || PyThread_get_thread_ident() == g_exiting_thread.load();
}

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
  ~Ref() {
    if (p_ != nullptr && MayReleaseInDestructor()) Py_DECREF(p_);
  }

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

// Sets the Python exception for the C++ exception being handled:
// std::bad_alloc and std::length_error (a size past what can be allocated)
// become MemoryError, anything else SystemError. Cold.
CPYTREE_NOINLINE void SetPythonErrorFromCxx();

// `Guarded<fn>::Call` is `fn` (any function CPython calls: a method, a slot)
// with C++ exceptions turned into Python ones. No exception may unwind into
// CPython's C frames (std::terminate: a failed allocation of an arena
// vector aborted the interpreter instead of raising MemoryError). Costs
// nothing when nothing throws. The forced unwind of a thread ended by
// pthread_exit passes through (see MayReleaseInDestructor): libstdc++ names
// it abi::__forced_unwind, rethrown here; under libc++abi (the wheels'
// runtime) a forced unwind never enters this handler (src/base/forced_unwind.cc).
// Any other foreign (non-C++) exception has no C++ type: rethrown.
template <auto Fn>
struct Guarded;
template <class R, class... A, R (*Fn)(A...)>
struct Guarded<Fn> {
  static R Call(A... args) {
    try {
      return Fn(args...);
#if defined(__GLIBCXX__)
    } catch (abi::__forced_unwind&) {
      throw;
#endif
    } catch (...) {
#if !defined(__GLIBCXX__)
      if (abi::__cxa_current_exception_type() == nullptr) throw;
#endif
      SetPythonErrorFromCxx();
      if constexpr (std::is_pointer_v<R>) {
        return nullptr;
      } else {
        return static_cast<R>(-1);
      }
    }
  }
};

// A guarded function (`&Guarded<fn>::Call`) as a method table or a type slot
// takes it: converts to its exact function pointer type (slots, getters,
// METH_O/METH_NOARGS methods) and, for METH_FASTCALL functions, to the
// PyCFunction that PyMethodDef stores every method as.
template <auto Call>
struct GuardedEntry {
  using Exact = decltype(Call);
  operator Exact() const { return Call; }
  template <class T,
            class = std::enable_if_t<std::is_same_v<T, PyCFunction> && !std::is_same_v<T, Exact>>>
  operator T() const {
    return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Call));
  }
};

// The one way an entry point is handed to CPython: every method, getter and
// slot is CPYTREE_GUARDED(fn), so no C++ exception reaches CPython's frames.
#define CPYTREE_GUARDED(fn) (::cpytree::GuardedEntry<&::cpytree::Guarded<fn>::Call>{})

// Declares a METH_FASTCALL | METH_KEYWORDS entry point (a function bound
// directly as a public function of the package: no Python frame between the
// caller and the traversal).
#define CPYTREE_FASTCALL(name) \
  PyObject* name(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames)

// Bounds the recursion of one traversal. The limit is Python's recursion limit
// capped by kMaxDepth so that a raised sys.setrecursionlimit cannot overflow
// the C stack, and by the C stack this thread has left: traversals re-entered
// from user code (an is_leaf that flattens again) share one stack, and threads
// may have small ones. Past it the traversal raises RecursionError.
inline constexpr int kMaxDepth = 20000;

// C stack one traversal level may take, at most, with any compiler and flags
// (measured: 300-450 bytes optimised, gcc's frames the larger; up to ~4 KB with
// ASan), and the stack kept free for what runs at the deepest level (user
// code, error messages).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::uintptr_t kStackPerLevel = 16384;
#else
inline constexpr std::uintptr_t kStackPerLevel = 2048;
#endif
inline constexpr std::uintptr_t kStackReserve = std::uintptr_t{256} * 1024;

// The lowest usable address of this thread's stack (cached per thread), or 0
// when unknown (stack_probe.cc: the one platform-specific file).
std::uintptr_t StackLow();

// The depth bound of one recursive traversal, read once at its entry point.
// Up to `unchecked` levels fit in the stack left even at kStackPerLevel each,
// so a level costs one compare; deeper, each level also compares the stack
// pointer with the floor, so a build with larger frames than measured raises
// RecursionError instead of overflowing.
struct DepthBound {
  int unchecked;
  int limit;
  std::uintptr_t floor;

  // Whether `depth` is past the bound; the cold part out of line.
  bool Exceeded(int depth) const {
    return CPYTREE_UNLIKELY(depth > unchecked) && ExceededSlow(depth);
  }
  // The limit to report for a traversal that stopped at `depth`.
  int Reached(int depth) const { return depth > limit ? limit : depth - 1; }

 private:
  CPYTREE_NOINLINE bool ExceededSlow(int depth) const {
    if (depth > limit) return true;
    return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) < floor;
  }
};

inline DepthBound DepthLimit() {
  int limit = Py_GetRecursionLimit();
  if (limit > kMaxDepth) limit = kMaxDepth;
  DepthBound bound{limit, limit, 0};
  std::uintptr_t low = StackLow();
  if (low != 0) {
    auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    std::uintptr_t left = sp > low + kStackReserve ? sp - low - kStackReserve : 0;
    bound.floor = low + kStackReserve;
    if (left / kStackPerLevel < static_cast<std::uintptr_t>(limit)) {
      bound.unchecked = static_cast<int>(left / kStackPerLevel);
    }
  }
  return bound;
}

// Limit for an iterative walk (no C stack per level): the recursion limit
// capped by kMaxDepth, so that what it builds stays within what the
// recursive traversals accept in a thread with a large stack.
inline int IterativeDepthLimit() {
  int limit = Py_GetRecursionLimit();
  return limit > kMaxDepth ? kMaxDepth : limit;
}

// Raises RecursionError for a tree deeper than the limit (or cyclic). Cold.
CPYTREE_NOINLINE void RaiseDepthError(const char* op, int limit);

// Releases the owned references in out[from:] and truncates.
inline void ReleaseFrom(std::vector<PyObject*>* out, std::size_t from) {
  for (std::size_t i = from; i < out->size(); ++i) Py_DECREF((*out)[i]);
  out->resize(from);
}

}  // namespace cpytree

#endif  // CPYTREE_SRC_COMMON_H_
