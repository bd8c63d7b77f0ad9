#!/usr/bin/env bash
# The whole Python suite against the wheel built for one CPython:
#
#   scripts/test_python.sh /path/to/python3.12
#
# Builds (or rebuilds incrementally) the manylinux wheel for that interpreter
# (scripts/wheel.sh), installs it into a *fresh* venv build/pythons/<X.Y>/venv
# with pytest and hypothesis only, and there runs tests/packaging (what the
# wheel carries: ldd, auditwheel show, stripped, version) then tests/python.
# torch (TORCH_VERSION, default 2.13.0) joins the venv only when pip can find
# a CPU build of it without an index (on this machine's disk, through pip's
# configured find-links): an unpinned or CUDA torch is never pulled in.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:?usage: scripts/test_python.sh PYTHON}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
ver=$("$PYTHON" -c 'import sys, sysconfig; print("%d.%d%s" % (*sys.version_info[:2],
  "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
# The newest hypothesis has no wheel for free-threaded CPython and builds a
# Rust part from source (no Rust registry here): the newest that installs.
HYPOTHESIS=hypothesis
case $ver in *t) HYPOTHESIS=${FT_HYPOTHESIS:-hypothesis==6.155.0} ;; esac
wheel=$(scripts/wheel.sh "$PYTHON" | tail -1)
venv=build/pythons/$ver/venv
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; return "${PIPESTATUS[0]}"; }
quiet "$venv/bin/python" -m pip install -q "$wheel" pytest pytest-xdist==3.8.0 "$HYPOTHESIS"
torch_note="without torch (no local CPU build of torch==$TORCH_VERSION for Python $ver)"
if report=$("$venv/bin/python" -m pip install -q --dry-run --no-index --no-deps --report - \
      "torch==$TORCH_VERSION" 2>/dev/null) && grep -q '"version": "[^"]*+cpu"' <<<"$report"; then
  echo "test-python $ver: installing torch==$TORCH_VERSION (local CPU build)"
  quiet "$venv/bin/python" -m pip install -q "torch==$TORCH_VERSION"
  torch_note="with torch $TORCH_VERSION"
fi
echo "test-python $ver: $(basename "$wheel"), $torch_note"
export CPYTREE_REQUIRE_ENGINE=1 CPYTREE_WHEEL=$wheel \
  CPYTREE_AUDITWHEEL=$(realpath "build/wheel/$ver$([ "${WHEEL_TOOLCHAIN:-zig}" = zig ] && echo -zig)/venv/bin/auditwheel") \
  CPYTREE_WHEEL_TOOLCHAIN=${WHEEL_TOOLCHAIN:-zig} \
  CPYTREE_WHEEL_SYMBOLS=${WHEEL_SYMBOLS:-0}
# -p no:cacheprovider: several venvs share the checkout; no .pytest_cache churn.
# -n: pytest-xdist workers (PYTEST_WORKERS, default 2; 0: one process).
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" tests/packaging \
  ${PYTEST_ARGS:-tests/python}
