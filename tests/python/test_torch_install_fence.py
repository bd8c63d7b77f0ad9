"""The fence outside Dynamo: the registry link and install() check their names first.

On a torch that moved a name the registry link needs (`_NODE_REGISTRY_LOCK`,
a registration function), `import torch` / `import cpytree` never raise:
one warning, torch's functions left exactly as they were, and install()
refuses with one warning. Each case runs in a fresh interpreter, where the
drift is made before cpytree sees torch (or shown to the inventory check
while `import torch` runs).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

pytest.importorskip("torch")

import torch
import torch.utils._pytree as tp

import cpytree
from cpytree._torch import _versions
from cpytree._torch_link import _inventory

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp", reason="install() needs the C++ engine (cpytree._C)"
    ),
]

_REPORT = """
    import json, warnings
    import torch.utils._pytree as tp
    import cpytree
    wrapped = {name: getattr(getattr(tp, name, None), "__wrapped__", None) is not None
               for name in ("_private_register_pytree_node", "_deregister_pytree_node",
                            "register_constant")}
    with warnings.catch_warnings(record=True) as at_install:
        warnings.simplefilter("always")
        cpytree.install()
    status = cpytree.status()
    print(json.dumps({
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught + at_install
                     if str(w.message).startswith("cpytree")],  # not torch's own
        "at_install": len(at_install), "wrapped": wrapped, "installed": status["installed"],
        "registry": status["registry"], "refused": status["refused"],
        "tree_map_is_torch": tp.tree_map.__module__ == "torch.utils._pytree",
    }))
