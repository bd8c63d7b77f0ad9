#!/usr/bin/env bash
# cibuildwheel's before-all (pyproject.toml [tool.cibuildwheel]): abseil and
# simdjson as static libraries, from the versions pinned in
# .github/vcpkg/vcpkg.json (vcpkg manifest, fixed baseline), installed once per
# platform into a fixed prefix that the build finds through CMAKE_PREFIX_PATH
# (set per platform in pyproject.toml):
#
#   bash scripts/cibw_deps.sh PREFIX
#
# Triplets: x64-linux / arm64-linux inside the manylinux_2_28 containers
# (static, -fPIC), arm64-osx, x64-windows-static-md (static libraries, the
# dynamic C runtime CPython uses). NOT YET RUN on hosted runners (README).
set -euo pipefail
PREFIX=${1:?usage: scripts/cibw_deps.sh PREFIX}
cd "$(dirname "$0")/.."
BASELINE=$(python3 -c 'import json; print(json.load(open(".github/vcpkg/vcpkg.json"))["builtin-baseline"])' 2>/dev/null \
  || python -c 'import json; print(json.load(open(".github/vcpkg/vcpkg.json"))["builtin-baseline"])')
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) triplet=x64-linux ;;
  Linux-aarch64) triplet=arm64-linux ;;
  Darwin-arm64) triplet=arm64-osx ;;
  Darwin-x86_64) triplet=x64-osx ;;
  MINGW*|MSYS*|CYGWIN*) triplet=x64-windows-static-md ;;
  *) echo "cibw_deps: no vcpkg triplet for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
if [ "$(uname -s)" = Linux ]; then
  # vcpkg's own tools (manylinux_2_28 is AlmaLinux 8: git and curl are there).
  dnf install -y -q zip unzip tar perl-IPC-Cmd >/dev/null
fi
VCPKG_ROOT=${CPYTREE_VCPKG_ROOT:-$HOME/cpytree-vcpkg}
if [ ! -d "$VCPKG_ROOT/.git" ]; then
  git clone -q https://github.com/microsoft/vcpkg "$VCPKG_ROOT"
fi
git -C "$VCPKG_ROOT" checkout -q "$BASELINE"
vcpkg="$VCPKG_ROOT/vcpkg"
if [ ! -x "$vcpkg" ] && [ ! -x "$vcpkg.exe" ]; then
  case "$triplet" in
    *windows*) cmd //c "$(cygpath -w "$VCPKG_ROOT/bootstrap-vcpkg.bat")" -disableMetrics ;;
    *) "$VCPKG_ROOT/bootstrap-vcpkg.sh" -disableMetrics ;;
  esac
fi
[ -x "$vcpkg" ] || vcpkg="$vcpkg.exe"
work=$(mktemp -d)
"$vcpkg" install --x-manifest-root=.github/vcpkg --x-install-root="$work" --triplet "$triplet" \
  --host-triplet "$triplet" --clean-after-build
mkdir -p "$PREFIX"
cp -R "$work/$triplet/." "$PREFIX/"
echo "cibw_deps: abseil and simdjson ($triplet) in $PREFIX"
