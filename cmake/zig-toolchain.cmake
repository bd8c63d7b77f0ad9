# CMake toolchain of the wheels: zig's clang and lld for <arch>-linux-gnu.2.28
# (glibc 2.28: manylinux_2_28), libc++ linked in statically (zig's default), the
# pinned abseil and simdjson of cmake/deps.lock. Use with the prefix that
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
