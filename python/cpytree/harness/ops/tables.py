"""Text tables of a run: fixed-width for the terminal, Markdown for report.md.

Op tables have one row per workload and one column per available backend.
A cell is the median time per call; the Markdown cell adds the fastest and
slowest round in brackets; both add the ratio to the baseline (cpytree):
time / cpytree's time, so above 1 means cpytree is faster. Markers: `*` the
backend's answer differs from torch semantics (timed anyway), `~` the
backend has no exact equivalent and runs its nearest spelling (listed under
the tables), `n/a` no equivalent at all, `skip` it cannot run the workload,
`ERR` it raised, `RecErr` it raised RecursionError (too deep for it).

Usage:

    print(terminal_op_tables(results))
    md = markdown_op_tables(results)
"""

from __future__ import annotations

from collections.abc import Iterable

from .results import OpResults, ScalingResults
from .workloads import Workload

__all__ = [
    "closest_peers",
    "fmt_ratio",
    "fmt_us",
    "markdown_closest",
    "markdown_notes",
    "markdown_op_tables",
    "markdown_scaling",
    "markdown_summary",
    "terminal_closest",
    "terminal_op_tables",
    "terminal_scaling",
    "terminal_summary",
]

# Backends that are not peers: cpytree's own reference, and the floor (a
# measuring instrument that knows only list/tuple/dict, no library).
_NOT_PEERS = frozenset({"cpytree-reference", "floor"})


def fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    if us < 10:
        return f"{us:.2f}"
    if us < 1000:
        return f"{us:.1f}"
    return f"{us:.0f}"


def fmt_ratio(r: float) -> str:
    if r < 10:
        return f"{r:.2f}x"
    if r < 100:
        return f"{r:.1f}x"
    return f"{r:.0f}x"


def _mark(res: OpResults, workload: str, backend: str, op: str) -> str:
    b = next(b for b in res.backends if b.name == backend)
    if (workload, backend) in res.differs:
        return "*"
    if op in b.equivalents:
        return "~"
    return ""


def _cell_text(res: OpResults, workload: Workload, backend: str, op: str, spread: bool) -> str:
    entry = res.entry(workload, backend, op)
    if isinstance(entry, str):
        return entry
    text = fmt_us(entry.median)
    if spread:
        text += f" [{fmt_us(entry.low)}-{fmt_us(entry.high)}]"
    ratio = res.ratio(workload.name, backend, op)
    if ratio is not None and backend != res.baseline:
        text += f" {fmt_ratio(ratio)}"
    return text + _mark(res, workload.name, backend, op)


def terminal_op_tables(res: OpResults) -> str:
    """One fixed-width table per op, plus notes."""
    shown = [b.name for b in res.shown]
    name_w = max([len("geomean ratio")] + [len(w.name) for w in res.workloads])
    lines: list[str] = []
    for op in res.ops:
        rows = [[_cell_text(res, w, b, op, spread=False) for b in shown] for w in res.workloads]
        geo = []
        for b in shown:
            g = res.geomean_ratio(b, op) if b != res.baseline else None
            geo.append(fmt_ratio(g) if g is not None else "")
        widths = [max(len(b), *(len(r[i]) for r in rows), len(geo[i])) for i, b in enumerate(shown)]
        lines.append("")
        lines.append(f"{op}: median us per call, ratio = time / {res.baseline} time")
        header = f"{'workload':<{name_w}} {'nodes':>7} " + " ".join(
            f"{b:>{w}}" for b, w in zip(shown, widths, strict=True)
        )
        lines.append(header)
        lines.append("-" * len(header))
        for wl, row in zip(res.workloads, rows, strict=True):
            cells = " ".join(f"{t:>{w}}" for t, w in zip(row, widths, strict=True))
            lines.append(f"{wl.name:<{name_w}} {wl.nodes:>7} {cells}".rstrip())
        cells = " ".join(f"{t:>{w}}" for t, w in zip(geo, widths, strict=True))
        lines.append(f"{'geomean ratio':<{name_w}} {'':>7} {cells}".rstrip())
    return "\n".join(lines)


def terminal_summary(res: OpResults) -> str:
    """Geomean ratio per (op, backend): the whole op table in one screen."""
    shown = [b.name for b in res.shown if b.name != res.baseline]
    if not shown:
        return ""
    op_w = max(len("op"), *(len(op) for op in res.ops))
    widths = [max(len(b), 6) for b in shown]
    lines = [
        (
            f"summary: geometric mean over workloads of time / {res.baseline} time "
            "(above 1: cpytree is faster)"
        ),
        f"{'op':<{op_w}} " + " ".join(f"{b:>{w}}" for b, w in zip(shown, widths, strict=True)),
    ]
    for op in res.ops:
        vals = []
        for b in shown:
            g = res.geomean_ratio(b, op)
            vals.append(fmt_ratio(g) if g is not None else "n/a")
        lines.append(
            f"{op:<{op_w}} " + " ".join(f"{v:>{w}}" for v, w in zip(vals, widths, strict=True))
        )
    return "\n".join(lines)


