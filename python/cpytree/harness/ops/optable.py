"""Plans the op tables: one timing cell per (workload, backend, op).

For each workload, two trees are built (the tree and its separately built
twin); each backend's answer is checked against torch semantics once (its
leaves, in order), and each op is staged and called once before it is timed:
a failure becomes an `ERR` entry with the message (`RecErr` for a
RecursionError), never an abort. Workloads deeper than
`deep_probe.PROBE_DEPTH` are tried in a child process first (`deep_probe`):
a backend that fails there is not called here.

Usage:

    res = plan_ops(workloads, backends, ops)
    run_cells(res.cells, rounds=10, target=1e-3)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backends import Backend, Operands
from .deep_probe import PROBE_DEPTH, probe, short as _short
from .results import OpResults
from .timing import Cell
from .workloads import Workload, expected_leaves

__all__ = ["plan_ops", "torch_leaves"]


def _probed(w: Workload, b: Backend, ops: list[str]) -> dict[str, str] | None:
    """The child's verdicts for a workload too deep to try in this process, else None."""
    if w.depth <= PROBE_DEPTH:
        return None
    return probe(b.name, w.name, [op for op in ops if op in b.ops])


def _expected(expected: Callable[[Any], list[Any]], tree: Any) -> list[Any]:
    """The oracle's leaves; torch's own pytree raises RecursionError on deep
    trees, and then the harness's iterative model of torch semantics answers."""
    if expected is expected_leaves:
        return expected_leaves(tree)
    try:
        return expected(tree)
    except RecursionError:
        return expected_leaves(tree)


def _differs(backend: Backend, tree: Any, expected: list[Any]) -> str:
    """'' if the backend's leaves are torch's, else how they differ."""
    got = backend.leaves(tree)
    if len(got) != len(expected):
        return f"{len(got)} leaves, torch semantics give {len(expected)}"
    if any(a is not b for a, b in zip(got, expected, strict=True)):
        return "leaves in another order than torch's"
    return ""


def torch_leaves(backends: list[Backend]) -> Callable[[Any], list[Any]]:
    """The oracle of torch semantics for trees the harness did not build:
    torch's own leaves when torch is installed, else cpytree's."""
    for name in ("torch", "cpytree", "cpytree-reference"):
        for b in backends:
            if b.name == name and b.available:
                return b.leaves
    return expected_leaves


def plan_ops(
    workloads: list[Workload],
    backends: list[Backend],
    ops: list[str],
    expected: Callable[[Any], list[Any]] = expected_leaves,
) -> OpResults:
    """Cells to time, with notes on semantic differences and on errors."""
    cells: list[Cell] = []
    differs: dict[tuple[str, str], str] = {}
    errors: dict[tuple[str, str, str], str] = {}
    for w in workloads:
        tree, twin = w.build(), w.build()
        want = _expected(expected, tree)
        for b in backends:
            if not b.supports(w)[0]:
                continue
            verdicts = _probed(w, b, ops)
            try:
                if verdicts is not None and verdicts["leaves()"]:
                    diff = f"leaves failed: {verdicts['leaves()']}"
                else:
                    diff = _differs(b, tree, want)
            except Exception as exc:  # noqa: BLE001 - reported in the table
                diff = f"leaves failed: {_short(exc)}"
            if diff:
                differs[(w.name, b.name)] = diff
            operands = Operands(tree, twin)
            for op in ops:
                if op not in b.ops:
                    continue
                if verdicts is not None and verdicts[op]:
                    errors[(w.name, b.name, op)] = verdicts[op]
                    continue
                try:
                    fn, args, kwargs = b.stage(op, operands)
                    fn(*args, **kwargs)  # it must run before it is timed
                except Exception as exc:  # noqa: BLE001 - reported in the table
                    errors[(w.name, b.name, op)] = _short(exc)
                    continue
                cells.append(Cell(w.name, b.name, op, fn, args, kwargs))
    return OpResults(workloads, backends, ops, cells, differs, errors)
