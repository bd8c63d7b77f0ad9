"""Which ops a backend can run on a very deep workload, found in a child process.

A backend meeting a tree deeper than Python's recursion limit should raise
RecursionError, and the harness shows that cell as `RecErr`. Some do worse:
jax 0.10's C++ flatten raises RecursionError on a 2,000-deep chain and
leaves the interpreter's recursion counter behind, so every later Python
call in that process fails too (the harness would then die on formatting
the message); a backend could as well crash outright. So for workloads
deeper than `PROBE_DEPTH`, each backend's leaves and every op are first
called once in a fresh process per (backend, workload); only what that child
ran without error is called in the harness's own process. A child that
dies is reported as the error of every op it had not answered.

    verdicts = probe("jax", "chain-list-2000", ["flatten", "map"])
    verdicts["flatten"]    # "" (ran), or "RecursionError: ...", or why the child died
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["PROBE_DEPTH", "probe"]

# Workloads nested deeper than this are probed in a child first.
PROBE_DEPTH = 500
_TIMEOUT_S = 300
_LEAVES = "leaves()"  # the verdict of Backend.leaves (the semantics check)


def short(exc: BaseException) -> str:
    """The first line of `exc` as `Type: message`, at most 160 characters."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def probe(backend: str, workload: str, ops: Sequence[str]) -> dict[str, str]:
    """op (or `_LEAVES`) -> "" if it ran in the child, else the error."""
    config = {"backend": backend, "workload": workload, "ops": list(ops)}
    cmd = [sys.executable, "-m", __name__, json.dumps(config)]
    answered: dict[str, str] = {}
    why = ""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                answered.update(json.loads(line))
        if proc.returncode != 0:
            why = f"the probe process died (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        why = f"the probe process timed out after {_TIMEOUT_S} s"
    return {op: answered.get(op, why or "no answer") for op in [_LEAVES, *ops]}


def _child(config: dict[str, Any]) -> None:
    from .backends import Operands, discover
    from .workloads import get_workloads

    (backend,) = discover([config["backend"]])
    (w,) = get_workloads([config["workload"]])
    tree, twin = w.build(), w.build()

    def answer(op: str, verdict: str) -> None:  # one line each: a crash loses only the rest
        print(json.dumps({op: verdict}), flush=True)

    try:
        backend.leaves(tree)
        answer(_LEAVES, "")
    except Exception as exc:  # noqa: BLE001 - reported in the table
        answer(_LEAVES, short(exc))
    for op in config["ops"]:
        try:
            fn, args, kwargs = backend.stage(op, Operands(tree, twin))
            fn(*args, **kwargs)
            answer(op, "")
        except Exception as exc:  # noqa: BLE001 - reported in the table
            answer(op, short(exc))


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
