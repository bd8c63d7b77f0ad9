"""Autoload: `import torch` runs install() through cpytree's `torch.backends` entry point.

Each case runs in a child process whose `import torch` sees the entry point
pyproject.toml declares (autoload_env.py: a `.dist-info` on PYTHONPATH), with
the switches set as the case says; the child reports what torch's pytree
module holds afterwards. The suite itself runs with autoload off
(conftest.py), which the first test checks.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree
import torch.utils._pytree as tp

import cpytree
from autoload_env import child_env, declared_entry_point, run, run_json
from cpytree._torch import TARGETS
from cpytree._torch._autoload import ENTRY_POINT, describe, setting

pytestmark = pytest.mark.torch

FAILED = (
    "cpytree: install() at `import torch` failed (RuntimeError: boom); torch's pytree is "
    "left as it was. CPYTREE_INSTALL=0 turns this autoload off."
)

# What a child's `import torch` left: whether cpytree was loaded and installed,
# whether every name install() may swap is still torch's Python function from
# torch's own file, the warnings raised during the import (the child's `prelude`
# runs first, `after` inside the recording), and whether Dynamo was imported.
_REPORT = """
import json, sys, types, warnings
{prelude}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("{action}")
    import torch, torch.fx._pytree, torch.utils._pytree as tp
    {after}
loaded = "cpytree" in sys.modules
entry_point = "_cpytree_autoload" in sys.modules
def torchs_own(module, name):
    fn = getattr(sys.modules[module], name)
    return isinstance(fn, types.FunctionType) and fn.__code__.co_filename == sys.modules[module].__file__
