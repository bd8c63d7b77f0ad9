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
  (`_registry.RegistryMirror` then joins the registries both ways).

Changes are caught by wrapping torch's `_private_register_pytree_node` and
`_deregister_pytree_node` (every torch registration API ends in one of them)
and `register_constant` (which marks the type constant only after
registering it). A module that bound one of those names before the wrapping
(`from torch.utils._pytree import _private_register_pytree_node`) bypasses
it; torch itself calls them through its module globals.

Shared state: `_mirrored` (type -> what was copied) is touched only with
cpytree's registry lock held; `_quiet` is per thread, set while the follower
itself writes so its registration hook ignores the change.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import _registry
from ._registry import _Entry, _entry

if TYPE_CHECKING:
    from ._import_watch import ImportWatcher

_PYTREE = "torch.utils._pytree"
# The torch functions wrapped, and whether each one's first argument is the type.
_WRAPPED = ("_private_register_pytree_node", "_deregister_pytree_node", "register_constant")


def is_loaded(name: str) -> bool:
    """Whether module `name` has finished importing (not merely started).

    Here, not in `_import_watch`, which `import cpytree` then loads only
    when it must wait for torch.
    """
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


class TorchRegistryFollower:
    """Copies torch.utils._pytree's registrations into cpytree's registry."""

    def __init__(self, builtin_types: frozenset[type]) -> None:
        self._builtins = builtin_types
        self._tp: ModuleType | None = None
        self._watcher: ImportWatcher | None = None
        self._mirrored: dict[type, tuple[_Entry, bool]] = {}
        self._originals: dict[str, Callable[..., Any]] = {}
        self._quiet = threading.local()

    def start(self) -> None:
        """Follow torch's registry now if it is loaded, else once it is."""
        if is_loaded(_PYTREE):
            self._attach()
        else:
            from ._import_watch import ImportWatcher

            self._watcher = ImportWatcher(_PYTREE, self._attach)
            self._watcher.start()

    def following(self) -> bool:
        """Whether torch's registry is being followed (False while waiting for torch)."""
        return self._tp is not None

    def mirrored(self) -> list[type]:
        """The types whose registration in cpytree is a copy of torch's."""
        return list(self._mirrored)

    # ------------------------------------------------------------ attaching

    def _attach(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        tp = sys.modules[_PYTREE]
        self._tp = tp
        self._builtins = self._builtins | frozenset(tp.BUILTIN_TYPES)
        with _registry._NODE_REGISTRY_LOCK:
            for name in _WRAPPED:
                original = getattr(tp, name)
                self._originals[name] = original
                setattr(tp, name, self._wrap(original))
            self._copy_all(list(tp.SUPPORTED_NODES))
            _registry._REGISTRATION_HOOKS.append(self._on_cpytree_change)
        cpytree = sys.modules["cpytree"]
        if cpytree._C is not None:  # hash a torch constant's spec by its value, as torch does
            cpytree._C._set_constant_types((cpytree.ConstantNode, tp.ConstantNode))

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def follow_torch(cls: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(cls, *args, **kwargs)
            finally:  # torch stores a node before validating it: copy even on error
                if isinstance(cls, type):
                    self._sync(cls)

        return follow_torch

    # ------------------------------------------------------------ copying

    def _sync(self, cls: type) -> None:
        """Make cpytree's registration of `cls` follow torch's, unless cpytree owns it."""
        tp = self._tp
        if tp is None or cls in self._builtins:
            return
        with _registry._NODE_REGISTRY_LOCK:
            if cls in _registry.SUPPORTED_NODES and cls not in self._mirrored:
                return  # cpytree's own registration wins
            source = _entry(tp.SUPPORTED_NODES, tp.SUPPORTED_SERIALIZED_TYPES,
                            tp.NO_SERIALIZED_TYPE_NAME_FOUND, cls)  # fmt: skip
            self._quiet.active = True
            try:
                if source is None:
                    if self._mirrored.pop(cls, None) is not None:
                        _registry._remove_node(cls)
                    return
                constant = cls in tp.CONSTANT_NODES
                if self._mirrored.get(cls) == (source, constant):
                    return
                _registry._store_node(
                    cls, source.flatten_fn, source.unflatten_fn, source.flatten_with_keys_fn,
                    source.serialized_type_name, source.to_dumpable_context,
                    source.from_dumpable_context, constant=constant, warn_overwrite=False,
                )  # fmt: skip
                if not constant:
                    _registry.CONSTANT_NODES.discard(cls)
                self._mirrored[cls] = (source, constant)
            finally:
                self._quiet.active = False

    def _copy_all(self, classes: list[type]) -> None:
        """`_sync` of each of `classes` (not yet followed), stored in one batch."""
        tp = self._tp
        assert tp is not None
        nodes, serialized, no_name = (
            tp.SUPPORTED_NODES, tp.SUPPORTED_SERIALIZED_TYPES, tp.NO_SERIALIZED_TYPE_NAME_FOUND
        )  # fmt: skip
        own, builtins, mirrored = _registry.SUPPORTED_NODES, self._builtins, self._mirrored
        rows = []
        copies = []
        for cls in classes:
            if cls in builtins or cls in mirrored:
                continue
            if cls in own:
                continue  # cpytree's own registration wins
            source = _entry(nodes, serialized, no_name, cls)
            if source is None:
                continue
            constant = cls in tp.CONSTANT_NODES
            rows.append((cls, *source, constant))
            copies.append((cls, source, constant))
        self._quiet.active = True
        try:
            _registry._store_copies(rows)
            for cls, source, constant in copies:
                if not constant:
                    _registry.CONSTANT_NODES.discard(cls)
                mirrored[cls] = (source, constant)
        finally:
            self._quiet.active = False

    def _on_cpytree_change(self, cls: type, node_def: Any) -> None:
        """cpytree registration hook: a change through cpytree's API makes `cls` its own."""
        if getattr(self._quiet, "active", False):
            return
        self._mirrored.pop(cls, None)
        if node_def is None:
            self._sync(cls)  # torch's registration, if any, shows through again

    # ------------------------------------------------------------ stopping

    def stop(self) -> None:
        """Stop following: unwrap torch's functions, drop the copies (tests, teardown)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        tp = self._tp
        if tp is None:
            return
        with _registry._NODE_REGISTRY_LOCK:
            for name, original in self._originals.items():
                setattr(tp, name, original)
            self._originals.clear()
            if self._on_cpytree_change in _registry._REGISTRATION_HOOKS:
                _registry._REGISTRATION_HOOKS.remove(self._on_cpytree_change)
            self._quiet.active = True
            try:
                for cls in list(self._mirrored):
                    _registry._remove_node(cls)
            finally:
                self._quiet.active = False
            self._mirrored.clear()
        self._tp = None
