"""The wheel, really installed: a script that never names cpytree gets it inside
torch, each switch restores plain torch, and `pip uninstall cpytree` leaves
torch clean.

Runs when CPYTREE_WHEEL names a wheel (`make test-pythons` sets it;
by hand: `CPYTREE_WHEEL=dist/cpytree-...whl pytest tests/python/test_autoload_venv.py`).
A fresh venv gets the wheel with pip, and torch either from
CPYTREE_AUTOLOAD_TORCH_SITE (a site-packages directory holding torch and no
cpytree, e.g. /work/venvs/torch-2.15.0/lib/python3.11/site-packages, added with
a .pth: fast) or else `pip install --no-index torch==<this torch's version>`
(a local build through pip's configured find-links; skipped if there is none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch

WHEEL = os.environ.get("CPYTREE_WHEEL", "")
TORCH_SITE = os.environ.get("CPYTREE_AUTOLOAD_TORCH_SITE", "")

# Never names cpytree: what torch holds after its own import.
_SCRIPT = """
import json, sys, types, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch, torch.utils._pytree as tp
cp = sys.modules.get("cpytree")
print(json.dumps({
    "loaded": cp is not None,
    "installed": cp is not None and cp.is_installed(),
    "python_tree_map": isinstance(tp.tree_map, types.FunctionType)
                       and tp.tree_map.__code__.co_filename == tp.__file__,
    "cpytree_from": None if cp is None else cp.__file__,
    "warnings": [str(w.message) for w in caught],
    "torch": torch.__version__,
}))
"""


def _run(python: Path, *args: str, **env: str | None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CPYTREE_INSTALL")}
    full["CUDA_VISIBLE_DEVICES"] = ""
    for key, value in env.items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=full, timeout=900, check=False
    )


def _state(python: Path, **env: str | None) -> dict:
    proc = _run(python, "-c", _SCRIPT, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    if not WHEEL:
        pytest.skip("CPYTREE_WHEEL names no wheel (make test-pythons sets it)")
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    python = root / "bin" / "python"
    if TORCH_SITE:
        purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
        Path(purelib.stdout.strip(), "zz_torch_site.pth").write_text(TORCH_SITE + "\n")
    else:
        pin = f"torch=={torch.__version__}"
        got = _run(python, "-m", "pip", "install", "-q", "--no-index", pin)
        if got.returncode != 0:
            pytest.skip(f"no local build of {pin} for pip: {got.stderr.strip()[-200:]}")
    got = _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", WHEEL)
    assert got.returncode == 0, got.stderr
    return python


def test_installing_is_enough_and_uninstalling_leaves_torch_clean(venv: Path):
    site = _run(venv, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    purelib = site.stdout.strip()
    on = _state(venv)
    assert on["installed"] and not on["python_tree_map"]
    assert on["cpytree_from"].startswith(purelib)  # the wheel's, not a checkout's
    plain = _state(venv, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert not plain["loaded"] and plain["python_tree_map"]
    # Autoload adds no warning of its own to `import torch`.
    explicit = _run(
        venv,
        "-W",
        "always",
        "-c",
        "import warnings, json\n"
        "with warnings.catch_warnings(record=True) as c:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch, cpytree; cpytree.install()\n"
        "print(json.dumps([str(w.message) for w in c]))",
        CPYTREE_INSTALL="0",
    )
    assert on["warnings"] == json.loads(explicit.stdout.strip().splitlines()[-1])
    off = _state(venv, CPYTREE_INSTALL="0")
    # switched off, the entry point imports no cpytree module
    assert not off["loaded"] and not off["installed"] and off["python_tree_map"]
    assert off["warnings"] == plain["warnings"]
    cli = _run(venv, "-m", "cpytree")
    assert "autoload: on (install() at `import torch`; CPYTREE_INSTALL unset; " in cli.stdout

    got = _run(venv, "-m", "pip", "uninstall", "-y", "-q", "cpytree")
    assert got.returncode == 0, got.stderr
    gone = _state(venv)
    assert not gone["loaded"] and gone["python_tree_map"]
    assert gone["warnings"] == plain["warnings"]
    left = [p for p in Path(purelib).iterdir() if p.name.lower().lstrip("_").startswith("cpytree")]
    assert not left
    assert sysconfig.get_path("purelib") != purelib  # the test's own venv was not touched
