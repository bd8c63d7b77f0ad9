"""Thread scaling of the engine: N threads doing N times the work (not a test).

    python benchmarks/ft_scaling.py [--calls 4000] [--repeat 5] [--threads 1,2]

For each workload (a dict of 200 small lists; a ResNet-like module tree of
OrderedDicts) and operation (tree_flatten, tree_unflatten, both in turn), T
threads each make the same fixed number of calls (a deterministic amount of
work: calls x leaves, printed); the wall time of the slowest thread and the
process CPU time are measured, best of --repeat rounds. Two sharing modes:

- own:    each thread flattens its own copy of the tree (the interned spec
          and the dict keys are still shared: they are the same objects);
- shared: all threads flatten the very same tree object.

Then three pure-Python controls (no engine) in the same process: a loop that
shares nothing (what two threads can get on this machine at best), and dict
building from 200 key objects each thread owns, or all threads share: on
3.13t a reference to a shared mortal key is an atomic add on its shared
count, so dict-making scales worse with shared keys in CPython's own code.

speedup = (T x calls / wall_T) / (calls / wall_1): 2.0 is perfect scaling on
two cores. With the GIL (a default build) threads take turns: ~1.0. On a
free-threaded build (3.13t) the goal is >= 1.8 for two threads. CPU time per
call is printed beside (it shows contention: spinning or bouncing cache
lines cost CPU, waiting for the GIL does not). The machine must be quiet:
the other load on it is printed from /proc/loadavg before each workload.

--single prints only one thread's calls per second for each cell, to compare
interpreters (e.g. 3.13t against 3.13) with the same script.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import sysconfig
import threading
import time

import cpytree
import cpytree._reference as ref


def dict200(seed: int = 0) -> dict:
    return {f"k{i}": [seed, i, None] for i in range(200)}


def resnet_like(seed: int = 0) -> collections.OrderedDict:
    od = collections.OrderedDict
    n = iter(range(10**9))
    return od(
        (
            f"layer{i}",
            od(
                (
                    f"block{j}",
                    od(
                        conv1=od(weight=(seed, next(n))),
                        bn1=od(weight=(seed, next(n)), bias=(seed, next(n)), running_mean=seed),
                        conv2=od(weight=(seed, next(n))),
                        bn2=od(weight=(seed, next(n)), bias=(seed, next(n)), running_mean=seed),
                    ),
                )
                for j in range(4)
            ),
        )
        for i in range(4)
    )


def dict200_interned(seed: int = 0) -> dict:
    # The same tree with interned keys, as keys written in source are: 3.13t
    # makes interned strings immortal, so taking a reference to one writes no
    # shared reference count. dict200's keys, made at run time, are mortal:
    # every thread's unflatten increments and decrements the same keys (the
    # interned spec's), one cache line bouncing between the cores.
    return {sys.intern(f"k{i}"): [seed, i, None] for i in range(200)}


WORKLOADS = {"dict200": dict200, "dict200-interned-keys": dict200_interned, "resnet": resnet_like}


def control_spin(calls: int, _keys: list) -> None:
    # A pure-Python loop sharing nothing: the best 2 threads get on this machine.
    x = 0
    for i in range(calls * 150):
        x += i * i


def control_dict_build(calls: int, keys: list) -> None:
    # CPython's own dict building from the given key objects (no engine).
    values = list(range(len(keys)))
    for _ in range(calls):
        dict(zip(keys, values, strict=True))


CONTROLS = {
    "spin (shares nothing)": (control_spin, False),
    "dict(zip(keys)) own keys": (control_dict_build, False),
    "dict(zip(keys)) shared keys": (control_dict_build, True),
}


def run_control(fn, shared: bool, threads: int, calls: int) -> tuple[float, float]:
    """A pure-Python control, each thread `calls` rounds."""
    keysets = [[f"k{i}" for i in range(200)] for _ in range(threads)]
    if shared:
        keysets = [keysets[0]] * threads
    return timed_threads([lambda k=k: fn(calls, k) for k in keysets])


def timed_threads(bodies) -> tuple[float, float]:
    """(wall s to the last body's end, process CPU s): one thread a body, all started at once."""
    start = threading.Barrier(len(bodies) + 1)
    began, done = [], []

    def work(body):
        start.wait()
        began.append(time.perf_counter())  # each thread's own start: short bodies
        body()  # may end before the main thread runs again
        done.append(time.perf_counter())

    workers = [threading.Thread(target=work, args=(b,)) for b in bodies]
    for w in workers:
        w.start()
    cpu0 = time.process_time()
    start.wait()
    for w in workers:
        w.join()
    return max(done) - min(began), time.process_time() - cpu0


def op_flatten(tree, leaves, spec):
    cpytree.tree_flatten(tree)


def op_unflatten(tree, leaves, spec):
    cpytree.tree_unflatten(leaves, spec)


def op_both(tree, leaves, spec):
    leaves2, spec2 = cpytree.tree_flatten(tree)
    cpytree.tree_unflatten(leaves2, spec2)


OPS = {"flatten": op_flatten, "unflatten": op_unflatten, "flatten+unflatten": op_both}


def run(make, op, threads: int, calls: int, shared: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for `threads` threads making `calls` calls each."""
    trees = [make(0 if shared else k) for k in range(threads)]
    if shared:
        trees = [trees[0]] * threads
    args = [(t, *cpytree.tree_flatten(t)) for t in trees]

    def body(a):
        for _ in range(calls):
            op(*a)

    return timed_threads([lambda a=a: body(a) for a in args])


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=4000, help="calls per thread per round")
    ap.add_argument("--repeat", type=int, default=5, help="rounds; the best is kept")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--single", action="store_true", help="one thread only: calls per second")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    counts = [1] if a.single else [int(x) for x in a.threads.split(",")]
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    engine = cpytree.tree_flatten is not ref.tree_flatten
    print(
        f"python {sys.version.split()[0]}{'t' if ft else ''}, GIL {'on' if gil else 'off'}, "
        f"cpus {os.cpu_count()}, engine {'C++' if engine else 'pure Python (fallback)'}"
    )
    results = []
    for wname, make in WORKLOADS.items():
        nleaves = len(cpytree.tree_leaves(make()))
        print(f"\n{wname}: {nleaves} leaves a tree, {a.calls} calls a thread; load {loadavg()}")
        print(f"  {'op':18} {'mode':7} {'T':>2} {'calls/s':>12} {'speedup':>8} {'cpu us/call':>12}")
        for oname, op in OPS.items():
            for shared in (False, True):
                if a.single and shared:
                    continue
                base = None
                for t in counts:
                    best = min(
                        (run(make, op, t, a.calls, shared) for _ in range(a.repeat)),
                        key=lambda r: r[0],
                    )
                    wall, cpu = best
                    rate = t * a.calls / wall
                    base = rate if t == 1 else base
                    speedup = rate / base if base else float("nan")
                    cpu_per_call = cpu / (t * a.calls) * 1e6
                    mode = "shared" if shared else "own"
                    print(
                        f"  {oname:18} {mode:7} {t:>2} {rate:>12,.0f} {speedup:>8.2f} "
                        f"{cpu_per_call:>12.2f}"
                    )
                    results.append(
                        {
                            "workload": wname,
                            "leaves": nleaves,
                            "op": oname,
                            "mode": mode,
                            "threads": t,
                            "calls": t * a.calls,
                            "wall_s": wall,
                            "cpu_s": cpu,
                            "calls_per_s": rate,
                            "speedup": speedup,
                        }
                    )
    if not a.single:
        print(f"\ncontrols (pure Python, no engine), {a.calls} rounds a thread; load {loadavg()}")
        print(f"  {'control':30} {'T':>2} {'rounds/s':>12} {'speedup':>8}")
        for cname, (fn, shared) in CONTROLS.items():
            base = None
            for t in counts:
                wall, _cpu = min(
                    (run_control(fn, shared, t, a.calls) for _ in range(a.repeat)),
                    key=lambda r: r[0],
                )
                rate = t * a.calls / wall
                base = rate if t == 1 else base
                print(f"  {cname:30} {t:>2} {rate:>12,.0f} {rate / base:>8.2f}")
                results.append(
                    {"control": cname, "threads": t, "wall_s": wall, "speedup": rate / base}
                )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python": sys.version, "free_threaded": ft, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
