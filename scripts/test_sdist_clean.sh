#!/usr/bin/env bash
# The source build with a compiler alone (issue 39): the sdist installed by pip
# in a Debian sid folder that has C++ compilers and CMake but no abseil and no
# simdjson (no libabsl-dev, no libsimdjson-dev, no copy anywhere under /usr),
# once per compiler, then tests/python against the result:
#
#   scripts/test_sdist_clean.sh [gcc|clang]...     # default: gcc clang
#
#   gcc    online: the build downloads the pinned abseil and simdjson
#          (cmake/deps.lock) from PyPI's file host, as a user's pip install does.
#   clang  offline: CPYTREE_DOWNLOAD_DEPS=0, CPYTREE_DEPS_SOURCES naming the
#          archives scripts/pinned_sources.sh keeps ($CPYTREE_CACHE/downloads,
#          the ones the wheels are built from).
# Each run checks the compiler CMake used, that abseil and simdjson came from
# deps.lock, that the extension exports PyInit__C alone, prints the build's
# wall time (measured inside the build lock: waiting for it is not counted) and
# runs tests/python with CPYTREE_REQUIRE_ENGINE=1 on sid's CPython 3.14, without
# torch (there is no local torch for 3.14; make test-torch-sid covers that).
#
# The folder: $CPYTREE_CACHE/sid-amd64-compilers, a copy of scripts/sid_root.sh's
# amd64 folder (which has g++) with clang and cmake added from Debian, made once.
# Logs: build/sdist-clean/<compiler>/.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
LOCK=${BUILD_LOCK:-build.lock}
JOBS=${JOBS:-2}
COMPILERS=${*:-gcc clang}
OUT=build/sdist-clean
ROOT=$CACHE/sid-amd64-compilers
PY=/usr/bin/python3.14
in_root() { SID_ROOT_DIR=$ROOT scripts/sid_root.sh amd64 run "$@"; }

if [ ! -f "$ROOT/.cpytree-done" ]; then
  base=$(scripts/sid_root.sh amd64 | tail -1)
  echo "sdist-clean: copying $base to $ROOT, adding clang and cmake" >&2
  rm -rf "$ROOT.tmp" && cp -a "$base" "$ROOT.tmp"
  SID_ROOT_DIR=$ROOT.tmp scripts/sid_root.sh amd64 run sh -c 'apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ clang cmake &&
    apt-get clean' >"$ROOT.log" 2>&1 || { tail -20 "$ROOT.log" >&2; exit 1; }
  mv "$ROOT.tmp" "$ROOT"
fi
# The point of the folder: no abseil or simdjson a find_package could reach.
in_root sh -c 'for p in libabsl-dev libsimdjson-dev; do
    if dpkg -s "$p" >/dev/null 2>&1; then echo "sdist-clean: $p is installed" >&2; exit 1; fi; done
  found=$(find /usr /opt -name "simdjson.h" -o -name "flat_hash_map.h" -o -name "abslConfig.cmake" \
    -o -name "simdjson-config.cmake" 2>/dev/null | head -3)
  [ -z "$found" ] || { echo "sdist-clean: found $found" >&2; exit 1; }'

# The clang run's archives: the pinned ones, fetched (sha256-checked) here.
# shellcheck disable=SC1091
. scripts/pinned_sources.sh
fetch abseil >/dev/null && fetch simdjson >/dev/null

rm -rf "$OUT" && mkdir -p "$OUT"
in_root sh -c "$PY -m venv $OUT/tools && $OUT/tools/bin/pip install -q build &&
  $OUT/tools/bin/python -m build -q --sdist --outdir $OUT/dist . >$OUT/sdist.log 2>&1" \
  || { cat "$OUT/sdist.log" >&2; exit 1; }
sdist=$(ls "$OUT"/dist/cpytree-*.tar.gz)
echo "sdist-clean: $sdist ($(du -k "$sdist" | cut -f1) KB), in $ROOT"

status=0
for cc in $COMPILERS; do
  case $cc in
    gcc) tools=(CC=gcc CXX=g++) id=GNU offline=() ;;
    clang) tools=(CC=clang CXX=clang++) id=Clang
      offline=(CPYTREE_DOWNLOAD_DEPS=0 CPYTREE_DEPS_SOURCES="$CACHE/downloads") ;;
    *) echo "sdist-clean: unknown compiler $cc (gcc or clang)" >&2; exit 2 ;;
  esac
  dir=$OUT/$cc venv=$OUT/$cc/venv
  mkdir -p "$dir"
  in_root sh -c "$PY -m venv $venv && $venv/bin/pip install -q pytest pytest-xdist==3.8.0 hypothesis"
  # --no-cache-dir: pip would otherwise reuse the wheel the other compiler built.
  in_root flock "$LOCK" env "${tools[@]}" "${offline[@]}" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
    sh -c "start=\$(date +%s); $venv/bin/pip install -v --no-cache-dir $sdist >$dir/build.log 2>&1 &&
      echo \$(( \$(date +%s) - start )) > $dir/seconds" \
    || { tail -40 "$dir/build.log" >&2; echo "sdist-clean: $cc: pip install failed" >&2; status=1; continue; }
  checks=("The CXX compiler identification is $id" "cpytree: abseil from cmake/deps.lock"
          "cpytree: simdjson from cmake/deps.lock")
  [ "$cc" = gcc ] && checks+=("cpytree: downloading abseil" "cpytree: downloading simdjson")
  for want in "${checks[@]}"; do
    grep -q "$want" "$dir/build.log" || { echo "sdist-clean: $cc: no '$want' in $dir/build.log" >&2; status=1; }
  done
  if [ "$cc" = clang ] && grep -q "cpytree: downloading" "$dir/build.log"; then
    echo "sdist-clean: clang: downloaded although offline" >&2; status=1
  fi
  so=$(ls "$venv"/lib/python3.14/site-packages/cpytree/_C.*.so)
  exports=$(in_root nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
  [ "$exports" = "PyInit__C " ] || { echo "sdist-clean: $cc: exports: $exports" >&2; status=1; }
  echo "sdist-clean: $cc: built in $(cat "$dir/seconds") s ($JOBS jobs); exports: $exports"
  in_root env CPYTREE_REQUIRE_ENGINE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -n "${PYTEST_WORKERS:-2}" tests/python 2>&1 | tee "$dir/pytest.log" | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "sdist-clean: $cc: tests/python failed" >&2; status=1; }
done
[ "$status" = 0 ] && echo "sdist-clean: ok ($COMPILERS)"
exit "$status"
