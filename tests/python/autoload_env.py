"""Child processes in which `import torch` sees cpytree's `torch.backends` entry point.

torch finds the entry point through the package metadata
(`importlib.metadata.entry_points(group="torch.backends")`). A source tree on
sys.path has none, so `entry_point_dir` writes a minimal distribution (a
`.dist-info` with METADATA and entry_points.txt) declaring exactly the entry
point pyproject.toml declares, read from pyproject.toml itself, and the
children get it first on PYTHONPATH, followed by this process's sys.path (the
very cpytree under test). A wheel installed in a venv carries the same
metadata (scripts/autoload_venv.sh checks that path, `pip uninstall` included).

The conftest turns autoload off for the suite (CPYTREE_INSTALL=0); `child_env`
starts from that and each test says what it wants: `CPYTREE_INSTALL=None`
removes the variable (the user's default).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GROUP = "torch.backends"


def declared_entry_point() -> tuple[str, str]:
    """(name, target) of the `torch.backends` entry point in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(
        r'^\[project\.entry-points\."torch\.backends"\]\n((?:[^\[\n].*\n)+)', text, re.M
    )
    assert section is not None, "pyproject.toml declares no torch.backends entry point"
    pairs = re.findall(r'^(\w+)\s*=\s*"([^"]+)"', section.group(1), re.M)
    assert len(pairs) == 1, pairs
    return pairs[0]


def entry_point_dir(base: Path) -> Path:
    """A directory holding a distribution that declares cpytree's entry point."""
    name, target = declared_entry_point()
    info = base / "cpytree_autoload_probe-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cpytree-autoload-probe\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{name} = {target}\n")
    return base


def child_env(base: Path | None, **overrides: str | None) -> dict[str, str]:
    """This process's environment, with the entry point on PYTHONPATH (unless base is None)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    path = [p for p in sys.path if p]
    if base is not None:
        path.insert(0, str(entry_point_dir(base)))
    env["PYTHONPATH"] = os.pathsep.join(path)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(
    args: list[str], env: dict[str, str], timeout: float = 240.0
) -> subprocess.CompletedProcess:
    """`python *args` in a child; fails the test with its stderr when it exits non-zero."""
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def run_json(code: str, env: dict[str, str], timeout: float = 240.0) -> dict:
    """Run `code` in a child; the JSON object on its last line of stdout."""
    proc = run(["-c", code], env, timeout)
    return json.loads(proc.stdout.strip().splitlines()[-1])
