#!/usr/bin/env bash
# Installs what the fuzz targets need, idempotently: clang with libFuzzer and
# the sanitizer runtimes (Debian: clang + libclang-rt-<major>-dev) for
# `make fuzz-cxx`, and atheris (PyPI) in the project virtualenv for `make fuzz`.
#   scripts/setup_fuzz.sh [cxx|py|all]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
what=${1:-all}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

if [ "$what" != py ]; then
  fuzzer_lib() { clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true; }
  if ! command -v clang++ >/dev/null 2>&1 || [ ! -f "$(fuzzer_lib)" ]; then
    echo "setup_fuzz: installing clang and libFuzzer (Debian packages)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang >/dev/null
    major=$(clang -dumpversion | cut -d. -f1)
    if [ ! -f "$(fuzzer_lib)" ]; then
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "libclang-rt-${major}-dev" >/dev/null
    fi
  fi
fi
if [ "$what" != cxx ]; then
  if ! "$VENV/bin/python" -c "import atheris" >/dev/null 2>&1; then
    echo "setup_fuzz: installing atheris"
    "$VENV/bin/python" -m pip install -q atheris
  fi
fi
