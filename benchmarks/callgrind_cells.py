"""Instructions per call of a few engine cells, under callgrind (not a test).

    python benchmarks/callgrind_cells.py [--cells dict200/flatten,...] [--python PY]
    (controls: --cells dict200/ref_leaves,dict200/py_copy, see CONTROL_OPS)
    python benchmarks/callgrind_cells.py --peers [--backends cpytree,optree,jax,torch]

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
timed loop) and each loop's instructions are dumped apart; a cell is
(Ir(N2 calls) - Ir(N1 calls)) / (N2 - N1), the loop's fixed cost cancelled.
A backend without the op (optree/jax have no loads, torch no flatten-spec
of its own on a chain) shows "n/a"; ratios are the peer's count over
cpytree's (above 1: cpytree executes fewer instructions).
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

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--collect-atstart=no",
                "--toggle-collect=consume_iterator",
                "--dump-after=consume_iterator",
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


def print_peers(result: dict, cells: list[str], backend_names: list[str]) -> None:
    print(f"{'cell':30}" + "".join(f"{b:>12}" for b in backend_names) + "   peer/cpytree")
    for cell in cells:
        row = [result.get((cell, b)) for b in backend_names]
        base = result.get((cell, "cpytree"))
        ratios = [
            f"{b} {v / base:.2f}x"
            for b, v in zip(backend_names, row, strict=True)
            if v is not None and base and b != "cpytree"
        ]
        print(
            f"{cell:30}"
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
    a = ap.parse_args()
    env = dict(os.environ)
    # A fixed seed: str hashes decide the dicts' probe sequences, which moved
    # the counts by ~1% between runs.
    env.setdefault("PYTHONHASHSEED", "0")
    if a.peers:
        # torch's own pytree, not cpytree installed into it at `import torch`.
        env.setdefault("CPYTREE_INSTALL", "0")
        cells = list(PEER_CELLS) if a.cells == ",".join(DEFAULT_CELLS) else a.cells.split(",")
        names = a.backends.split(",")
        print_peers(peers(a.python, cells, names, a.n1, a.n2, env), cells, names)
        return 0
    for cell in a.cells.split(","):
        i1 = instructions(a.python, cell, a.n1, env)
        i2 = instructions(a.python, cell, a.n2, env)
        print(f"{cell:28} {(i2 - i1) / (a.n2 - a.n1):>12,.0f} instructions/call", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
