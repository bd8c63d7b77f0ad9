#!/usr/bin/env bash
# The wheels' toolchain and native dependencies (cmake/deps.lock), made once
# into a cache outside the checkout, for one target:
#
#   scripts/native_deps.sh [x86_64|aarch64]     # default: x86_64
#
# Prints, on its last line, the prefix holding them: pass it to CMake as
# -DCPYTREE_DEPS=<prefix> with -DCMAKE_TOOLCHAIN_FILE=cmake/zig-toolchain.cmake
# (scripts/wheel.sh does). In $CPYTREE_CACHE (default ~/.cache/cpytree):
#   downloads/                  the pinned archives, sha256-checked
#   zig-<version>/              zig from the pinned ziglang wheel, and zig's own
#                               cache (libc++, glibc stubs: built on first use)
#   deps-<hash>/<target>/       per target (<arch>-linux-gnu.2.28):
#     bin/                      cc, c++, ar, ranlib, strip: zig for that target
#     include/                  abseil's headers, simdjson.h
#     lib/                      libcpytree_absl.a, libsimdjson.a: static, PIC,
#                               hidden visibility (-fvisibility=hidden)
#     runtime/                  libc++.a, libc++abi.a (zig's), libgcc_s.so.1 (a
#                               link stub: the unwinder comes from the system)
#     cpytree-deps.cmake        imported targets absl::flat_hash_map,
#                               absl::hash, simdjson::simdjson
# <hash> covers cmake/deps.lock and RECIPE (bump it when the way the libraries
# are compiled changes): either makes a new prefix. The wrappers in bin/ are
# rewritten on every run. Compiles run under the build lock ($BUILD_LOCK),
# $JOBS at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${1:-x86_64}
GLIBC=2.28
TARGET=$ARCH-linux-gnu.$GLIBC
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
JOBS=${JOBS:-2}
LOCK=${BUILD_LOCK:-build.lock}
LOCKFILE=$(realpath -m "$LOCK")
RECIPE=1
# pin, fetch
. scripts/pinned_sources.sh
hash=$( (cat cmake/deps.lock; echo "recipe $RECIPE") | sha256sum | cut -c1-12)
PREFIX=$CACHE/deps-$hash/$TARGET
mkdir -p "$CACHE/downloads"
start=$(date +%s)

# zig, from the pinned ziglang wheel (scripts/pinned_sources.sh).
ZIG=$(pinned_zig)
ZIGDIR=$(dirname "$(dirname "$ZIG")")

# Wrappers: zig for this target, with zig's cache beside zig (not ~/.cache/zig).
wrappers() {  # directory
  mkdir -p "$1"
  for tool in cc c++; do
    printf '#!/bin/sh\nZIG_GLOBAL_CACHE_DIR="%s" exec "%s" %s -target %s "$@"\n' \
      "$ZIGDIR/cache" "$ZIG" "$tool" "$TARGET" > "$1/$tool"
  done
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ZIG" "$tool" > "$1/$tool"
  done
  # CMake's install --strip calls `strip FILE` (zig objcopy cannot strip a
  # shared object yet): binutils' strip, which reads x86_64 and aarch64 ELF.
  printf '#!/bin/sh\nexec %s --strip-all "$@"\n' "$(command -v strip || echo strip)" > "$1/strip"
  chmod +x "$1"/*
}

# The C++ runtime the extension links (cmake/zig-toolchain.cmake), in
# <prefix>/runtime: zig's libc++.a and libc++abi.a for this target (zig builds
# them on first use, about 2.5 min, into its cache; a probe link finds them),
# and a link stub libgcc_s.so.1 standing for the system's unwinder. The
# extension takes its unwinder (_Unwind_*) from the system's libgcc_s, not
# from zig's static LLVM libunwind: glibc's pthread_exit/pthread_cancel unwind
# through libgcc_s, and a module with its own unwinder gets libgcc_s's context
# handed to its own _Unwind_GetIP/SetGR (SIGSEGV at interpreter exit on
# CPython 3.11-3.13, which ends daemon threads with pthread_exit). The stub
# defines the symbols libc++abi calls at the versions every libgcc_s since
# GCC 4.2 has (GCC_3.0, GCC_3.3, GCC_4.2.0; the same on x86_64 and aarch64),
# so the link depends on no libgcc_s of the build machine.
runtime() {  # prefix
  local R=$1/runtime t
  [ -f "$R/libgcc_s.so.1" ] && return
  rm -rf "$R.tmp" && mkdir -p "$R.tmp" && t=$R.tmp
  printf '#include <string>\nstd::string cpytree_probe(const char* s) { return s; }\n' > "$t/probe.cc"
  flock "$LOCKFILE" "$1/bin/c++" -O3 -fPIC -shared "$t/probe.cc" -o "$t/probe.so" -v 2> "$t/probe.log" \
    || { cat "$t/probe.log" >&2; exit 1; }
  for lib in libc++.a libc++abi.a; do
    cp "$(grep '^ld.lld' "$t/probe.log" | tr ' ' '\n' | grep -F "/$lib" | head -1)" "$t/$lib"
  done
  cat > "$t/libgcc_s.map" <<'MAP'
GCC_3.0 { global: _Unwind_DeleteException; _Unwind_ForcedUnwind; _Unwind_GetDataRelBase;
  _Unwind_GetGR; _Unwind_GetIP; _Unwind_GetLanguageSpecificData; _Unwind_GetRegionStart;
  _Unwind_GetTextRelBase; _Unwind_RaiseException; _Unwind_Resume; _Unwind_SetGR;
  _Unwind_SetIP; local: *; };
GCC_3.3 { _Unwind_Backtrace; _Unwind_FindEnclosingFunction; _Unwind_GetCFA;
  _Unwind_Resume_or_Rethrow; } GCC_3.0;
GCC_4.2.0 { _Unwind_GetIPInfo; } GCC_3.3;
MAP
  grep -o '_Unwind_[A-Za-z_]*' "$t/libgcc_s.map" | sed 's/.*/void &(void) {}/' > "$t/libgcc_s.c"
  flock "$LOCKFILE" "$1/bin/cc" -shared -nostdlib -Wl,-soname,libgcc_s.so.1 \
    -Wl,--version-script="$t/libgcc_s.map" "$t/libgcc_s.c" -o "$t/libgcc_s.so.1"
  rm "$t"/probe.* "$t/libgcc_s.c"
  rm -rf "$R" && mv "$t" "$R"
}
# Two builds of one prefix at once (two checkouts with different build locks)
# would share $PREFIX.tmp: one waits for the other here, then finds it made.
mkdir -p "$(dirname "$PREFIX")"
exec 9> "$PREFIX.lock"
flock 9
if [ -f "$PREFIX/cpytree-deps.cmake" ]; then
  wrappers "$PREFIX/bin"; runtime "$PREFIX"; echo "$PREFIX"; exit 0
