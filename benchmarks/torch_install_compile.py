"""torch.compile wall clock with and without cpytree.install(), in fresh processes.

    python benchmarks/torch_install_compile.py [--reps 7] [--backend aot_eager]
                                               [--model block] [--profile]

Modes, run interleaved so that machine load spreads evenly over them:

* ``none``   torch as shipped;
* ``attrs``  ``cpytree.install(rebind_imports=False)``: module attributes only;
* ``rebind`` ``cpytree.install()``: also torch modules' import-time bindings.

Each run is a new interpreter: import torch and torch._dynamo (not timed),
build the model, install (timed separately), then time the first call of the
compiled model plus its backward pass (compile of forward and backward), as
wall clock and as the process's CPU time (less sensitive to a busy machine).
``--in-process`` instead times warm compiles (after ``torch._dynamo.reset()``)
in one process, modes interleaved: no import or first-compile noise, so the
few percent install() saves are resolvable on a busy machine.
``--replay`` records every call torch code makes to the pytree functions
install() can swap during one compile (module attributes and import-time
bindings; callbacks replaced by side-effect-free ones) and replays them with
torch's functions and with cpytree's: the pytree time one compile spends.
``--profile`` instead runs each mode once under cProfile and reports the time
spent in, and the calls made to, torch.utils._pytree's Python functions
during the compile: what install() removes from the compile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import torch, torch._dynamo
    mode, backend, model_name, profile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    torch.manual_seed(0)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)
        def forward(self, x):
            return self.l2(torch.relu(self.l1(x)))

    class Block(torch.nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
            self.ff = torch.nn.Sequential(
                torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
        def forward(self, x):
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, need_weights=False)
            x = x + a
            return x + self.ff(self.ln2(x))

    class Stack(torch.nn.Module):
        def __init__(self, n=6):
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(n))
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    model, x = {
        "mlp": (MLP, (4, 16)), "block": (Block, (2, 5, 32)), "stack": (Stack, (2, 5, 32)),
    }[model_name]
    model, x = model(), torch.randn(*x, requires_grad=True)
    t0 = time.perf_counter()
    if mode != "none":
        import cpytree
        cpytree.install(rebind_imports=(mode == "rebind"))
    t1 = time.perf_counter()
    compiled = torch.compile(model, backend=backend)
    if profile:
        import cProfile, pstats
        prof = cProfile.Profile()
        prof.enable()
    t2, c2 = time.perf_counter(), time.process_time()
    compiled(x).sum().backward()
    t3, c3 = time.perf_counter(), time.process_time()
    out = {"install_s": t1 - t0, "compile_s": t3 - t2, "cpu_s": c3 - c2}
    if profile:
        prof.disable()
        stats = pstats.Stats(prof).stats
        pytree = [(k, v) for k, v in stats.items() if k[0].endswith("torch/utils/_pytree.py")]
        out["pytree_tottime_s"] = sum(v[2] for _, v in pytree)
        out["pytree_calls"] = sum(v[1] for _, v in pytree)
        top = sorted(pytree, key=lambda kv: -kv[1][3])[:8]
        out["top"] = [(k[2], v[1], round(v[3], 4)) for k, v in top]
        out["total_s"] = sum(v[2] for v in stats.values())
    print(json.dumps(out))
    """
)


_IN_PROCESS = textwrap.dedent(
    """
    import gc, json, statistics, sys, time
    import torch, torch._dynamo, cpytree
    backend, model_name, reps, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    MODEL_SOURCE
    model, x = MODELS[model_name]
    model, x = model(), torch.randn(*x, requires_grad=True)
    def compile_once():
        torch._dynamo.reset()
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        torch.compile(model, backend=backend)(x).sum().backward()
        return time.perf_counter() - t0, time.process_time() - c0
    compile_once()  # warm-up: imports, first-time caches
    wall = {m: [] for m in modes.split(",")}
    cpu = {m: [] for m in modes.split(",")}
    for _ in range(reps):
        for mode in wall:
            if mode != "none":
                cpytree.install(rebind_imports=(mode == "rebind"))
            w, c = compile_once()
            cpytree.uninstall()
            wall[mode].append(w)
            cpu[mode].append(c)
    print(json.dumps({"wall": wall, "cpu": cpu}))
    """
)


