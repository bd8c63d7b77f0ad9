"""What one harness run measured, in one object the tables, the report and
the plots read: the op table (`OpResults`), the scaling curve
(`ScalingResults`) and the compile study (a plain dict from `compile_bench`),
plus the machine and versions (`machine_info`).

Usage:

    res = OpResults(workloads, backends, ops, cells, differs, errors)
    res.entry("resnet50", "torch", "flatten")    # a Cell, or "n/a" / "skip" / "ERR"
    res.ratio("resnet50", "torch", "flatten")    # torch time / cpytree time
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends import Backend
from .timing import Cell
from .workloads import Workload

__all__ = ["OpResults", "ScalingResults", "geomean", "machine_info"]


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


@dataclass
class OpResults:
    """Every (workload, backend, op) cell of the op tables."""

    workloads: list[Workload]
    backends: list[Backend]
    ops: list[str]
    cells: list[Cell]
    # (workload, backend) -> how the backend's leaves differ from torch's.
    differs: dict[tuple[str, str], str] = field(default_factory=dict)
    # (workload, backend, op) -> the error staging or the first call raised.
    errors: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_key = {(c.workload, c.backend, c.op): c for c in self.cells}
        self._backends = {b.name: b for b in self.backends}
        self.baseline = next((b.name for b in self.backends if b.available), None)

    @property
    def shown(self) -> list[Backend]:
        """The available backends, in table order."""
        return [b for b in self.backends if b.available]

    def cell(self, workload: str, backend: str, op: str) -> Cell | None:
        return self._by_key.get((workload, backend, op))

    def entry(self, workload: Workload, backend: str, op: str) -> Cell | str:
        """The timed cell, or why there is none: "RecErr" (it raised
        RecursionError: too deep for it), "ERR" (another error), "n/a" (the
        backend has no such op) or "skip" (the backend cannot run the workload)."""
        cell = self._by_key.get((workload.name, backend, op))
        if cell is not None:
            return cell
        error = self.errors.get((workload.name, backend, op))
        if error is not None:
            return "RecErr" if error.startswith("RecursionError") else "ERR"
        b = self._backends[backend]
        if op not in b.ops:
            return "n/a"
        return "skip" if not b.supports(workload)[0] else "-"

    def ratio(self, workload: str, backend: str, op: str) -> float | None:
        """Median time over the baseline's median time, when both exist."""
        if self.baseline is None:
            return None
        cell = self._by_key.get((workload, backend, op))
        base = self._by_key.get((workload, self.baseline, op))
        if cell is None or base is None or base.median <= 0:
            return None
        return cell.median / base.median

    def geomean_ratio(self, backend: str, op: str) -> float | None:
        """Geometric mean over workloads of `ratio`; None without any."""
        rs = [self.ratio(w.name, backend, op) for w in self.workloads]
        vals = [r for r in rs if r is not None]
        return geomean(vals) if vals else None

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "ops": list(self.ops),
            "workloads": [
                {
                    "name": w.name,
                    "nodes": w.nodes,
                    "builtin_only": w.builtin_only,
                    "description": w.description,
                }
                for w in self.workloads
            ],
            "results": [
                {
                    "workload": c.workload,
                    "backend": c.backend,
                    "op": c.op,
                    "median_us": c.median * 1e6,
                    "min_us": c.low * 1e6,
                    "max_us": c.high * 1e6,
                    "calls_per_sample": c.number,
                    "samples_us": [s * 1e6 for s in c.samples],
                    "ratio_to_baseline": self.ratio(c.workload, c.backend, c.op),
                    "equivalent": self._backends[c.backend].equivalents.get(c.op, ""),
                    "differs": self.differs.get((c.workload, c.backend), ""),
                }
                for c in self.cells
            ],
            "errors": [
                {"workload": w, "backend": b, "op": op, "error": e}
                for (w, b, op), e in self.errors.items()
            ],
            "not_applicable": [
                {"backend": b.name, "op": op}
                for b in self.shown
                for op in self.ops
                if op not in b.ops
            ],
        }


@dataclass
class ScalingResults:
    """Cost per node of one op on trees of growing size, per shape and backend."""

    op: str
    sizes: list[int]
    shapes: dict[str, str]  # shape -> description
    cells: list[Cell]  # workload = "<shape>:<nodes>"
    nodes: dict[str, int]  # workload -> exact node count
    baseline: str | None
    backends: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # backend -> why not run
    # Points not run: one call was predicted to outlast the limit.
    left_out: list[dict[str, Any]] = field(default_factory=list)
    max_call: float | None = None

    def per_node(self, cell: Cell) -> float:
        """Median seconds per node."""
        return cell.median / self.nodes[cell.workload]

    def series(self, shape: str, backend: str) -> list[tuple[int, Cell]]:
        """(nodes, cell) of one curve, by size."""
        out = [
            (self.nodes[c.workload], c)
            for c in self.cells
            if c.backend == backend and c.workload.split(":")[0] == shape
        ]
        return sorted(out, key=lambda nc: nc[0])

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "sizes": self.sizes,
            "shapes": self.shapes,
            "baseline": self.baseline,
            "skipped": self.skipped,
            "left_out": self.left_out,
            "max_call_s": self.max_call,
            "results": [
                {
                    "shape": c.workload.split(":")[0],
                    "nodes": self.nodes[c.workload],
                    "backend": c.backend,
                    "median_ns_per_node": self.per_node(c) * 1e9,
                    "min_ns_per_node": c.low / self.nodes[c.workload] * 1e9,
                    "max_ns_per_node": c.high / self.nodes[c.workload] * 1e9,
                    "median_us": c.median * 1e6,
                    "calls_per_sample": c.number,
                    "samples_us": [s * 1e6 for s in c.samples],
                }
                for c in self.cells
            ],
        }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str:
    """The commit of a source checkout cpytree runs from, else ''."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    if out.returncode != 0:
        return ""
    dirty = subprocess.run(
        ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    )
    return out.stdout.strip() + (" (modified tree)" if dirty.stdout.strip() else "")


def _version(module: str) -> str | None:
    mod = sys.modules.get(module)
    if mod is None:
        return None
    return str(getattr(mod, "__version__", "?"))


def machine_info() -> dict[str, Any]:
    """The machine, the interpreter and the versions of what this process loaded."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    versions = {
        name: _version(mod)
        for name, mod in (
            ("cpytree", "cpytree"),
            ("torch", "torch"),
            ("optree", "optree"),
            ("jax", "jax"),
            ("dm-tree", "tree"),
            ("numpy", "numpy"),
            ("matplotlib", "matplotlib"),
        )
    }
    return {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpytree_engine": getattr(sys.modules.get("cpytree"), "ENGINE", None),
        "cpytree_commit": _git_commit(),
        "versions": {k: v for k, v in versions.items() if v is not None},
    }
