"""The Dynamo fence: every private torch name cpytree uses is checked before use.

A torch that moved one of the names the tracker-level fast paths use gets
them left out, with one warning naming what moved: install()'s engine swap
stays and compiled code traces torch's own pytree exactly as without
install(). A torch that moved a name the substitution needs (Dynamo could
not be told what the C functions stand for) gets install() undone, again
with one warning. Never an error inside a user's compile.

The "drifted" torch is shown to the inventory check only (`_inventory.import_module`
hands it a copy of one Dynamo module with one name removed), so that torch's
own tracing, which still uses the name, runs as shipped.
"""

from __future__ import annotations

import types
import warnings

import pytest

pytest.importorskip("torch")

import torch
import torch._dynamo
import torch.utils._pytree as tp

import cpytree
from cpytree._torch import _inventory
from cpytree._torch._inventory import INVENTORY, VERSIONS
from cpytree.harness.studies.dynamo_probe import counting_steps

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp", reason="install() needs the C++ engine (cpytree._C)"
    ),
]


def test_every_required_name_is_present_on_this_torch():
    for layer in _inventory.LAYERS:
        assert _inventory.missing(layer) == [], layer
    assert {n.layer for n in INVENTORY} == set(_inventory.LAYERS)


def test_optional_names_match_the_versions_table():
    minor = ".".join(torch.__version__.split(".")[:2])
    column = {"2.13": 1, "2.14": 2}.get(minor)
    if column is None:
        pytest.skip(f"torch {torch.__version__} is not in VERSIONS")
    optional = {str(n): _inventory._present(n) for n in INVENTORY if n.optional}
    assert set(optional) == {row[0] for row in VERSIONS}
    for row in VERSIONS:
        assert optional[row[0]] == (row[column] == "present"), row[0]


def _drift(monkeypatch, module_name: str, class_name: str, removed: str) -> str:
    """Show the inventory check a `module_name` whose class lacks `removed`."""
    real_module = __import__(module_name, fromlist=["_"])
    real_class = getattr(real_module, class_name)
    kept = {k: v for k, v in vars(real_class).items() if k not in (removed, "__dict__",
                                                                    "__weakref__")}  # fmt: skip
    fake_module = types.ModuleType(module_name)
    fake_module.__dict__.update(vars(real_module))
    setattr(fake_module, class_name, type(class_name, (), kept))
    real_import = _inventory.import_module
    monkeypatch.setattr(
        _inventory,
        "import_module",
        lambda name: fake_module if name == module_name else real_import(name),
    )
    return f"{module_name}.{class_name}.{removed}"


def _flatten_unflatten(tree, x):
    leaves, spec = tp.tree_flatten(tree)
    return tp.tree_unflatten([v * x for v in leaves], spec)


def _compile(fn, *args):
    """(output, bytecodes, guards) of a fresh fullgraph compile and call."""
    torch._dynamo.reset()
    guards = []
    compiled = torch._dynamo.optimize(
        "eager", nopython=True, guard_export_fn=lambda g: guards.append(len(g))
    )(fn)
    with counting_steps() as steps:
        out = compiled(*args)
    return out, steps[0], sum(guards)


def _tree():
    t = torch.arange(3.0)
    return {"a": [t, (t + 1, t + 2)], "b": {"c": t * 2}}


def _equal(a, b) -> bool:
    la, sa = tp.tree_flatten(a)
    lb, sb = tp.tree_flatten(b)
    return sa == sb and all(torch.equal(x, y) for x, y in zip(la, lb))


@pytest.fixture
def clean():
    yield
    cpytree.uninstall()
    torch._dynamo.reset()


@pytest.mark.usefixtures("clean")
def test_drifted_tracker_name_turns_fast_paths_off_with_one_warning(monkeypatch):
    x = torch.tensor(2.0)
    expected, torch_steps, torch_guards = _compile(_flatten_unflatten, _tree(), x)
    moved = _drift(monkeypatch, "torch._dynamo.variables", "ConstDictVariable",
                   "install_dict_keys_match_guard")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [type(w.message) for w in caught] == [RuntimeWarning]
    assert moved in str(caught[0].message)
    assert "fast paths are off" in str(caught[0].message)
    # The engine swap stays; the Dynamo substitution stays; the trackers are off.
    assert cpytree.is_installed() and tp.tree_flatten is cpytree.tree_flatten
    layers = cpytree._torch.status()["dynamo"]
    assert layers["substitute"] == "on" and layers["trackers"].startswith("off: torch moved ")
    # Compiled code traces torch's own pytree: same result, same steps and guards.
    out, steps, guards = _compile(_flatten_unflatten, _tree(), x)
    assert _equal(out, expected) and _equal(out, _flatten_unflatten(_tree(), x))
    assert steps == torch_steps and guards <= torch_guards


@pytest.mark.usefixtures("clean")
def test_drifted_substitution_name_undoes_install_with_one_warning(monkeypatch):
    x = torch.tensor(2.0)
    expected, torch_steps, _ = _compile(_flatten_unflatten, _tree(), x)
    original = tp.tree_flatten
    moved = _drift(monkeypatch, "torch._dynamo.guards", "GuardBuilder", "CLOSURE_MATCH")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [type(w.message) for w in caught] == [RuntimeWarning]
    assert moved in str(caught[0].message) and "install() was undone" in str(caught[0].message)
    assert not cpytree.is_installed() and tp.tree_flatten is original
    out, steps, _ = _compile(_flatten_unflatten, _tree(), x)
    assert _equal(out, expected) and steps == torch_steps
    monkeypatch.undo()
    cpytree.install()  # an intact torch installs as usual
    assert cpytree._torch.status()["dynamo"] == {"trackers": "on", "substitute": "on",
                                                  "spec": "on"}  # fmt: skip
