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
# checkout (scripts/wheel.sh) reinstalled fresh, then the tests that
# exercise torch: install()/uninstall(), torch.compile and torch.export with
# install(), the spec interop and pickling
# (test_torch_install), the shared registries and the install lock
# (test_torch_registry_follow), the version check and rollback
# (test_torch_versions), API parity with torch's module, byte-identical
# treespec_dumps and the differential tests against torch.utils._pytree.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${TORCH_PYTHON:-python3}
[ $# -gt 0 ] || set -- 2.13.0 2.14.1
TESTS="tests/python/test_torch_install.py tests/python/test_torch_versions.py
  tests/python/test_api_parity.py tests/python/test_serialization.py
  tests/python/test_differential.py tests/python/test_torch_dynamo.py
  tests/python/test_torch_dynamo_fence.py tests/python/test_torch_install_paths.py
  tests/python/test_map_only_iter.py tests/python/test_torch_registry_follow.py"
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
  # shellcheck disable=SC2086
  if CUDA_VISIBLE_DEVICES= CPYTREE_REQUIRE_ENGINE=1 "$venv/bin/python" -m pytest -q \
       -p no:cacheprovider $TESTS; then r=ok; else r=FAILED; status=1; fi
  summary="$summary torch-$got:$r"
done
echo "test-torch-versions:$summary"
exit $status
