"""`cpytree-harness` / `python -m cpytree.harness`: time every pytree op on
every workload for every backend in one process and print a table.

Each number is the median time per call in microseconds; beside it, the ratio
to cpytree (time / cpytree's time: above 1 means cpytree is faster). Cells
whose answer differs from torch semantics (e.g. jax drops None leaves, dm-tree
sorts keys) are marked `*` and listed below the tables.

Usage:

    python -m cpytree.harness --quick
    python -m cpytree.harness --workloads resnet50,tiny-call --backends cpytree,torch,optree
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

from . import backends as backends_mod
from . import workloads as workloads_mod
from .progress import ProgressBar
from .timing import Cell, run_cells

__all__ = ["main"]

# Rounds kept, warm-up rounds, target seconds per sample.
_DEFAULT = (20, 1, 1.5e-3)
_QUICK = (5, 1, 2e-4)


def _identity(x: Any) -> Any:
    """The function mapped: a Python function, as PT2's tree_map callers pass."""
    return x


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="cpytree-harness",
        description="Time pytree flatten/leaves/unflatten/map on PT2-shaped trees across backends.",
    )
    p.add_argument(
        "--quick", action="store_true", help="few short rounds (for tests and smoke runs)"
    )
    p.add_argument(
        "--workloads", metavar="NAME,...", help="workloads to run (default: all; see --list)"
    )
    p.add_argument(
        "--backends", metavar="NAME,...", help="backends to run (default: all installed)"
    )
    p.add_argument(
        "--ops", metavar="OP,...", help=f"ops to run (default: {','.join(backends_mod.OPS)})"
    )
    p.add_argument(
        "--rounds", type=int, metavar="N", help="timed rounds per cell (median over them)"
    )
    p.add_argument(
        "--target-ms", type=float, metavar="MS", help="duration of one sample (inner loop)"
    )
    p.add_argument("--json", metavar="PATH", help="also write every result as JSON to PATH")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--list", action="store_true", help="list workloads and backends, then exit")
    return p.parse_args(argv)


def _fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    if us < 10:
        return f"{us:.2f}"
    if us < 1000:
        return f"{us:.1f}"
    return f"{us:.0f}"


def _fmt_ratio(r: float) -> str:
    if r < 10:
        return f"{r:.2f}x"
    if r < 100:
        return f"{r:.1f}x"
    return f"{r:.0f}x"


def _check(backend: backends_mod.Backend, tree: Any, expected: list[Any]) -> str:
    """'' if the backend's leaves are torch's, else how they differ."""
    got = backend.leaves(tree)
    if len(got) != len(expected):
        return f"{len(got)} leaves, torch semantics give {len(expected)}"
    if any(a is not b for a, b in zip(got, expected, strict=True)):
        return "leaves in another order than torch's"
    return ""


