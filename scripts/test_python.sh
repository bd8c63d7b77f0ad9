#!/usr/bin/env bash
# The whole Python suite against the wheel built for one CPython and
# architecture:
#
#   scripts/test_python.sh /path/to/python3.12          # x86_64
#   scripts/test_python.sh --arch aarch64 3.11          # aarch64 under qemu (3.11, 3.13-3.15)
#   scripts/test_python.sh --arch aarch64 --torch 3.11  # the torch suites with aarch64 torch 2.15.0
#   scripts/test_python.sh --torch 2.13.0 2.14.1 2.15.0 # torch releases; TORCH_PYTHON: default python3
#
# Builds (or rebuilds incrementally) the manylinux wheel for that interpreter
# (scripts/wheel.sh), then:
#
# x86_64: installs it into a *fresh* venv build/pythons/<X.Y>/venv
# with pytest and hypothesis only, and there runs tests/packaging (what the
# wheel carries: ldd, auditwheel show, stripped, version) then tests/python.
# torch (TORCH_VERSION, default 2.13.0) joins the venv only when pip can find
# a CPU build of it without an index (on this machine's disk, through pip's
# configured find-links): an unpinned or CUDA torch is never pulled in.
#
# aarch64: pytest, hypothesis and the wheel installed (pip --target, for
# manylinux_2_28_aarch64) into build/wheel/<X.Y>-aarch64/site, which Debian's
# arm64 CPython imports from, then tests/python under qemu (the wrapper
# scripts/wheel.sh made, build/wheel/<X.Y>-aarch64/python). The tests that
# start a subprocess of the interpreter run it under qemu too: a sitecustomize
# makes sys.executable that wrapper (QEMU_EXEC=0: they are deselected instead,
# NO_SUBPROCESS); NOT_UNDER_QEMU lists what still cannot run, with the
# reasons. Bytecode goes to a cache folder of its own (see
# PYTHONPYCACHEPREFIX below). REUSE_WHEEL=1 tests the aarch64 wheel already in
# dist/ as it is.
#   SHARDS=N (default 2, one per core; 1: one pytest process) runs the
#   files in N pytest processes at once (logs and a per-file table from
#   lab/pytest_file_counts.py: $SHARD_LOGS, default /tmp/cpytree-aarch64);
#   PYTEST_ARGS="tests/python/test_a.py ... -x" picks files and options.
#   test_leaks runs at CPYTREE_LEAK_ITERATIONS=10000 here (its own count for
#   the engine is 100,000, hours under qemu). At 10,000 the reference counts
#   are still exact and one leaked object a call is still 20x the block
#   slack; the RSS check then sees a C++ leak of ~200 bytes a call instead of
#   ~20. Set it to run more.
#
# --torch (`make test-torch-versions`, `make test-torch-range`): the
# torch-facing suites against torch releases, each in its own venv.
# Per release: venv build/torch/<release>/venv with torch==<release> (pinned
# exactly: a machine without a pip constraint must get that release and no
# other), kept between runs; its wheels come from a wheelhouse outside the
# checkout, TORCH_WHEELHOUSE (default ${CPYTREE_CACHE:-~/.cache/cpytree}/wheelhouse),
# so torch (a 2-5 GB CUDA build from PyPI; it runs on the CPU:
# CUDA_VISIBLE_DEVICES is emptied) is downloaded once per machine, not per
# venv or per checkout: a new venv installs from it offline, and only what it
# lacks is fetched (`pip download`, with pip's own index settings).
# TORCH_VENV_SUFFIX is appended to the venv's folder name (the sid folder's
# CPython 3.14: -py3.14).
# Then the wheel of this checkout (scripts/wheel.sh) reinstalled fresh, and
# `pytest -m torch tests/python`: every test that faces torch (install()/
# uninstall(), torch.compile and torch.export with install(), the spec interop
# and pickling, the shared registries and the install lock, the release's own
# pytree semantics (tests/python/test_torch_releases.py) and rollback, API
# parity with torch's module, byte-identical treespec_dumps, the differential
# tests against torch.utils._pytree). The marker, not a list here, says which:
# tests/python/test_suite_markers.py fails when a test module that imports
# torch lacks it. Prints each release's result and wall times (venv, tests).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=x86_64
if [ "${1:-}" = --arch ]; then
  ARCH=${2:?usage: scripts/test_python.sh [--arch x86_64|aarch64] PYTHON}
  shift 2
