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

    model, x = {
        "mlp": (MLP, (4, 16)), "block": (Block, (2, 5, 32)),
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
    parser.add_argument("--model", default="block", choices=("mlp", "block"))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--modes", default="none,attrs,rebind")
    args = parser.parse_args()
    modes = args.modes.split(",")
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
        print(f"          cpu    {statistics.median(cs):.3f} s  min {min(cs):.3f}  max {max(cs):.3f}  "
              f"({(statistics.median(cs) / base_cpu - 1) * 100:+.1f}% vs {modes[0]})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
