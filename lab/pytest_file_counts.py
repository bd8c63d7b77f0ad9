"""A pytest plugin: passed/failed/skipped/deselected counts per test file.

`scripts/test_python.sh --arch aarch64` loads it (-p pytest_file_counts) into each shard of
tests/python under qemu: at the end of a session it prints one line a file,
and with FILE_COUNTS_JSON=path it also writes them there, so that the shards'
counts can be put together into one table (`python pytest_file_counts.py
a.json b.json ...` prints the table of several sessions and its total).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict

KINDS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")
_counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
_seconds: dict[str, float] = defaultdict(float)  # setup + call + teardown, per file
_start = time.time()


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_deselected(items) -> None:
    for item in items:
        _counts[_file(item.nodeid)]["deselected"] += 1


def pytest_collection_modifyitems(items) -> None:
    for item in items:  # files whose every test is skipped still get a row
        _counts[_file(item.nodeid)]


def pytest_runtest_logreport(report) -> None:
    row = _counts[_file(report.nodeid)]
    _seconds[_file(report.nodeid)] += report.duration
    if hasattr(report, "wasxfail"):
        if report.when == "call" or report.skipped:
            row["xpassed" if report.passed else "xfailed"] += 1
    elif report.failed:
        row["failed" if report.when == "call" else "error"] += 1
    elif report.skipped:
        row["skipped"] += 1
    elif report.when == "call":
        row["passed"] += 1


def _table(counts: dict[str, dict[str, int]], seconds: float | None, per_file: dict) -> str:
    kinds = [k for k in KINDS if any(c[k] for c in counts.values())] or ["passed"]
    width = max([len(f) for f in counts] + [5])
    lines = [f"{'file':<{width}}  " + "  ".join(f"{k:>10}" for k in kinds) + "   seconds"]
    total = dict.fromkeys(kinds, 0)
    for f in sorted(counts):
        lines.append(
            f"{f:<{width}}  "
            + "  ".join(f"{counts[f][k]:>10}" for k in kinds)
            + f"  {per_file.get(f, 0):8.0f}"
        )
        for k in kinds:
            total[k] += counts[f][k]
    lines.append(
        f"{'total':<{width}}  "
        + "  ".join(f"{total[k]:>10}" for k in kinds)
        + f"  {sum(per_file.values()):8.0f}"
    )
    if seconds is not None:
        lines.append(f"wall time {seconds:.0f} s")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter) -> None:
    seconds = time.time() - _start
    terminalreporter.write_sep("=", "per file")
    terminalreporter.write_line(_table(_counts, seconds, _seconds))
    path = os.environ.get("FILE_COUNTS_JSON")
    if path:
        with open(path, "w") as out:
            json.dump(
                {"seconds": seconds, "files": _counts, "file_seconds": _seconds}, out, indent=1
            )


if __name__ == "__main__":  # the table of several sessions' JSON files
    merged: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    merged_seconds: dict[str, float] = defaultdict(float)
    for name in sys.argv[1:]:
        with open(name) as f:
            data = json.load(f)
        print(f"{name}: {data['seconds']:.0f} s")
        for fname, row in data["files"].items():
            for k in KINDS:
                merged[fname][k] += row.get(k, 0)
        for fname, sec in data.get("file_seconds", {}).items():
            merged_seconds[fname] += sec
    print(_table(merged, None, merged_seconds))
