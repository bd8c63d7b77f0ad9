"""The Dynamo suite with and without `cpytree.install()`, each mode in fresh processes.

For every case of `dynamo_cases` (or a user's `module:callable`), a child
process per mode (`dynamo_probe`) compiles it and reports Dynamo's
bytecodes, guards, graphs, graph breaks, a canonical digest of each FX graph
and of the output, and the compile wall time. The modes alternate which runs
first over `reps` repetitions; counts come from the first repetition (they are
deterministic), wall times are medians over all.

    study = run(cases=["tree_map/dict/100"], reps=1)
    print(terminal(study))
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from typing import Any

from ..child import spawn
from .modes import MODES, Unavailable, check_available

__all__ = ["markdown", "run", "terminal"]

_TIMEOUT_S = 1800
_COUNTS = ("bytecodes", "guards", "graphs", "graph_breaks")


def _child(mode: str, names: Sequence[str]) -> dict[str, Any]:
    config = {"mode": mode, "cases": list(names)}
    # Raises ChildFailed when the child gives no result.
    return spawn("cpytree.harness.studies.dynamo_probe", config, _TIMEOUT_S)


def compare(torch_row: dict[str, Any], cpytree_row: dict[str, Any]) -> dict[str, Any]:
    """One case's row: both modes' counts, their ratios and whether graphs/outputs agree."""
    row: dict[str, Any] = {"case": torch_row["case"]}
    for key in _COUNTS:
        row[key] = {"torch": torch_row[key], "cpytree": cpytree_row[key]}
    row["bytecode_ratio"] = cpytree_row["bytecodes"] / max(torch_row["bytecodes"], 1)
    row["guard_ratio"] = cpytree_row["guards"] / max(torch_row["guards"], 1)
    row["same_graphs"] = torch_row["graph_digest"] == cpytree_row["graph_digest"]
    row["same_output"] = torch_row["output_digest"] == cpytree_row["output_digest"]
    return row


def run(
    cases: Sequence[str] | None = None, reps: int = 1, sizes: Sequence[int] = (10, 100, 1000)
) -> dict[str, Any]:
    """Measure `cases` (default: the whole suite at `sizes`) in both modes."""
    check_available()
    from . import dynamo_cases

    names = list(cases) if cases else [c.name for c in dynamo_cases.cases(sizes=sizes)]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for rep in range(reps):
        for mode in MODES if rep % 2 == 0 else MODES[::-1]:
            runs[mode].append(_child(mode, names))
    first = {mode: {r["case"]: r for r in runs[mode][0]["cases"]} for mode in MODES}
    rows = []
    for name in names:
        row = compare(first["torch"][name], first["cpytree"][name])
        for mode in MODES:
            times = [next(r for r in rep_run["cases"] if r["case"] == name)["compile_s"]
                     for rep_run in runs[mode]]  # fmt: skip
            row.setdefault("compile_s", {})[mode] = statistics.median(times)
        rows.append(row)
    return {
        "torch_version": runs["torch"][0]["torch_version"],
        "reps": reps,
        "install_s": statistics.median(r["install_s"] for r in runs["cpytree"]),
        "install_imported_dynamo": any(r["dynamo_imported_by_install"] for r in runs["cpytree"]),
        "rows": rows,
    }


def _table(study: dict[str, Any]) -> list[list[str]]:
    out = [["case", "bytecodes torch", "cpytree", "ratio", "guards torch", "cpytree", "graphs",
            "breaks", "same graph", "same output", "compile ms torch", "cpytree"]]  # fmt: skip
    for row in study["rows"]:
        b, g = row["bytecodes"], row["guards"]
        out.append([
            row["case"], str(b["torch"]), str(b["cpytree"]), f"{row['bytecode_ratio']:.2f}",
            str(g["torch"]), str(g["cpytree"]),
            f"{row['graphs']['torch']}/{row['graphs']['cpytree']}",
            f"{row['graph_breaks']['torch']}/{row['graph_breaks']['cpytree']}",
            "yes" if row["same_graphs"] else "NO", "yes" if row["same_output"] else "NO",
            f"{row['compile_s']['torch'] * 1e3:.0f}", f"{row['compile_s']['cpytree'] * 1e3:.0f}",
        ])  # fmt: skip
    return out


def _summary(study: dict[str, Any]) -> str:
    rows = study["rows"]
    worst = max(rows, key=lambda r: r["bytecode_ratio"])
    more_guards = [r["case"] for r in rows if r["guard_ratio"] > 1]
    differ = [r["case"] for r in rows if not (r["same_graphs"] and r["same_output"])]
    total_t = sum(r["bytecodes"]["torch"] for r in rows)
    total_c = sum(r["bytecodes"]["cpytree"] for r in rows)
    wall_t = sum(r["compile_s"]["torch"] for r in rows)
    wall_c = sum(r["compile_s"]["cpytree"] for r in rows)
    above_half = sum(r["bytecode_ratio"] > 0.5 for r in rows)
    return (
        f"torch {study['torch_version']}: {len(rows)} cases; bytecodes {total_t} -> {total_c} "
        f"({total_c / max(total_t, 1):.2f}x), worst ratio {worst['bytecode_ratio']:.2f} "
        f"({worst['case']}), {above_half} cases above 0.50x; cases with more guards: "
        f"{len(more_guards)}; graphs or outputs differing: {len(differ)}; compile wall time "
        f"{wall_t:.1f} s -> {wall_c:.1f} s ({wall_t / max(wall_c, 1e-9):.1f}x lower); "
        f"install() {study['install_s'] * 1e3:.1f} ms"
        f"{' (imported torch._dynamo)' if study['install_imported_dynamo'] else ''}"
    )


def terminal(study: dict[str, Any]) -> str:
    table = _table(study)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))) for r in table]  # fmt: skip
    return "\n".join(["Dynamo suite (with / without cpytree.install())", *lines, _summary(study)])


def markdown(study: dict[str, Any]) -> str:
    table = _table(study)
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
    return "\n".join(["## Dynamo suite", "", _summary(study), "", *lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m cpytree.harness.studies.dynamo_study [case ...]`: the table on the terminal."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        study = run(cases=args or None)
    except Unavailable as exc:
        print(f"dynamo_study: {exc}", file=sys.stderr)
        return 2
    print(terminal(study))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