_REPLAY = textwrap.dedent(
    """
    import json, sys, time
    import torch, torch._dynamo, cpytree
    import torch.utils._pytree as tp
    from cpytree._torch import _patch
    backend, model_name = sys.argv[1], sys.argv[2]
    MODEL_SOURCE
    model, x = MODELS[model_name]
    model, x = model(), torch.randn(*x, requires_grad=True)
    cold = sys.argv[3] == "cold"
    if not cold:
        torch.compile(model, backend=backend)(x).sum().backward()  # warm-up
        torch._dynamo.reset()

    NAMES = ("tree_leaves", "tree_iter", "arg_tree_leaves", "tree_map", "tree_map_",
             "tree_flatten", "tree_structure", "tree_unflatten")
    calls = []
    depth = [0]
    routes = {}
    def recorder(name, fn, route):
        def record(*args, **kwargs):
            if depth[0] == 0:  # only calls from outside pytree itself
                calls.append((name, args, kwargs))
                routes[(name, route)] = routes.get((name, route), 0) + 1
            depth[0] += 1
            try:
                result = fn(*args, **kwargs)
                return list(result) if name == "tree_iter" else result
            finally:
                depth[0] -= 1
        return record
    originals = {n: getattr(tp, n) for n in NAMES}
    patches = _patch.Patches()
    pairs = {}
    for n in NAMES:
        patches.set(tp, n, recorder(n, originals[n], "attr"))
        pairs[id(originals[n])] = (originals[n], recorder(n, originals[n], "import"))
    _patch.rebind_imports(patches, pairs, skip=("torch.utils._pytree",))
    torch.compile(model, backend=backend)(x).sum().backward()
    patches.undo()

    def keep(x):
        return x
    def nothing(*a):
        return None
    def plan(impl):
        # (function, args, kwargs) with side-effect-free callbacks; specs of impl's kind.
        out = []
        for name, args, kwargs in calls:
            fn = getattr(impl, name)
            if name in ("tree_map", "tree_map_"):
                args = ((keep if name == "tree_map" else nothing),) + args[1:]
                if len(args) > 2:
                    args = args[:2]  # n-ary: keep the traversal of the first tree
            if name == "tree_unflatten":
                leaves, spec = args if isinstance(args[1], tp.TreeSpec) else args[::-1]
                if impl is cpytree:
                    dummy = tp.tree_unflatten(list(range(spec.num_leaves)), spec)
                    spec = cpytree.tree_structure(dummy)
                args = (list(leaves), spec)
            out.append((fn, args, kwargs))
        return out
    plans = {"torch": plan(tp), "cpytree": plan(cpytree)}
    by_name = {}
    for name, _, _ in calls:
        by_name[name] = by_name.get(name, 0) + 1
    result = {"calls": by_name, "routes": {f"{n}/{r}": c for (n, r), c in routes.items()}}
    def best_of(steps, consume):
        best = None
        for _ in range(7):
            t0 = time.perf_counter()
            for fn, args, kwargs in steps:
                r = fn(*args, **kwargs)
                if consume:
                    for _ in r:
                        pass
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        return best
    for label, steps in plans.items():
        per = {}
        for name in by_name:
            sel = [step for step, (n, _, _) in zip(steps, calls) if n == name]
            per[name] = best_of(sel, consume=(name == "tree_iter"))
        result[label + "_by_name"] = per
        result[label] = sum(per.values())
    print(json.dumps(result))
    """
)


def _replay(args: argparse.Namespace) -> int:
    code = _REPLAY.replace("MODEL_SOURCE\n", _model_source())
    proc = subprocess.run(
        [sys.executable, "-c", code, args.backend, args.model, "cold" if args.cold else "warm"],
        capture_output=True, text=True, check=False,
        env=dict(os.environ, CPYTREE_INSTALL="0"),
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"pytree calls torch code makes during one {'first' if args.cold else 'warm'} "
          f"torch.compile({args.model}, backend={args.backend!r}) forward+backward, "
          "replayed (best of 7)")  # fmt: skip
    print(f"  {'function':16s} {'calls':>6s} {'torch ms':>9s} {'cpytree ms':>11s}")
    for name, count in sorted(r["calls"].items(), key=lambda kv: -r["torch_by_name"][kv[0]]):
        print(f"  {name:16s} {count:6d} {r['torch_by_name'][name] * 1e3:9.2f} "
              f"{r['cpytree_by_name'][name] * 1e3:11.2f}")  # fmt: skip
    print(f"  {'all':16s} {sum(r['calls'].values()):6d} {r['torch'] * 1e3:9.2f} "
          f"{r['cpytree'] * 1e3:11.2f}")  # fmt: skip
    print("  calls by route (attr: through the module attribute; import: a name bound at import):")
    for route, count in sorted(r["routes"].items()):
        print(f"    {route:24s} {count:6d}")
    return 0