fi
case $ARCH in
  x86_64 | aarch64) ;;
  *) echo "test-python: --arch must be x86_64 or aarch64, not '$ARCH'" >&2; exit 2 ;;
esac

# --arch aarch64 --torch: install_aarch64_torch, test_aarch64_torch, NO_COMPILER_UNDER_QEMU
# shellcheck source=scripts/aarch64_torch.sh
. scripts/aarch64_torch.sh

test_aarch64() {
TORCH_AARCH64=0
if [ "${1:-}" = --torch ]; then TORCH_AARCH64=1; shift; fi
PYV=${1:?usage: scripts/test_python.sh --arch aarch64 [--torch] X.Y}
if [ "$TORCH_AARCH64" = 1 ] && [ "$PYV" != 3.11 ]; then
  echo "test-python aarch64 --torch: the pinned torch wheels are cp311 (requirements-aarch64-torch.txt), not $PYV" >&2
  exit 2
fi
CP=cp${PYV/./}
case $PYV in
  3.10 | 3.12) echo "test-python aarch64: $CP has no arm64 interpreter here: built, not run" >&2; exit 2 ;;
esac
whl=$(scripts/wheel.sh --arch aarch64 "$PYV" | tail -1)
root=build/wheel/$PYV-aarch64
tools=$(realpath build/wheel/aarch64-tools/bin)
# Tests that run the interpreter in a subprocess: the child is
# sys.executable, the arm64 python3.14 itself, which this kernel cannot exec
# (no binfmt_misc: "Exec format error"). QEMU_EXEC (the default) makes
# sys.executable the qemu wrapper, and they run; with QEMU_EXEC=0 these are
# deselected, by function (every parametrization; the reason for each is the
# child it runs). Tests that also need torch or atheris (not installed for
# aarch64) are skipped by their own marks and not listed.
NO_SUBPROCESS=(
  # the mutating callbacks run in a child so a crash fails one case
  tests/python/test_callback_safety.py::test_callback_mutation_is_safe
  # the hostile trees (deep, cyclic, mutated mid-traversal) run in a child
  # (support.run_isolated -> _hostile.py) so a stack overflow fails the test
  tests/python/test_errors.py::test_deep_tree_raises_recursion_error
  tests/python/test_errors.py::test_cyclic_tree_raises_recursion_error
  tests/python/test_errors.py::test_deep_spec_can_be_built
  tests/python/test_errors.py::test_deep_spec_ops_raise_recursion_error_or_work
  tests/python/test_errors.py::test_flatten_up_to_cyclic_tree
  tests/python/test_errors.py::test_mutation_during_traversal
  # the hostile loads table, each implementation in a child (_hostile.py loads);
  # the same texts run in-process in test_listed_hostile_loads_match_reference
  tests/python/test_serialization_engine.py::test_hostile_loads_table_matches_reference_and_torch
  # random inputs fed to a child (tests/fuzz) so a crash is caught
  tests/python/test_fuzz.py::test_fuzz_random_inputs
  # `python -m cpytree.harness` in a child
  tests/python/test_harness.py::test_report_files
  tests/python/test_harness.py::test_every_number_positive
  tests/python/test_harness.py::test_machine_and_versions
  tests/python/test_harness.py::test_every_backend_row
  tests/python/test_harness.py::test_closest_peer_table
  tests/python/test_harness.py::test_own_tree
  tests/python/test_harness.py::test_bad_arguments
  tests/python/test_harness.py::test_model_needs_compile
  tests/python/test_harness.py::test_runtime_unknown_case
  # `import cpytree` in a fresh interpreter, counting the modules it loads
  tests/python/test_import_cost.py::test_import_does_not_load_the_reference
  tests/python/test_import_cost.py::test_fallback_still_loads_the_reference
  # deep recursion, memory limits, exit with threads: each in a child with
  # its own limits, so an overflow or an exit crash fails one test
  tests/python/test_limits.py::test_large_tree_memory_is_proportional
  tests/python/test_limits.py::test_deeper_than_recursion_limit_raises_clear_error
  tests/python/test_limits.py::test_raised_recursion_limit_is_capped
  tests/python/test_limits.py::test_just_under_the_cap_works_in_threads
  tests/python/test_limits.py::test_interpreter_shutdown_is_clean
  tests/python/test_limits.py::test_out_of_memory_raises_memory_error
  tests/python/test_limits.py::test_freeing_a_long_chain_of_specs
  tests/python/test_limits.py::test_reentrant_traversals_share_the_c_stack
)
# Under qemu (QEMU_EXEC, below) the children run too, except these:
NOT_UNDER_QEMU=(
  # the child lowers RLIMIT_AS to get a MemoryError: qemu-user ignores a
  # guest's setrlimit(RLIMIT_AS) (its own mappings live in that space)
  tests/python/test_limits.py::test_out_of_memory_raises_memory_error
)
site=$root/site
rm -rf "$site"
"$tools/python" -m pip install -q --target "$site" --platform manylinux_2_28_aarch64 \
  --python-version "$PYV" --implementation cp --only-binary :all: --no-compile \
  "$whl" pytest hypothesis 2>&1 | { grep -v "is ignored: it is neither" || true; }
