/* pyconfig.h for compiling cpytree's engine against CPython 3.13's headers
 * for macOS (arm64 and x86_64), made for scripts/cross_compile.sh: no macOS
 * CPython is available here, and CPython's macOS pyconfig.h is a configure
 * output, not part of its source tree (Windows' is: PC/pyconfig.h.in, used
 * as it is).
 *
 * What this holds: every macro of CPython's pyconfig.h.in that a header an
 * extension includes reads (Include/ and Include/cpython/, not
 * Include/internal: `grep -w` of each #undef of pyconfig.h.in over them;
 * the curses macros of py_curses.h left out, cpytree does not include it),
 * set to what configure gives on macOS for a default (GIL, release,
 * non-debug) build. Python.h includes Include/pymacconfig.h on __APPLE__,
 * which redefines the architecture-dependent ones (SIZEOF_LONG, SIZEOF_VOID_P,
 * SIZEOF_SIZE_T, SIZEOF_TIME_T, SIZEOF_PTHREAD_T, SIZEOF_UINTPTR_T,
 * SIZEOF__BOOL, SIZEOF_LONG_DOUBLE, ALIGNOF_MAX_ALIGN_T, the endianness and
 * HAVE_GCC_ASM_FOR_X64/X87) from the compiler's own predefined macros, as in
 * python.org's universal2 builds; they are set here too for completeness.
 * scripts/cross/pyconfig_check.cc checks every size and alignment against
 * the target compiler.
 *
 * What this is not: a configure run on macOS. The configure-only features
 * (HAVE_<function> and the like) that no public header reads are absent;
 * they only matter to CPython's own sources. The engine compiled with it
 * has never run on macOS. */
#ifndef Py_PYCONFIG_H
#define Py_PYCONFIG_H

/* Sizes: LP64 on both architectures. */
#define SIZEOF_INT 4
#define SIZEOF_LONG 8
#define SIZEOF_LONG_LONG 8
#define SIZEOF_PID_T 4
#define SIZEOF_PTHREAD_T 8
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_UINTPTR_T 8
#define SIZEOF_VOID_P 8
#define SIZEOF_WCHAR_T 4
#define SIZEOF__BOOL 1
#if defined(__x86_64__)
#define SIZEOF_LONG_DOUBLE 16
#define ALIGNOF_MAX_ALIGN_T 16
#define HAVE_GCC_ASM_FOR_X64 1
#define HAVE_GCC_ASM_FOR_X87 1
#else /* arm64: long double is double */
#define SIZEOF_LONG_DOUBLE 8
#define ALIGNOF_MAX_ALIGN_T 8
#endif
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1

/* Headers and types present on macOS. */
#define HAVE_FORK 1
#define HAVE_LANGINFO_H 1
#define HAVE_PTHREAD_H 1
#define HAVE_SSIZE_T 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_WCHAR_H 1

/* The build's options: python.org's defaults. */
#define WITH_DOC_STRINGS 1
#define WITH_MIMALLOC 1
#define WITH_PYMALLOC 1

/* configure defines no _XOPEN_SOURCE/_POSIX_C_SOURCE on Darwin (they would
 * hide the BSD interfaces) but _DARWIN_C_SOURCE. */
#ifndef _DARWIN_C_SOURCE
#define _DARWIN_C_SOURCE 1
#endif

/* Left undefined, as configure leaves them on macOS: Py_DEBUG, Py_GIL_DISABLED,
 * Py_TRACE_REFS, Py_STATS, WITH_DTRACE, Py_HASH_ALGORITHM (the default),
 * PYLONG_BITS_IN_DIGIT (the default, 30), HAVE_LARGEFILE_SUPPORT (LP64),
 * HAVE_USABLE_WCHAR_T (wchar_t is signed 32 bits), HAVE_ALIGNED_REQUIRED,
 * SIGNED_RIGHT_SHIFT_ZERO_FILLS, HAVE_PTHREAD_STUBS (WASI), _POSIX_THREADS
 * (unistd.h's), and Py_ENABLE_SHARED (the framework build's libpython is a
 * framework; exports.h reads it only to choose visibility attributes). */

#endif /* Py_PYCONFIG_H */
