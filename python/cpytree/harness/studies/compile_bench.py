"""`cpytree-harness --compile`: torch.compile of the zoo with and without
`cpytree.install()`, every compile in a fresh process.

For each model of `zoo` (torch.nn only, compiled on CPU) the study runs:

1. one warm-up process, not counted: it fills torch's on-disk caches and the
   OS file cache, so the first counted run is not the only cold one;
2. `reps` plain runs per mode ("torch": torch as shipped; "cpytree": after
   `cpytree.install()`), the two modes alternating which goes first: compile
   wall clock and CPU time, Dynamo's phase timers, graph breaks and graphs,
   output equality, and the time per call of the compiled model on tiny
   inputs;
3. profiled runs per mode under cProfile: the time spent inside pytree
   functions during the compile and the number of calls into them.

Options compare install() variants on forward and backward compiles:
`modes` may add "cpytree-attrs" (`modes.COMPILE_MODES`: install() without
rebinding torch modules' import-time names), `backward=True` times the
first call plus backward() of its outputs' sum, and `EXTRA_MODELS` (a
transformer block and a stack of six) may be named beside `MODELS`.
`compile_warm` (warm compiles in one process) and `compile_replay` (one
compile's pytree calls replayed) are the two in-process measurements of
the same question.

Each child runs with one intra-op thread and in-process Inductor compilation
(`OMP_NUM_THREADS=1`, `TORCHINDUCTOR_COMPILE_THREADS=1`), so that two cores
shared with other work give repeatable numbers. See `compile_child` for what
one run measures.

Usage:

    study, terminal_text, markdown_text = run(models=["mlp"], reps=3)
    run(models=["block"], backend="aot_eager", modes=tuple(COMPILE_MODES), backward=True)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ..child import ChildFailed, child_env, spawn
from ..progress import ProgressBar
from .modes import COMPILE_MODES, MODES, Unavailable, check_available

__all__ = ["EXTRA_MODELS", "MODELS", "run"]

# Model name -> what it is (zoo.py builds them; this table needs no torch).
MODELS = {
    "mlp": "Linear/ReLU stack, input (2, 16)",
    "resnet": "ResNet-style CNN: conv stem, 2 basic blocks, pool, linear; input (1, 3, 16, 16)",
    "transformer": "nn.TransformerEncoderLayer(d_model=32, nhead=4), input (2, 5, 32)",
    "nested-io": "dict of dataclass/namedtuple/list in, tree_map in forward, "
    "dict of dataclass/namedtuple out",
}
# Models run only when named (zoo.py builds them too).
EXTRA_MODELS = {
    "block": "pre-norm transformer block (LayerNorm, 4-head attention, GELU MLP), input (2, 5, 32)",
    "stack": "six such blocks, input (2, 5, 32)",
    "pytree-blocks": "six blocks, each flattening and unflattening a dict of five tensors "
    "in forward, input dict of (2, 16)",
}
_TIMEOUT_S = 900


KNOWN = {**MODELS, **EXTRA_MODELS}


def check_names(models: Sequence[str], modes: Sequence[str] = MODES) -> None:
    """Unavailable naming an unknown model or mode (needs no torch)."""
    unknown = [m for m in models if m not in KNOWN and ":" not in m]
    if unknown:
        raise Unavailable(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    bad = [m for m in modes if m not in COMPILE_MODES]
    if bad or len(modes) < 2:
        raise Unavailable(
            f"--compile-modes: {', '.join(bad) or 'give two or more'}; "
            f"known: {', '.join(COMPILE_MODES)}"
        )


def _child(config: dict[str, Any]) -> dict[str, Any]:
    try:
        result = spawn("cpytree.harness.studies.compile_child", config, _TIMEOUT_S)
    except ChildFailed as exc:
        return dict(config, error=str(exc))
    return dict(result, warmup=config.get("warmup", False))


def _plan(
    models: list[str],
    reps: int,
    profile_reps: int,
    backend: str,
    warmup: bool,
    modes: Sequence[str] = MODES,
    backward: bool = False,
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    base: dict[str, Any] = {"backend": backend}
    if backward:
        base["backward"] = True
    if warmup:
        runs += [dict(base, model=m, mode="torch", profile=False, warmup=True) for m in models]
    for rep in range(reps):
        for i, m in enumerate(models):
            order = modes if (rep + i) % 2 == 0 else modes[::-1]
            runs += [dict(base, model=m, mode=mode, profile=False) for mode in order]
    for rep in range(profile_reps):
        for i, m in enumerate(models):
            order = modes if (rep + i) % 2 == 0 else modes[::-1]
            runs += [dict(base, model=m, mode=mode, profile=True) for mode in order]
    return runs


def _stat(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _summarize(
    runs: list[dict[str, Any]],
    models: list[str],
    modes: Sequence[str] = MODES,
    counts: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    counted_of = {(c["model"], c["mode"]): c for c in counts}
    rows = []
    for m in models:
        digests = {r["digest"] for r in runs if r["model"] == m and "digest" in r}
        for mode in modes:
            mine = [r for r in runs if r["model"] == m and r["mode"] == mode and "error" not in r]
            plain = [r for r in mine if not r["profile"] and not r.get("warmup")]
            prof = [r for r in mine if r["profile"]]
            counted = plain + prof
            errors = [
                r["error"] for r in runs if r["model"] == m and r["mode"] == mode and "error" in r
            ]
            phases = {
                k: statistics.median(r["phases"][k] for r in plain)
                for k in (plain[0]["phases"] if plain else {})
            }
            row: dict[str, Any] = {
                "model": m,
                "mode": mode,
                "runs": len(plain),
                "profiled_runs": len(prof),
                "compile_s": _stat([r["compile_s"] for r in plain]),
                "compile_cpu_s": _stat([r["compile_cpu_s"] for r in plain]),
                "import_s": _stat([r["import_s"] for r in plain if "import_s" in r]),
                "install_ms": 1e3 * statistics.median(r["install_s"] for r in plain)
                if plain
                else None,
                "phases": phases,
                "graph_breaks": max((r["graph_breaks"] for r in counted), default=None),
                "break_reasons": sorted({x for r in counted for x in r["break_reasons"]}),
                "graphs": max((r["graphs"] for r in counted), default=None),
                "allclose_to_eager": bool(counted)
                and all(r["same_structure"] and r["allclose_to_eager"] for r in counted),
                "identical_across_modes": len(digests) == 1,
                "call_us": _stat([r["call_us"] for r in plain]),
                "eager_call_us": _stat([r["eager_call_us"] for r in plain]),
                "call_pytree_calls": max(
                    (r["call_pytree_calls"] for r in plain if "call_pytree_calls" in r),
                    default=None,
                ),
                "pytree_ms": 1e3 * statistics.median(r["pytree_s"] for r in prof) if prof else None,
                "pytree_share": statistics.median(
                    r["pytree_s"] / r["profiled_total_s"] for r in prof
                )
                if prof
                else None,
                "pytree_calls": int(statistics.median(r["pytree_calls"] for r in prof))
                if prof
                else None,
                "profiled_compile_s": statistics.median(r["compile_s"] for r in prof)
                if prof
                else None,
                "top_pytree": prof[0]["top"][:6] if prof else [],
                "subsystems_ms": _subsystems_ms(prof),
                "instructions": counted_of.get((m, mode), {}).get("total"),
                "instructions_by_phase": counted_of.get((m, mode), {}).get("phases"),
                "errors": errors
                + (
                    [counted_of[(m, mode)]["error"]]
                    if "error" in counted_of.get((m, mode), {})
                    else []
                ),
            }
            rows.append(row)
    return rows


def _subsystems_ms(prof: list[dict[str, Any]]) -> dict[str, float] | None:
    """Median pytree ms per calling subsystem over the profiled runs."""
    splits = [r["subsystems_s"] for r in prof if r.get("subsystems_s")]
    if not splits:
        return None
    return {k: 1e3 * statistics.median(s.get(k, 0.0) for s in splits) for k in splits[0]}


def subsystem_lines(summary: list[dict[str, Any]]) -> list[str]:
    """One line per (model, mode): profiled pytree ms by the subsystem that called it."""
    out = []
    for r in summary:
        split = r.get("subsystems_ms")
        if split:
            parts = ", ".join(f"{k} {v:.1f}" for k, v in split.items() if v >= 0.05)
            out.append(f"{r['model']} / {r['mode']}: {parts or 'none'} (ms)")
    return out


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _spread(s: dict[str, float] | None, fmt: str) -> str:
    if s is None:
        return "-"
    return f"{s['median']:{fmt}} [{s['min']:{fmt}}-{s['max']:{fmt}}]"


def _change(row: dict[str, Any], base: dict[str, Any] | None, key: str) -> str:
    if base is None or row is base or not row.get(key) or not base.get(key):
        return ""
    return f" ({(row[key]['median'] / base[key]['median'] - 1) * 100:+.1f}%)"


_COLUMNS = (
    "model",
    "mode",
    "compile s",
    "CPU s",
    "pytree ms (share)",
    "pytree calls",
    "instructions G",
    "graph breaks",
    "graphs",
    "= eager",
    "same both modes",
    "call us",
    "eager call us",
)


def _instructions(row: dict[str, Any], base: dict[str, Any] | None) -> str:
    """Instructions of the whole process (callgrind), in billions, and the change."""
    n = row.get("instructions")
    if n is None:
        return "-"
    text = f"{n / 1e9:.3f}"
    b = base.get("instructions") if base is not None and base is not row else None
    if b:
        text += f" ({(n / b - 1) * 100:+.2f}%)"
    return text


def count_lines(summary: list[dict[str, Any]]) -> list[str]:
    """Per model: each phase's instructions (millions) in each mode, and the change."""
    out: list[str] = []
    for m in dict.fromkeys(r["model"] for r in summary):
        rows = [r for r in summary if r["model"] == m and r.get("instructions_by_phase")]
        if not rows:
            continue
        out.append(
            f"{m}: instructions of the whole process by phase (callgrind, millions; "
            + " | ".join(r["mode"] for r in rows)
            + (" | change)" if len(rows) > 1 else ")")
        )
        base = rows[0]["instructions_by_phase"]
        for phase in base:
            vals = [r["instructions_by_phase"][phase] for r in rows]
            if not any(vals):
                continue
            cells = " | ".join(f"{v / 1e6:,.1f}" for v in vals)
            change = f" | {(vals[-1] - vals[0]) / 1e6:+,.1f}" if len(vals) > 1 else ""
            out.append(f"  {phase:<16} {cells}{change}")
        totals = [r["instructions"] for r in rows]
        change = f" | {(totals[-1] - totals[0]) / 1e6:+,.1f}" if len(totals) > 1 else ""
        out.append(f"  {'total':<16} " + " | ".join(f"{v / 1e6:,.1f}" for v in totals) + change)
    return out


