"""Instructions per call of a few engine cells, under callgrind (not a test).

    python benchmarks/callgrind_cells.py [--cells dict200/flatten,...] [--python PY]
    (controls: --cells dict200/ref_leaves,dict200/py_copy, see CONTROL_OPS)

Runs each cell twice under `valgrind --tool=callgrind` (N1 and N2 calls after
a warm-up) and prints (Ir(N2) - Ir(N1)) / (N2 - N1): the instructions one
call executes, start-up and import excluded. Deterministic up to a few
instructions, so two builds of the engine (e.g. before and after a change,
each importable through PYTHONPATH) compare exactly where timings would not.
The cell driver is this same file run with --child.
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--n1", type=int, default=100)
    ap.add_argument("--n2", type=int, default=300)
    a = ap.parse_args()
    env = dict(os.environ)
    # A fixed seed: str hashes decide the dicts' probe sequences, which moved
    # the counts by ~1% between runs.
    env.setdefault("PYTHONHASHSEED", "0")
    for cell in a.cells.split(","):
        i1 = instructions(a.python, cell, a.n1, env)
        i2 = instructions(a.python, cell, a.n2, env)
        print(f"{cell:28} {(i2 - i1) / (a.n2 - a.n1):>12,.0f} instructions/call", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
