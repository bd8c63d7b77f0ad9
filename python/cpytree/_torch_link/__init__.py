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
* `CPYTREE_INSTALL` (`_switch.py`): install() at `import cpytree` when it is
  on, through the install() the face hands in.

It takes from the package only the registry (`cpytree._registry`) and the
engine handle (`cpytree._engine`); the builtin node types come in as an
argument.
"""

from __future__ import annotations

import threading

from ._follow import TorchRegistryFollower

__all__ = ["follow_torch_registry", "follower"]

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