def _build_cells(
    workloads: list[workloads_mod.Workload],
    backends: list[backends_mod.Backend],
    ops: list[str],
) -> tuple[list[Cell], dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Cells to time, plus notes on semantic differences and on errors."""
    cells: list[Cell] = []
    differs: dict[tuple[str, str], str] = {}
    errors: dict[tuple[str, str], str] = {}
    for w in workloads:
        tree = w.build()
        expected = workloads_mod.expected_leaves(tree)
        for b in backends:
            ok, _ = b.supports(w)
            if not ok:
                continue
            try:
                diff = _check(b, tree, expected)
                staged = [(op, b.call(op, tree, _identity)) for op in ops]
                for _, (fn, args, kwargs) in staged:
                    fn(*args, **kwargs)  # it must run before it is timed
            except Exception as exc:  # noqa: BLE001 - reported in the table
                errors[(w.name, b.name)] = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
                continue
            if diff:
                differs[(w.name, b.name)] = diff
            for op, (fn, args, kwargs) in staged:
                cells.append(Cell(w.name, b.name, op, fn, args, kwargs))
    return cells, differs, errors


def _baseline(backends: list[backends_mod.Backend]) -> str | None:
    for b in backends:
        if b.available:
            return b.name
    return None


def _render(
    workloads: list[workloads_mod.Workload],
    backends: list[backends_mod.Backend],
    ops: list[str],
    cells: list[Cell],
    differs: dict[tuple[str, str], str],
    errors: dict[tuple[str, str], str],
) -> str:
    base = _baseline(backends)
    shown = [b for b in backends if b.available]
    med = {(c.workload, c.backend, c.op): c.median for c in cells}
    name_w = max([len("geomean ratio")] + [len(w.name) for w in workloads])
    # Each cell is "time ratio" plus one marker column ("*" or blank).
    width = {b.name: max(len(b.name), 8 if b.name == base else 13) + 1 for b in shown}
    lines: list[str] = []
    for op in ops:
        lines.append("")
        lines.append(f"{op}: median us per call, (ratio = time / {base} time)")
        header = f"{'workload':<{name_w}} {'nodes':>6} " + " ".join(
            f"{b.name:>{width[b.name] - 1}} " for b in shown
        )
        lines.append(header.rstrip())
        lines.append("-" * len(header.rstrip()))
        ratios: dict[str, list[float]] = {b.name: [] for b in shown}
        for w in workloads:
            base_t = med.get((w.name, base, op)) if base else None
            texts = []
            for b in shown:
                t = med.get((w.name, b.name, op))
                mark = " "
                if (w.name, b.name) in errors:
                    text = "ERR"
                elif t is None:
                    text = "-"
                else:
                    text = _fmt_us(t)
                    if base_t and b.name != base:
                        ratios[b.name].append(t / base_t)
                        text += f" {_fmt_ratio(t / base_t):>6}"
                    if (w.name, b.name) in differs:
                        mark = "*"
                texts.append(f"{text:>{width[b.name] - 1}}{mark}")
            lines.append((f"{w.name:<{name_w}} {w.nodes:>6} " + " ".join(texts)).rstrip())
        geo = []
        for b in shown:
            rs = ratios[b.name]
            text = _fmt_ratio(math.exp(sum(map(math.log, rs)) / len(rs))) if rs else ""
            geo.append(f"{text:>{width[b.name] - 1}} ")
        lines.append((f"{'geomean ratio':<{name_w}} {'':>6} " + " ".join(geo)).rstrip())
    notes = []
    if differs:
        notes.append("* answer differs from torch semantics (timed anyway):")
        notes += [f"    {b} on {w}: {why}" for (w, b), why in differs.items()]
    if errors:
        notes.append("ERR backend failed on the workload (not timed):")
        notes += [f"    {b} on {w}: {why}" for (w, b), why in errors.items()]
    notes.append("- not applicable (floor: list/tuple/dict only; dm-tree: no custom nodes)")
    return "\n".join(lines + [""] + notes)


def _header(backends: list[backends_mod.Backend], rounds: int, warmup: int, target: float) -> str:
    lines = [
        f"cpytree-harness: python {platform.python_version()} on {platform.machine()}, "
        f"{rounds} rounds (+{warmup} warm-up), ~{target * 1e3:g} ms per sample, interleaved",
    ]
    for b in backends:
        if b.available:
            lines.append(f"  {b.name:<18} {b.note}".rstrip())
        else:
            lines.append(f"  {b.name:<18} MISSING ({b.reason})")
    return "\n".join(lines)


def _list(backends: list[backends_mod.Backend]) -> str:
    out = ["workloads:"]
    for w in workloads_mod.default_workloads():
        kind = "builtin" if w.builtin_only else ("custom" if w.custom_nodes else "")
        out.append(f"  {w.name:<22} {w.nodes:>5} nodes  {kind:<8} {w.description}")
    out.append("backends:")
    for b in backends:
        state = b.note if b.available else f"MISSING ({b.reason})"
        out.append(f"  {b.name:<18} {state}")
    return "\n".join(out)


def _write_json(
    path: str,
    meta: dict[str, Any],
    backends: list[backends_mod.Backend],
    workloads: list[workloads_mod.Workload],
    cells: list[Cell],
    differs: dict[tuple[str, str], str],
    errors: dict[tuple[str, str], str],
) -> None:
    doc = {
        "meta": meta,
        "backends": [
            {"name": b.name, "available": b.available, "reason": b.reason, "note": b.note}
            for b in backends
        ],
        "workloads": [
            {"name": w.name, "nodes": w.nodes, "builtin_only": w.builtin_only} for w in workloads
        ],
        "results": [
            {
                "workload": c.workload,
                "backend": c.backend,
                "op": c.op,
                "median_us": c.median * 1e6,
                "best_us": c.best * 1e6,
                "number": c.number,
                "samples_us": [s * 1e6 for s in c.samples],
                "differs": differs.get((c.workload, c.backend), ""),
            }
            for c in cells
        ],
        "errors": [{"workload": w, "backend": b, "error": e} for (w, b), e in errors.items()],
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; returns the process exit code."""
    args = _parse(argv)
    try:
        workloads = workloads_mod.get_workloads(_split(args.workloads))
        backend_names = _split(args.backends)
        backends = backends_mod.discover(backend_names)
        ops = _split(args.ops) or list(backends_mod.OPS)
        bad_ops = [op for op in ops if op not in backends_mod.OPS]
        if bad_ops:
            raise KeyError(
                f"unknown op(s): {', '.join(bad_ops)}; known: {', '.join(backends_mod.OPS)}"
            )
    except KeyError as exc:
        print(f"cpytree-harness: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.list:
        print(_list(backends))
        return 0

    rounds, warmup, target = _QUICK if args.quick else _DEFAULT
    rounds = args.rounds or rounds
    target = args.target_ms / 1e3 if args.target_ms else target
    print(_header(backends, rounds, warmup, target), flush=True)

    started = time.monotonic()
    cells, differs, errors = _build_cells(workloads, backends, ops)
    progress = ProgressBar(
        len(cells) * (1 + warmup + rounds), enabled=False if args.no_progress else None
    )
    try:
        run_cells(cells, rounds=rounds, target=target, warmup_rounds=warmup, progress=progress)
    finally:
        progress.close()
    elapsed = time.monotonic() - started

    print(_render(workloads, backends, ops, cells, differs, errors))
    print(f"{len(cells)} cells timed in {elapsed:.1f} s")
    if args.json:
        meta = {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "rounds": rounds,
            "warmup_rounds": warmup,
            "target_s": target,
            "elapsed_s": elapsed,
            "baseline": _baseline(backends),
        }
        _write_json(args.json, meta, backends, workloads, cells, differs, errors)
    return 0
