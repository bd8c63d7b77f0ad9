// Compiled by scripts/cross_compile.sh for each target against the
// pyconfig.h it uses (Windows: CPython's PC/pyconfig.h.in; macOS:
// scripts/cross/macos_pyconfig.h): the sizes and alignments CPython's headers
// take from pyconfig.h are the target compiler's.
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <ctime>

static_assert(SIZEOF_INT == sizeof(int), "SIZEOF_INT");
static_assert(SIZEOF_LONG == sizeof(long), "SIZEOF_LONG");
static_assert(SIZEOF_LONG_LONG == sizeof(long long), "SIZEOF_LONG_LONG");
static_assert(SIZEOF_SIZE_T == sizeof(std::size_t), "SIZEOF_SIZE_T");
static_assert(SIZEOF_VOID_P == sizeof(void*), "SIZEOF_VOID_P");
static_assert(SIZEOF_TIME_T == sizeof(std::time_t), "SIZEOF_TIME_T");
static_assert(SIZEOF_WCHAR_T == sizeof(wchar_t), "SIZEOF_WCHAR_T");
#ifdef SIZEOF_LONG_DOUBLE
static_assert(SIZEOF_LONG_DOUBLE == sizeof(long double), "SIZEOF_LONG_DOUBLE");
#endif
#ifdef SIZEOF_UINTPTR_T
static_assert(SIZEOF_UINTPTR_T == sizeof(std::uintptr_t), "SIZEOF_UINTPTR_T");
#endif
// Windows: PC/pyconfig.h describes MSVC's ABI (python.org's CPython for
// Windows is built with MSVC); MinGW (zig's x86_64-windows-gnu) differs from
// it in two macros, neither of which the engine reaches: alignof(max_align_t)
// (16 against MSVC's 8; read only by Include/internal) and pid_t (MinGW-w64's
// is 64 bits, MSVC has none; read only by PyLong_FromPid/AsPid). The engine
// uses neither; everything else above is asserted there too.
#if !defined(__MINGW32__)
#ifdef ALIGNOF_MAX_ALIGN_T
static_assert(ALIGNOF_MAX_ALIGN_T == alignof(std::max_align_t), "ALIGNOF_MAX_ALIGN_T");
#endif
#ifdef SIZEOF_PID_T
static_assert(SIZEOF_PID_T == sizeof(pid_t), "SIZEOF_PID_T");
#endif
#endif  // !__MINGW32__
#ifdef SIZEOF_PTHREAD_T
static_assert(SIZEOF_PTHREAD_T == sizeof(pthread_t), "SIZEOF_PTHREAD_T");
#endif
