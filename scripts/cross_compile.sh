#!/usr/bin/env bash
# Compiles the engine for the platforms no wheel is built for, with zig's
# clang as a cross compiler, warnings as errors (`make lint` runs it):
#
#   scripts/cross_compile.sh [TARGET...]
#       default: aarch64-macos x86_64-macos x86_64-windows-gnu
#
# Each translation unit of the extension (the sources CMakeLists.txt lists
# for _C; src/base/forced_unwind.cc is the Linux wheels' alone) and the header
# library's (tests/cpp/every_public_header.cc) is compiled to an object file
# (-c, no link) with the extension's warning flags plus -Werror, against:
# - CPython 3.13.0's headers, from the source tree in
#   ../shared/pythons/Python-3.13.0-ft-src.tar.xz (PYTHON_SRC_TAR): Include/,
#   and for Windows PC/pyconfig.h.in as pyconfig.h (what CPython's Windows
#   build installs); for macOS scripts/cross/macos_pyconfig.h (it says how it
#   was derived). scripts/cross/pyconfig_check.cc checks each pyconfig.h's
#   sizes against the target.
# - abseil's headers and simdjson.h from the pinned archives of
#   cmake/deps.lock (sha256-checked; scripts/pinned_sources.sh), and
#   nlohmann-json's headers from the system (Debian nlohmann-json3-dev: the
#   header library's json.h includes them).
# The headers are unpacked once into $CPYTREE_CACHE/cross-headers-<hash>
# (default ~/.cache/cpytree), never into the checkout. The objects go under
# build/cross/<target>; ninja (build/cross/build.ninja, depfiles) recompiles
# only what changed, under the build lock ($BUILD_LOCK), $JOBS at a time.
# Nothing is linked and nothing compiled here is run.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
JOBS=${JOBS:-2}
LOCK=${BUILD_LOCK:-build.lock}
PYTHON_SRC_TAR=${PYTHON_SRC_TAR:-$(realpath -m ../shared/pythons/Python-3.13.0-ft-src.tar.xz)}
NINJA=${NINJA:-$(command -v ninja || echo .venv/bin/ninja)}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(aarch64-macos x86_64-macos x86_64-windows-gnu)
# pin, fetch, pinned_zig
. scripts/pinned_sources.sh
ZIG=$(pinned_zig)
ZIG_CACHE=$(dirname "$(dirname "$ZIG")")/cache

# The headers, once per (deps.lock, CPython archive, RECIPE).
RECIPE=1
hash=$( (cat cmake/deps.lock; basename "$PYTHON_SRC_TAR"; echo "recipe $RECIPE") | sha256sum | cut -c1-12)
H=$CACHE/cross-headers-$hash
if [ ! -f "$H/done" ]; then
  [ -f "$PYTHON_SRC_TAR" ] || { echo "cross_compile: no CPython source tree at $PYTHON_SRC_TAR" >&2; exit 1; }
  rm -rf "$H" && mkdir -p "$H"/{python,windows,deps,src}
  top=$(tar -tJf "$PYTHON_SRC_TAR" | awk -F/ 'NR == 1 { print $1 }')
  tar -xJf "$PYTHON_SRC_TAR" -C "$H/src" "$top/Include" "$top/PC/pyconfig.h.in"
  mv "$H/src/$top/Include" "$H/python/Include"
  mv "$H/src/$top/PC/pyconfig.h.in" "$H/windows/pyconfig.h"
  tar -xzf "$(fetch abseil)" -C "$H/src" --wildcards '*/third_party/abseil-cpp/absl/*.h' \
    '*/third_party/abseil-cpp/absl/*.inc'
  (cd "$H"/src/*/third_party/abseil-cpp && tar -cf - absl) | tar -xf - -C "$H/deps"
  tar -xzf "$(fetch simdjson)" -C "$H/src" --wildcards '*/simdjson/simdjson.h'
  cp "$H"/src/*/simdjson/simdjson.h "$H/deps/"
  rm -rf "$H/src"
  touch "$H/done"
fi
# nlohmann-json: the system's (zig searches no /usr/include), alone in a folder.
NLOHMANN=$(realpath -m build/cross/nlohmann-include)
mkdir -p "$NLOHMANN"
[ -d /usr/include/nlohmann ] || { echo "cross_compile: no /usr/include/nlohmann (apt-get install nlohmann-json3-dev)" >&2; exit 1; }
ln -sfn /usr/include/nlohmann "$NLOHMANN/nlohmann"

# The extension's sources, as CMakeLists.txt lists them for _C.
mapfile -t SOURCES < <(sed -n '/^  Python_add_library(_C MODULE/,/)/p' CMakeLists.txt | grep -o 'src/[^ )]*\.cc')
[ ${#SOURCES[@]} -gt 10 ] || { echo "cross_compile: found no sources in CMakeLists.txt" >&2; exit 1; }
# The extension's flags (cmake/compiler_flags.cmake, its GCC/Clang column:
# warnings, CPYTREE_EXTENSION_FLAGS, hidden visibility) plus -Werror.
# -O1: the same diagnostics as -O3 with clang, in less time.
FLAGS="-std=c++17 -O1 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-missing-field-initializers \
-Wno-cast-function-type -fno-strict-aliasing -Werror -I$PWD/include -I$PWD/src -isystem $H/deps \
-isystem $NLOHMANN -isystem $H/python/Include"

B=build/cross
# macOS: the derived pyconfig.h under its own name, copied only when it
# changed (ninja's depfiles then recompile what includes it).
mkdir -p "$B/macos-include"
cmp -s scripts/cross/macos_pyconfig.h "$B/macos-include/pyconfig.h" \
  || cp scripts/cross/macos_pyconfig.h "$B/macos-include/pyconfig.h"
{
  echo "# Made by scripts/cross_compile.sh."
  echo "ninja_required_version = 1.5"
  echo "builddir = $B"
  echo "rule cxx"
  echo "  command = env ZIG_GLOBAL_CACHE_DIR=$ZIG_CACHE $ZIG c++ -target \$target \$flags -MD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "  description = cross \$target \$in"
  for t in "${TARGETS[@]}"; do
    case $t in
      *-macos) pyconfig=$PWD/$B/macos-include ;;
      *-windows-*) pyconfig=$H/windows ;;
      *) echo "cross_compile: no pyconfig.h for $t (macOS and Windows only)" >&2; exit 2 ;;
    esac
    for src in "${SOURCES[@]}" tests/cpp/every_public_header.cc scripts/cross/pyconfig_check.cc; do
      echo "build $B/$t/${src%.cc}.o: cxx $PWD/$src"
      echo "  target = $t"
      echo "  flags = $FLAGS -isystem $pyconfig"
    done
  done
} > "$B/build.ninja.tmp"
mv "$B/build.ninja.tmp" "$B/build.ninja"
# ninja's progress lines ("cross <target> <source>") are dropped; the
# compiler's diagnostics and ninja's FAILED lines are kept. The time printed
# is the compiles' alone, not the wait for the lock.
flock "$(realpath -m "$LOCK")" bash -o pipefail -c '
  start=$(date +%s%N)
  status=0
  "$1" -f "$2/build.ninja" -j "$3" -k 0 | { grep -v "^\[[0-9/]*\] cross " || true; } || status=$?
  echo "cross_compile: $4: $5 translation units each, $(( ($(date +%s%N) - start) / 1000000 )) ms" \
       "(ninja: only what changed)"
  exit $status' _ "$NINJA" "$B" "$JOBS" "${TARGETS[*]}" "$(( ${#SOURCES[@]} + 2 ))"
