"""install() on torch versions: tested ones silently, others with a warning,
and a failure midway never leaves torch half patched.

`make test-torch-versions` runs this file with the other torch-facing suites
against torch 2.13.0 and 2.14.1 (cpytree._torch._versions.TESTED).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree
import torch.utils._pytree as tp

import cpytree
import cpytree._torch as ct
from cpytree._torch import _spec_interop, _versions, dynamo as _dynamo

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="install() needs the engine"),
]


@pytest.fixture(autouse=True)
def _uninstalled():
    cpytree.uninstall()
    _versions._warned.clear()
    yield
    cpytree.uninstall()


def test_this_torch_is_a_tested_version():
    # The venvs of `make test-torch-versions` hold exactly the tested releases.
    assert _versions.is_tested(torch.__version__), torch.__version__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpytree.install()
    assert cpytree.is_installed()


@pytest.mark.parametrize(
    ("version", "tested"),
    [("2.13.0", True), ("2.13.0+cpu", True), ("2.14.1", True), ("2.14.0+cu126", True),
     ("2.12.1", False), ("2.15.0.dev20260101", False), ("3.0.0", False), ("nightly", False)],
)  # fmt: skip
def test_is_tested(version, tested):
    assert _versions.is_tested(version) is tested


def test_untested_version_warns_once_and_installs(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with pytest.warns(UserWarning, match=r"torch 2\.99\.0 was not tested .*2\.13\.0, 2\.14\.1"):
        cpytree.install()
    assert cpytree.is_installed()
    assert tp.tree_flatten is not cpytree._reference.tree_flatten
    cpytree.uninstall()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpytree.install()  # the same untested version: no second warning


def _torch_state():
    """Everything install() may change in torch, by identity."""
    return (
        dict(vars(tp)),
        dict(vars(fx_pytree)),
        dict(tp.SUPPORTED_NODES),
        dict(tp.SERIALIZED_TYPE_TO_PYTHON_TYPE),
        dict(fx_pytree.SUPPORTED_NODES),
        dict(cpytree.SUPPORTED_NODES),
    )


_STATE_NAMES = (
    "vars(torch.utils._pytree)",
    "vars(torch.fx._pytree)",
    "tp.SUPPORTED_NODES",
    "tp.SERIALIZED_TYPE_TO_PYTHON_TYPE",
    "fx SUPPORTED_NODES",
    "cpytree.SUPPORTED_NODES",
)


def _same(before, after):
    for name, b, a in zip(_STATE_NAMES, before, after):
        assert b.keys() == a.keys(), (name, set(b.keys()) ^ set(a.keys()))
        # torch's objects must be the very same; cpytree's own registry may
        # hold equal NodeDefs re-made by the registry mirror's stop().
        if name.startswith("cpytree"):
            changed = {k: (b[k], a[k]) for k in b if a[k] != b[k]}
        else:
            changed = {k: (b[k], a[k]) for k in b if a[k] is not b[k]}
        assert not changed, f"{name} left changed: {changed}"


class Injected(Exception):
    pass


def _fail_on_call(n):
    calls = []

    def fail(*args, **kwargs):
        calls.append(args)
        if len(calls) >= n:
            raise Injected(f"call {n}")

    return fail, calls


@pytest.mark.parametrize("where", ["spec_interop", "third_substitution", "rebind_imports"])
def test_failure_midway_leaves_torch_as_it_was(monkeypatch, where):
    before = _torch_state()
    if where == "spec_interop":
        monkeypatch.setattr(_spec_interop, "enable", _fail_on_call(1)[0])
    elif where == "third_substitution":
        real = _dynamo.DynamoHooks.substitute
        fail, _ = _fail_on_call(3)

        def substitute(self, fast, original):
            fail()
            return real(self, fast, original)

        monkeypatch.setattr(_dynamo.DynamoHooks, "substitute", substitute)
    else:  # every function already swapped when this runs
        monkeypatch.setattr(ct, "_rebind_imports", _fail_on_call(1)[0])
    with pytest.raises(Injected):
        cpytree.install()
    assert not cpytree.is_installed()
    _same(before, _torch_state())
    monkeypatch.undo()
    cpytree.install()  # and a later install() works as usual
    assert cpytree.is_installed()
    cpytree.uninstall()
    _same(before, _torch_state())
