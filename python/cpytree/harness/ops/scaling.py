"""The scaling curve: cost per node of one op from 10 to 1,000,000 nodes.

Two shapes of builtin containers, so every backend (the floor included) runs
them:

* wide: one flat list of leaves (depth 1);
* deep: chains nested `DEPTH` levels deep, cycling list/tuple/dict with a
  leaf beside each level (as the `deep-200` workload), side by side in one
  list once a single chain would be deeper than `DEPTH` (Python
  implementations recurse once per level; torch's stops near 1,000).

Every (shape, size, backend) is one timing cell; all are interleaved as in
the op tables. Calls that outlast the sample target (a pure-Python backend
on a large tree) are timed one call per sample, in as many rounds as fit in
`budget` seconds (at least `min_rounds`). With `max_call`, a point whose one
call is predicted (from the cost per node at up to 1,000 nodes) to take
longer than that is left out and listed: it would cost seconds per sample
and its cost per node is already flat by then.

Usage:

    sc = run_scaling(backends, sizes=(10, 1000, 100_000), rounds=5)
    for n, cell in sc.series("wide", "cpytree"):
        print(n, cell.median / n)
"""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter
from typing import Any

from ..progress import ProgressBar
from .backends import Backend, Operands
from .results import ScalingResults
from .timing import Cell, run_cells, total_steps
from .workloads import Leaf, _deep

__all__ = ["DEPTH", "SHAPES", "SIZES", "build", "plan", "run_scaling"]

_NEEDS_TWIN = ("map-nary", "flatten-spec", "spec-eq")
SIZES = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
DEPTH = 100
SHAPES = {
    "wide": "a flat list of leaves",
    "deep": f"chains nested up to {DEPTH} levels (list/tuple/dict, a leaf beside each "
    "level), side by side in a list",
}


def _chain(levels: int) -> Any:
    """A chain `levels` deep: the deep-200 workload's shape (one builder for both)."""
    return _deep(levels)


def build(shape: str, nodes: int) -> tuple[Any, int]:
    """A tree of `shape` with about `nodes` nodes, and its exact node count."""
    if shape == "wide":
        n = max(nodes - 1, 1)
        return [Leaf("x") for _ in range(n)], n + 1
    if shape == "deep":
        chain_nodes = 2 * DEPTH + 1
        if nodes <= chain_nodes:
            levels = max((nodes - 1) // 2, 1)
            return _chain(levels), 2 * levels + 1
        k = max((nodes - 1) // chain_nodes, 1)
        return [_chain(DEPTH) for _ in range(k)], 1 + k * chain_nodes
    raise KeyError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def _one_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = perf_counter()
        fn(*args, **kwargs)
        best = min(best, perf_counter() - t0)
    return best


def plan(
    backends: Sequence[Backend],
    sizes: Sequence[int],
    op: str = "flatten",
    max_call: float | None = None,
) -> tuple[list[Cell], dict[str, int], dict[str, str], list[dict[str, Any]]]:
    """The cells to time, the node count of each tree, backends left out (and
    why), and points left out because one call would outlast `max_call`
    seconds (predicted from the cost per node at up to 1,000 nodes)."""
    cells: list[Cell] = []
    nodes: dict[str, int] = {}
    skipped: dict[str, str] = {}
    left_out: list[dict[str, Any]] = []
    per_node: dict[tuple[str, str], float] = {}  # (shape, backend) -> seconds
    for shape in SHAPES:
        for size in sorted(sizes):
            tree, n = build(shape, size)
            twin = build(shape, size)[0] if op in _NEEDS_TWIN else tree
            name = f"{shape}:{n}"
            nodes[name] = n
            for b in backends:
                if not b.available or b.name in skipped:
                    continue
                if op not in b.ops:
                    skipped[b.name] = f"no {op}"
                    continue
                predicted = per_node.get((shape, b.name), 0.0) * n
                if max_call is not None and n > 1000 and predicted > max_call:
                    left_out.append(
                        {"backend": b.name, "shape": shape, "nodes": n, "predicted_s": predicted}
                    )
                    continue
                try:
                    fn, args, kwargs = b.stage(op, Operands(tree, twin))
                    if n <= 1000:  # a failure must show here; and the cost per node
                        per_node[(shape, b.name)] = _one_call(fn, args, kwargs) / n
                except Exception as exc:  # noqa: BLE001 - reported, not fatal
                    skipped[b.name] = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
                    continue
                cells.append(Cell(name, b.name, op, fn, args, kwargs))
    # A backend that failed on a larger tree leaves the whole curve.
    cells = [c for c in cells if c.backend not in skipped]
    return cells, nodes, skipped, left_out


def run_scaling(
    backends: Sequence[Backend],
    sizes: Sequence[int] = SIZES,
    rounds: int = 5,
    target: float = 2e-3,
    budget: float = 1.0,
    min_rounds: int = 3,
    max_call: float | None = None,
    op: str = "flatten",
    progress: ProgressBar | None = None,
    cells_plan: tuple[list[Cell], dict[str, int], dict[str, str], list[dict[str, Any]]]
    | None = None,
) -> ScalingResults:
    """Time `op` on every shape and size for every available backend."""
    cells, nodes, skipped, left_out = (
        cells_plan if cells_plan is not None else plan(backends, sizes, op, max_call)
    )
    run_cells(
        cells,
        rounds=rounds,
        target=target,
        warmup_rounds=1,
        progress=progress,
        budget=budget,
        min_rounds=min_rounds,
    )
    names = [b.name for b in backends if b.available and b.name not in skipped]
    return ScalingResults(
        op=op,
        sizes=list(sizes),
        shapes=dict(SHAPES),
        cells=cells,
        nodes=nodes,
        baseline=names[0] if names else None,
        backends=names,
        skipped=skipped,
        left_out=left_out,
        max_call=max_call,
    )


def steps(n_cells: int, rounds: int) -> int:
    """Progress steps of `run_scaling` with `n_cells` cells."""
    return total_steps(n_cells, rounds, 1)
