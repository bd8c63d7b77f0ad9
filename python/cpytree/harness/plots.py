"""PNG plots of a run, drawn with matplotlib (Agg) when it is installed.

* `summary.png`: geometric-mean ratio to cpytree per op and backend;
* `op-<op>.png`: per op, median time per call per workload and backend
  (log scale; whiskers are the fastest and slowest round);
* `scaling.png`: cost per node from 10 to 1,000,000 nodes, wide and deep;
* `compile.png`: torch.compile time per model with and without
  `cpytree.install()`, split into Dynamo's phases, and the profiled time
  spent inside pytree functions;
* `pytree-subsystems.png`: that pytree time split by the torch subsystem
  that called it (Dynamo, AOTAutograd, FakeTensor/proxy, export, inductor,
  other), stacked, torch and install() side by side per model;
* `runtime.png`: CPU time per call of the eager paths of `--runtime`, with
  and without install().

`available()` says whether matplotlib imports; every function returns the
file names it wrote.

Usage:

    if plots.available():
        files = plots.op_plots(results, out_dir)
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from .ops.results import OpResults, ScalingResults

__all__ = [
    "available",
    "compile_plot",
    "op_plots",
    "runtime_plot",
    "scaling_plot",
    "subsystem_plot",
    "why_missing",
]

_PLT: Any = None
_WHY = ""


def available() -> bool:
    """Whether matplotlib can be imported (with the file-only Agg backend)."""
    global _PLT, _WHY
    if _PLT is not None:
        return True
    try:
        mpl = importlib.import_module("matplotlib")
        mpl.use("Agg")
        _PLT = importlib.import_module("matplotlib.pyplot")
    except Exception as exc:  # noqa: BLE001 - any failure means "no plots"
        _WHY = f"{type(exc).__name__}: {exc}"
        return False
    return True


def why_missing() -> str:
    return _WHY


def _save(fig: Any, out: Path, name: str, bottom: float = 0.12, left: float = 0.07) -> str:
    # Fixed margins: tight_layout costs a third of the drawing time.
    fig.subplots_adjust(left=left, right=0.98, top=0.92, bottom=bottom, wspace=0.25)
    fig.savefig(out / name, dpi=100)
    _PLT.close(fig)
    return name


def _grouped(ax: Any, groups: list[str], series: dict[str, list[float | None]]) -> None:
    n = max(len(series), 1)
    width = 0.8 / n
    for i, (label, vals) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        pts = [(x, v) for x, v in zip(xs, vals, strict=True) if v is not None]
        if pts:
            ax.bar([p[0] for p in pts], [p[1] for p in pts], width, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=35, ha="right", fontsize=8)


def op_plots(res: OpResults, out: Path) -> list[str]:
    """summary.png and one op-<op>.png per op."""
    files = []
    others = [b.name for b in res.shown if b.name != res.baseline]
    if others:
        fig, ax = _PLT.subplots(figsize=(10, 4.5))
        series = {b: [res.geomean_ratio(b, op) for op in res.ops] for b in others}
        _grouped(ax, list(res.ops), series)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(f"time / {res.baseline} time (geomean over workloads)")
        ax.set_title(f"Each op across backends, relative to {res.baseline} (above 1: slower)")
        ax.legend(fontsize=8, ncol=3)
        files.append(_save(fig, out, "summary.png", bottom=0.2))
    names = [b.name for b in res.shown]
    for op in res.ops:
        fig, ax = _PLT.subplots(figsize=(11, 4.8))
        n = max(len(names), 1)
        width = 0.8 / n
        labels = [w.name for w in res.workloads]
        for i, b in enumerate(names):
            xs, ys, lo, hi = [], [], [], []
            for g, w in enumerate(res.workloads):
                cell = res.cell(w.name, b, op)
                if cell is None:
                    continue
                xs.append(g + (i - (n - 1) / 2) * width)
                ys.append(cell.median * 1e6)
                lo.append((cell.median - cell.low) * 1e6)
                hi.append((cell.high - cell.median) * 1e6)
            if xs:
                ax.bar(xs, ys, width, label=b, yerr=[lo, hi], error_kw={"elinewidth": 0.6})
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("median us per call (log)")
        ax.set_title(f"{op}: time per call by workload and backend")
        ax.legend(fontsize=8, ncol=4)
        files.append(_save(fig, out, f"op-{op}.png", bottom=0.25))
    return files


def scaling_plot(sc: ScalingResults, out: Path) -> list[str]:
    shapes = list(sc.shapes)
    fig, axes = _PLT.subplots(1, len(shapes), figsize=(11, 4.5), sharey=True, squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        for b in sc.backends:
            pts = sc.series(shape, b)
            if pts:
                ax.plot(
                    [n for n, _ in pts],
                    [sc.per_node(c) * 1e9 for _, c in pts],
                    marker="o",
                    markersize=3,
                    label=b,
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_title(f"{shape}: {sc.shapes[shape].split(' (')[0]}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(f"{sc.op}: median ns per node (log)")
    axes[0][-1].legend(fontsize=8)
    return [_save(fig, out, "scaling.png")]


_PHASES = (
    ("dynamo_tracing_s", "Dynamo bytecode tracing"),
    ("backend_compile_s", "backend compiler (AOT + codegen)"),
    ("guards_s", "guards"),
    ("other_s", "rest of the first call"),
)


def compile_plot(study: dict[str, Any], out: Path) -> list[str]:
    summary = study.get("summary", [])
    if not summary:
        return []
    labels = [f"{row['model']}\n{row['mode']}" for row in summary]
    fig, (ax1, ax2) = _PLT.subplots(1, 2, figsize=(12, 4.8))
    bottom = [0.0] * len(summary)
    for key, label in _PHASES:
        vals = [row["phases"].get(key, 0.0) for row in summary]
        ax1.bar(range(len(summary)), vals, 0.6, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax1.set_xticks(range(len(summary)))
    ax1.set_xticklabels(labels, fontsize=7)
    ax1.set_ylabel("seconds (median over repetitions)")
    ax1.set_title(f"torch.compile first call, backend={study.get('backend')}", fontsize=10)
    ax1.legend(fontsize=7)
    pytree = [row.get("pytree_ms") or 0.0 for row in summary]
    colors = ["tab:gray" if row["mode"] == "torch" else "tab:green" for row in summary]
    ax2.bar(range(len(summary)), pytree, 0.6, color=colors)
    ax2.set_xticks(range(len(summary)))
    ax2.set_xticklabels(labels, fontsize=7)
    ax2.set_ylabel("ms inside pytree functions (cProfile self time)")
    ax2.set_title("pytree time during the compile (gray: torch, green: install())", fontsize=10)
    return [_save(fig, out, "compile.png", bottom=0.15)]


def subsystem_plot(study: dict[str, Any], out: Path) -> list[str]:
    """Stacked bars: profiled pytree ms per calling subsystem, torch vs cpytree."""
    rows = [r for r in study.get("summary", []) if r.get("subsystems_ms")]
    if not rows:
        return []
    names = list(rows[0]["subsystems_ms"])
    labels = [f"{r['model'].rpartition(':')[2]}\n{r['mode']}" for r in rows]
    fig, ax = _PLT.subplots(figsize=(max(6.0, 1.1 * len(rows) + 3), 4.8))
    bottom = [0.0] * len(rows)
    for name in names:
        vals = [r["subsystems_ms"].get(name, 0.0) for r in rows]
        ax.bar(range(len(rows)), vals, 0.6, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("ms inside pytree functions (profiled compile)")
    ax.set_title("pytree time during the compile by calling subsystem", fontsize=10)
    ax.legend(fontsize=7)
    return [_save(fig, out, "pytree-subsystems.png", bottom=0.15, left=0.1)]


def runtime_plot(study: dict[str, Any], out: Path) -> list[str]:
    """Grouped bars: CPU us per call of each runtime case, torch vs install()."""
    rows = [r for r in study.get("rows", []) if r.get("torch_us") and r.get("cpytree_us")]
    if not rows:
        return []
    fig, ax = _PLT.subplots(figsize=(8, 4.5))
    series: dict[str, list[float | None]] = {
        "torch": [r["torch_us"] for r in rows],
        "cpytree.install()": [r["cpytree_us"] for r in rows],
    }
    _grouped(ax, [f"{r['case']} ({r['speedup']:.2f}x)" for r in rows], series)
    ax.set_ylabel("CPU us per call (median)")
    ax.set_title("Eager torch paths that call pytree", fontsize=10)
    ax.legend(fontsize=8)
    return [_save(fig, out, "runtime.png", bottom=0.25, left=0.1)]
