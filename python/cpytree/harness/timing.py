"""Side-by-side timing of many (workload, backend, op) cells in one process.

Each cell is calibrated to an inner loop of `number` calls lasting about
`target` seconds, then all cells are timed in rounds, in a shuffled order
each round, so drift (frequency scaling, other processes on the machine)
spreads over every backend alike. The first rounds are warm-up and dropped;
a cell's result is the median time per call over the remaining rounds. The
garbage collector is off while timing and runs between rounds.

Usage:

    cells = [Cell("w", "b", "flatten", fn, (tree,), {})]
    run_cells(cells, rounds=10, target=1e-3)
    print(cells[0].median)
"""

from __future__ import annotations

import gc
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from time import perf_counter
from typing import Any

from .progress import ProgressBar

__all__ = ["Cell", "run_cells"]


# One loop per call shape, so the timed loop adds no *args/**kwargs unpacking
# that the library call itself does not need.
def _loop1(fn: Callable[..., Any], a: Any, n: int) -> float:
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a)
    return perf_counter() - t0


def _loop2(fn: Callable[..., Any], a: Any, b: Any, n: int) -> float:
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b)
    return perf_counter() - t0


def _loop1kw(fn: Callable[..., Any], a: Any, kw: dict[str, Any], n: int) -> float:
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, **kw)
    return perf_counter() - t0


def _loop2kw(fn: Callable[..., Any], a: Any, b: Any, kw: dict[str, Any], n: int) -> float:
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b, **kw)
    return perf_counter() - t0


@dataclass
class Cell:
    """One timed call `fn(*args, **kwargs)`; `samples` are seconds per call."""

    workload: str
    backend: str
    op: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    number: int = 1
    samples: list[float] = field(default_factory=list)

    def time(self, n: int) -> float:
        """Seconds taken by `n` back-to-back calls."""
        fn, args, kw = self.fn, self.args, self.kwargs
        if len(args) == 1:
            return _loop1kw(fn, args[0], kw, n) if kw else _loop1(fn, args[0], n)
        if len(args) == 2:
            return _loop2kw(fn, args[0], args[1], kw, n) if kw else _loop2(fn, args[0], args[1], n)
        raise ValueError(f"unsupported call shape: {len(args)} positional arguments")

    def calibrate(self, target: float) -> None:
        """Pick `number` so one sample lasts about `target` seconds."""
        per_call = min(self.time(1), self.time(1))  # the first call also warms up
        n = max(1, min(1_000_000, int(target / max(per_call, 1e-9))))
        per_call = self.time(n) / n
        self.number = max(1, min(1_000_000, round(target / max(per_call, 1e-9))))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)


def run_cells(
    cells: list[Cell],
    rounds: int,
    target: float,
    warmup_rounds: int = 1,
    seed: int = 0,
    progress: ProgressBar | None = None,
) -> None:
    """Calibrate, then time every cell `rounds` times, interleaved."""
    rng = random.Random(seed)
    for cell in cells:
        cell.calibrate(target)
        if progress:
            progress.advance(label=f"calibrating {cell.workload}")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(warmup_rounds + rounds):
            order = cells[:]
            rng.shuffle(order)
            label = (
                f"warm-up {r + 1}/{warmup_rounds}"
                if r < warmup_rounds
                else f"round {r - warmup_rounds + 1}/{rounds}"
            )
            for cell in order:
                per_call = cell.time(cell.number) / cell.number
                if r >= warmup_rounds:
                    cell.samples.append(per_call)
                if progress:
                    progress.advance(label=label)
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
