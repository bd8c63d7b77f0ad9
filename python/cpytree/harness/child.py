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


def child_env(mode: str | None = None) -> dict[str, str]:
    """The environment of a measuring child: one thread, this cpytree importable.

    Autoload (install() at `import torch`, cpytree's torch.backends entry
    point) is off (CPYTREE_INSTALL=0) except in mode "autoload", where the
    child gets the user's default: no CPYTREE_INSTALL, torch's entry-point
    loading on, and the entry point visible (`_entry_point_path`).

    PYTHONDONTWRITEBYTECODE is dropped: with it, every child compiles the
    source of each cpytree module it imports (tens of milliseconds that a
    pip-installed cpytree, whose bytecode pip writes, never pays), and the
    modes would differ by that. The first child writes the bytecode.
    """
    pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
    parts = [pkg_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        TORCHINDUCTOR_COMPILE_THREADS="1",
        CPYTREE_INSTALL="0",
        PYTHONHASHSEED="0",
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode == "autoload":
        del env["CPYTREE_INSTALL"]
        env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
        extra = _entry_point_path()
        if extra is not None:
            parts.insert(0, extra)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


_EP_DIR: list[str] = []


def _entry_point_path() -> str | None:
    """None when an installed cpytree declares the entry point; else a directory to
    put on PYTHONPATH that declares it (a source tree has no package metadata)."""
    from .._torch._autoload import ENTRY_POINT, entry_point_registered

    if entry_point_registered():
        return None
    if not _EP_DIR:
        import atexit
        import shutil
        import tempfile

        base = tempfile.mkdtemp(prefix="cpytree-harness-ep-")
        atexit.register(shutil.rmtree, base, True)
        info = Path(base) / "cpytree_harness_autoload-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: cpytree-harness-autoload\nVersion: 0\n"
        )
        (info / "entry_points.txt").write_text("[torch.backends]\n{} = {}\n".format(*ENTRY_POINT))
        _EP_DIR.append(base)
    return _EP_DIR[0]


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
    env = child_env(config.get("mode"))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ChildFailed(f"timed out after {timeout:g} s") from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER) :])
            return result
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    raise ChildFailed(f"exit {proc.returncode}: {tail[-400:]}")
