"""cpytree honours torch's pytree registry, without install(): one way, torch -> cpytree.

Libraries register their types with `torch.utils._pytree` (transformers'
model outputs, torch's own `torch.return_types`, `register_dataclass`,
`register_constant`, `_register_namedtuple` serialized names), not with
cpytree. So that `import cpytree as pytree` gives torch's results on their
objects, `TorchRegistryFollower` copies every registration torch holds into
cpytree's registry, and every later (de)registration made through torch, as
soon as `torch.utils._pytree` is loaded, whether before or after cpytree
(an import watcher waits for it; cpytree never imports torch).

The rules (docs/torch_install.md, "Registries"):

* A type registered with torch only is a node for cpytree with torch's
  functions, serialized name, dumpable-context hooks and constant flag.
  cpytree's tables list it (`SUPPORTED_NODES` is what cpytree's functions
  use), so registering it again through cpytree behaves as registering it
  twice in one registry: `register_pytree_node` raises ValueError,
  `_private_register_pytree_node` warns and overwrites.
* A type registered through cpytree's API is cpytree's own: torch's
  registration of the same type, before or after, does not replace it (the
  two serve different modules; nothing warns). Deregistering cpytree's own
  registration lets torch's show through again; deregistering a type cpytree
  only holds from torch does the same, since torch still holds it.
* cpytree's own registrations never reach torch, unless install() is active
  (`RegistrySync.join()` then joins the registries both ways).

The copying itself is `_sync.RegistrySync`, the one link between the
two registries, which install() also uses to join them both ways; this
module only attaches it, now or once torch's pytree module has loaded.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

from .. import _engine
from ._sync import RegistrySync

if TYPE_CHECKING:
    from ._import_watch import ImportWatcher

_PYTREE = "torch.utils._pytree"


def is_loaded(name: str) -> bool:
    """Whether module `name` has finished importing (not merely started).

    Here, not in `_import_watch`, which `import cpytree` then loads only
    when it must wait for torch.
    """
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


class TorchRegistryFollower:
    """Attaches the registry sync to torch.utils._pytree as soon as it is loaded."""

    def __init__(self, builtin_types: frozenset[type]) -> None:
        self.sync = RegistrySync(builtin_types)
        self._watcher: ImportWatcher | None = None
        self._failure = ""  # why following could not start (torch left as it was)

    def start(self) -> None:
        """Follow torch's registry now if it is loaded, else once it is."""
        if is_loaded(_PYTREE):
            self.attach()
        else:
            from ._import_watch import ImportWatcher

            self._watcher = ImportWatcher(_PYTREE, self.attach)
            self._watcher.start()

    def following(self) -> bool:
        """Whether torch's registry is being followed (False while waiting for torch)."""
        return self.sync.attached()

    def failure(self) -> str:
        """Why torch's registry is not followed ("" when it is, or torch is not loaded)."""
        return self._failure

    def mirrored(self) -> list[type]:
        """The types whose registration in cpytree is a copy of torch's."""
        return self.sync.copied_into_cpytree()

    def attach(self) -> None:
        """Follow torch's registry from now on (torch.utils._pytree must be loaded).

        Runs inside `import torch` (the watcher's callback): never raises. On a
        torch that moved a registry name (checked first) or any failure, torch
        is left as it was, with one warning; `failure()` says why.
        """
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self.sync.attached() or self._failure:
            return
        try:
            tp = sys.modules[_PYTREE]
            if not self.sync.attach(tp):
                self._failure = "torch moved " + ", ".join(self.sync.drift())
            else:
                _engine.set_constant_types(tp.ConstantNode)
        except Exception as error:  # noqa: BLE001 - reported; never raised inside import torch
            self.sync.detach()
            self._failure = f"{type(error).__name__}: {error}"
        if self._failure:
            warnings.warn(
                f"cpytree: torch's pytree registry cannot be followed ({self._failure}); "
                "torch is left as it was, and cpytree.install() will not install "
                "(see cpytree.status()).",
                RuntimeWarning,
                stacklevel=2,
            )

    def stop(self) -> None:
        """Stop following: unwrap torch's functions, drop the copies (tests, teardown)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.sync.detach()