def _table_rows(summary: list[dict[str, Any]]) -> list[list[str]]:
    base_of: dict[str, dict[str, Any]] = {}
    for r in summary:  # each model's first mode (torch unless told otherwise)
        base_of.setdefault(r["model"], r)
    rows = []
    for r in summary:
        base = base_of.get(r["model"])
        share = f" ({r['pytree_share'] * 100:.1f}%)" if r["pytree_share"] is not None else ""
        rows.append(
            [
                r["model"],
                r["mode"],
                _spread(r["compile_s"], ".2f") + _change(r, base, "compile_s"),
                _spread(r["compile_cpu_s"], ".2f") + _change(r, base, "compile_cpu_s"),
                _f(r["pytree_ms"], ".1f") + share,
                _f(r["pytree_calls"], "d"),
                _instructions(r, base),
                _f(r["graph_breaks"], "d"),
                _f(r["graphs"], "d"),
                "yes" if r["allclose_to_eager"] else "NO",
                "yes" if r["identical_across_modes"] else "NO",
                _spread(r["call_us"], ".0f") + _change(r, base, "call_us"),
                _spread(r["eager_call_us"], ".0f"),
            ]
        )
    return rows


def _headline(summary: list[dict[str, Any]]) -> list[str]:
    """Per model, each mode against the first (torch): one line each."""
    out = []
    by = {(r["model"], r["mode"]): r for r in summary}
    modes = list(dict.fromkeys(r["mode"] for r in summary))
    pairs = [
        (m, mode, by.get((m, modes[0])), by.get((m, mode)))
        for m in dict.fromkeys(r["model"] for r in summary)
        for mode in modes[1:]
    ]
    for m, mode, t, c in pairs:
        if not t or not c or not t["compile_s"] or not c["compile_s"]:
            continue
        name = m if len(modes) == 2 else f"{m} {mode}"
        parts = [
            (
                f"{name}: compile {t['compile_s']['median']:.2f} s"
                f" -> {c['compile_s']['median']:.2f} s "
                f"({(c['compile_s']['median'] / t['compile_s']['median'] - 1) * 100:+.1f}%)"
            )
        ]
        if t.get("import_s") and c.get("import_s"):
            a, b = t["import_s"]["median"], c["import_s"]["median"]
            parts.append(f"import torch, torch._dynamo {a:.2f} s -> {b:.2f} s")
        if t["compile_cpu_s"] and c["compile_cpu_s"]:
            a, b = t["compile_cpu_s"]["median"], c["compile_cpu_s"]["median"]
            parts.append(f"CPU {a:.2f} s -> {b:.2f} s ({(b / a - 1) * 100:+.1f}%)")
        if t["pytree_ms"] is not None and c["pytree_ms"] is not None:
            parts.append(f"pytree {t['pytree_ms']:.1f} ms -> {c['pytree_ms']:.1f} ms")
        if c.get("install_ms") is not None:
            parts.append(f"install() {c['install_ms']:.0f} ms")
        if t["call_us"] and c["call_us"]:
            parts.append(f"call {t['call_us']['median']:.0f} us -> {c['call_us']['median']:.0f} us")
        if t.get("call_pytree_calls") is not None and c.get("call_pytree_calls") is not None:
            parts.append(
                f"pytree calls per call {t['call_pytree_calls']:g} -> {c['call_pytree_calls']:g}"
            )
        out.append(", ".join(parts))
    return out


