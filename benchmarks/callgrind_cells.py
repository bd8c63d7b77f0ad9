"""Instructions per call of a few engine cells, under callgrind (not a test).

    python benchmarks/callgrind_cells.py [--cells dict200/flatten,...] [--python PY]
    (controls: --cells dict200/ref_leaves,dict200/py_copy, see CONTROL_OPS)
    python benchmarks/callgrind_cells.py --peers [--backends cpytree,optree,jax,torch]
    python benchmarks/callgrind_cells.py [--peers] --baseline SITE   (before/after)

Runs each cell twice under `valgrind --tool=callgrind` (N1 and N2 calls after
a warm-up) and prints (Ir(N2) - Ir(N1)) / (N2 - N1): the instructions one
call executes, start-up and import excluded. Deterministic up to a few
instructions, so two builds of the engine (e.g. before and after a change,
each importable through PYTHONPATH) compare exactly where timings would not.
The cell driver is this same file run with --child.

--peers: the harness cells of issue 40 (PEER_CELLS), each backend staged by
the harness itself (cpytree.harness.ops.backends: the same function and
arguments its table times, called by its own timing loop), all backends in
one callgrind run (one process, one import of each). Collection is on only
inside `consume_iterator` (CPython's `deque(it, maxlen=0)`, which runs each
timed loop; `deque_init` on builds that inline it, loop_function) and each
loop's instructions are dumped apart; a cell is
(Ir(N2 calls) - Ir(N1 calls)) / (N2 - N1), the loop's fixed cost cancelled.
A backend without the op (optree/jax have no loads, torch no flatten-spec
of its own on a chain) shows "n/a"; ratios are the peer's count over
cpytree's (above 1: cpytree executes fewer instructions).

--baseline SITE: every cell also with another build of cpytree, the one
importable from SITE (a folder holding `cpytree/` with its `_C` and a
`sitecustomize.py` that drops the editable install's finder, as
scripts/sanitize_site.sh lays one out), printed as before/after columns:
e.g. main's build against this checkout's, on any --python. To compare two
engines alone, lay the other build's `_C` out with this checkout's Python
(run `scripts/sanitize_site.sh <other build dir> <site>` here): a site of
another checkout also imports other Python, and the heap that leaves moves
the allocation-heavy cells (map) by up to 2% with identical engine work.
With --peers, before and after are cpytree alone in a process each; the
peers' columns come from one process with every backend.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def dict200():
    return {f"k{i}": [i, i + 1, None] for i in range(200)}


def resnet_like():
    od = collections.OrderedDict
    n = iter(range(10**9))
    return od(
        (
            f"layer{i}",
            od(
                (
                    f"block{j}",
                    od(
                        conv1=od(weight=next(n)),
                        bn1=od(weight=next(n), bias=next(n), running_mean=next(n)),
                        conv2=od(weight=next(n)),
                    ),
                )
                for j in range(4)
            ),
        )
        for i in range(4)
    )


def nested_args():
    return ((1, 2.0, "x", None), {"a": [1, 2, (3, 4)], "b": {"c": 5}})


TREES = {"dict200": dict200, "resnet": resnet_like, "args": nested_args}
OPS = ("flatten", "unflatten", "map", "leaves", "flatten_up_to")
DEFAULT_CELLS = [f"{t}/{o}" for t in TREES for o in OPS]
# Controls, not in the default cells: the same operation in pure Python
# (cpytree._reference), the copy `[list(v) for v in d.values()]`, and the
# call of a C builtin (`len(tree)`: the harness's own cost per call): what
# the interpreter itself costs (py_copy: dict trees), e.g. on a free-threaded build against a GIL
# one (--python each), apart from the engine.
CONTROL_OPS = ("ref_flatten", "ref_leaves", "py_copy", "py_call")


# Issue 40's cells: workload/op as the harness names them, plus the chain of
# one-element lists (`spec.flatten_up_to`, no harness workload of its own).
PEER_CELLS = (
    "deep-200/flatten-spec",
    "chain-200/flatten-up-to",
    "deep-200/flatten-paths",
    "state-dict-resnet50/loads",
)
PEER_BACKENDS = ("cpytree", "optree", "jax", "torch")


def chain(depth: int = 200):
    """`t = None; for _ in range(depth): t = [t]`."""
    t = None
    for _ in range(depth):
        t = [t]
    return t


def peer_child(cells: list[str], backend_names: list[str], n1: int, n2: int) -> None:
    """Runs every (cell, backend) loop twice (n1, n2 calls) inside
    consume_iterator; prints the order of the dumps (JSON) on stdout."""
    import json
    from collections import deque

    from cpytree.harness.ops import backends as hb, timing
    from cpytree.harness.ops.workloads import get_workloads

    found = {b.name: b for b in hb.discover(backend_names) if b.available}
    order = []
    for cell in cells:
        wname, op = cell.split("/")
        if wname == "chain-200":
            tree, twin = chain(), chain()
        else:
            (w,) = get_workloads([wname])
            tree, twin = w.build(), w.build()
        for name in backend_names:
            b = found.get(name)
            if b is None:
                continue
            try:
                if op == "flatten-up-to":  # as the harness's _flatten_up_to stages it
                    spec = b.flatten(tree)[1]
                    fn, args, kw = spec.flatten_up_to, (twin,), {}
                else:
                    fn, args, kw = b.stage(op, hb.Operands(tree, twin))
            except KeyError:
                continue
            c = timing.Cell(wname, name, op, fn, args, kw)
            for _ in range(3):
                c.time(20)  # warm-up: caches, per-thread arenas
            for n in (n1, n2):
                deque(map(c.time, (n,)), maxlen=0)  # collected inside consume_iterator
            order.append([cell, name])
    print(json.dumps(order))


def peers(
    python: str, cells: list[str], backend_names: list[str], n1: int, n2: int, env: dict
) -> dict:
    """{(cell, backend): instructions per call} from one callgrind run."""
    import glob
    import json

    loop = loop_function(python)

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--collect-atstart=no",
                f"--toggle-collect={loop}",
                f"--dump-after={loop}",
                python,
                os.path.abspath(__file__),
                "--peer-child",
                ",".join(cells),
                ",".join(backend_names),
                str(n1),
                str(n2),
            ],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        )
        order = json.loads(r.stdout.strip().splitlines()[-1])
        dumps = sorted(
            (f for f in glob.glob(out + ".*") if re.fullmatch(r".*\.\d+", f)),
            key=lambda f: int(f.rsplit(".", 1)[1]),
        )
        counts = []
        for f in dumps:
            with open(f) as fh:
                m = re.search(r"^totals:\s+(\d+)", fh.read(), re.M)
            counts.append(int(m.group(1)) if m else 0)
    # Any consume_iterator run before ours (imports) dumps first: ours are last.
    counts = counts[len(counts) - 2 * len(order) :]
    assert len(counts) == 2 * len(order), (len(counts), len(order))
    return {tuple(k): (counts[2 * i + 1] - counts[2 * i]) / (n2 - n1) for i, k in enumerate(order)}


def loop_function(python: str) -> str:
    """The C function of CPython that runs `deque(it, maxlen=0)`'s loop:
    consume_iterator, or where a build inlined it (3.13t) deque_init, which
    calls it (no timed op here makes a deque of its own)."""
    probe = (
        "import os, sys, sysconfig; print(sys.executable); "
        "print(os.path.join(sysconfig.get_config_var('LIBDIR') or '', "
        "sysconfig.get_config_var('LDLIBRARY') or ''))"
    )
    paths = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True)
    for path in paths.stdout.split():
        if os.path.isfile(path):
            nm = subprocess.run(["nm", path], capture_output=True, text=True)
            if re.search(r" consume_iterator$", nm.stdout, re.M):
                return "consume_iterator"
    return "deque_init"


def print_peers(
    result: dict,
    cells: list[str],
    backend_names: list[str],
    before: dict | None = None,
    alone: dict | None = None,
) -> None:
    """`before`/`alone`: cpytree's counts with the baseline and with this
    build, each measured in a process of its own with no other backend (a
    process that also imports the peers leaves another heap, which moves a
    count by a few tenths of a percent)."""
    head = f"{'cell':30}" + (f"{'before':>12}{'after':>12}" if before is not None else "")
    print(head + "".join(f"{b:>12}" for b in backend_names) + "   peer/cpytree")
    for cell in cells:
        row = [result.get((cell, b)) for b in backend_names]
        old = before.get((cell, "cpytree")) if before is not None else None
        new = alone.get((cell, "cpytree")) if alone is not None else None
        base = result.get((cell, "cpytree"))
        ratios = [
            f"{b} {v / base:.2f}x"
            for b, v in zip(backend_names, row, strict=True)
            if v is not None and base and b != "cpytree"
        ]
        if old is not None and new:
            ratios.insert(0, f"after/before {new / old:.3f}")
        print(
            f"{cell:30}"
            + (
                "".join(f"{v:>12,.0f}" if v is not None else f"{'n/a':>12}" for v in (old, new))
                if before is not None
                else ""
            )
            + "".join(f"{v:>12,.0f}" if v is not None else f"{'n/a':>12}" for v in row)
            + "   "
            + ", ".join(ratios),
            flush=True,
        )


def child(cell: str, calls: int) -> None:
    import cpytree
    from cpytree import _reference

    tree_name, op = cell.split("/")
    tree = TREES[tree_name]()
    leaves, spec = cpytree.tree_flatten(tree)
    fn = {
        "flatten": lambda: cpytree.tree_flatten(tree),
        "unflatten": lambda: cpytree.tree_unflatten(leaves, spec),
        "map": lambda: cpytree.tree_map(id, tree),
        "leaves": lambda: cpytree.tree_leaves(tree),
        "flatten_up_to": lambda: spec.flatten_up_to(tree),
        "ref_flatten": lambda: _reference.tree_flatten(tree),
        "ref_leaves": lambda: _reference.tree_leaves(tree),
        "py_copy": lambda: [list(v) for v in tree.values()],
        "py_call": lambda: len(tree),
    }[op]
    for _ in range(50):  # warm-up: caches, the per-thread builder
        fn()
    for _ in range(calls):
        fn()


def instructions(python: str, cell: str, calls: int, env: dict) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                python,
                os.path.abspath(__file__),
                "--child",
                cell,
                str(calls),
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        with open(out) as f:
            text = f.read()
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    assert m, "no callgrind summary"
    return int(m.group(1))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--peer-child":
        cells, names, n1, n2 = sys.argv[2:6]
        peer_child(cells.split(","), names.split(","), int(n1), int(n2))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--n1", type=int, default=100)
    ap.add_argument("--n2", type=int, default=300)
    ap.add_argument("--peers", action="store_true", help="issue 40's cells against the peers")
    ap.add_argument("--backends", default=",".join(PEER_BACKENDS))
    ap.add_argument("--baseline", metavar="SITE", help="also the cpytree importable from SITE")
    a = ap.parse_args()
    env = dict(os.environ)
    # A fixed seed: str hashes decide the dicts' probe sequences, which moved
    # the counts by ~1% between runs.
    env.setdefault("PYTHONHASHSEED", "0")
    base_env = None
    if a.baseline:
        site = os.path.abspath(a.baseline)
        base_env = dict(
            env, PYTHONPATH=os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
        )
    if a.peers:
        # torch's own pytree, not cpytree installed into it at `import torch`.
        env.setdefault("CPYTREE_INSTALL", "0")
        cells = list(PEER_CELLS) if a.cells == ",".join(DEFAULT_CELLS) else a.cells.split(",")
        names = a.backends.split(",")
        before = alone = None
        if base_env is not None:
            base_env.setdefault("CPYTREE_INSTALL", "0")
            before = peers(a.python, cells, ["cpytree"], a.n1, a.n2, base_env)
            alone = peers(a.python, cells, ["cpytree"], a.n1, a.n2, env)
        result = peers(a.python, cells, names, a.n1, a.n2, env)
        print_peers(result, cells, names, before, alone)
        return 0
    if base_env is not None:
        print(f"{'cell':28} {'before':>12} {'after':>12}  after/before (instructions/call)")
    for cell in a.cells.split(","):
        after = per_call(a.python, cell, a.n1, a.n2, env)
        if base_env is None:
            print(f"{cell:28} {after:>12,.0f} instructions/call", flush=True)
            continue
        before = per_call(a.python, cell, a.n1, a.n2, base_env)
        print(f"{cell:28} {before:>12,.0f} {after:>12,.0f}  {after / before:.3f}", flush=True)
    return 0


def per_call(python: str, cell: str, n1: int, n2: int, env: dict) -> float:
    return (instructions(python, cell, n2, env) - instructions(python, cell, n1, env)) / (n2 - n1)


if __name__ == "__main__":
    sys.exit(main())
