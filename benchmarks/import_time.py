"""What `import cpytree` and `cpytree.install()` cost, measured in fresh interpreters.

    python benchmarks/import_time.py [--runs 15] [--path DIR ...] [--instructions]

Each run is a new interpreter (this one, or --python) timing with
time.perf_counter, around the statement alone:

  cold      `import cpytree` with nothing else imported
  torch     `import cpytree` after `import torch`
  install   `import cpytree; cpytree.install()` after `import torch`

and what `import torch` itself costs with the autoload (issue 30: at most
12 ms more), the statement being `import torch` alone:

  torch-only      no cpytree entry point (torch as a user without cpytree has it;
                  torch still scans for `torch.backends` entry points)
  autoload        cpytree's `torch.backends` entry point (pyproject.toml's): install()
                  runs at the end of `import torch`
  autoload-off    the same with CPYTREE_INSTALL=0 (torch imports the tiny
                  `_cpytree_autoload`, which returns: no cpytree module is imported)

In these two the entry point's own time inside `import torch` (its load and its
call, timed in the child around `EntryPoint.load`) is printed too: what autoload
adds, without `import torch`'s own variance of hundreds of ms.

and Inductor's compile workers (they must not start slower): after `import torch`,
the statement starts a `SubprocPool(2)` (a fresh sidecar process that imports torch,
and its forked workers) and waits for the first job's answer (the worker's module
count and whether cpytree is installed there: the deterministic count beside the time):

  workers-off       the entry point visible, CPYTREE_INSTALL=0
  workers-autoload  the entry point visible, autoload on

and the sidecar's start alone, in this process (so --instructions counts it): the
statement is `import torch._inductor.compile_worker.__main__`, what the sidecar
(`python .../compile_worker/__main__.py`) imports before it serves; its
`import torch` runs the entry point, which leaves the sidecar as torch ships it
(`sys.argv[0]` is set to the sidecar's script, as in the real one). The forked
workers inherit the sidecar's state.

  sidecar-off       the entry point visible, CPYTREE_INSTALL=0
  sidecar-autoload  the entry point visible, autoload on

Each of these also reports whether cpytree ended up installed and whether
torch._dynamo was imported (it must not be). Every case puts a `cpytree`
.dist-info first on PYTHONPATH: importlib.metadata keeps the first
distribution of a name, so it hides an installed cpytree's (a development
install's, a wheel in --python's venv) and the entry point is exactly
pyproject.toml's in the cases above that name it, and absent in the others
(`torch-only`, and `cold`/`torch`/`install`, whose `import torch` must not
install). The output says which (`entry point visible`/`absent`).

and, once per case, the deterministic counts that pair with the times:
modules `import cpytree` adds to sys.modules, and Python function calls
(cProfile's total) during the statement. With several --path (a directory
holding a `cpytree` package, e.g. two checkouts' python/ with the extension
copied in), the cases run interleaved, A B A B, so a drift of the machine
hits both alike. Prints medians (and min/max) in ms; times on a loaded
machine are noisy, the counts are not. --instructions adds, once per case,
the instructions the statement executes (valgrind's callgrind, collecting
only inside it; PYTHONHASHSEED=0): a count that does not move with the load,
about 1.5 minutes a case because torch's import runs under valgrind too.

.pyc files: pip writes them when it installs; a source tree run with
PYTHONDONTWRITEBYTECODE=1 compiles every module on every import, so this
script unsets it and compiles the given paths first (compileall).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
case, profile = sys.argv[1], sys.argv[2] == "1"
IMPORT_TORCH = ("torch-only", "autoload", "autoload-off")
WORKERS = ("workers-off", "workers-autoload")
SIDECAR = ("sidecar-off", "sidecar-autoload")
PROBE = "(lambda m: [len(m), m.get('cpytree') is not None and m['cpytree'].is_installed()])"
if case not in IMPORT_TORCH + SIDECAR and case != "cold":
    import torch  # noqa: F401
if case in WORKERS:
    from torch._inductor.compile_worker.subproc_pool import SubprocPool
if case in SIDECAR:  # this process stands for the sidecar, as `python <its __main__.py>`
    import importlib.util, os
    torch_dir = os.path.dirname(importlib.util.find_spec("torch").origin)
    sys.argv[0] = os.path.join(torch_dir, "_inductor", "compile_worker", "__main__.py")
worker = None
hook_ms = []
if case in IMPORT_TORCH:
    # torch's entry-point scan imports importlib.metadata (and email, zipfile,
    # csv... under it); the autoload cases import it here for their timing
    # hook, so every `import torch` case does, or the cases without the hook
    # would count those modules and their instructions in the statement.
    import importlib.metadata as _md
if case in ("autoload", "autoload-off"):
    # The entry point's own share of `import torch`: torch loads it and calls
    # it (`_import_device_backends`); both are timed here, in this process,
    # which `import torch`'s own variance (hundreds of ms) does not blur.

    _load = _md.EntryPoint.load

    def _timed_load(self):
        if "cpytree" not in self.value:
            return _load(self)
        t = time.perf_counter()
        fn = _load(self)
        hook_ms.append((time.perf_counter() - t) * 1e3)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                hook_ms.append((time.perf_counter() - t) * 1e3)

        return timed

    _md.EntryPoint.load = _timed_load
before = set(sys.modules)
if profile:
    import cProfile, pstats
    pr = cProfile.Profile()
    pr.enable()


def statement():
    global cpytree, torch, worker
    if case in WORKERS:  # the sidecar's start and its first job
        worker = SubprocPool(2)
        worker = [worker, worker.submit(eval, PROBE + "(__import__('sys').modules)").result()]
        return
    if case in IMPORT_TORCH:
        import torch
        return
    if case in SIDECAR:  # what the compile-worker sidecar imports before it serves
        import torch._inductor.compile_worker.__main__
        return
    import cpytree
    if case == "install":
        cpytree.install()


t0 = time.perf_counter()
if sys.argv[3:] == ["instructions"]:
    # callgrind collects inside itertools' starmap_next only: this statement.
    import itertools
    list(itertools.starmap(statement, [()]))
else:
    statement()
t1 = time.perf_counter()
if profile:
    pr.disable()
    calls = pstats.Stats(pr).total_calls
else:
    calls = None
if worker is not None:
    worker[0].shutdown()
new = set(sys.modules) - before
mods = sorted(m for m in new if m.startswith(("cpytree", "_cpytree")))
import importlib.metadata
cp = sys.modules.get("cpytree")
print(json.dumps({"ms": (t1 - t0) * 1e3, "hook_ms": sum(hook_ms) if hook_ms else None,
                  "calls": calls, "modules": mods, "all_modules": len(new),
                  "installed": bool(cp is not None and cp.is_installed()),
                  "dynamo": "torch._dynamo" in sys.modules,
                  "worker": None if worker is None else worker[1],
                  "entry_point": any("cpytree" in e.value for e in
                                     importlib.metadata.entry_points(group="torch.backends"))}))
"""
CASES = ("cold", "torch", "install")
AUTOLOAD_CASES = (
    "torch-only",
    "autoload",
    "autoload-off",
    "workers-off",
    "workers-autoload",
    "sidecar-off",
    "sidecar-autoload",
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The cases whose `import torch` sees cpytree's entry point.
_WITH_ENTRY_POINT = tuple(case for case in AUTOLOAD_CASES if case != "torch-only")
_DIST_DIRS: dict[bool, str] = {}


def _dist_dir(entry_points: bool) -> str:
    """A temporary directory with a `cpytree` .dist-info, first on PYTHONPATH.

    importlib.metadata keeps the first distribution of each name on sys.path
    (torch reads `entry_points(group="torch.backends")`), so this one hides
    any installed cpytree's: with `entry_points`, it declares pyproject.toml's
    torch.backends entry point (exactly one: the "autoload" cases); without,
    none (the "torch-only" case and the statements after `import torch`:
    torch as a user without cpytree has it, even where a cpytree is installed).
    """
    if entry_points in _DIST_DIRS:
        return _DIST_DIRS[entry_points]
    lines = ""
    if entry_points:
        with open(os.path.join(ROOT, "pyproject.toml")) as f:
            text = f.read()
        section = re.search(
            r'^\[project\.entry-points\."torch\.backends"\]\n((?:[^\[\n].*\n)+)', text, re.M
        )
        if section is None:
            raise SystemExit("pyproject.toml declares no torch.backends entry point")
        lines = "".join(
            f"{n} = {t}\n" for n, t in re.findall(r'^(\w+)\s*=\s*"([^"]+)"', section.group(1), re.M)
        )
    base = tempfile.mkdtemp(prefix="cpytree-ep-" if entry_points else "cpytree-no-ep-")
    info = os.path.join(base, "cpytree-0.dist-info")
    os.mkdir(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: cpytree\nVersion: 0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[torch.backends]\n" + lines if lines else "")
    _DIST_DIRS[entry_points] = base
    return base


def _env(path: str | None, case: str = "") -> dict[str, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    parts = [_dist_dir(entry_points=case in _WITH_ENTRY_POINT)]
    if path:
        parts.append(path)
    elif env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    if case in ("autoload-off", "workers-off", "sidecar-off"):
        env["CPYTREE_INSTALL"] = "0"
    else:  # the default: unset
        env.pop("CPYTREE_INSTALL", None)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def run(python: str, path: str | None, case: str, profile: bool) -> dict:
    out = subprocess.run(
        [python, "-c", CHILD, case, "1" if profile else "0"],
        capture_output=True,
        text=True,
        env=_env(path, case),
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def instructions(python: str, path: str | None, case: str) -> int:
    """Instructions the statement of `case` executes (callgrind)."""
    env = {**_env(path, case), "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--toggle-collect=starmap_next", "--callgrind-out-file=/dev/null",
           python, "-c", CHILD, case, "0", "instructions"]  # fmt: skip
    err = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    match = re.search(r"Collected : (\d+)", err)
    if match is None:
        raise RuntimeError(f"no callgrind count in:\n{err}")
    return int(match.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--path", action="append", default=[], help="PYTHONPATH of one variant")
    ap.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated, of {', '.join(CASES + AUTOLOAD_CASES)}",
    )
    ap.add_argument("--instructions", action="store_true", help="also count instructions")
    args = ap.parse_args()
    paths = args.path or [None]
    for p in paths:
        if p:
            compileall.compile_dir(p, quiet=1)
    cases = args.cases.split(",")
    times: dict[tuple[str | None, str], list[float]] = {(p, c): [] for p in paths for c in cases}
    hooks: dict[tuple[str | None, str], list[float]] = {(p, c): [] for p in paths for c in cases}
    counts = {(p, c): run(args.python, p, c, profile=True) for p in paths for c in cases}
    if args.instructions:
        for p in paths:
            for c in cases:
                counts[(p, c)]["instructions"] = instructions(args.python, p, c)
    for _ in range(args.runs):
        for c in cases:
            for p in paths:
                one = run(args.python, p, c, profile=False)
                times[(p, c)].append(one["ms"])
                if one["hook_ms"] is not None:
                    hooks[(p, c)].append(one["hook_ms"])
    for c in cases:
        for p in paths:
            t = times[(p, c)]
            n = counts[(p, c)]
            print(
                f"{c:8} {p or 'installed'}: median {statistics.median(t):6.1f} ms "
                f"(min {min(t):.1f}, max {max(t):.1f}, {len(t)} runs); "
                f"{len(n['modules'])} cpytree modules ({n['all_modules']} in all), "
                f"{n['calls']} Python calls"
                + (f", {n['instructions'] / 1e6:.1f}M instructions" if "instructions" in n else "")
                + (
                    f"; entry point {'visible' if n['entry_point'] else 'absent'}, "
                    f"installed {n['installed']}, torch._dynamo imported {n['dynamo']}"
                    + (
                        f"; compile worker: {n['worker'][0]} modules, installed {n['worker'][1]}"
                        if n["worker"]
                        else ""
                    )
                    if c in AUTOLOAD_CASES
                    else ""
                )
                + (
                    f"; of it the entry point (load + call): median "
                    f"{statistics.median(hooks[(p, c)]):.1f} ms (min {min(hooks[(p, c)]):.1f})"
                    if hooks[(p, c)]
                    else ""
                )
            )


if __name__ == "__main__":
    main()
