"""Time and count one eager call: the two measurements of each `--runtime` case.

* `per_call(fn, rounds, target)`: median CPU and wall seconds per call over
  `rounds` samples of about `target` seconds each;
* `count(fn, calls)`: a separate pass under cProfile (after the timing, so
  the profiler never slows a timed call) giving deterministic counts per
  call: the calls into pytree functions from outside them (`calls`), every
  call of a pytree function, nested ones included (`fn_calls`: the pytree
  work; torch's Python pytree makes several per node, the engine one per
  call), and the share of the profiled time spent in pytree functions
  (`share`, self time plus the builtins they call, as `profiling`
  counts it), with the functions that take most of it (`top`).

"Pytree functions" are those of torch.utils._pytree, torch.fx._pytree,
torch.utils._cxx_pytree, cpytree (not its harness), and the C functions of
cpytree._C and optree.

    cpu, wall = per_call(fn, rounds=15, target=0.05)
    counts = count(fn, calls=20)

`agree` makes several processes run a call the same number of times: each
rank of a distributed case passes a function returning the largest of the
counts every rank proposed (collectives inside the call must pair up).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .profiling import cpytree_dir, harness_dir, is_pytree, label, pytree_profile

__all__ = ["count", "count_calls", "per_call"]

# Calls of the counting pass: about this many seconds of calls, within these bounds.
_COUNT_S, _COUNT_MIN, _COUNT_MAX = 1.0, 3, 20


def count_calls(call_s: float) -> int:
    """How many calls the counting pass makes of a call taking `call_s` seconds."""
    return max(_COUNT_MIN, min(_COUNT_MAX, int(_COUNT_S / max(call_s, 1e-7))))


def _same(n: int) -> int:
    return n


def per_call(
    fn: Callable[[], Any], rounds: int, target: float, agree: Callable[[int], int] = _same
) -> tuple[float, float]:
    """Median (CPU, wall) seconds per call over `rounds` samples of about `target` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    n = agree(max(1, int(target / max(time.perf_counter() - t0, 1e-7))))
    cpu, wall = [], []
    for _ in range(rounds):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            fn()
        cpu.append((time.process_time() - c0) / n)
        wall.append((time.perf_counter() - t0) / n)
    return statistics.median(cpu), statistics.median(wall)


def count(fn: Callable[[], Any], calls: int = 20, profile: bool = True) -> dict[str, Any]:
    """Pytree counts per call of `fn` over `calls` profiled calls (see the module docstring).

    With `profile=False` the calls run unprofiled and nothing is counted (the
    other ranks of a distributed case, which only keep rank 0 company).
    """
    import cProfile
    import pstats

    if not profile:
        for _ in range(calls):
            fn()
        return {}
    prof = cProfile.Profile(builtins=True)
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    summary = pytree_profile(prof)
    # key -> (cc, nc, tt, ct, callers); `stats` is undocumented, so not in typeshed.
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cdir, hdir = cpytree_dir(), harness_dir()
    fn_calls = 0
    per_fn: dict[str, list[float]] = {}
    for key, (_, nc, tt, _, _) in stats.items():
        if is_pytree(key, cdir, hdir):
            fn_calls += nc
            entry = per_fn.setdefault(label(key), [0.0, 0.0])
            entry[0] += nc
            entry[1] += tt
    total = summary["profiled_total_s"] or 1.0
    top = sorted(per_fn.items(), key=lambda kv: -kv[1][1])[:6]
    return {
        "calls": summary["pytree_calls"] / calls,
        "fn_calls": fn_calls / calls,
        "share": summary["pytree_s"] / total,
        "top": [[name, n / calls, tt / total] for name, (n, tt) in top],
    }
