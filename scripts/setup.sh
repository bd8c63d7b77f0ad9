#!/usr/bin/env bash
# Installs everything the build, the tests and the harness need, idempotently:
# Debian packages (abseil, googletest, nlohmann-json, simdjson) and a project virtualenv
# with the Python build and test dependencies and the peer pytree libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# The interpreter of a new virtualenv and what goes into it (`make
# sanitize-pythons` makes one per newer CPython with requirements-sanitize.txt).
PYTHON=${PYTHON:-python3}
REQUIREMENTS=${REQUIREMENTS:-requirements-dev.txt}
APT_PKGS=(libabsl-dev libgtest-dev nlohmann-json3-dev libsimdjson-dev g++ cmake)
# SETUP_LINT=1 (`make lint`): the C++ formatter and linter too.
[ "${SETUP_LINT:-0}" = 1 ] && APT_PKGS+=(clang-format clang-tidy)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# SETUP_VENV=0: the Debian packages only (`make wheel`/`sdist` build in venvs of their own).
[ "${SETUP_VENV:-1}" = 1 ] || exit 0

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.cpytree-requirements"
if ! cmp -s "$REQUIREMENTS" "$stamp"; then
  echo "setup: installing Python packages ($REQUIREMENTS)"
  "$VENV/bin/python" -m pip install -q -r "$REQUIREMENTS"
  cp "$REQUIREMENTS" "$stamp"
fi
