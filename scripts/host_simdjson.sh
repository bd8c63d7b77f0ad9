#!/usr/bin/env bash
# The pinned simdjson (cmake/deps.lock: the amalgamation in pysimdjson's sdist)
# built with this machine's C++ compiler, for the header library's C++ tests,
# examples/aoti and the find_package(cpytree) consumer tests: the same
# simdjson the wheels link (scripts/native_deps.sh builds it with zig), never
# the system's (Debian 12 has 3.0, sid 4.x: they differ on what they accept).
#
#   scripts/host_simdjson.sh        # prints the prefix: pass it in CMAKE_PREFIX_PATH
#
# $CPYTREE_CACHE/simdjson-<hash>/ (default ~/.cache/cpytree), made once:
#   include/simdjson.h  lib/libsimdjson.a (static, PIC)  version (e.g. 3.12.3)
#   lib/cmake/simdjson/ simdjson-config.cmake and -config-version.cmake:
#                       find_package(simdjson 3.0) finds this copy first
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
CXX=${CXX:-c++}
LOCKFILE=$(realpath -m "${BUILD_LOCK:-build.lock}")
# pin, fetch
. scripts/pinned_sources.sh
hash=$( (pin simdjson 3; "$CXX" --version | head -1) | sha256sum | cut -c1-12)
PREFIX=$CACHE/simdjson-$hash
if [ -f "$PREFIX/lib/cmake/simdjson/simdjson-config.cmake" ]; then echo "$PREFIX"; exit 0; fi
start=$(date +%s)
P=$PREFIX.tmp
rm -rf "$P" && mkdir -p "$P"/{include,lib/cmake/simdjson,src}
tar -xzf "$(fetch simdjson)" -C "$P/src" --wildcards '*/simdjson/simdjson.h' '*/simdjson/simdjson.cpp'
SJ=$(echo "$P"/src/*/simdjson)
cp "$SJ/simdjson.h" "$P/include/"
version=$(sed -n 's/^#define SIMDJSON_VERSION "\(.*\)"$/\1/p' "$SJ/simdjson.h")
[ -n "$version" ] || { echo "host_simdjson: no SIMDJSON_VERSION in simdjson.h" >&2; exit 1; }
echo "$version" > "$P/version"
echo "host_simdjson: compiling simdjson $version with $CXX" >&2
flock "$LOCKFILE" "$CXX" -std=c++17 -O2 -DNDEBUG -fPIC -w -I"$SJ" -c "$SJ/simdjson.cpp" -o "$P/src/simdjson.o"
ar rcs "$P/lib/libsimdjson.a" "$P/src/simdjson.o"
rm -rf "$P/src"
cat > "$P/lib/cmake/simdjson/simdjson-config.cmake" <<C
# Made by scripts/host_simdjson.sh: the pinned simdjson $version (cmake/deps.lock).
if(NOT TARGET simdjson::simdjson)
  get_filename_component(_cpytree_sj "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
  add_library(simdjson::simdjson STATIC IMPORTED)
  set_target_properties(simdjson::simdjson PROPERTIES
    IMPORTED_LOCATION "\${_cpytree_sj}/lib/libsimdjson.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_cpytree_sj}/include")
endif()
C
cat > "$P/lib/cmake/simdjson/simdjson-config-version.cmake" <<C
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
C
rm -rf "$PREFIX" && mv "$P" "$PREFIX"
echo "host_simdjson: $PREFIX made in $(( $(date +%s) - start )) s" >&2
echo "$PREFIX"
