#!/usr/bin/env bash
# Installs everything the build, the tests and the harness need, idempotently:
# Debian packages (abseil, googletest, nlohmann-json) and a project virtualenv
# with the Python build and test dependencies and the peer pytree libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
APT_PKGS=(libabsl-dev libgtest-dev nlohmann-json3-dev g++ cmake)

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
  python3 -m venv "$VENV"
fi
stamp="$VENV/.cpytree-requirements"
if ! cmp -s requirements-dev.txt "$stamp"; then
  echo "setup: installing Python packages (requirements-dev.txt)"
  "$VENV/bin/python" -m pip install -q -r requirements-dev.txt
  cp requirements-dev.txt "$stamp"
fi
