"""Autoload: install() at the end of `import torch`, because the package is installed.

torch (2.5 and later) loads every entry point of the group `torch.backends`
at the end of `import torch` and calls it (torch/__init__.py,
`_import_device_backends`); an exception from one makes `import torch` fail
with RuntimeError. pyproject.toml registers `autoload` below as
`torch.backends: cpytree` through the tiny package `_cpytree_autoload`, which
returns at once when CPYTREE_INSTALL switches autoload off (then `import
torch` imports no cpytree module) and otherwise imports `cpytree` as any user
does and hands it to `autoload` here: a script that never names cpytree runs
torch's pytree on the engine. This module sits above the package's face and
never imports it: the face comes in as an argument (`autoload(cpytree)`,
`describe(cpytree.ENGINE)`).

The two switches, read when they act:

==================================  ========================  =====================
CPYTREE_INSTALL                     at `import torch`         at `import cpytree`
==================================  ========================  =====================
unset or empty (the default)        install()                 nothing (no torch import)
1, true, yes, on (any other value)  install()                 install() (imports torch)
0, false, no, off                   nothing                   nothing
==================================  ========================  =====================

`TORCH_DEVICE_BACKEND_AUTOLOAD` is torch's: with any value but `1` torch
calls no entry point, so `import torch` installs nothing, whatever
CPYTREE_INSTALL says (`CPYTREE_INSTALL=1` still installs at `import
cpytree`). Explicit `cpytree.install()` works under every setting.
Inductor's compile-worker sidecar never installs at `import torch` (it runs
kernel-compile jobs only, which never call pytree; see `_cpytree_autoload`).

autoload() never raises: a failing install() has already put torch back as
it was (install() undoes its own steps); autoload() then warns once, naming
the error and the switch. With all well it prints nothing of its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from types import ModuleType

from .._torch_link import ENV_VAR, TORCH_ENV_VAR, setting, torch_calls_entry_points

__all__ = ["ENTRY_POINT", "autoload", "describe", "setting"]

# The entry point pyproject.toml declares (tests/python/test_autoload.py checks they agree).
ENTRY_POINT = ("cpytree", "_cpytree_autoload:autoload")

# What the last autoload() call did ("installed", or why not): for describe().
_outcome: str | None = None
_warned = False


def _install_running() -> bool:
    """Whether install() is on this thread's stack: it imports torch, which calls autoload().

    `install` is this package's (`cpytree._torch.install`), which the face's
    install() calls and which imports torch: on the stack whenever any install() is.
    """
    from . import install

    code = install.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def autoload(cpytree: ModuleType) -> None:
    """The `torch.backends` entry point's work: the face's install() unless switched off.

    `cpytree` is the package's face, imported by `_cpytree_autoload`. Never raises.
    """
    global _outcome
    try:
        if setting() == "off":
            _outcome = f"off: {ENV_VAR}={os.environ[ENV_VAR]}"
            return
        if _install_running():
            _outcome = "left to the install() that is importing torch"
            return
        if cpytree.ENGINE != "cpp":  # `import cpytree` has warned already
            _outcome = "off: the C++ engine did not load"
            return
        cpytree.install()
        _outcome = "installed" if cpytree.is_installed() else "install() left torch unchanged"
    except Exception as error:
        _outcome = f"failed: {type(error).__name__}: {error}"
        _warn_failed(error)


def _warn_failed(error: Exception) -> None:
    """One warning per process; even with warnings turned into errors, nothing raises."""
    global _warned
    if _warned:
        return
    _warned = True
    # Under -W error the warning is an exception: `import torch` must still succeed.
    with contextlib.suppress(Exception):
        warnings.warn(
            f"cpytree: install() at `import torch` failed ({type(error).__name__}: {error}); "
            f"torch's pytree is left as it was. {ENV_VAR}=0 turns this autoload off.",
            RuntimeWarning,
            stacklevel=3,
        )


def entry_point_registered() -> bool:
    """Whether an installed distribution declares cpytree's `torch.backends` entry point."""
    from importlib.metadata import entry_points

    return any(ep.value == ENTRY_POINT[1] for ep in entry_points(group="torch.backends"))


def describe(engine: str) -> str:
    """One line for `python -m cpytree`: whether `import torch` installs, and why.

    `engine` is the face's `cpytree.ENGINE` ("cpp" or "python").
    """
    cpytree_value = os.environ.get(ENV_VAR, "")
    if setting() == "off":
        return f"autoload: off ({ENV_VAR}={cpytree_value})"
    if not torch_calls_entry_points():
        value = os.environ.get(TORCH_ENV_VAR)
        return f"autoload: off ({TORCH_ENV_VAR}={value}: torch loads no backend entry point)"
    if not entry_point_registered():
        return (
            "autoload: off (no torch.backends entry point: cpytree is not installed as a "
            "distribution, e.g. a source tree on sys.path)"
        )
    if engine != "cpp":
        return "autoload: off (the C++ engine did not load)"
    if _outcome is not None:
        return f"autoload: on (at this process's `import torch`: {_outcome})"
    why = f"{ENV_VAR}={cpytree_value}" if cpytree_value else f"{ENV_VAR} unset"
    return f"autoload: on (install() at `import torch`; {why}; {ENV_VAR}=0 turns it off)"
