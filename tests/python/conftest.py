"""Shared fixtures for the cpytree Python test suite.

* ``impl``: the implementation under test, parametrized over ``cpytree`` (the
  package: the C++ engine when ``cpytree._C`` loads) and ``cpytree._reference``
  (the pure-Python implementation).
* ``torch_pytree``: ``torch.utils._pytree`` with the table's custom types
  registered in it, or a skip when torch is not importable. A test that takes
  it gets the ``torch`` marker here (the torch-version run is ``-m torch``);
  modules that import torch carry the marker themselves (checked by
  test_suite_markers.py).
* Hypothesis profiles: ``ci`` (the default, thousands of generated trees in
  total) and ``dev`` (a few dozen per test, for quick local runs). Pick one with
  ``HYPOTHESIS_PROFILE=dev``.

Autoload (install() at ``import torch``) is off for the suite and its
children: ``CPYTREE_INSTALL=0`` is set here, before anything imports torch.

Set ``CPYTREE_REQUIRE_ENGINE=1`` to turn "the C++ engine did not load" from a
skip of the engine-only tests into a failure.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# Every comparison with torch compares with torch's own Python code: the
# `torch.backends` entry point of an installed cpytree (install() at
# `import torch`) is off for this process and every child it starts, before
# anything imports torch. Tests that want it on say so for their child
# (test_autoload*.py); test_autoload.py checks that torch here is torch's code.
os.environ["CPYTREE_INSTALL"] = "0"

# The helper modules (trees, support) live next to this file; make them
# importable whatever pytest's import mode is. Pickling specs of the table's
# types refers to them as ``trees.<name>``, so there must be one ``trees``.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import support  # noqa: E402
import trees  # noqa: E402

settings.register_profile(
    "ci",
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


IMPL_NAMES = ("cpytree", "cpytree._reference")
IMPL_IDS = ("cpytree", "reference")


@pytest.fixture(params=IMPL_NAMES, ids=IMPL_IDS)
def impl(request):
    """The implementation under test (a module with torch's pytree API)."""
    return importlib.import_module(request.param)


@pytest.fixture
def engine():
    """``cpytree`` when its functions are the C++ engine's; skips otherwise."""
    if not support.engine_active():
        if os.environ.get("CPYTREE_REQUIRE_ENGINE") == "1":
            pytest.fail("cpytree._C did not load but CPYTREE_REQUIRE_ENGINE=1")
        pytest.skip("the C++ engine (cpytree._C) is not active")
    return importlib.import_module("cpytree")


@pytest.fixture(scope="session")
def torch_pytree():
    """torch.utils._pytree with the table's custom types registered, or skip."""
    mod = trees.torch_pytree()
    if mod is None:
        pytest.skip("torch is not importable")
    return mod


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    """The ``torch`` marker on every test that takes the ``torch_pytree`` fixture."""
    for item in items:
        if "torch_pytree" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.torch)


def pytest_report_header(config):
    try:
        import cpytree

        where = getattr(cpytree, "__file__", "?")
        active = "C++ engine" if support.engine_active() else "pure-Python fallback"
        return [f"cpytree: {where} ({active})"]
    except Exception as exc:  # pragma: no cover - reporting only
        return [f"cpytree: not importable ({type(exc).__name__}: {exc})"]
