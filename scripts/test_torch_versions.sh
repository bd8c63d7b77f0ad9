#!/usr/bin/env bash
# The torch-facing suites against torch releases, each in its own venv:
#
#   scripts/test_torch_versions.sh 2.13.0 2.14.1 2.15.0    # TORCH_PYTHON: default python3
#
# (`make test-torch-range` passes every supported release, cpytree._releases.SUPPORTED.)
# Per release: venv build/torch/<release>/venv with torch==<release> (pinned
# exactly: a machine without a pip constraint must get that release and no
# other), kept between runs; its wheels come from a wheelhouse outside the
# checkout, TORCH_WHEELHOUSE (default ${CPYTREE_CACHE:-~/.cache/cpytree}/wheelhouse),
# so torch (a 2-5 GB CUDA build from PyPI; it runs on the CPU:
# CUDA_VISIBLE_DEVICES is emptied) is downloaded once per machine, not per
# venv or per checkout: a new venv installs from it offline, and only what it
# lacks is fetched (`pip download`, with pip's own index settings).
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
