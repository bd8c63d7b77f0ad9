"""The report directory: `report.md`, `results.json` and PNG plots.

`write_report` takes whatever the run measured (op tables, scaling curve,
compile study; any may be absent) and the run's metadata (machine, versions,
settings, command line). `results.json` holds every sample; `report.md` the
tables with medians, fastest/slowest rounds and ratios; the plots are drawn
when matplotlib is installed, and a notice says so when it is not.

Usage:

    files = write_report(Path("harness-report"), meta, ops=res, scaling=sc)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import plots
from .ops import tables
from .ops.backends import Backend
from .ops.results import OpResults, ScalingResults

__all__ = ["write_report"]


def _machine_md(meta: dict[str, Any]) -> str:
    m = meta["machine"]
    rows = [
        ["CPU", f"{m['cpu']} ({m['cpu_count']} logical cores)"],
        ["load average at start", " / ".join(str(x) for x in m.get("load_average", []))],
        ["platform", m["platform"]],
        ["python", m["python"]],
    ]
    engine = m.get("cpytree_engine")
    commit = m.get("cpytree_commit")
    for name, version in m["versions"].items():
        text = version
        if name == "cpytree":
            text += f" ({'C++ engine' if engine == 'cpp' else 'pure-Python fallback'})"
            if commit:
                text += f", commit {commit}"
        rows.append([name, text])
    out = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(out)


def _method_md(meta: dict[str, Any]) -> str:
    s = meta["settings"]
    lines = [
        (
            f"- Every cell (workload, backend, op) is one call timed in an inner loop "
            f"calibrated to about {s['target_ms']:g} ms per sample; {s['rounds']} timed rounds "
            f"after {s['warmup_rounds']} warm-up round(s), all cells in a new random order "
            "each round (interleaved across backends), garbage collector off while timing."
        ),
        (
            "- A cell shows the median time per call in microseconds, [fastest-slowest "
            "round], and the ratio time / cpytree's time (above 1: cpytree is faster)."
        ),
        (
            "- The n-ary map, flatten against a spec and spec equality use a second, "
            "separately built tree of the same structure (the *twin*)."
        ),
        (
            "- cpytree interns specs: two specs of one structure are one object, so its "
            "spec equality is a pointer comparison; the peers compare node by node."
        ),
        (
            "- loads is timed without caches: torch's and cpytree's `treespec_loads` are "
            "`functools.lru_cache`d on the input string, so the function they wrap "
            "(`treespec_loads.__wrapped__`) is what runs."
        ),
    ]
    if "scaling" in s:
        sc = s["scaling"]
        lines.append(
            f"- Scaling: {sc['op']} on trees of {', '.join(f'{n:,}' for n in sc['sizes'])} "
            f"nodes, {sc['rounds']} rounds; a call longer than the sample target is "
            f"timed once per sample in as many rounds as fit in {sc['budget_s']:g} s "
            f"(at least {sc['min_rounds']}); the count of samples is in parentheses."
        )
    return "\n".join(lines)


def _backends_md(backends: list[Backend]) -> str:
    rows = ["| backend | state |", "|---|---|"]
    for b in backends:
        state = b.note if b.available else f"**missing**: {b.reason}"
        rows.append(f"| {b.name} | {state} |")
    return "\n".join(rows)


def _backends_json(backends: list[Backend]) -> list[dict[str, Any]]:
    return [
        {
            "name": b.name,
            "available": b.available,
            "reason": b.reason,
            "note": b.note,
            "version": b.version,
            "ops": sorted(b.ops),
            "equivalents": b.equivalents,
        }
        for b in backends
    ]


def write_report(
    out: Path,
    meta: dict[str, Any],
    backends: list[Backend] | None = None,
    ops: OpResults | None = None,
    scaling: ScalingResults | None = None,
    compile_study: dict[str, Any] | None = None,
    compile_markdown: str = "",
    make_plots: bool = True,
    dynamo: dict[str, Any] | None = None,
    dynamo_markdown: str = "",
    runtime: dict[str, Any] | None = None,
    runtime_markdown: str = "",
) -> tuple[list[str], str]:
    """Write the report into `out`; returns (files written, plot notice or '').

    `dynamo` and `runtime` are the Dynamo suite (`dynamo_study.run`) and the
    runtime study (`runtime_bench.run`), stored under those keys of
    results.json, with their Markdown sections."""
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"meta": meta}
    if backends is not None:
        doc["backends"] = _backends_json(backends)
    if ops is not None:
        doc["op_tables"] = ops.to_json()
    if scaling is not None:
        doc["scaling"] = scaling.to_json()
    if compile_study is not None:
        doc["compile"] = compile_study
    if dynamo is not None:
        doc["dynamo"] = dynamo
    if runtime is not None:
        doc["runtime"] = runtime
    (out / "results.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")

    pngs: list[str] = []
    notice = ""
    if make_plots and plots.available():
        if ops is not None and ops.cells:
            pngs += plots.op_plots(ops, out)
        if scaling is not None and scaling.cells:
            pngs += plots.scaling_plot(scaling, out)
        if compile_study is not None:
            pngs += plots.compile_plot(compile_study, out)
            pngs += plots.subsystem_plot(compile_study, out)
        if runtime is not None:
            pngs += plots.runtime_plot(runtime, out)
    elif make_plots:
        notice = (
            f"plots skipped: matplotlib is not installed ({plots.why_missing()}); "
            "`pip install matplotlib` (it is in requirements-dev.txt) to get them"
        )
    else:
        notice = "plots skipped (--no-plots)"

    md = [
        "# cpytree harness report",
        "",
        f"`{meta['command']}`, {meta['started']}, {meta['elapsed_s']:.0f} s.",
        "",
        "## Machine and versions",
        "",
        _machine_md(meta),
        "",
    ]
    if backends is not None:
        md += ["## Backends", "", _backends_md(backends), ""]
    if ops is not None:
        md += ["## Method", "", _method_md(meta), ""]
        md += [
            f"## Summary: geometric mean over workloads of time / {ops.baseline} time",
            "",
            tables.markdown_summary(ops),
            "",
            "## Every cell against its closest peer",
            "",
            (
                f"Peer time / {ops.baseline} time for the fastest peer (torch, optree, jax, "
                "dm-tree) on each (workload, op); below 1 the peer is faster."
            ),
            "",
            tables.markdown_closest(ops),
            "",
            "## Every op on every workload",
            "",
            (f"Median us per call [fastest-slowest round] and ratio to {ops.baseline}."),
            "",
            tables.markdown_op_tables(ops),
            tables.markdown_notes(ops),
        ]
    if scaling is not None and scaling.cells:
        md += [
            f"## Scaling: {scaling.op}, median ns per node",
            "",
            "[fastest-slowest round] (samples). Shapes: "
            + "; ".join(f"**{k}** {v}" for k, v in scaling.shapes.items())
            + ".",
            "",
            tables.markdown_scaling(scaling),
            "",
        ]
        if "scaling.png" in pngs:
            md += ["![scaling](scaling.png)", ""]
    if compile_markdown:
        md += [compile_markdown, ""]
        if "compile.png" in pngs:
            md += ["![compile](compile.png)", ""]
        if "pytree-subsystems.png" in pngs:
            md += ["![pytree time by subsystem](pytree-subsystems.png)", ""]
    if dynamo_markdown:
        md += [dynamo_markdown, ""]
    if runtime_markdown:
        md += [runtime_markdown, ""]
        if "runtime.png" in pngs:
            md += ["![runtime](runtime.png)", ""]
    md += ["## Plots", ""]
    if pngs:
        md += [f"- [{p}]({p})" for p in pngs]
        if "summary.png" in pngs:
            md += ["", "![summary](summary.png)"]
    else:
        md.append(notice)
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return ["report.md", "results.json", *pngs], notice
