"""install() on torch releases: silently on every one (tested or not), and a
failure midway never leaves torch half patched.

`make test-torch-range` runs this file with the other torch-facing suites
against every release of cpytree._releases.SUPPORTED (2.10.0-2.15.0);
cpytree._torch._versions.TESTED lists those they passed on.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree
import torch.utils._pytree as tp

import cpytree
import cpytree._torch as ct
from cpytree import _releases
from cpytree._torch import _spec_interop, _versions, dynamo as _dynamo

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="install() needs the engine"),
]


@pytest.fixture(autouse=True)
def _uninstalled():
    cpytree.uninstall()
    yield
    cpytree.uninstall()


def test_this_torch_is_a_tested_release():
    # The venvs of `make test-torch-range` hold exactly the supported releases.
    assert _versions.is_tested(torch.__version__), torch.__version__
    assert torch.__version__.split("+")[0] in _releases.SUPPORTED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpytree.install()
    assert cpytree.is_installed()


def test_tested_releases_are_the_supported_ones():
    assert set(_versions.TESTED) <= set(_releases.SUPPORTED)


@pytest.mark.parametrize(
    ("version", "tested"),
    [("2.13.0+cpu", True), ("2.14.0+cu126", True), ("2.9.1", False),
     ("2.16.0.dev20270101", False), ("3.0.0", False), ("nightly", False)],
)  # fmt: skip
def test_is_tested(version, tested):
    assert _versions.is_tested(version) is tested


@pytest.mark.parametrize("release", _releases.SUPPORTED)
def test_is_tested_over_the_range(release):
    assert _versions.is_tested(release) is (release in _versions.TESTED)


def _install_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert cpytree.is_installed()
    return [str(w.message) for w in caught]


def test_untested_release_installs_silently(monkeypatch):
    # Being untested adds no warning: install() warns only of something
    # actually off (a Dynamo fast path whose torch names moved), which it
    # would say on this very torch too.
    real = _install_warnings()
    cpytree.uninstall()
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    untested = _install_warnings()
    assert [m for m in untested if m not in real] == []
    assert not any("tested" in m for m in untested)
    assert not _versions.is_tested(torch.__version__)
    assert tp.tree_flatten is not cpytree._reference.tree_flatten
    # ...and cpytree gives the newest supported release's semantics there
    assert _releases.active() == (2, 15) == _versions.check_torch_version("2.99.0")


def test_the_installed_release_semantics():
    cpytree.install()
    assert _releases.active() == _releases.release_of(torch.__version__)
    assert _versions.check_torch_version(torch.__version__) == _releases.active()


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
