// The personality routine of the extension's C++ frames in the wheels
// (libc++abi), adjusted for forced unwinds: a frame's cleanups run, its
// catch (...) handlers never do.
//
// A forced unwind is how glibc ends a thread (pthread_exit, pthread_cancel):
// CPython 3.11-3.13 end daemon threads that way when they try to take the GIL
// after finalization began, which unwinds the engine's frames below the
// Python callback the thread was in. The unwind is "foreign" (not a C++
// exception), and it must reach the thread's start: a frame may run cleanups
// and let it go on, never stop it. libstdc++ builds do that with
// `catch (abi::__forced_unwind&) { throw; }` (Guarded, common.h): its rethrow
// continues a forced unwind (_Unwind_Resume_or_Rethrow). libc++abi has no such
// type, enters catch (...) for it, and cannot continue it: `throw;` restarts
// it as a new exception (_Unwind_RaiseException), finds no handler above
// and calls std::terminate (measured: "libc++abi: terminating due to uncaught
// foreign exception" at interpreter exit). The same holds for the
// catch-all landing pad clang gives a noexcept function (it calls
// std::terminate).
//
// So under a forced unwind a frame whose landing pad is a handler (selector
// != 0: catch (...), a noexcept terminate pad) is passed over whole
// (_URC_CONTINUE_UNWIND), and a frame with cleanups only is entered as
// usual. What that skips: the destructors in frames that hold a catch-all,
// i.e. the Guarded entry points (which hold the inlined engine call): memory
// of the traversal (freed by the process exit that follows) and Python
// references (which a daemon thread torn down at exit must not release
// anyway: MayReleaseInDestructor). No lock is held
// across a Python call (the registry's writer mutex is taken and released
// with no Python code between), so none is left locked.
//
// Linked with -Wl,--wrap=__gxx_personality_v0 (CMakeLists.txt, wheels only),
// which points every C++ frame of the extension, libc++'s and abseil's
// included, at this function. It reads the unwind context through the
// process's one unwinder (the system's libgcc_s: cmake/zig-toolchain.cmake).

#include <unwind.h>

extern "C" {

// The names are the linker's: --wrap=SYM binds __real_SYM and __wrap_SYM.
// NOLINTNEXTLINE(bugprone-reserved-identifier)
_Unwind_Reason_Code __real___gxx_personality_v0(int version, _Unwind_Action actions,
                                                _Unwind_Exception_Class exception_class,
                                                _Unwind_Exception* exception,
                                                _Unwind_Context* context);

// NOLINTNEXTLINE(bugprone-reserved-identifier)
__attribute__((visibility("hidden"))) _Unwind_Reason_Code __wrap___gxx_personality_v0(
    int version, _Unwind_Action actions, _Unwind_Exception_Class exception_class,
    _Unwind_Exception* exception, _Unwind_Context* context) {
  _Unwind_Reason_Code reason =
      __real___gxx_personality_v0(version, actions, exception_class, exception, context);
  // libc++abi has set the landing pad's selector (0: cleanups only).
  if ((actions & _UA_FORCE_UNWIND) != 0 && reason == _URC_INSTALL_CONTEXT &&
      _Unwind_GetGR(context, __builtin_eh_return_data_regno(1)) != 0) {
    return _URC_CONTINUE_UNWIND;
  }
  return reason;
}

}  // extern "C"
