"""Side-by-side timing of many (workload, backend, op) cells in one process.

Each cell is calibrated to an inner loop of `number` calls lasting about
`target` seconds, then all cells are timed in rounds, in a shuffled order
each round, so drift (frequency scaling, other processes on the machine)
spreads over every backend alike. The first rounds are warm-up and dropped;
a cell's result is the median time per call over the remaining rounds, shown
with the fastest and slowest round. The garbage collector is off while
timing and runs between rounds (with the trees frozen out of its sight).

A cell whose single call already exceeds `target` (a pure-Python backend on
a million nodes) is timed one call per sample; its calibration calls serve
as its warm-up, and with a `budget` it takes part in only as many rounds as
fit in that many seconds (never fewer than `min_rounds`).

Usage:

    cells = [Cell("w", "b", "flatten", fn, (tree,), {})]
    run_cells(cells, rounds=10, target=1e-3)
    print(cells[0].median, cells[0].low, cells[0].high)
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

from ..progress import ProgressBar

__all__ = ["Cell", "run_cells", "total_steps"]


# One loop per call shape, so the timed loop adds no *args/**kwargs unpacking
# that the library call itself does not need.
def _loop1(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    (a,) = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a)
    return perf_counter() - t0


def _loop2(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    a, b = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b)
    return perf_counter() - t0


def _loop3(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    a, b, c = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b, c)
    return perf_counter() - t0


def _loop1kw(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    (a,) = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, **kw)
    return perf_counter() - t0


def _loop2kw(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    a, b = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b, **kw)
    return perf_counter() - t0


def _loop3kw(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], n: int) -> float:
    a, b, c = args
    it = repeat(None, n)
    t0 = perf_counter()
    for _ in it:
        fn(a, b, c, **kw)
    return perf_counter() - t0


_LOOPS = {
    (1, False): _loop1,
    (2, False): _loop2,
    (3, False): _loop3,
    (1, True): _loop1kw,
    (2, True): _loop2kw,
    (3, True): _loop3kw,
}


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
    # Rounds this cell takes part in (set by run_cells from its budget).
    rounds: int = 0
    # Seconds of one call measured while calibrating.
    per_call: float = 0.0
    # One call outlasts the target: one call per sample, no warm-up rounds.
    slow: bool = False

    def __post_init__(self) -> None:
        key = (len(self.args), bool(self.kwargs))
        if key not in _LOOPS:
            raise ValueError(f"unsupported call shape: {len(self.args)} positional arguments")
        self._loop = _LOOPS[key]

    def time(self, n: int) -> float:
        """Seconds taken by `n` back-to-back calls."""
        return self._loop(self.fn, self.args, self.kwargs, n)

    def calibrate(self, target: float) -> None:
        """Pick `number` so one sample lasts about `target` seconds."""
        first = self.time(1)  # also the first warm-up call
        if first >= 50 * target:  # surely slow: no second call of seconds
            self.number, self.per_call = 1, first
            return
        per_call = min(first, self.time(1))  # one preempted call must not decide
        if per_call >= target:
            self.number, self.per_call = 1, per_call
            return
        n = max(1, min(1_000_000, int(target / max(per_call, 1e-9))))
        per_call = self.time(n) / n
        self.per_call = per_call
        self.number = max(1, min(1_000_000, round(target / max(per_call, 1e-9))))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        """The fastest round."""
        return min(self.samples)

    @property
    def high(self) -> float:
        """The slowest round."""
        return max(self.samples)

    best = low


def _plan(cell: Cell, rounds: int, target: float, budget: float | None, min_rounds: int) -> None:
    cell.slow = cell.per_call >= target
    if budget is None or not cell.slow:
        cell.rounds = rounds
    else:
        cell.rounds = max(min_rounds, min(rounds, int(budget / cell.per_call)))


def total_steps(n_cells: int, rounds: int, warmup_rounds: int) -> int:
    """Progress steps run_cells takes at most for `n_cells` cells."""
    return n_cells * (1 + warmup_rounds + rounds)


def run_cells(
    cells: list[Cell],
    rounds: int,
    target: float,
    warmup_rounds: int = 1,
    seed: int = 0,
    progress: ProgressBar | None = None,
    budget: float | None = None,
    min_rounds: int = 3,
) -> None:
    """Calibrate, then time every cell `rounds` times, interleaved.

    `budget`: seconds a slow cell (one call longer than `target`) may spend
    in timed rounds; it then takes part in fewer rounds, at least `min_rounds`.
    """
    rng = random.Random(seed)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for cell in cells:
            cell.calibrate(target)
            _plan(cell, rounds, target, budget, min_rounds)
            if progress:
                progress.advance(label=f"calibrating {cell.workload}")
        gc.collect()
        # Everything alive now (the trees) is out of the collector's sight, so
        # the collection between rounds stays cheap on million-node trees.
        gc.freeze()
        for r in range(warmup_rounds + rounds):
            warm = r < warmup_rounds
            order = cells[:]
            rng.shuffle(order)
            label = f"warm-up {r + 1}/{warmup_rounds}" if warm else f"round {r - warmup_rounds + 1}"
            for cell in order:
                timed_round = r - warmup_rounds
                skip = (warm and cell.slow) or (not warm and timed_round >= cell.rounds)
                if not skip:
                    per_call = cell.time(cell.number) / cell.number
                    if not warm:
                        cell.samples.append(per_call)
                if progress:
                    progress.advance(label=label)
            gc.collect()
    finally:
        gc.unfreeze()
        if gc_was_enabled:
            gc.enable()
