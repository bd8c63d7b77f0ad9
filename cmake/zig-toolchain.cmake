# CMake toolchain of the wheels: zig's clang and lld for <arch>-linux-gnu.2.28
# (glibc 2.28: manylinux_2_28), libc++ and libc++abi linked in statically, the
# unwinder taken from the system's libgcc_s.so.1, the pinned abseil and
# simdjson of cmake/deps.lock. Use with the prefix that
# scripts/native_deps.sh prints for the target:
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/zig-toolchain.cmake -DCPYTREE_DEPS=<prefix> ...
#
# (scripts/wheel.sh passes both). The development build (`make build`) uses
# neither: system compiler, Debian's abseil and simdjson.
if(NOT CPYTREE_DEPS)
  message(FATAL_ERROR "cpytree: zig-toolchain.cmake needs -DCPYTREE_DEPS=<prefix> "
                      "(the last line of scripts/native_deps.sh)")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CPYTREE_DEPS)
get_filename_component(_cpytree_target "${CPYTREE_DEPS}" NAME)  # x86_64-linux-gnu.2.28
string(REGEX MATCH "^[^-]+" _cpytree_arch "${_cpytree_target}")
if(NOT _cpytree_arch STREQUAL CMAKE_HOST_SYSTEM_PROCESSOR)
  set(CMAKE_SYSTEM_NAME Linux)
  set(CMAKE_SYSTEM_PROCESSOR ${_cpytree_arch})
endif()
set(CMAKE_C_COMPILER "${CPYTREE_DEPS}/bin/cc")
set(CMAKE_CXX_COMPILER "${CPYTREE_DEPS}/bin/c++")
set(CMAKE_AR "${CPYTREE_DEPS}/bin/ar" CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB "${CPYTREE_DEPS}/bin/ranlib" CACHE FILEPATH "zig ranlib")
set(CMAKE_STRIP "${CPYTREE_DEPS}/bin/strip" CACHE FILEPATH "zig objcopy --strip-all")

# The C++ runtime: zig's libc++ and libc++abi (static, from <prefix>/runtime),
# but not zig's static LLVM libunwind, which `zig c++` links by default:
# -nostdlib++ drops all three, and the unwinder (_Unwind_*, the versions
# GCC_3.0-GCC_4.2.0) comes from the system's libgcc_s.so.1 (linked against
# the stub scripts/native_deps.sh makes). One unwinder per process: glibc
# ends threads (pthread_exit, pthread_cancel) by a forced unwind that runs in
# libgcc_s and calls the module's personality routine, which must read that
# unwind context with libgcc_s's own accessors; a second unwinder inside the
# module crashed there (CPython 3.11-3.13 exit with daemon threads).
# manylinux_2_28 allows libgcc_s.so.1, and glibc itself loads it for the
# same unwinds.
set(_cpytree_rt "${CPYTREE_DEPS}/runtime")
set(CMAKE_CXX_STANDARD_LIBRARIES_INIT
    "${_cpytree_rt}/libc++.a ${_cpytree_rt}/libc++abi.a ${_cpytree_rt}/libgcc_s.so.1")
foreach(_kind EXE SHARED MODULE)
  set(CMAKE_${_kind}_LINKER_FLAGS_INIT "-nostdlib++")
endforeach()
