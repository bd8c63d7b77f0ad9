"""What `import cpytree` and `cpytree.install()` cost, measured in fresh interpreters.

    python benchmarks/import_time.py [--runs 15] [--path DIR ...]

Each run is a new interpreter (this one, or --python) timing with
time.perf_counter, around the statement alone:

  cold      `import cpytree` with nothing else imported
  torch     `import cpytree` after `import torch`
  install   `import cpytree; cpytree.install()` after `import torch`

and, once per case, the deterministic counts that pair with the times:
modules `import cpytree` adds to sys.modules, and Python function calls
(cProfile's total) during the statement. With several --path (a directory
holding a `cpytree` package, e.g. two checkouts' python/ with the extension
copied in), the cases run interleaved, A B A B, so a drift of the machine
hits both alike. Prints medians (and min/max) in ms; times on a loaded
machine are noisy, the counts are not.

.pyc files: pip writes them when it installs; a source tree run with
PYTHONDONTWRITEBYTECODE=1 compiles every module on every import, so this
script unsets it and compiles the given paths first (compileall).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
case, profile = sys.argv[1], sys.argv[2] == "1"
if case != "cold":
    import torch  # noqa: F401
before = set(sys.modules)
if profile:
    import cProfile, pstats
    pr = cProfile.Profile()
    pr.enable()
t0 = time.perf_counter()
import cpytree
if case == "install":
    cpytree.install()
t1 = time.perf_counter()
if profile:
    pr.disable()
    calls = pstats.Stats(pr).total_calls
else:
    calls = None
new = set(sys.modules) - before
mods = sorted(m for m in new if m.startswith("cpytree"))
print(json.dumps({"ms": (t1 - t0) * 1e3, "calls": calls, "modules": mods, "all_modules": len(new)}))
"""
CASES = ("cold", "torch", "install")


def run(python: str, path: str | None, case: str, profile: bool) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if path:
        env["PYTHONPATH"] = path
    out = subprocess.run(
        [python, "-c", CHILD, case, "1" if profile else "0"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--path", action="append", default=[], help="PYTHONPATH of one variant")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    paths = args.path or [None]
    for p in paths:
        if p:
            compileall.compile_dir(p, quiet=1)
    cases = args.cases.split(",")
    times: dict[tuple[str | None, str], list[float]] = {(p, c): [] for p in paths for c in cases}
    counts = {(p, c): run(args.python, p, c, profile=True) for p in paths for c in cases}
    for _ in range(args.runs):
        for c in cases:
            for p in paths:
                times[(p, c)].append(run(args.python, p, c, profile=False)["ms"])
    for c in cases:
        for p in paths:
            t = times[(p, c)]
            n = counts[(p, c)]
            print(
                f"{c:8} {p or 'installed'}: median {statistics.median(t):6.1f} ms "
                f"(min {min(t):.1f}, max {max(t):.1f}, {len(t)} runs); "
                f"{len(n['modules'])} cpytree modules ({n['all_modules']} in all), "
                f"{n['calls']} Python calls"
            )


if __name__ == "__main__":
    main()
