"""`cpytree-harness` / `python -m cpytree.harness`: what pytree work costs.

Three modes, each printing tables and writing a report directory (`--out`,
default `harness-report/`: report.md, results.json, PNG plots):

* default: every op on every embedded workload for every installed backend,
  side by side in one process, then the scaling curve (cost per node from 10
  to 1,000,000 nodes); needs nothing beyond cpytree;
* `--tree module:callable`: the same op tables on the user's own pytree (or
  the state dict of the nn.Module the callable returns);
* `--compile`: torch.compile of a small torch.nn model zoo, each model in
  fresh processes with and without `cpytree.install()`.

Each number of the op tables is the median time per call in microseconds;
beside it, the ratio to cpytree (time / cpytree's time: above 1 means cpytree
is faster). See `tables` for the markers.

Usage:

    cpytree-harness                     # the default run (under two minutes)
    cpytree-harness --quick --out /tmp/r
    cpytree-harness --workloads resnet50,tiny-call --backends cpytree,torch,optree
    cpytree-harness --tree mypkg.models:make_model
    cpytree-harness --compile --models mlp,nested-io --compile-reps 3
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import backends as backends_mod, scaling as scaling_mod, tables, workloads as workloads_mod
from .optable import plan_ops, torch_leaves
from .progress import ProgressBar
from .report import write_report
from .results import OpResults, ScalingResults, machine_info
from .timing import run_cells, total_steps

__all__ = ["main"]

# (rounds kept, warm-up rounds, target seconds per sample) of the op tables.
_DEFAULT = (10, 1, 1e-3)
_QUICK = (3, 1, 2e-4)
# Scaling: sizes, rounds, seconds a slow cell may spend, its least rounds.
_SCALING: tuple[tuple[int, ...], int, float, int] = (scaling_mod.SIZES, 5, 0.35, 2)
_SCALING_QUICK: tuple[tuple[int, ...], int, float, int] = ((10, 100, 1_000, 10_000), 3, 0.2, 2)


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="cpytree-harness",
        description="What pytree work costs: every op on PT2-shaped trees across pytree "
        "backends, a scaling curve, your own tree (--tree) or torch.compile (--compile).",
    )
    p.add_argument("--quick", action="store_true", help="few short rounds (tests, smoke runs)")
    p.add_argument("--workloads", metavar="NAME,...", help="workloads (default all; --list)")
    p.add_argument("--backends", metavar="NAME,...", help="backends (default: all installed)")
    p.add_argument("--ops", metavar="OP,...", help=f"ops (default: {','.join(backends_mod.OPS)})")
    p.add_argument("--rounds", type=int, metavar="N", help="timed rounds per cell")
    p.add_argument("--target-ms", type=float, metavar="MS", help="duration of one sample")
    p.add_argument("--out", default="harness-report", metavar="DIR", help="report directory")
    p.add_argument("--json", metavar="PATH", help="also copy results.json to PATH")
    p.add_argument("--no-plots", action="store_true", help="no PNG plots")
    p.add_argument("--no-scaling", action="store_true", help="no scaling curve")
    p.add_argument("--scaling-max", type=int, metavar="N", help="largest tree of the scaling curve")
    p.add_argument(
        "--scaling-max-call",
        type=float,
        default=1.0,
        metavar="S",
        help="scaling: leave out points whose one call would take over S seconds (0: none)",
    )
    p.add_argument("--tree", metavar="MODULE:CALLABLE", help="time your own pytree")
    p.add_argument("--compile", action="store_true", help="torch.compile study (needs torch)")
    p.add_argument("--models", metavar="NAME,...", help="--compile: models (default all)")
    p.add_argument("--compile-reps", type=int, metavar="N", help="--compile: runs per mode")
    p.add_argument(
        "--compile-backend", default="inductor", metavar="NAME", help="--compile: backend"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--list", action="store_true", help="list workloads, backends, models")
    return p.parse_args(argv)


def _backend_lines(backends: list[backends_mod.Backend]) -> list[str]:
    out = []
    for b in backends:
        state = b.note if b.available else f"MISSING ({b.reason})"
        out.append(f"  {b.name:<18} {state}".rstrip())
    return out


def _list(backends: list[backends_mod.Backend]) -> str:
    out = ["workloads:"]
    for w in workloads_mod.default_workloads():
        kind = "builtin" if w.builtin_only else ("custom" if w.custom_nodes else "")
        out.append(f"  {w.name:<22} {w.nodes:>5} nodes  {kind:<8} {w.description}")
    out.append("backends:")
    out += _backend_lines(backends)
    out.append(f"ops: {', '.join(backends_mod.OPS)}")
    from .compile_bench import MODELS

    out.append("--compile models:")
    out += [f"  {name:<12} {what}" for name, what in MODELS.items()]
    return "\n".join(out)


def _machine_line(machine: dict[str, Any]) -> str:
    load = "/".join(str(x) for x in machine.get("load_average", []))
    return f"{machine['python']} on {machine['cpu']} ({machine['cpu_count']} cores, load {load})"


def _meta(args: argparse.Namespace, argv: Sequence[str] | None, started: float) -> dict[str, Any]:
    words = list(sys.argv[1:] if argv is None else argv)
    return {
        "command": " ".join(["cpytree-harness", *map(shlex.quote, words)]),
        "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "elapsed_s": 0.0,
        "machine": machine_info(),
        "settings": {},
        "phases_s": {},
    }


def _finish(
    args: argparse.Namespace,
    meta: dict[str, Any],
    t0: float,
    **report: Any,
) -> int:
    meta["elapsed_s"] = time.monotonic() - t0
    out = Path(args.out)
    t1 = time.monotonic()
    files, notice = write_report(out, meta, make_plots=not args.no_plots, **report)
    meta["phases_s"]["report"] = time.monotonic() - t1
    if args.json:
        Path(args.json).write_text((out / "results.json").read_text(encoding="utf-8"))
    if notice:
        print(notice)
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in meta["phases_s"].items())
    print(f"report: {out}/ ({', '.join(files)})")
    print(f"{time.monotonic() - t0:.0f} s in all ({phases})")
    return 0


def _run_compile(args: argparse.Namespace, meta: dict[str, Any], t0: float) -> int:
    from . import compile_bench

    try:
        study, terminal, markdown = compile_bench.run(
            models=_split(args.models),
            reps=args.compile_reps,
            backend=args.compile_backend,
            quick=args.quick,
            progress=not args.no_progress,
        )
    except compile_bench.Unavailable as exc:
        print(f"cpytree-harness --compile: {exc}", file=sys.stderr)
        return 2
    meta["machine"] = machine_info()  # torch's version, now that it is imported
    meta["settings"] = study["settings"]
    print(terminal)
    return _finish(args, meta, t0, compile_study=study, compile_markdown=markdown)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; returns the process exit code."""
    args = _parse(argv)
    t0 = time.monotonic()
    meta = _meta(args, argv, time.time())
    if args.compile:
        return _run_compile(args, meta, t0)
    try:
        backends = backends_mod.discover(_split(args.backends))
        if args.tree:
            from .usertree import load_workload

            workloads = [load_workload(args.tree)]
            expected = torch_leaves(backends)
        else:
            workloads = workloads_mod.get_workloads(_split(args.workloads))
            expected = workloads_mod.expected_leaves
        ops = _split(args.ops) or list(backends_mod.OPS)
        bad = [op for op in ops if op not in backends_mod.OPS]
        if bad:
            raise KeyError(f"unknown op(s): {', '.join(bad)}; known: {', '.join(backends_mod.OPS)}")
    except KeyError as exc:
        print(f"cpytree-harness: {exc.args[0]}", file=sys.stderr)
        return 2
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        print(f"cpytree-harness: --tree {args.tree}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print(_list(backends))
        return 0

    rounds, warmup, target = _QUICK if args.quick else _DEFAULT
    rounds = args.rounds or rounds
    target = args.target_ms / 1e3 if args.target_ms else target
    meta["machine"] = machine_info()
    meta["settings"] = {"rounds": rounds, "warmup_rounds": warmup, "target_ms": target * 1e3}
    print(f"cpytree-harness: {_machine_line(meta['machine'])}")
    print(
        f"{rounds} rounds (+{warmup} warm-up) of every cell, ~{target * 1e3:g} ms per "
        "sample, cells interleaved; backends:"
    )
    print("\n".join(_backend_lines(backends)), flush=True)

    phases = meta["phases_s"]
    phases["setup"] = time.monotonic() - t0
    t1 = time.monotonic()
    res: OpResults = plan_ops(workloads, backends, ops, expected)
    phases["plan"] = time.monotonic() - t1
    enabled = False if args.no_progress else None
    progress = ProgressBar(
        total_steps(len(res.cells), rounds, warmup), prefix="ops: ", enabled=enabled
    )
    sc: ScalingResults | None = None
    try:
        t1 = time.monotonic()
        run_cells(res.cells, rounds=rounds, target=target, warmup_rounds=warmup, progress=progress)
        phases["ops"] = time.monotonic() - t1
        progress.close()
        t1 = time.monotonic()
        if not (args.no_scaling or args.tree):
            sizes, s_rounds, budget, min_rounds = _SCALING_QUICK if args.quick else _SCALING
            if args.scaling_max:
                sizes = tuple(n for n in scaling_mod.SIZES if n <= args.scaling_max)
            max_call = args.scaling_max_call or None
            plan = scaling_mod.plan(backends, sizes, max_call=max_call)
            progress = ProgressBar(
                scaling_mod.steps(len(plan[0]), s_rounds), prefix="scaling: ", enabled=enabled
            )
            sc = scaling_mod.run_scaling(
                backends,
                sizes,
                rounds=s_rounds,
                budget=budget,
                min_rounds=min_rounds,
                max_call=max_call,
                progress=progress,
                cells_plan=plan,
            )
            meta["settings"]["scaling"] = {
                "op": sc.op,
                "sizes": list(sizes),
                "rounds": s_rounds,
                "budget_s": budget,
                "min_rounds": min_rounds,
                "max_call_s": max_call,
            }
            phases["scaling"] = time.monotonic() - t1
    finally:
        progress.close()

    print(tables.terminal_op_tables(res))
    print()
    print(tables.terminal_summary(res))
    notes = tables.markdown_notes(res).replace("`", "")
    if notes:
        print()
        print(notes)
    if sc is not None:
        print()
        print(tables.terminal_scaling(sc))
    print(f"{len(res.cells)} op cells timed")
    return _finish(args, meta, t0, backends=backends, ops=res, scaling=sc)