def _terminal(study: dict[str, Any]) -> str:
    rows = _table_rows(study["summary"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_COLUMNS)]
    backward = " and backward" if study["settings"].get("backward") else ""
    lines = [
        (
            f"torch.compile(backend={study['backend']!r}) first call{backward}, median "
            "[min-max] over "
            f"{study['settings']['reps']} fresh processes per mode; pytree time from "
            f"{study['settings']['profile_reps']} profiled run(s) per mode"
        ),
        "  ".join(f"{h:<{w}}" for h, w in zip(_COLUMNS, widths, strict=True)),
    ]
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=True)) for r in rows]
    lines += ["", *_headline(study["summary"])]
    split = subsystem_lines(study["summary"])
    if split:
        lines += ["", "pytree time during the compile by calling subsystem (profiled):", *split]
    counted = count_lines(study["summary"])
    if counted:
        lines += ["", *counted]
    for r in study["summary"]:
        for e in r["errors"]:
            lines.append(f"ERROR {r['model']} {r['mode']}: {e}")
    return "\n".join(lines)


def _markdown(study: dict[str, Any]) -> str:
    s = study["settings"]
    modes = list(dict.fromkeys(r["mode"] for r in study["summary"]))
    md = [
        "## torch.compile with and without cpytree.install()",
        "",
        *(
            [
                "Modes: " + "; ".join(f"*{m}*: {COMPILE_MODES.get(m, m)}" for m in modes) + ".",
                "",
            ]
            if modes and list(modes) != list(MODES)
            else []
        ),
        *(
            [
                "Timed: the first call and backward() of the sum of its outputs (inputs "
                "require grad), so the backward graph compiles too.",
                "",
            ]
            if s.get("backward")
            else []
        ),
        f"Backend `{study['backend']}` on CPU, torch {study.get('torch_version', '?')}. Each "
        f"model compiled in a fresh process: {s['reps']} plain run(s) and "
        f"{s['profile_reps']} cProfile run(s) per mode, modes alternating which goes first"
        + (", after one uncounted warm-up run per model." if s["warmup"] else ".")
        + " *compile s*: wall clock of the first call of the compiled model (it compiles), "
        "median [min-max] and the change against torch; *CPU s*: the same in CPU time of "
        "the process and the C++ compilers it ran (steadier on a shared machine); "
        "*pytree ms*: self time inside pytree "
        "functions during a profiled compile and its share of that compile; *pytree calls*: "
        "calls from other code into pytree functions during it; *= eager*: "
        "output has the eager structure and allclose values; *same both modes*: the "
        "compiled outputs of every run of both modes are bit-identical; *call us*: time "
        "per call of the compiled model on its tiny inputs (one thread); the lines "
        "below give the calls into pytree functions per compiled call (profiled): where "
        "there are none, a change of *call us* is noise.",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "---|" * len(_COLUMNS),
    ]
    md += ["| " + " | ".join(r) + " |" for r in _table_rows(study["summary"])]
    md += [""] + [f"- {h}" for h in _headline(study["summary"])]
    phases = [
        f"- {r['model']} / {r['mode']}: "
        + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in r["phases"].items())
        for r in study["summary"]
        if r["phases"]
    ]
    if phases:
        md += ["", "Compile phases (Dynamo's timers, medians):", "", *phases]
    counted = count_lines(study["summary"])
    if counted:
        md += [
            "",
            "*instructions G*: instructions of one whole process (start-up, `import torch`, "
            "building the model, the first compiled call, exit), counted by callgrind "
            "(`compile_count`), one run per mode after the warm-up; the C++ compiler "
            "processes are not in it. By phase:",
            "",
            "```",
            *counted,
            "```",
        ]
    tops = [r for r in study["summary"] if r["top_pytree"]]
    if tops:
        md += ["", "Where the pytree time goes (profiled, self time):", ""]
        for r in tops:
            items = ", ".join(f"{name} {secs * 1e3:.1f} ms" for name, secs in r["top_pytree"])
            md.append(f"- {r['model']} / {r['mode']}: {items}")
    splits = [r for r in study["summary"] if r.get("subsystems_ms")]
    if splits:
        names = list(splits[0]["subsystems_ms"])
        md += [
            "",
            "Pytree time during the profiled compile by the torch subsystem that called it "
            "(ms; each pytree function's time goes to its nearest caller outside pytree "
            "code, see `profiling.subsystem_split`):",
            "",
            "| model | mode | " + " | ".join(names) + " | total |",
            "|" + "---|" * (len(names) + 3),
        ]
        for r in splits:
            vals = r["subsystems_ms"]
            md.append(
                f"| {r['model']} | {r['mode']} | "
                + " | ".join(f"{vals[k]:.1f}" for k in names)
                + f" | {sum(vals.values()):.1f} |"
            )
    errors = [(r, e) for r in study["summary"] for e in r["errors"]]
    if errors:
        md += ["", "Errors:", ""] + [f"- {r['model']} {r['mode']}: {e}" for r, e in errors]
    return "\n".join(md)


