"""Every op on every default workload for every pytree backend, side by side.

Tests are grouped by "op workload", so pytest-benchmark's table for a group
compares the backends on one job. A missing backend, a backend that cannot
run a workload (the floor: list/tuple/dict only; dm-tree: no custom nodes)
and an op a backend has no equivalent for are skips with the reason. The ops
and what each backend runs for them are `cpytree.harness.ops.backends.OPS`.

    pytest benchmarks/ --benchmark-only
    pytest benchmarks/ --benchmark-only -k "resnet50 and (cpytree or floor)"
"""

from __future__ import annotations

from typing import Any

import pytest

from cpytree.harness.ops import backends, workloads

BACKENDS = {b.name: b for b in backends.discover()}
WORKLOADS = {w.name: w for w in workloads.default_workloads()}
_OPERANDS: dict[str, backends.Operands] = {}


def _operands(name: str) -> backends.Operands:
    """The workload's tree and its separately built twin, built once."""
    if name not in _OPERANDS:
        w = WORKLOADS[name]
        _OPERANDS[name] = backends.Operands(w.build(), w.build())
    return _OPERANDS[name]


CASES = [(op, w, b) for op in backends.OPS for w in WORKLOADS for b in BACKENDS]


@pytest.mark.parametrize(("op", "workload", "backend"), CASES, ids=[":".join(c) for c in CASES])
def test_op(benchmark: Any, op: str, workload: str, backend: str) -> None:
    b = BACKENDS[backend]
    w = WORKLOADS[workload]
    ok, why = b.supports(w)
    if not ok:
        pytest.skip(f"{backend}: {why}")
    if op not in b.ops:
        pytest.skip(f"{backend}: no equivalent of {op}")
    fn, args, kwargs = b.stage(op, _operands(workload))
    benchmark.group = f"{op} {workload} ({w.nodes} nodes)"
    benchmark.extra_info.update(backend=backend, workload=workload, op=op, nodes=w.nodes)
    benchmark(fn, *args, **kwargs)
