#!/usr/bin/env bash
# Lays out an importable `cpytree` package built with ASan+UBSan, apart from
# the normal editable install:   scripts/sanitize_site.sh <build dir> <site dir>
#
# <site dir>/cpytree holds symlinks to python/cpytree's sources plus the
# sanitized _C extension from <build dir>; <site dir>/sitecustomize.py drops
# the editable install's import redirect, so that with PYTHONPATH=<site dir>
# every interpreter (pytest and the subprocesses it starts) imports this copy.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
site=$2
so=$(find "$build" -maxdepth 1 -name '_C*.so' | head -n 1)
[ -n "$so" ] || { echo "sanitize_site: no _C*.so in $build" >&2; exit 1; }
rm -rf "$site"
mkdir -p "$site/cpytree"
for f in python/cpytree/*; do
  ln -s "$(realpath "$f")" "$site/cpytree/$(basename "$f")"
done
ln -s "$(realpath "$so")" "$site/cpytree/$(basename "$so")"
ln -s "$(realpath include)" "$site/cpytree/include"
cat > "$site/sitecustomize.py" <<'PY'
# Written by scripts/sanitize_site.sh: import the sanitized cpytree next to
# this file, not the editable install's (its finders sit first on meta_path).
import sys

sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__name__.startswith("ScikitBuild")]
PY
