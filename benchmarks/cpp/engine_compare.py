"""The Python engine on the tree of tree_bench.cc, for `make bench-cpp`.

Builds the same ResNet50-sized tree as benchmarks/cpp/tree_bench.cc out of
Python containers (a dict of 160 module dicts; 1721 nodes, 1040 leaves) and
times cpytree.tree_flatten, tree_unflatten, treespec_dumps and
treespec_loads on it: the numbers the header library is measured against.
Prints the same columns as the C++ benchmark (median of 7 runs).

    .venv/bin/python benchmarks/cpp/engine_compare.py [--iters N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any


class Tensor:
    """A stand-in leaf: the engine increfs it, as the C++ side copies a handle."""

    __slots__ = ("sizes",)

    def __init__(self, n: int) -> None:
        self.sizes = (n, 3, 3, 3)


def module(i: int) -> dict[str, Any]:
    entries: dict[str, Any] = {
        "params": {"weight": Tensor(i), "bias": Tensor(i + 1)},
        "buffers": [Tensor(i + 2), Tensor(i + 3)],
        "meta": (Tensor(i + 4), Tensor(i + 7)),
    }
    if i % 4 == 0:
        entries["running"] = [Tensor(i + 5), Tensor(i + 6)]
    return entries


def resnet50_like() -> dict[str, Any]:
    return {f"layer{i // 40 + 1}.{i % 40}.conv": module(i) for i in range(160)}


def median_micros(iters: int, f: Callable[[], object]) -> float:
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(iters):
            f()
        runs.append((time.perf_counter() - start) * 1e6 / iters)
    return sorted(runs)[len(runs) // 2]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        import cpytree
        from cpytree import _C  # noqa: F401  (the engine, not the pure-Python fallback)
    except ImportError as e:
        print(f"engine comparison skipped: the cpytree extension is not built ({e})")
        return 0
    tree = resnet50_like()
    leaves, spec = cpytree.tree_flatten(tree)
    text = cpytree.treespec_dumps(spec)
    n = spec.num_nodes
    print(
        f"Python engine (cpytree {cpytree.__version__}) on the same tree: {n} nodes, "
        f"{spec.num_leaves} leaves; spec JSON {len(text)} bytes"
    )

    def report(name: str, us: float) -> None:
        print(f"{name:<40} {us:9.2f} us   {us * 1000.0 / n:6.1f} ns/node")

    report("engine tree_flatten", median_micros(args.iters, lambda: cpytree.tree_flatten(tree)))
    report("engine tree_leaves", median_micros(args.iters, lambda: cpytree.tree_leaves(tree)))
    report(
        "engine tree_unflatten",
        median_micros(args.iters, lambda: cpytree.tree_unflatten(leaves, spec)),
    )
    quarter = args.iters // 4 + 1
    report("engine treespec_dumps", median_micros(quarter, lambda: cpytree.treespec_dumps(spec)))
    loads = getattr(cpytree.treespec_loads, "__wrapped__", cpytree.treespec_loads)
    report("engine treespec_loads (uncached)", median_micros(quarter, lambda: loads(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