"""


def _run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
           "CPYTREE_INSTALL": "0", "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + textwrap.dedent(_REPORT)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _assert_refused(res: dict, moved: str) -> None:
    # One warning from the registry link, one from install(); torch as shipped.
    assert len(res["warnings"]) == 2, res["warnings"]
    assert res["warnings"][0].startswith("RuntimeWarning: cpytree: torch's pytree registry")
    assert moved in res["warnings"][0]
    assert res["at_install"] == 1 and "nothing installed" in res["warnings"][1]
    assert res["wrapped"] == dict.fromkeys(res["wrapped"], False)
    assert res["installed"] is False and res["tree_map_is_torch"] is True
    assert res["registry"] == f"off: torch moved {moved}"
    assert moved in res["refused"]


@pytest.mark.parametrize("name", ["_NODE_REGISTRY_LOCK", "_private_register_pytree_node",
                                  "register_constant"])  # fmt: skip
def test_renamed_registry_name_leaves_torch_as_it_was(name):
    # Renamed before cpytree is imported: the link attaches at `import cpytree`.
    res = _run(f"""
        import warnings
        import torch.utils._pytree as tp
        tp.{name}_renamed = tp.{name}
        del tp.{name}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import cpytree
        tp.{name} = tp.{name}_renamed  # so that the report can read it
    """)
    _assert_refused(res, f"torch.utils._pytree.{name}")


@pytest.mark.parametrize("name", ["_NODE_REGISTRY_LOCK", "_deregister_pytree_node"])
def test_drift_seen_inside_import_torch_never_raises(name):
    # cpytree first: the link attaches while `import torch` runs; the check
    # there is shown a torch whose pytree module lacks `name`.
    res = _run(f"""
        import types, warnings, importlib
        import cpytree
        from cpytree._torch_link import _inventory
        real = _inventory.import_module
        def drifted(module):
            found = real(module)
            if module != "torch.utils._pytree":
                return found
            fake = types.ModuleType(module)
            fake.__dict__.update({{k: v for k, v in vars(found).items() if k != "{name}"}})
            return fake
        _inventory.import_module = drifted
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        _inventory.import_module = real
    """)
    _assert_refused(res, f"torch.utils._pytree.{name}")


def test_failure_midway_through_attach_unwraps_and_never_raises():
    res = _run("""
        import warnings
        import cpytree
        from cpytree._torch_link import _sync as _registry
        def broken(self, classes):
            raise RuntimeError("boom")
        _registry.RegistrySync._copy_all = broken
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
    """)
    assert res["warnings"][0].startswith("RuntimeWarning: cpytree: torch's pytree registry")
    assert "RuntimeError: boom" in res["warnings"][0]
    assert res["wrapped"] == dict.fromkeys(res["wrapped"], False)
    assert res["installed"] is False and res["tree_map_is_torch"] is True
    assert res["registry"] == "off: RuntimeError: boom"


@pytest.fixture
def clean():
    yield
    cpytree.uninstall()


def _hide(monkeypatch, module: str, attr: str) -> None:
    real = _inventory.import_module
    found = real(module)

    class Drifted:
        def __getattr__(self, name):
            if name == attr:
                raise AttributeError(name)
            return getattr(found, name)

    monkeypatch.setattr(_inventory, "import_module",
                        lambda name: Drifted() if name == module else real(name))  # fmt: skip


@pytest.mark.usefixtures("clean")
def test_install_refuses_on_a_moved_name_it_reads(monkeypatch):
    original = tp.tree_map
    _hide(monkeypatch, "torch.fx._pytree", "SUPPORTED_NODES")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [str(w.message) for w in caught] == [
        "cpytree.install(): torch moved torch.fx._pytree.SUPPORTED_NODES; nothing installed, "
        "torch is as shipped (see cpytree.status())."
    ]
    assert not cpytree.is_installed() and tp.tree_map is original
    assert cpytree.status()["refused"] == "torch moved torch.fx._pytree.SUPPORTED_NODES"
    monkeypatch.undo()
    cpytree.install()
    assert cpytree.status()["refused"] == "" and tp.tree_map is not original


@pytest.mark.usefixtures("clean")
def test_moved_interop_name_gives_spec_free_mode(monkeypatch):
    _hide(monkeypatch, "torch.utils._pytree", "_LEAF_SPEC")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [w for w in caught if "_LEAF_SPEC" in str(w.message)] == []
    state = cpytree.status()
    assert state["installed"] and state["mode"] == "spec-free"
    assert state["skipped"]["torch.utils._pytree.tree_flatten"] == (
        "torch moved torch.utils._pytree._LEAF_SPEC"
    )
    assert tp.tree_flatten.__module__ == "torch.utils._pytree"
    leaves = tp.tree_leaves({"a": [1, (2, None)]})
    assert leaves == [1, 2, None]  # None is a leaf in torch


@pytest.mark.usefixtures("clean")
def test_public_status():
    assert cpytree.status() == cpytree._torch.status()  # the face hands over to the room above it
    before = cpytree.status()
    assert before == {"installed": False, "torch": torch.__version__,
                      "tested": _versions.is_tested(torch.__version__),
                      "registry": "following", "refused": ""}  # fmt: skip
    importlib.import_module("torch._dynamo")  # the Dynamo part applies once Dynamo is loaded
    cpytree.install()
    after = cpytree.status()
    assert after["installed"] and after["mode"] == "full"
    assert set(after["fast_paths"]) == set(_inventory.PATHS)
    off = _inventory.paths_off()
    assert {p for p, v in after["fast_paths"].items() if v != "on"} == set(off)


def test_python_m_cpytree():
    proc = subprocess.run(
        [sys.executable, "-m", "cpytree"],
        capture_output=True,
        text=True,
        env={**os.environ, "CPYTREE_INSTALL": ""},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"cpytree {cpytree.__version__}"
    assert lines[1].startswith("engine: cpp")
    version = importlib.metadata.version("torch")
    tested = "yes" if _versions.is_tested(version) else "no"
    assert lines[2] == f"torch: {version} (not imported), tested with cpytree: {tested}"
    assert any(line.startswith("install(): not in effect") for line in lines)
    # Every part and fast path, checked against this torch (all present here).
    start = lines.index(f"on torch {version} (every private name cpytree uses, checked):")
    parts = [line.split() for line in lines[start + 1 :] if line.strip() != "Dynamo fast paths:"]
    assert [p[-1] for p in parts] == ["on"] * (4 + len(_inventory.PATHS))
    assert [p[0] for p in parts[4:]] == list(_inventory.PATHS)
