"""The harness's "autoload" mode: what a user gets with no code change.

Beside "torch" (torch as shipped: the children run with CPYTREE_INSTALL=0)
and "cpytree" (explicit install()), the --compile and --runtime studies can
run children whose own `import torch` installs cpytree through the entry
point (harness/child.py: `child_env("autoload")`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cpytree.harness.child import child_env

pytestmark = pytest.mark.torch


def _harness(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpytree.harness", "--no-progress", "--no-plots", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, CPYTREE_INSTALL="0"),
        timeout=timeout,
        check=False,
    )


def test_child_env_turns_autoload_off_except_in_its_mode():
    assert child_env()["CPYTREE_INSTALL"] == "0"
    assert child_env("cpytree")["CPYTREE_INSTALL"] == "0"
    env = child_env("autoload")
    assert "CPYTREE_INSTALL" not in env and "TORCH_DEVICE_BACKEND_AUTOLOAD" not in env
    code = (
        "import json, sys, torch\n"
        "cp = sys.modules.get('cpytree')\n"
        "print(json.dumps(cp is not None and cp.is_installed()))"
    )
    for mode, want in ((None, "false"), ("autoload", "true")):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=child_env(mode),
            timeout=240,
            check=True,
        )
        assert proc.stdout.strip().splitlines()[-1] == want


def test_compile_autoload_mode(tmp_path: Path):
    out = tmp_path / "report"
    proc = _harness(
        "--compile", "--models", "mlp", "--quick", "--compile-backend", "aot_eager",
        "--compile-modes", "torch,autoload", "--no-runtime", "--no-dynamo", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())["compile"]["summary"]
    assert [(r["model"], r["mode"]) for r in rows] == [("mlp", "torch"), ("mlp", "autoload")]
    for r in rows:
        assert r["errors"] == [], r["errors"]
        assert r["allclose_to_eager"] and r["identical_across_modes"]
    report = (out / "report.md").read_text()
    assert "*autoload*: no code change" in report


def test_runtime_autoload_mode(tmp_path: Path):
    out = tmp_path / "report"
    proc = _harness(
        "--runtime", "--quick", "--runtime-cases", "export-module",
        "--runtime-modes", "torch,cpytree,autoload", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads((out / "results.json").read_text())["runtime"]["rows"]
    assert row["errors"] == [], row["errors"]
    assert row["autoload_us"] > 0 and row["autoload_speedup"] > 0
    # The deterministic counts: the export call's pytree work runs on the
    # engine after the autoload as after install().
    assert row["autoload_pytree_fn_calls"] < row["torch_pytree_fn_calls"]
    header = next(line for line in proc.stdout.splitlines() if line.startswith("case "))
    assert "autoload us" in header and "autoload speedup" in header


def test_autoload_mode_needs_fresh_processes():
    proc = _harness("--compile", "--warm", "--compile-modes", "torch,autoload", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "cpytree-harness --compile: the autoload mode needs a fresh `import torch` per run; "
        "--warm and --replay switch modes inside one process"
    )
