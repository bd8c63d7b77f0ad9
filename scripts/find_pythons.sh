#!/usr/bin/env bash
# Prints one CPython interpreter per minor version >= 3.10 found on this
# machine (PATH first, then pyenv's versions), one path a line, oldest first.
# `make wheel` and `make test-pythons` loop over these; override with
# PYTHONS="/path/to/python3.12 ..." on the make command line.
set -euo pipefail
candidates=()
for minor in 10 11 12 13 14 15; do
  p=$(command -v "python3.$minor" 2>/dev/null || true)
  [ -n "$p" ] && candidates+=("$p")
done
for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3; do
  [ -x "$p" ] && candidates+=("$p")
done
declare -A seen=()
for p in "${candidates[@]}"; do
  # A pyenv shim for a version that is not selected fails here; so does a
  # free-threaded build (no stable ABI tag we ship) or anything below 3.10.
  out=$("$p" -c 'import sys, sysconfig
ok = sys.implementation.name == "cpython" and sys.version_info >= (3, 10) \
     and not sysconfig.get_config_var("Py_GIL_DISABLED")
print("%d.%d %s" % (*sys.version_info[:2], sys.executable) if ok else "")' 2>/dev/null || true)
  [ -n "$out" ] || continue
  v=${out%% *}
  [ -z "${seen[$v]:-}" ] || continue
  seen[$v]=${out#* }
done
for v in $(printf '%s\n' "${!seen[@]}" | sort -t. -k2 -n); do
  echo "${seen[$v]}"
done