def _counts(
    models: list[str], modes: Sequence[str], backend: str, progress: bool
) -> list[dict[str, Any]]:
    """One callgrind run per model and mode (after the timed runs: caches warm)."""
    from . import compile_count

    if not compile_count.available():
        raise Unavailable("--compile-counts: valgrind is not installed")
    out: list[dict[str, Any]] = []
    bar = ProgressBar(
        len(models) * len(modes), label="callgrind", enabled=None if progress else False
    )
    try:
        for m in models:
            for mode in modes:
                bar.label = f"callgrind {m} {mode}"
                try:
                    out.append(compile_count.count(m, mode, backend))
                except ChildFailed as exc:
                    out.append({"model": m, "mode": mode, "error": f"callgrind: {exc}"})
                bar.advance()
    finally:
        bar.close()
    return out


def run(
    models: Sequence[str] | None = None,
    reps: int | None = None,
    backend: str = "inductor",
    quick: bool = False,
    progress: bool = True,
    modes: Sequence[str] = MODES,
    backward: bool = False,
    counts: bool = False,
) -> tuple[dict[str, Any], str, str]:
    """Run the study; returns (results for results.json, terminal text, Markdown).

    `counts`: also count the instructions of one whole process per model and
    mode under callgrind (`compile_count`; minutes per run; forward only).
    `modes`: of `COMPILE_MODES`, the first is the base of the comparisons;
    `backward`: time the first call and the backward() of its outputs' sum."""
    check_available()
    names = list(models) if models else list(MODELS)
    check_names(names, modes)
    if counts and backward:
        raise Unavailable("--compile-counts counts the forward compile only (no --backward)")
    reps = reps if reps is not None else (1 if quick else 3)
    profile_reps = 1 if quick or reps < 3 else 2
    warmup = not quick
    plan = _plan(names, reps, profile_reps, backend, warmup, modes, backward)
    bar = ProgressBar(len(plan), label="compiling", enabled=None if progress else False)
    runs = []
    try:
        for config in plan:
            bar.label = f"{config['model']} {config['mode']}" + (
                " prof" if config["profile"] else ""
            )
            runs.append(_child(config))
            bar.advance()
    finally:
        bar.close()
    counted = _counts(names, modes, backend, progress) if counts else []
    torch_version = next((r.get("torch_version") for r in runs if r.get("torch_version")), None)
    study = {
        "backend": backend,
        "torch_version": torch_version,
        "models": {m: KNOWN.get(m, "--model: the user's model") for m in names},
        "settings": {
            "reps": reps,
            "profile_reps": profile_reps,
            "warmup": warmup,
            "modes": list(modes),
            "backward": backward,
            "env": {
                k: child_env()[k] for k in ("OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
            },
        },
        "runs": runs,
        "counts": counted,
        "summary": _summarize(runs, names, modes, counted),
    }
    return study, _terminal(study), _markdown(study)
