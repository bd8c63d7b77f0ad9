"""CPYTREE_INSTALL and torch's TORCH_DEVICE_BACKEND_AUTOLOAD, read when they act.

The table of what each setting does is `cpytree._torch._autoload`'s (the
entry point at `import torch`); this module is the part `import cpytree`
needs: the switch's reading and install() at `import cpytree` when it is on.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable

__all__ = ["ENV_VAR", "TORCH_ENV_VAR", "install_at_import", "setting", "torch_calls_entry_points"]

ENV_VAR = "CPYTREE_INSTALL"
TORCH_ENV_VAR = "TORCH_DEVICE_BACKEND_AUTOLOAD"
_OFF = frozenset({"0", "false", "no", "off"})


def setting() -> str:
    """CPYTREE_INSTALL as a switch: "on", "off", or "" (unset or empty: the default)."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return ""
    return "off" if value in _OFF else "on"


def torch_calls_entry_points() -> bool:
    """torch's own test (`_is_device_backend_autoload_enabled`): the variable is "1" or unset."""
    return os.getenv(TORCH_ENV_VAR, "1") == "1"


def install_at_import(install: Callable[[], None]) -> None:
    """`import cpytree`'s step: `install()` (the face's) if CPYTREE_INSTALL is on."""
    if setting() != "on":
        return
    torch = sys.modules.get("torch")
    importing = getattr(getattr(torch, "__spec__", None), "_initializing", False)
    if importing and torch_calls_entry_points():
        return  # torch is loading this package through the entry point: autoload() installs
    try:
        install()
    except ImportError as error:
        warnings.warn(
            f"{ENV_VAR}={os.environ[ENV_VAR]}: torch could not be imported ({error}); "
            "nothing installed.",
            RuntimeWarning,
            stacklevel=3,
        )
