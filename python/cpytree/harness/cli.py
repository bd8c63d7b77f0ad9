"""`cpytree-harness` / `python -m cpytree.harness`: what pytree work costs.

Five modes, each printing tables and writing a report directory (`--out`,
default `harness-report/`: report.md, results.json, PNG plots):

* default: every op on every embedded workload for every installed backend,
  side by side in one process, then the scaling curve (cost per node from 10
  to 1,000,000 nodes); needs nothing beyond cpytree;
* `--tree module:callable`: the same op tables on the user's own pytree (or
  the state dict of the nn.Module the callable returns);
* `--compile`: torch.compile of a small torch.nn model zoo, each model in
  fresh processes with and without `cpytree.install()`; then the Dynamo
  suite (`dynamo_study`: bytecodes, guards, graphs of compiled functions
  calling pytree, at 10/100/1,000 leaves, 10/100 with --quick) and the
  runtime section;
* `--compile --model module:callable`: the same for the user's model or
  function (the callable returns it and its example inputs): compile time,
  Dynamo's bytecodes and guards, graph breaks, outputs, the compiled call's
  time and the pytree time of the compile by calling torch subsystem (no
  zoo, suite or runtime section); `--compile-counts` adds the
  instructions of one whole process per mode (callgrind, by phase: import,
  cpytree's install and Dynamo layer, Dynamo, AOTAutograd, Inductor;
  `compile_count`), a column and a table of the report;
* `--compile` with `--compile-modes torch,cpytree-attrs,cpytree` and/or
  `--backward`: the same study comparing install() with and without the
  rebinding of torch modules' import-time names, timing the first call
  and its backward (`--models block,stack`: a transformer block and a
  stack of six, beside the zoo); `--compile --warm`: warm compiles in one
  process, modes interleaved (`compile_warm`); `--compile --replay
  [--cold]`: one compile's pytree calls recorded and replayed with torch's
  and cpytree's functions (`compile_replay`); the last two run only that
  measurement (default model: block);
* `--runtime`: eager torch paths that call pytree (export's module,
  torch.func, checkpoint, a compiled module's call, transformers generate,
  DTensor dispatch and an FSDP2 step on 2 gloo ranks of 127.0.0.1), per
  call, with and without install(), each time beside deterministic pytree
  call counts and the pytree share of the profile (`runtime_bench`);
  `--runtime-modes torch,cpytree,autoload` adds what a user gets with no
  code change (as `--compile-modes ...,autoload` does for `--compile`).

Each number of the op tables is the median time per call in microseconds;
beside it, the ratio to cpytree (time / cpytree's time: above 1 means cpytree
is faster). See `tables` for the markers.

Usage:

    cpytree-harness                     # the default run (under two minutes)
    cpytree-harness --quick --out /tmp/r
    cpytree-harness --workloads resnet50,tiny-call --backends cpytree,torch,optree
    cpytree-harness --tree mypkg.models:make_model
    cpytree-harness --compile --models mlp,nested-io --compile-reps 3
    cpytree-harness --compile --model path/to/mymodel.py:make --quick
    cpytree-harness --compile --models pytree-blocks --compile-modes torch,autoload \
        --no-dynamo --no-runtime --compile-reps 7 --compile-counts
    cpytree-harness --compile --models block --compile-backend aot_eager --backward \
        --compile-modes torch,cpytree-attrs,cpytree --compile-reps 7 --no-dynamo --no-runtime
    cpytree-harness --compile --warm --compile-backend aot_eager --compile-reps 7
    cpytree-harness --compile --replay --cold --models block,stack --compile-backend aot_eager
    cpytree-harness --runtime
    cpytree-harness --runtime --runtime-cases dtensor-ops,fsdp2-step
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .ops import (
    backends as backends_mod,
    scaling as scaling_mod,
    tables,
    workloads as workloads_mod,
)
from .ops.optable import plan_ops, torch_leaves
from .ops.results import OpResults, ScalingResults, machine_info
from .ops.timing import run_cells, total_steps
from .progress import ProgressBar
from .report import write_report

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
    p.add_argument(
        "--model",
        metavar="MODULE:CALLABLE",
        help="--compile: your model; the callable returns (model or function, example inputs)",
    )
    p.add_argument("--no-dynamo", action="store_true", help="--compile: no Dynamo suite")
    p.add_argument(
        "--runtime",
        action="store_true",
        help="eager torch paths that call pytree (export, torch.func, checkpoint, compiled "
        "call, generate, DTensor, FSDP2); also a section of --compile",
    )
    p.add_argument(
        "--runtime-cases", metavar="NAME,...", help="--runtime: cases (default all; --list)"
    )
    p.add_argument(
        "--runtime-modes",
        metavar="MODE,...",
        help="--runtime: torch,cpytree (the default), or torch,cpytree,autoload: also what a "
        "user gets with no code change (install() by the entry point at import torch)",
    )
    p.add_argument("--no-runtime", action="store_true", help="--compile: no runtime section")
    p.add_argument("--compile-reps", type=int, metavar="N", help="--compile: runs per mode")
    p.add_argument(
        "--compile-backend", default="inductor", metavar="NAME", help="--compile: backend"
    )
    p.add_argument(
        "--compile-modes",
        metavar="MODE,...",
        help="--compile: modes compared, the first the base (default torch,cpytree; "
        "also cpytree-attrs: install(rebind_imports=False); autoload: no code change, "
        "install() by the entry point at import torch)",
    )
    p.add_argument(
        "--backward", action="store_true", help="--compile: time the first call and its backward"
    )
    p.add_argument(
        "--compile-counts",
        action="store_true",
        help="--compile: also count the instructions of one whole process per model and mode "
        "(callgrind, by phase: import, cpytree's install, Dynamo, AOTAutograd, Inductor; "
        "minutes per run)",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="--compile: warm compiles (forward+backward) in one process, modes interleaved",
    )
    p.add_argument(
        "--replay",
        action="store_true",
        help="--compile: replay one compile's pytree calls with torch's and cpytree's functions",
    )
    p.add_argument(
        "--cold", action="store_true", help="--replay: record the first compile of the process"
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
    from .studies.compile_bench import EXTRA_MODELS, MODELS

    out.append("--compile models:")
    out += [f"  {name:<12} {what}" for name, what in MODELS.items()]
    out += [f"  {name:<12} {what} (when named)" for name, what in EXTRA_MODELS.items()]
    from .studies.runtime_bench import CASES

    out.append("--runtime cases:")
    out += [f"  {name:<17} {what}" for name, what in CASES.items()]
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


def _dynamo(cases: list[str] | None, sizes: tuple[int, ...]) -> tuple[dict[str, Any], str, str]:
    """The Dynamo suite (or the given cases): (results, terminal text, Markdown)."""
    from .studies import dynamo_study

    what = ", ".join(cases) if cases else f"the suite at {'/'.join(map(str, sizes))} leaves"
    print(f"Dynamo: {what}, with and without install()...", file=sys.stderr, flush=True)
    try:
        study = dynamo_study.run(cases=cases, sizes=sizes)
    except RuntimeError as exc:
        error = f"{type(exc).__name__}: {exc}"
        return (
            {"error": error},
            f"Dynamo suite: ERROR {error}",
            f"## Dynamo suite\n\nERROR: {error}\n",
        )
    return study, dynamo_study.terminal(study), dynamo_study.markdown(study)


def _runtime(args: argparse.Namespace) -> tuple[dict[str, Any], str, str]:
    from .studies import runtime_bench

    study = runtime_bench.run(
        cases=_split(args.runtime_cases),
        reps=1 if args.quick else 3,
        quick=args.quick,
        progress=not args.no_progress,
        modes=tuple(_split(args.runtime_modes) or ("torch", "cpytree")),
    )
    return study, runtime_bench.terminal(study), runtime_bench.markdown(study)


def _in_process(
    args: argparse.Namespace, models: list[str], modes: tuple[str, ...]
) -> tuple[dict[str, Any], str, str]:
    """--warm or --replay: (results, terminal text, Markdown)."""
    if args.warm:
        from .studies import compile_warm

        reps = args.compile_reps or (2 if args.quick else 7)
        study = compile_warm.run(models, args.compile_backend, reps, modes)
        return study, compile_warm.terminal(study), compile_warm.markdown(study)
    from .studies import compile_replay

    study = compile_replay.run(models, args.compile_backend, cold=args.cold)
    return study, compile_replay.terminal(study), compile_replay.markdown(study)


def _run_compile(args: argparse.Namespace, meta: dict[str, Any], t0: float) -> int:
    from .studies import compile_bench
    from .studies.modes import MODES, Unavailable, check_available

    phases = meta["phases_s"]
    report: dict[str, Any] = {}
    in_process = args.warm or args.replay
    try:
        if args.runtime_cases:  # names before torch: a typo is reported either way
            from .studies.runtime_bench import check_case_names

            check_case_names(_split(args.runtime_cases))
        models = [args.model] if args.model else _split(args.models)
        modes = tuple(_split(args.compile_modes) or MODES)
        if args.compile:
            compile_bench.check_names(models or [], modes)
        if in_process and "autoload" in modes:
            raise Unavailable(
                "the autoload mode needs a fresh `import torch` per run; "
                "--warm and --replay switch modes inside one process"
            )
        check_available()
        if args.compile and in_process:
            t1 = time.monotonic()
            study, terminal, markdown = _in_process(args, models or ["block"], modes)
            print(terminal, flush=True)
            report.update(compile_study=study, compile_markdown=markdown)
            phases["compile"] = time.monotonic() - t1
        elif args.compile:
            t1 = time.monotonic()
            study, terminal, markdown = compile_bench.run(
                models=models,
                reps=args.compile_reps,
                backend=args.compile_backend,
                quick=args.quick,
                progress=not args.no_progress,
                modes=modes,
                backward=args.backward,
                counts=args.compile_counts,
            )
            meta["settings"] = study["settings"]
            print(terminal, flush=True)
            report.update(compile_study=study, compile_markdown=markdown)
            phases["compile"] = time.monotonic() - t1
            if not args.no_dynamo:
                t1 = time.monotonic()
                sizes = (10, 100) if args.quick else (10, 100, 1000)
                dyn, terminal, markdown = _dynamo([args.model] if args.model else None, sizes)
                print()
                print(terminal, flush=True)
                report.update(dynamo=dyn, dynamo_markdown=markdown)
                phases["dynamo"] = time.monotonic() - t1
        if args.runtime or (args.compile and not (args.model or args.no_runtime or in_process)):
            t1 = time.monotonic()
            rt, terminal, markdown = _runtime(args)
            print()
            print(terminal, flush=True)
            report.update(runtime=rt, runtime_markdown=markdown)
            phases["runtime"] = time.monotonic() - t1
    except Unavailable as exc:
        print(
            f"cpytree-harness --{'compile' if args.compile else 'runtime'}: {exc}", file=sys.stderr
        )
        return 2
    except KeyError as exc:  # an unknown --runtime-cases name
        print(f"cpytree-harness: {exc.args[0]}", file=sys.stderr)
        return 2
    meta["machine"] = machine_info()  # torch's version, now that it is imported
    return _finish(args, meta, t0, **report)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; returns the process exit code."""
    # The in-process "torch" backend must be torch's own Python pytree: an
    # installed cpytree's autoload would swap it at `import torch`. Off for this
    # process before anything imports torch; each study's children choose their
    # own (child.child_env: off, except in the "autoload" mode).
    os.environ["CPYTREE_INSTALL"] = "0"
    args = _parse(argv)
    t0 = time.monotonic()
    meta = _meta(args, argv, time.time())
    if args.model and not args.compile:
        print("cpytree-harness: --model goes with --compile", file=sys.stderr)
        return 2
    compile_only = [
        f"--{name.replace('_', '-')}"
        for name in ("compile_modes", "backward", "warm", "replay")
        if getattr(args, name)
    ]
    if compile_only and not args.compile:
        print(f"cpytree-harness: {', '.join(compile_only)} goes with --compile", file=sys.stderr)
        return 2
    if args.warm and args.replay:
        print("cpytree-harness: --warm or --replay, not both", file=sys.stderr)
        return 2
    if args.cold and not args.replay:
        print("cpytree-harness: --cold goes with --replay", file=sys.stderr)
        return 2
    if args.model and ":" not in args.model:
        print(
            f"cpytree-harness: --model wants module:callable, got {args.model!r}", file=sys.stderr
        )
        return 2
    if args.compile or args.runtime:
        return _run_compile(args, meta, t0)
    try:
        backends = backends_mod.discover(_split(args.backends))
        if args.tree:
            from .ops.usertree import load_workload

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
    closest = tables.terminal_closest(res)
    if closest:
        print()
        print(closest)
    notes = tables.markdown_notes(res).replace("`", "")
    if notes:
        print()
        print(notes)
    if sc is not None:
        print()
        print(tables.terminal_scaling(sc))
    print(f"{len(res.cells)} op cells timed")
    return _finish(args, meta, t0, backends=backends, ops=res, scaling=sc)
