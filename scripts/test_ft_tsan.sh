#!/bin/sh
# make test-ft-tsan: the engine built with ThreadSanitizer, on a free-threaded
# CPython 3.13.0 built with ThreadSanitizer too (scripts/build_py313t_tsan.sh,
# cached), runs the thread suites (TSAN_FILES). Every report fails the run
# (TSan exits 66) except those tests/tsan_suppressions.txt names, each with its
# reason, and CPython's own list for its free-threaded build.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
lock=${BUILD_LOCK:-build.lock}
py=$(flock "$lock" env PY313T_TARBALL="${PY313T_TARBALL:?}" scripts/build_py313t_tsan.sh | tail -1)
out=$root/build/tsan
venv=$out/venv
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q pytest hypothesis==6.155.0
fi
cmake -S . -B "$out/cmake" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCPYTREE_BUILD_PYTHON=ON \
  -DCPYTREE_BUILD_TESTS=OFF -DCPYTREE_TSAN=ON -DPython_EXECUTABLE="$py" > "$out/configure.log"
flock "$lock" cmake --build "$out/cmake" -j "${JOBS:-2}" --target _C > "$out/build.log"
rm -rf "$out/pkg" && mkdir -p "$out/pkg"
cp -r python/cpytree "$out/pkg/"
rm -f "$out/pkg/cpytree/"_C*.so
cp "$out/cmake/"_C*.so "$out/pkg/cpytree/"
cat "$(dirname "$py")/../tsan_suppressions_cpython.txt" tests/tsan_suppressions.txt > "$out/suppressions.txt"
files=${TSAN_FILES:-tests/python/test_threads.py tests/python/test_threads_stress.py \
  tests/python/test_registry_churn.py tests/python/test_callback_safety.py}
# halt_on_error=0: every report of the run is printed; exitcode=66 still
# fails the process when there was one.
# Reports go to $out/reports.<pid> (pytest would capture them from stderr).
# CPYTREE_SANITIZED: the RSS tests skip (TSan's shadow memory grows with every
# address the allocator hands out: the churn test read 10.4 MiB once and under
# 8 on a rerun); `make test-ft` runs them on the normal 3.13t build.
rm -f "$out"/reports.*
TSAN_OPTIONS="suppressions=$out/suppressions.txt halt_on_error=0 exitcode=66 second_deadlock_stack=1 log_path=$out/reports" \
  PYTHON_GIL=0 CPYTREE_SANITIZED=1 PYTHONPATH="$out/pkg" HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-dev} \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider $files ${PYTEST_ARGS:-}