# A folder ahead of the site folder: the per-file counts plugin and, unless
# QEMU_EXEC=0, a sitecustomize that makes sys.executable the qemu wrapper (a
# shell script the host kernel can exec), so the tests that run
# `sys.executable` in a subprocess run their child under qemu too.
extra=$(realpath -m "$root/pyextra")
rm -rf "$extra" && mkdir -p "$extra"
cp lab/pytest_file_counts.py "$extra/"
skip=("${NO_SUBPROCESS[@]}")
if [ "${QEMU_EXEC:-1}" != 0 ]; then
  printf 'import sys\nsys.executable = %s\n' "'$(realpath "$root/python")'" > "$extra/sitecustomize.py"
  skip=("${NOT_UNDER_QEMU[@]}")
fi
if [ "$TORCH_AARCH64" = 1 ]; then
  skip+=("${NO_COMPILER_UNDER_QEMU[@]}")
  torch_site=$(install_aarch64_torch)
fi
deselect=()
for t in "${skip[@]}"; do deselect+=(--deselect "$t"); done
# Bytecode into a folder of its own (the stdlib's too: the arm64 folder's
# packages were unpacked without their byte-compiling scripts): without it
# every interpreter under qemu compiles what it imports again, 24 s for
# `import cpytree`, nearly 2 min for pytest and hypothesis (5 s and 13 s once
# compiled). Nothing is written into the checkout or the arm64 folder.
unset PYTHONDONTWRITEBYTECODE
# CPYTREE_EMULATED: tests that read the process's memory from /proc measure
# the guest's allocations instead (qemu's own caches are in that process).
export CPYTREE_LEAK_ITERATIONS=${CPYTREE_LEAK_ITERATIONS:-10000}
export PYTHONPATH=$extra:$(realpath "$site") CPYTREE_REQUIRE_ENGINE=1 CPYTREE_EMULATED=qemu \
  PYTHONPYCACHEPREFIX=$(realpath -m "$root/pycache")
pytest=("$root/python" -m pytest -p no:cacheprovider -p pytest_file_counts -rfE "${deselect[@]}")
if [ "$TORCH_AARCH64" = 1 ]; then
  test_aarch64_torch
  exit
fi
echo "test-python aarch64: tests/python under qemu-aarch64 ($CP; ${#skip[@]} test functions deselected)"
SHARDS=${SHARDS:-2}
if [ "$SHARDS" = 1 ]; then
  exec "${pytest[@]}" ${PYTEST_ARGS:-tests/python}
fi
# SHARDS=N: the files split into N pytest processes run at once, the slowest
# files first, each to the shard with the least time so far. Seconds under
# qemu on this machine (cp313 on 2 cores, lab/pytest_file_counts.py's
# table); a file not listed counts 10. test_errors and test_limits include
# their children under qemu; test_leaks is at 10,000.
declare -A FILE_SECONDS=(
  [test_leaks.py]=228 [test_differential.py]=81 [test_errors.py]=85 [test_limits.py]=85
  [test_core.py]=24 [test_serialization_engine.py]=27 [test_registry_churn.py]=23
)
files=() opts=()
for a in ${PYTEST_ARGS:-tests/python}; do  # options go to every shard
  case $a in -*) opts+=("$a") ;; *) if [ -d "$a" ]; then files+=("$a"/test_*.py); else files+=("$a"); fi ;; esac
done
mapfile -t files < <(for f in "${files[@]}"; do echo "${FILE_SECONDS[$(basename "$f")]:-10} $f"; done | sort -k1,1nr -k2 | cut -d' ' -f2)
declare -a load shard
for ((i = 0; i < SHARDS; i++)); do load[i]=0; shard[i]=""; done
for f in "${files[@]}"; do
  best=0
  for ((i = 1; i < SHARDS; i++)); do [ "${load[i]}" -lt "${load[best]}" ] && best=$i; done
  load[best]=$((load[best] + ${FILE_SECONDS[$(basename "$f")]:-10}))
  shard[best]+=" $f"
