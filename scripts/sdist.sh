#!/usr/bin/env bash
# Builds the source distribution into dist/ and checks it both ways:
#
#   scripts/sdist.sh [PYTHON]          # default: python3
#
# 1. `python -m build --sdist` (in the build venv of scripts/wheel.sh).
# 2. A wheel builds from the unpacked sdist alone (nothing missing from it).
# 3. It carries what a build without a system abseil or simdjson reads: the
#    pins (cmake/deps.lock), cmake/pinned_deps.cmake, cmake/abseil-subset.txt.
# 4. Where CMake finds neither abseil nor simdjson (simulated with
#    CMAKE_DISABLE_FIND_PACKAGE_absl/_simdjson) and downloading their pinned
#    sources is off (CPYTREE_DOWNLOAD_DEPS=OFF, no CPYTREE_DEPS_SOURCES), installing
#    the sdist fails with the one message cmake/pinned_deps.cmake writes, naming
#    both, the packages to install and the archives. (With downloads on, the
#    default, it builds: make test-sdist-clean shows it in a folder without them.)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
DIST=${DIST:-dist}
ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=build/wheel/$ver-zig/venv
[ -x "$venv/bin/python" ] || scripts/wheel.sh "$PYTHON" >/dev/null  # creates the build venv
mkdir -p "$DIST"
"$venv/bin/python" -m build --sdist --no-isolation --outdir "$DIST" . >/dev/null
sdist=$(ls -t "$DIST"/cpytree-*.tar.gz | head -1)
echo "sdist: $sdist ($(du -k "$sdist" | cut -f1) KB)"

check=build/sdist-check
rm -rf "$check" && mkdir -p "$check"
echo "sdist: building a wheel from it"
flock "${BUILD_LOCK:-build.lock}" env CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$check/wheel" \
  -C build-dir="$check/cmake" "$sdist" 2>&1 | { grep -v "is ignored: it is neither" || true; }
ls "$check"/wheel/cpytree-*.whl >/dev/null

members=$(tar -tzf "$sdist")
for f in LICENSE cmake/deps.lock cmake/pinned_deps.cmake cmake/abseil-subset.txt cmake/exports.map; do
  grep -q "^cpytree-[^/]*/$f$" <<<"$members" || { echo "sdist: $f missing from $sdist" >&2; exit 1; }
done

echo "sdist: without abseil and simdjson and with downloads off, installing it must fail clearly"
if "$venv/bin/python" -m pip wheel --no-deps --no-build-isolation -w "$check/none" \
     -C build-dir="$check/cmake-noabsl" -C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_absl=ON \
     -C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_simdjson=ON \
     -C cmake.define.CPYTREE_DOWNLOAD_DEPS=OFF -C cmake.define.CPYTREE_DEPS_SOURCES="$check/none" \
     "$sdist" >"$check/noabsl.log" 2>&1; then
  echo "sdist: the build without abseil and simdjson succeeded?" >&2; exit 1
fi
if ! grep -q "cpytree: abseil and simdjson not found" "$check/noabsl.log" \
   || ! grep -q "apt-get install libabsl-dev libsimdjson-dev" "$check/noabsl.log" \
   || ! grep -qF "$(basename "$(awk '$1 == "abseil" { print $4 }' cmake/deps.lock)")" "$check/noabsl.log"; then
  echo "sdist: no clear message without abseil and simdjson; the log:" >&2
  cat "$check/noabsl.log" >&2; exit 1
fi
grep -A8 "CMake Error" "$check/noabsl.log" | head -12
echo "sdist: ok"
