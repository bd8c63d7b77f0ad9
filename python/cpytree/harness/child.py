"""Measuring children: every compile or runtime measurement runs in a fresh interpreter.

A child module defines `run(config) -> dict` and ends with
`raise SystemExit(serve(run))`; the parent calls `spawn(module, config)`.
The child prints its result as the last line of stdout, after `MARKER`, so
whatever torch prints before it does not matter.

    result = spawn("cpytree.harness.studies.dynamo_probe", {"mode": "torch", "cases": [...]})
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "ChildFailed", "child_env", "serve", "spawn"]

MARKER = "RESULT "


class ChildFailed(RuntimeError):
    """A child timed out or exited without a result (the message says how)."""


def child_env() -> dict[str, str]:
    """The environment of a measuring child: one thread, this cpytree importable."""
    pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        TORCHINDUCTOR_COMPILE_THREADS="1",
        CPYTREE_INSTALL="0",
        PYTHONHASHSEED="0",
        PYTHONPATH=pkg_parent + (os.pathsep + path if path else ""),
    )


def serve(run: Callable[[dict[str, Any]], dict[str, Any]], argv: list[str] | None = None) -> int:
    """The child's main: run(config from argv[0] as JSON), printed after MARKER."""
    args = sys.argv[1:] if argv is None else argv
    result = run(json.loads(args[0]))
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


def spawn(module: str, config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run `python -m module config` in a fresh process; its result, or ChildFailed."""
    cmd = [sys.executable, "-m", module, json.dumps(config)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=child_env(), timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ChildFailed(f"timed out after {timeout:g} s") from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER) :])
            return result
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    raise ChildFailed(f"exit {proc.returncode}: {tail[-400:]}")