done
logs=${SHARD_LOGS:-/tmp/cpytree-aarch64}
mkdir -p "$logs" && rm -f "$logs"/shard*.log "$logs"/shard*.json
pids=()
for ((i = 0; i < SHARDS; i++)); do
  [ -n "${shard[i]}" ] || continue
  echo "test-python aarch64: shard $i (~$(((load[i] + 59) / 60)) min):${shard[i]} -> $logs/shard$i.log"
  FILE_COUNTS_JSON=$logs/shard$i.json "${pytest[@]}" "${opts[@]}" ${shard[i]} > "$logs/shard$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for ((i = 0; i < SHARDS; i++)); do [ -z "${shard[i]}" ] || tail -1 "$logs/shard$i.log"; done
"$tools/python" lab/pytest_file_counts.py "$logs"/shard*.json
exit $rc
}

# --torch V...: the torch-facing suites on the x86_64 wheel of TORCH_PYTHON.
test_torch() {
PYTHON=${TORCH_PYTHON:-python3}
WHEELHOUSE=${TORCH_WHEELHOUSE:-${CPYTREE_CACHE:-$HOME/.cache/cpytree}/wheelhouse}
[ $# -gt 0 ] || set -- 2.13.0 2.14.1 2.15.0
for version in "$@"; do
  case $version in
    *[!0-9.]* | "") echo "test-torch-versions: '$version' is not a release (X.Y.Z)" >&2; exit 2 ;;
  esac
done
wheel=$(scripts/wheel.sh "$PYTHON" | tail -1)
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; return "${PIPESTATUS[0]}"; }
status=0; summary=""
for version in "$@"; do
  start=$SECONDS
  venv=build/torch/$version${TORCH_VENV_SUFFIX:-}/venv
  # The marker names what the venv holds: a venv made before pytest-xdist
  # joined the list is made again.
  if [ "$(cat "$venv/.torch" 2>/dev/null)" != "$version xdist" ]; then
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    mkdir -p "$WHEELHOUSE"
    need=("torch==$version" pytest pytest-xdist==3.8.0 hypothesis)
    echo "test-torch-versions: installing torch==$version into $venv (wheels: $WHEELHOUSE)"
    if ! quiet "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELHOUSE" "${need[@]}" \
         >/dev/null 2>&1; then
      # pip's HTTP cache stores nothing here (the index's responses are not
      # cacheable): the wheelhouse keeps the wheels themselves.
      quiet "$venv/bin/python" -m pip download -q -d "$WHEELHOUSE" "${need[@]}"
      quiet "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELHOUSE" "${need[@]}"
    fi
    echo "$version xdist" > "$venv/.torch"
  fi
  quiet "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
  got=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  case $got in
    "$version" | "$version"+*) ;;
    *) echo "test-torch-versions: asked for torch==$version, the venv has $got" >&2; exit 1 ;;
  esac
  ready=$SECONDS
  echo "test-torch-versions: torch $got, $(basename "$wheel")"
  if CUDA_VISIBLE_DEVICES= CPYTREE_REQUIRE_ENGINE=1 "$venv/bin/python" -m pytest -q \
       -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" -m torch tests/python; then r=ok; else r=FAILED; status=1; fi
  echo "test-torch-versions: torch $got $r (venv $((ready - start)) s, tests $((SECONDS - ready)) s)"
  summary="$summary torch-$got:$r"
done
echo "test-torch-versions:$summary"
exit $status
}

if [ "$ARCH" = aarch64 ]; then
  test_aarch64 "$@"  # --torch 3.11: scripts/aarch64_torch.sh
  exit
fi

if [ "${1:-}" = --torch ]; then
  shift
  test_torch "$@"
  exit
fi

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
  CPYTREE_AUDITWHEEL=$(realpath "build/wheel/$ver-zig/venv/bin/auditwheel") \
  CPYTREE_WHEEL_SYMBOLS=${WHEEL_SYMBOLS:-0}
# -p no:cacheprovider: several venvs share the checkout; no .pytest_cache churn.
# -n: pytest-xdist workers (PYTEST_WORKERS, default 2; 0: one process).
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" tests/packaging \
  ${PYTEST_ARGS:-tests/python}