fi
rm -rf "$PREFIX.tmp" && mkdir -p "$PREFIX.tmp"/{bin,include,lib,src,obj}
P=$PREFIX.tmp
wrappers "$P/bin"
runtime "$P"
# Everything built here is position-independent with hidden symbols, so the
# extension can export PyInit__C alone (CMakeLists.txt's version script).
CXXFLAGS="-std=c++17 -O3 -DNDEBUG -fPIC -fvisibility=hidden -fvisibility-inlines-hidden
  -ffunction-sections -fdata-sections -w"

# abseil: the subset cmake/abseil-subset.txt names (shared with the source
# build, cmake/pinned_deps.cmake); the linker takes from the archive only the
# objects it needs.
absl_tar=$(fetch abseil)
tar -xzf "$absl_tar" -C "$P/src" --wildcards '*/third_party/abseil-cpp/absl/*'
ABSL=$(echo "$P"/src/*/third_party/abseil-cpp)
(cd "$ABSL" && find absl -name '*.h' -o -name '*.inc' | tar -cf - -T - | tar -xf - -C "$P/include")
subset() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' cmake/abseil-subset.txt; }
absl_dirs=$(subset dirs) absl_exclude=$(subset exclude)
# shellcheck disable=SC2086
(cd "$ABSL" && find $absl_dirs -name '*.cc' | grep -v -E "$absl_exclude" | sort) > "$P/absl_sources.txt"
# simdjson: the amalgamation.
sj_tar=$(fetch simdjson)
tar -xzf "$sj_tar" -C "$P/src" --wildcards '*/simdjson/simdjson.h' '*/simdjson/simdjson.cpp'
SJ=$(echo "$P"/src/*/simdjson)
cp "$SJ/simdjson.h" "$P/include/"

echo "native_deps: compiling abseil ($(wc -l < "$P/absl_sources.txt") files) and simdjson for $TARGET" >&2
export P ABSL SJ CXXFLAGS
compile() {  # source -> object under $P/obj
  local src=$1 obj
  obj=$P/obj/$(echo "$src" | tr / _).o
  # shellcheck disable=SC2086
  "$P/bin/c++" $CXXFLAGS -I"$ABSL" -c "$src" -o "$obj"
}
export -f compile
flock "$LOCKFILE" bash -c '
  cd "$ABSL" && xargs -P "$1" -I{} bash -c "compile {}" < "$P/absl_sources.txt" &&
  "$P/bin/c++" $CXXFLAGS -I"$SJ" -c "$SJ/simdjson.cpp" -o "$P/obj/simdjson.o"' _ "$JOBS"
"$P/bin/ar" rcs "$P/lib/libsimdjson.a" "$P/obj/simdjson.o"
rm "$P/obj/simdjson.o"
"$P/bin/ar" rcs "$P/lib/libcpytree_absl.a" "$P"/obj/*.o
rm -rf "$P/obj" "$P/src"

cat > "$P/cpytree-deps.cmake" <<'C'
# Made by scripts/native_deps.sh: the pinned abseil and simdjson (cmake/deps.lock),
# static, PIC, hidden visibility, built with zig for this prefix's target.
get_filename_component(_cpytree_deps "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
add_library(cpytree_deps_absl STATIC IMPORTED)
set_target_properties(cpytree_deps_absl PROPERTIES
  IMPORTED_LOCATION "${_cpytree_deps}/lib/libcpytree_absl.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_cpytree_deps}/include")
add_library(absl::flat_hash_map ALIAS cpytree_deps_absl)
add_library(absl::hash ALIAS cpytree_deps_absl)
add_library(absl::inlined_vector ALIAS cpytree_deps_absl)
add_library(simdjson::simdjson STATIC IMPORTED)
set_target_properties(simdjson::simdjson PROPERTIES
  IMPORTED_LOCATION "${_cpytree_deps}/lib/libsimdjson.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_cpytree_deps}/include")
set(absl_FOUND ON)
set(simdjson_FOUND ON)
C
rm -rf "$PREFIX" && mv "$P" "$PREFIX"
# The wrappers name their own prefix only through $ZIG; nothing to rewrite.
echo "native_deps: $PREFIX made in $(( $(date +%s) - start )) s" >&2
echo "$PREFIX"