def _md_table(header: list[str], rows: Iterable[list[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def markdown_summary(res: OpResults) -> str:
    shown = [b.name for b in res.shown if b.name != res.baseline]
    rows = []
    for op in res.ops:
        vals = []
        for b in shown:
            g = res.geomean_ratio(b, op)
            vals.append(fmt_ratio(g) if g is not None else "n/a")
        rows.append([op, *vals])
    return "\n".join(_md_table(["op", *shown], rows))


def markdown_op_tables(res: OpResults) -> str:
    shown = [b.name for b in res.shown]
    parts: list[str] = []
    for op in res.ops:
        parts.append(f"### {op}\n")
        rows = []
        for w in res.workloads:
            rows.append(
                [w.name, str(w.nodes)] + [_cell_text(res, w, b, op, spread=True) for b in shown]
            )
        geo = []
        for b in shown:
            g = res.geomean_ratio(b, op) if b != res.baseline else None
            geo.append(fmt_ratio(g) if g is not None else "")
        rows.append(["geomean ratio", "", *geo])
        parts.append("\n".join(_md_table(["workload", "nodes", *shown], rows)))
        parts.append("")
    return "\n".join(parts)


def _grouped_differs(res: OpResults) -> list[str]:
    """One line per (backend, kind of difference), naming the workloads."""
    groups: dict[tuple[str, str], list[str]] = {}
    for (w, b), why in res.differs.items():
        words = why.split()
        if len(words) > 4 and words[1] == "leaves," and words[-1].isdigit():
            got, want = int(words[0]), int(words[-1])
            kind = "fewer leaves than torch" if got < want else "more leaves than torch"
            groups.setdefault((b, kind), []).append(f"{w} ({got} vs {want})")
        else:
            groups.setdefault((b, why), []).append(w)
    return [f"{b}: {kind} on {', '.join(ws)}" for (b, kind), ws in groups.items()]


def markdown_notes(res: OpResults) -> str:
    """What `*`, `~`, `ERR`, `RecErr` and `n/a` stand for in this run."""
    lines = []
    if res.differs:
        lines.append("`*` answer differs from torch semantics (timed anyway):\n")
        lines += [f"- {text}" for text in _grouped_differs(res)]
        lines.append("")
    equivalents = [(b.name, op, text) for b in res.shown for op, text in b.equivalents.items()]
    if equivalents:
        lines.append("`~` the backend has no exact equivalent; it runs instead:\n")
        lines += [f"- {b} {op}: `{text}`" for b, op, text in equivalents]
        lines.append("")
    na = [(b.name, op) for b in res.shown for op in res.ops if op not in b.ops]
    if na:
        lines.append("`n/a` no equivalent: " + ", ".join(f"{b} {op}" for b, op in na) + "\n")
    skipped = sorted({b.name for b in res.shown for w in res.workloads if not b.supports(w)[0]})
    if skipped:
        lines.append(
            "`skip` the backend cannot run the workload (floor: list/tuple/dict only; "
            f"dm-tree: no custom nodes): {', '.join(skipped)}\n"
        )
    deep = {k: e for k, e in res.errors.items() if e.startswith("RecursionError")}
    if deep:
        lines.append("`RecErr` the backend raised RecursionError (too deep for it; not timed):\n")
        by: dict[tuple[str, str], list[str]] = {}
        for (w, b, op), _ in deep.items():
            by.setdefault((b, w), []).append(op)
        lines += [f"- {b} on {w}: {', '.join(ops)}" for (b, w), ops in by.items()]
        lines.append("")
    other = {k: e for k, e in res.errors.items() if k not in deep}
    if other:
        lines.append("`ERR` the backend raised (not timed):\n")
        lines += [f"- {b} {op} on {w}: {e}" for (w, b, op), e in other.items()]
        lines.append("")
    return "\n".join(lines)


def _fmt_ns(seconds: float) -> str:
    ns = seconds * 1e9
    return f"{ns:.1f}" if ns < 100 else f"{ns:.0f}"


def _scaling_rows(sc: ScalingResults, spread: bool) -> tuple[list[str], list[list[str]]]:
    header = ["shape", "nodes", *sc.backends]
    rows = []
    for shape in sc.shapes:
        sizes = sorted({n for b in sc.backends for n, _ in sc.series(shape, b)})
        for n in sizes:
            row = [shape, f"{n:,}"]
            for b in sc.backends:
                cell = dict(sc.series(shape, b)).get(n)
                if cell is None:
                    row.append("-")
                    continue
                text = _fmt_ns(sc.per_node(cell))
                if spread:
                    text += (
                        f" [{_fmt_ns(cell.low / n)}-{_fmt_ns(cell.high / n)}] ({len(cell.samples)})"
                    )
                row.append(text)
            rows.append(row)
    return header, rows


def terminal_scaling(sc: ScalingResults) -> str:
    header, rows = _scaling_rows(sc, spread=False)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [f"scaling: {sc.op}, median ns per node"]
    lines.append(" ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    lines.append("-" * len(lines[-1]))
    lines += [" ".join(f"{t:>{w}}" for t, w in zip(r, widths, strict=True)) for r in rows]
    lines += ["  " + note for note in _scaling_notes(sc)]
    return "\n".join(lines)


def _scaling_notes(sc: ScalingResults) -> list[str]:
    notes = [f"{b}: {why}" for b, why in sc.skipped.items()]
    if sc.left_out:
        points = ", ".join(
            f"{p['backend']} {p['shape']} {p['nodes']:,} (~{p['predicted_s']:.1f} s)"
            for p in sc.left_out
        )
        notes.append(f"not run, one call predicted to take over {sc.max_call:g} s: {points}")
    return notes


def markdown_scaling(sc: ScalingResults) -> str:
    header, rows = _scaling_rows(sc, spread=True)
    out = _md_table(header, rows, "lr" + "r" * len(sc.backends))
    notes = [f"- {note}" for note in _scaling_notes(sc)]
    return "\n".join(out + (["", *notes] if notes else []))


# --------------------------------------------------------------------------
# Every cell against its closest peer


def closest_peers(res: OpResults) -> dict[tuple[str, str], tuple[str, float]]:
    """(workload, op) -> (peer, ratio) for the peer closest to the baseline.

    A peer is every other library timed (torch, optree, jax, dm-tree); ratio
    is the peer's time over the baseline's, so below 1 a peer is faster.
    Cells no peer ran are absent.
    """
    peers = [b.name for b in res.shown if b.name != res.baseline and b.name not in _NOT_PEERS]
    closest: dict[tuple[str, str], tuple[str, float]] = {}
    for w in res.workloads:
        for op in res.ops:
            ratios = [(r, p) for p in peers if (r := res.ratio(w.name, p, op)) is not None]
            if ratios:
                r, p = min(ratios)
                closest[(w.name, op)] = (p, r)
    return closest


# Marks a key-path cell of a workload with registered nodes: torch's API
# makes the baseline run more of the user's code there than a peer does.
USER_KEYS_MARK = "\u2020"
USER_KEYS_NOTE = (
    f"{USER_KEYS_MARK} key paths through registered nodes: torch's API has cpytree (as torch) "
    "call each node's flatten function and its `flatten_with_keys_fn`, which builds one "
    "`MappingKey` dataclass per child, in Python; optree numbers the children and jax calls "
    "one function with its C++ `DictKey`. That user code is most of the cell's time."
)


def _user_keys(res: OpResults, workload: str, op: str) -> bool:
    return op == "flatten-paths" and any(
        w.name == workload and w.custom_nodes for w in res.workloads
    )


def _closest_rows(res: OpResults) -> tuple[list[str], list[list[str]], int]:
    closest = closest_peers(res)
    rows = []
    for w in res.workloads:
        row = [w.name]
        for op in res.ops:
            hit = closest.get((w.name, op))
            mark = USER_KEYS_MARK if hit and _user_keys(res, w.name, op) else ""
            row.append(f"{fmt_ratio(hit[1])} {hit[0]}{mark}" if hit else "-")
        rows.append(row)
    slower = sum(r < 1.0 for _, r in closest.values())
    return ["workload", *res.ops], rows, slower


def _closest_notes(res: OpResults) -> list[str]:
    marked = any(_user_keys(res, w, op) for (w, op) in closest_peers(res))
    return [USER_KEYS_NOTE] if marked else []


def _closest_title(res: OpResults, slower: int, cells: int) -> str:
    return (
        f"every cell against its closest peer: peer time / {res.baseline} time "
        f"(below 1: the peer is faster; {slower} of {cells} cells)"
    )


def terminal_closest(res: OpResults) -> str:
    """One row per workload, one column per op: the closest peer's ratio and name."""
    header, rows, slower = _closest_rows(res)
    if not rows or len(header) < 2:
        return ""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [_closest_title(res, slower, len(closest_peers(res)))]
    lines.append(" ".join(f"{h:<{widths[0]}}" if i == 0 else f"{h:>{widths[i]}}"
                          for i, h in enumerate(header)))  # fmt: skip
    for r in rows:
        lines.append(" ".join(f"{c:<{widths[0]}}" if i == 0 else f"{c:>{widths[i]}}"
                              for i, c in enumerate(r)))  # fmt: skip
    return "\n".join(lines + _closest_notes(res))


def markdown_closest(res: OpResults) -> str:
    """`terminal_closest` as a Markdown table."""
    header, rows, _ = _closest_rows(res)
    notes = _closest_notes(res)
    return "\n".join(_md_table(header, rows) + (["", *notes] if notes else []))
