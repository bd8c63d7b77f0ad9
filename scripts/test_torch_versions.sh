#!/usr/bin/env bash
# The torch-facing suites against each torch version, each in its own venv:
#
#   scripts/test_torch_versions.sh 2.13.0 2.14.1     # TORCH_PYTHON: default python3
#
# Per version: venv build/torch/<version>/venv with torch==<version> (pinned;
# kept between runs, since torch 2.14.1 is a 5.5 GB CUDA build that takes a
# minute or two to install; TORCH_WHEELHOUSE=<folder> downloads the wheels
# there once and installs from it, so a new venv downloads nothing;
# CUDA_VISIBLE_DEVICES is emptied, it runs on the CPU), the wheel of this
# checkout (scripts/wheel.sh) reinstalled fresh, then `pytest -m torch
# tests/python`: every test that faces torch (install()/uninstall(),
# torch.compile and torch.export with install(), the spec interop and
# pickling, the shared registries and the install lock, the version check
# and rollback, API parity with torch's module, byte-identical
# treespec_dumps, the differential tests against torch.utils._pytree). The
# marker, not a list here, says which: tests/python/test_suite_markers.py
# fails when a test module that imports torch lacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${TORCH_PYTHON:-python3}
[ $# -gt 0 ] || set -- 2.13.0 2.14.1
wheel=$(scripts/wheel.sh "$PYTHON" | tail -1)
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; return "${PIPESTATUS[0]}"; }
status=0; summary=""
for version in "$@"; do
  venv=build/torch/$version${TORCH_VENV_SUFFIX:-}/venv
  if [ "$(cat "$venv/.torch" 2>/dev/null)" != "$version" ]; then
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    echo "test-torch-versions: installing torch==$version into $venv"
    if [ -n "${TORCH_WHEELHOUSE:-}" ]; then
      # pip's HTTP cache stores nothing here (the index's responses are not
      # cacheable): a folder of the wheels themselves, which pip download
      # keeps and does not fetch again.
      quiet "$venv/bin/python" -m pip download -q -d "$TORCH_WHEELHOUSE" "torch==$version" pytest hypothesis
      quiet "$venv/bin/python" -m pip install -q --no-index --find-links "$TORCH_WHEELHOUSE" \
        "torch==$version" pytest hypothesis
    else
      quiet "$venv/bin/python" -m pip install -q "torch==$version" pytest hypothesis
    fi
    echo "$version" > "$venv/.torch"
  fi
  quiet "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
  got=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  echo "test-torch-versions: torch $got, $(basename "$wheel")"
  if CUDA_VISIBLE_DEVICES= CPYTREE_REQUIRE_ENGINE=1 "$venv/bin/python" -m pytest -q \
       -p no:cacheprovider -m torch tests/python; then r=ok; else r=FAILED; status=1; fi
  summary="$summary torch-$got:$r"
done
echo "test-torch-versions:$summary"
exit $status
