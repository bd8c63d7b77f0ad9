"""torch's features that use pytree inside Dynamo, torch alone against cpytree inside.

Each mode in a fresh process (`feature_probe`): "torch" (CPYTREE_INSTALL=0)
and "autoload" (install() by cpytree's entry point at `import torch`, what a
user gets). A row per case of `feature_cases`: both outcomes, whether they
and the graphs agree, Dynamo's bytecodes and guards in each mode.

    python -m cpytree.harness.studies.feature_study            # every case, Markdown
    python -m cpytree.harness.studies.feature_study cond/ scan/  # cases by prefix
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..child import spawn

__all__ = ["markdown", "run"]

_TIMEOUT_S = 1800


def run(names: Sequence[str]) -> dict[str, Any]:
    """Both modes over `names`; a row per case."""
    runs = {
        mode: spawn(
            "cpytree.harness.studies.feature_probe",
            {"mode": mode, "cases": list(names)},
            _TIMEOUT_S,
        )
        for mode in ("torch", "autoload")
    }
    alone = {row["case"]: row for row in runs["torch"]["cases"]}
    inside = {row["case"]: row for row in runs["autoload"]["cases"]}
    rows = []
    for name in names:
        a, b = alone[name], inside[name]
        rows.append({
            "case": name,
            "torch": a,
            "cpytree": b,
            "same_outcome": a["outcome"] == b["outcome"],
            "same_graphs": (a["graphs"], a["graph_digest"]) == (b["graphs"], b["graph_digest"]),
        })  # fmt: skip
    return {
        "torch_version": runs["torch"]["torch_version"],
        "installed": {
            "torch": runs["torch"]["installed"],
            "autoload": runs["autoload"]["installed"],
        },
        "rows": rows,
    }


def markdown(study: dict[str, Any]) -> str:
    """The study as a Markdown table."""
    lines = [
        f"torch {study['torch_version']}; cpytree installed by autoload: "
        f"{study['installed']['autoload']}",
        "",
        "| case | outcome | same outcome | same graphs | bytecodes torch | cpytree "
        "| guards torch | cpytree |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in study["rows"]:
        a, b = row["torch"], row["cpytree"]
        outcome = "ok" if a["outcome"].startswith("ok ") else a["outcome"].split(":")[0]
        lines.append(
            f"| {row['case']} | {outcome} | {'yes' if row['same_outcome'] else '**no**'} "
            f"| {'yes' if row['same_graphs'] else '**no**'} | {a['bytecodes']} | {b['bytecodes']} "
            f"| {a['guards']} | {b['guards']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from . import feature_cases

    prefixes = sys.argv[1:] if argv is None else argv
    names = [n for n in feature_cases.names() if not prefixes or n.startswith(tuple(prefixes))]
    study = run(names)
    print(markdown(study))
    same = all(row["same_outcome"] and row["same_graphs"] for row in study["rows"])
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
