"""The link to torch that `import cpytree` needs, below the package's face.

Three things, none of which needs torch's compiler or imports torch:

* following torch's pytree registry (`follow_torch_registry`): from
  `import cpytree` on, every type registered with `torch.utils._pytree` is
  a node for cpytree too (`_follow.py` attaches `_sync.RegistrySync`, the
  one link between the two registries, once torch's module has loaded;
  `_import_watch.py` waits for it);
* the one inventory of torch's private names (`_inventory.py`), which the
  link checks before it touches torch and install() (`cpytree._torch`,
  above the face, loaded only when used) checks before it patches;
* `CPYTREE_INSTALL` (here, with torch's `TORCH_DEVICE_BACKEND_AUTOLOAD`):
  install() at `import cpytree` when it is on, through the install() the
  face hands in (`install_at_import`). The table of what each setting does
  is `cpytree._torch._autoload`'s, the entry point at `import torch`. It is
  here, not in a module of its own, because every module `import cpytree`
  loads is paid by every user (benchmarks/import_time.py).

It takes from the package only the registry (`cpytree._registry`) and the
engine handle (`cpytree._engine`); the builtin node types come in as an
argument.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable

from ._follow import TorchRegistryFollower

__all__ = [
    "ENV_VAR",
    "TORCH_ENV_VAR",
    "follow_torch_registry",
    "follower",
    "install_at_import",
    "setting",
    "torch_calls_entry_points",
]

_LOCK = threading.Lock()
# Follows torch's registry from cpytree's import on (`follow_torch_registry`).
_FOLLOWER: TorchRegistryFollower | None = None


def follow_torch_registry(builtin_types: frozenset[type]) -> TorchRegistryFollower:
    """Make cpytree honour torch.utils._pytree's registrations, now or once torch loads.

    Called when cpytree is imported, with the node types cpytree handles
    natively; needs no install() and never imports torch. Later calls return
    the same follower.
    """
    global _FOLLOWER
    with _LOCK:
        if _FOLLOWER is None:
            _FOLLOWER = TorchRegistryFollower(builtin_types)
            _FOLLOWER.start()
        return _FOLLOWER


def follower() -> TorchRegistryFollower | None:
    """The follower `import cpytree` started, or None before it (status())."""
    return _FOLLOWER


# --- CPYTREE_INSTALL and torch's TORCH_DEVICE_BACKEND_AUTOLOAD, read when they act ---
ENV_VAR = "CPYTREE_INSTALL"
TORCH_ENV_VAR = "TORCH_DEVICE_BACKEND_AUTOLOAD"
# The values that switch autoload off; `_cpytree_autoload._OFF` is the same set
# (tests/python/test_autoload.py checks it).
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