cp = sys.modules.get("cpytree")
auto = sys.modules.get("cpytree._torch._autoload")
print(json.dumps({{
    "loaded": loaded,
    "entry_point": entry_point,
    "installed": cp is not None and cp.is_installed(),
    "outcome": getattr(auto, "_outcome", None),
    "torchs_own": [m + "." + n for m, n in {targets!r} if torchs_own(m, n)],
    "tree_map_is_cpytrees": cp is not None
    and getattr(tp.tree_map, "__cpytree_engine__", None) is cp.tree_map,
    "flatten": repr(tp.tree_flatten({{"a": [1, (2, None)]}})),
    "nodes": len(tp.SUPPORTED_NODES),
    "dynamo": "torch._dynamo" in sys.modules,
    "warnings": [f"{{w.category.__name__}}: {{w.message}}" for w in caught],
}}))
"""

ALL_TARGETS = [f"{m}.{n}" for m, n, _ in TARGETS]


def _report(
    tmp_path, prelude: str = "", after: str = "pass", action: str = "always", **env: str | None
) -> dict:
    targets = [(m, n) for m, n, _ in TARGETS]
    code = _REPORT.format(prelude=prelude, after=after, action=action, targets=targets)
    return run_json(code, child_env(tmp_path, **env))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """torch as shipped: torch loads no entry point at all."""
    tmp = tmp_path_factory.mktemp("plain")
    return _report(tmp, TORCH_DEVICE_BACKEND_AUTOLOAD="0", CPYTREE_INSTALL=None)


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    """torch with an explicit install() after its import (autoload off)."""
    tmp = tmp_path_factory.mktemp("explicit")
    return _report(tmp, after="import cpytree; cpytree.install()", CPYTREE_INSTALL="0")


def test_the_suite_compares_with_torchs_own_code():
    assert os.environ["CPYTREE_INSTALL"] == "0"
    assert setting() == "off"
    for module, name, _ in TARGETS:
        mod = importlib.import_module(module)
        fn = getattr(mod, name)
        assert isinstance(fn, types.FunctionType), f"{module}.{name} is {fn!r}"
        assert fn.__code__.co_filename == mod.__file__, f"{module}.{name}"
    assert tp.tree_flatten.__module__ == "torch.utils._pytree"
    assert fx_pytree.tree_flatten_spec.__code__.co_filename == fx_pytree.__file__
    assert not cpytree.is_installed()


def test_the_entry_point_names_the_autoload_function():
    name, target = declared_entry_point()
    assert (name, target) == ("cpytree", "_cpytree_autoload:autoload") == ENTRY_POINT
    module, attr = target.split(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_plain_torch_is_torchs_own(plain):
    assert not plain["loaded"]
    assert plain["torchs_own"] == ALL_TARGETS
    assert not plain["dynamo"]


@pytest.mark.parametrize("value", [None, "1"])
def test_import_torch_installs(tmp_path, plain, explicit, value):
    got = _report(tmp_path, CPYTREE_INSTALL=value)
    assert got["installed"] and got["tree_map_is_cpytrees"]
    assert got["outcome"] == "installed"
    assert got["torchs_own"] == [n for n in ALL_TARGETS if n in explicit["torchs_own"]]
    assert got["flatten"] == plain["flatten"]
    assert got["nodes"] == explicit["nodes"]
    assert not got["dynamo"]  # no import of torch._dynamo until the user's code imports it
    # Nothing of its own to say: the warnings of `import torch` and of install() at most.
    assert got["warnings"] == plain["warnings"] + explicit["warnings"][len(plain["warnings"]) :]


@pytest.mark.parametrize("value", ["0", " Off "])
def test_cpytree_install_off_keeps_torch_as_shipped(tmp_path, plain, value):
    got = _report(tmp_path, CPYTREE_INSTALL=value)
    # torch loaded the entry point, which returned before importing any cpytree module
    assert got["entry_point"] and not got["loaded"]
    assert not got["installed"]
    assert got["outcome"] is None
    assert got["torchs_own"] == ALL_TARGETS
    assert got["nodes"] == plain["nodes"]
    assert got["warnings"] == plain["warnings"]


@pytest.mark.parametrize("value", ["0", ""])
def test_torch_switch_keeps_torch_as_shipped(tmp_path, plain, value):
    # torch's own test: anything but "1" turns its entry-point loading off.
    got = _report(tmp_path, TORCH_DEVICE_BACKEND_AUTOLOAD=value, CPYTREE_INSTALL=None)
    assert not got["loaded"]
    assert got["torchs_own"] == ALL_TARGETS
    assert got["warnings"] == plain["warnings"]


def test_cpytree_install_1_still_installs_at_import_cpytree_without_torchs_autoload(tmp_path):
    got = _report(
        tmp_path,
        prelude="import cpytree",
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        CPYTREE_INSTALL="1",
    )
    assert got["installed"] and got["outcome"] is None


@pytest.mark.parametrize(
    "prelude",
    ["import cpytree", "import cpytree; cpytree.install()"],
    ids=["CPYTREE_INSTALL=1", "explicit"],
)
def test_an_install_that_imports_torch_is_not_doubled(tmp_path, prelude):
    # install() imports torch, whose entry point must leave the work to it:
    # one install, which uninstall() undoes completely.
    got = _report(
        tmp_path,
        prelude=prelude,
        after="import cpytree; cpytree.uninstall()",
        CPYTREE_INSTALL="1" if prelude == "import cpytree" else None,
    )
    assert got["outcome"] == "left to the install() that is importing torch"
    assert not got["installed"]
    assert got["torchs_own"] == ALL_TARGETS


# `_cpytree_autoload` imports cpytree (and hands it down) inside its guard: an
# `import cpytree` that raises leaves `import torch` working, torch as shipped.
NOT_IMPORTED = (
    "cpytree: could not be imported at `import torch` (ModuleNotFoundError: import of "
    "cpytree halted; None in sys.modules); torch's pytree is left as it was. "
    "CPYTREE_INSTALL=0 turns this autoload off."
)


@pytest.mark.parametrize("errors", [False, True], ids=["warn", "W-error"])
def test_an_import_cpytree_that_raises_leaves_torch_as_shipped(tmp_path, plain, errors):
    if errors and plain["warnings"]:
        pytest.skip(f"torch's own import warns here, -W error fails it: {plain['warnings'][0]}")
    action = "error" if errors else "always"
    got = _report(
        tmp_path, prelude="sys.modules['cpytree'] = None", action=action, CPYTREE_INSTALL=None
    )
    assert got["entry_point"] and not got["installed"] and got["outcome"] is None
    assert got["torchs_own"] == ALL_TARGETS
    assert got["flatten"] == plain["flatten"]
    assert got["warnings"] == (
        [] if errors else [*plain["warnings"], f"RuntimeWarning: {NOT_IMPORTED}"]
    )


# A failure midway (after torch's names were swapped: `_rebind_imports` runs
# last) must leave torch as shipped, `import torch` succeeding, with one warning.
_BOOM = (
    "import cpytree._torch\n"
    "def boom(*args, **kwargs):\n"
    "    raise RuntimeError('boom')\n"
    "cpytree._torch._rebind_imports = boom\n"
)


@pytest.mark.parametrize("errors", [False, True], ids=["warn", "W-error"])
def test_a_failing_install_leaves_torch_as_shipped(tmp_path, plain, explicit, errors):
    if errors and plain["warnings"]:
        pytest.skip(f"torch's own import warns here, -W error fails it: {plain['warnings'][0]}")
    action = "error" if errors else "always"
    got = _report(tmp_path, prelude=_BOOM, action=action, CPYTREE_INSTALL=None)
    assert got["loaded"] and not got["installed"]
    assert got["torchs_own"] == ALL_TARGETS
    assert got["nodes"] == plain["nodes"]
    assert got["flatten"] == plain["flatten"]
    if errors:
        # The first warning (boom, or install()'s own on an untested torch)
        # became an exception: install() undid itself, autoload swallowed it.
        assert got["outcome"].startswith("failed: ")
        assert got["warnings"] == []
    else:
        assert got["outcome"] == "failed: RuntimeError: boom"
        # install()'s own warnings (none on a tested torch), then autoload's one.
        assert got["warnings"] == explicit["warnings"] + [f"RuntimeWarning: {FAILED}"]


def test_describe_in_this_process():
    assert describe(cpytree.ENGINE) == "autoload: off (CPYTREE_INSTALL=0)"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"CPYTREE_INSTALL": None},
            "autoload: on (install() at `import torch`; CPYTREE_INSTALL unset; CPYTREE_INSTALL=0 turns it off)",
        ),
        ({"CPYTREE_INSTALL": "off"}, "autoload: off (CPYTREE_INSTALL=off)"),
        (
            {"CPYTREE_INSTALL": None, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
            "autoload: off (TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch loads no backend entry point)",
        ),
    ],
)
def test_python_m_cpytree_says_whether_and_why(tmp_path, env, line):
    proc = run(["-m", "cpytree"], child_env(tmp_path, **env))
    assert line in proc.stdout.splitlines()
    # Nothing of cpytree's own on stderr: only what importing torch and Dynamo
    # prints by itself in this environment (torch 2.15 without numpy warns).
    torch_alone = run(["-c", "import torch, torch._dynamo"], child_env(tmp_path, **env))
    assert proc.stderr == torch_alone.stderr


def test_python_m_cpytree_without_the_entry_point(tmp_path):
    proc = run(["-m", "cpytree"], child_env(None, CPYTREE_INSTALL=None))
    if "autoload: on" in proc.stdout:  # an installed cpytree's metadata is on this path
        pytest.skip("this interpreter has an installed cpytree distribution")
    assert (
        "autoload: off (no torch.backends entry point: cpytree is not installed as a "
        "distribution, e.g. a source tree on sys.path)"
    ) in proc.stdout.splitlines()


def test_python_m_cpytree_after_import_torch(tmp_path):
    code = "import torch, runpy; runpy.run_module('cpytree', run_name='__main__')"
    proc = run(["-c", code], child_env(tmp_path, CPYTREE_INSTALL=None))
    lines = proc.stdout.splitlines()
    assert "autoload: on (at this process's `import torch`: installed)" in lines
    assert any(line.startswith("install(): in effect") for line in lines)
    assert sys.modules.get("torch") is torch


def test_the_entry_point_package_switches_off_as_cpytree_does():
    # _cpytree_autoload decides "off" before importing cpytree: the same values.
    import _cpytree_autoload
    from cpytree import _torch_link

    assert _cpytree_autoload._OFF == _torch_link._OFF