def _model_source() -> str:
    """The model classes of _CHILD, as a MODELS table for _IN_PROCESS."""
    start = _CHILD.index("class MLP")
    end = _CHILD.index("model, x = {")
    body = _CHILD[start:end]
    return body + (
        'MODELS = {"mlp": (MLP, (4, 16)), "block": (Block, (2, 5, 32)), '
        '"stack": (Stack, (2, 5, 32))}\n'
    )


def _in_process(args: argparse.Namespace, modes: list[str]) -> int:
    code = _IN_PROCESS.replace("MODEL_SOURCE\n", _model_source())
    proc = subprocess.run(
        [sys.executable, "-c", code, args.backend, args.model, str(args.reps), ",".join(modes)],
        capture_output=True, text=True, check=False,
        env=dict(os.environ, CPYTREE_INSTALL="0"),
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"torch.compile({args.model}, backend={args.backend!r}) forward+backward, warm "
          f"compiles in one process after torch._dynamo.reset(), modes interleaved, "
          f"{args.reps} each")  # fmt: skip
    for kind in ("cpu", "wall"):
        base = statistics.median(result[kind][modes[0]])
        for mode in modes:
            ts = result[kind][mode]
            med = statistics.median(ts)
            print(f"  {kind:4s} {mode:7s} median {med * 1e3:7.1f} ms  min {min(ts) * 1e3:7.1f}  "
                  f"({(med / base - 1) * 100:+.1f}% vs {modes[0]})")  # fmt: skip
    return 0


def _run(mode: str, backend: str, model: str, profile: bool) -> dict:
    env = dict(os.environ, CPYTREE_INSTALL="0", PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, backend, model, "1" if profile else "0"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: child failed\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--model", default="block", choices=("mlp", "block", "stack"))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--modes", default="none,attrs,rebind")
    parser.add_argument(
        "--in-process", action="store_true", help="warm compiles in one process (less noise)"
    )
    parser.add_argument(
        "--replay", action="store_true", help="replay one compile's pytree calls in both"
    )
    parser.add_argument(
        "--cold", action="store_true", help="--replay: record the first compile of the process"
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    if args.in_process:
        return _in_process(args, modes)
    if args.replay:
        return _replay(args)
    if args.profile:
        for mode in modes:
            result = _run(mode, args.backend, args.model, profile=True)
            print(f"{mode:7s} pytree {result['pytree_tottime_s'] * 1e3:7.1f} ms self time, "
                  f"{result['pytree_calls']:6d} calls to torch.utils._pytree Python functions "
                  f"(profiled compile {result['total_s']:.2f} s)")  # fmt: skip
            for name, calls, cum in result["top"]:
                print(f"          {name:24s} {calls:6d} calls {cum * 1e3:8.1f} ms cumulative")
        return 0
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    installs: dict[str, list[float]] = {mode: [] for mode in modes}
    for rep in range(args.reps):
        for mode in modes:
            result = _run(mode, args.backend, args.model, profile=False)
            times[mode].append(result["compile_s"])
            cpu[mode].append(result["cpu_s"])
            installs[mode].append(result["install_s"])
        print(f"rep {rep + 1}/{args.reps}: "
              + "  ".join(f"{m} {times[m][-1]:.3f}s" for m in modes), file=sys.stderr)  # fmt: skip
    base = statistics.median(times[modes[0]])
    base_cpu = statistics.median(cpu[modes[0]])
    print(f"torch.compile({args.model}, backend={args.backend!r}) forward+backward, "
          f"first call, {args.reps} fresh processes per mode")  # fmt: skip
    for mode in modes:
        ts = times[mode]
        med = statistics.median(ts)
        print(f"  {mode:7s} median {med:.3f} s  min {min(ts):.3f}  max {max(ts):.3f}  "
              f"({(med / base - 1) * 100:+.1f}% vs {modes[0]}; install() "
              f"{statistics.median(installs[mode]) * 1e3:.0f} ms)")  # fmt: skip
        cs = cpu[mode]
        print(f"          cpu    {statistics.median(cs):.3f} s  "
              f"min {min(cs):.3f}  max {max(cs):.3f}  "
              f"({(statistics.median(cs) / base_cpu - 1) * 100:+.1f}% vs {modes[0]})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
