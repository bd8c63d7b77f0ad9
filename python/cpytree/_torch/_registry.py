"""Keeps torch's pytree registry and cpytree's in step while install() is active.

Once torch's `tree_map` is cpytree's, a type torch knows but cpytree does not
would be a node in Python and a leaf in C++ (and the reverse for types
registered through cpytree: a leaf in the code Dynamo traces, a node in
eager). So while installed the two registries act as one:

* at start, every torch registration that is not a builtin node is copied into
  cpytree (with its serialized name and dumpable-context hooks), and every
  cpytree-only registration into torch;
* torch's `_private_register_pytree_node` and `_deregister_pytree_node` (which
  every torch registration API ends in) are wrapped to copy the change into
  cpytree; a hook in `cpytree._registry._REGISTRATION_HOOKS` copies cpytree's
  changes into torch;
* one lock serialises both: cpytree's registry lock is replaced by torch's
  (both are RLocks), so a registration entering through either side, and the
  copy it triggers, never wait on each other's lock in opposite orders.

`stop()` returns each registry to the registrations made through its own API:
what was copied in is removed, and what a copy replaced is put back.

Shared state: the `_copied_*` tables are touched only with the (shared)
registry lock held. `_quiet` is per thread: set while this module itself
registers, so the hook of the other side does not copy the change back.
"""

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import _registry

if TYPE_CHECKING:
    from typing import NamedTuple

    from ._patch import Patches
else:  # compiles no code at import (see cpytree._namedtuple)
    from .._namedtuple import NamedTuple

# Overwriting a registration warns in torch and in cpytree; a copy must not
# warn a second time for the one overwrite the user made.
_OVERWRITE_WARNING = r".* is already registered as pytree node\. Overwriting"
_ABSENT = object()


class _Entry(NamedTuple):
    """One registration as both registries describe it."""

    flatten_fn: Any
    unflatten_fn: Any
    flatten_with_keys_fn: Any
    serialized_type_name: str | None
    to_dumpable_context: Any
    from_dumpable_context: Any

    def _new(
        _cls: Any,
        flatten_fn: Any,
        unflatten_fn: Any,
        flatten_with_keys_fn: Any,
        serialized_type_name: Any,
        to_dumpable_context: Any,
        from_dumpable_context: Any,
    ) -> Any:
        return tuple.__new__(
            _cls,
            (
                flatten_fn,
                unflatten_fn,
                flatten_with_keys_fn,
                serialized_type_name,
                to_dumpable_context,
                from_dumpable_context,
            ),
        )


def _entry(
    supported: dict[Any, Any], serialized: dict[Any, Any], no_name: str, cls: type
) -> _Entry | None:
    """The registration of `cls` in a registry's tables, or None."""
    node = supported.get(cls)
    if node is None:
        return None
    ser = serialized.get(cls)
    name = None if ser is None or ser.serialized_type_name == no_name else ser.serialized_type_name
    return _Entry(
        node.flatten_fn,
        node.unflatten_fn,
        node.flatten_with_keys_fn,
        name,
        ser.to_dumpable_context if ser is not None else None,
        ser.from_dumpable_context if ser is not None else None,
    )


class RegistryMirror:
    """Two-way copy between torch.utils._pytree's registry and cpytree's."""

    def __init__(self, torch_pytree: ModuleType, reference: ModuleType) -> None:
        self._tp = torch_pytree
        self._ref = reference
        self._builtins = frozenset(torch_pytree.BUILTIN_TYPES) | frozenset(reference.BUILTIN_TYPES)
        self._register_torch: Callable[..., None] = torch_pytree._private_register_pytree_node
        self._deregister_torch: Callable[[type], None] = torch_pytree._deregister_pytree_node
        # cls -> (entry we wrote, entry it replaced or None), per destination.
        self._copied_into_cpytree: dict[type, tuple[_Entry, _Entry | None]] = {}
        self._copied_into_torch: dict[type, tuple[_Entry, _Entry | None]] = {}
        self._quiet = threading.local()
        self._saved_lock: Any = None

    # ------------------------------------------------------------ reading

    def _in_torch(self, cls: type) -> _Entry | None:
        tp = self._tp
        return _entry(tp.SUPPORTED_NODES, tp.SUPPORTED_SERIALIZED_TYPES,
                      tp.NO_SERIALIZED_TYPE_NAME_FOUND, cls)  # fmt: skip

    def _in_cpytree(self, cls: type) -> _Entry | None:
        ref = self._ref
        return _entry(ref.SUPPORTED_NODES, ref.SUPPORTED_SERIALIZED_TYPES,
                      ref.NO_SERIALIZED_TYPE_NAME_FOUND, cls)  # fmt: skip

    # ------------------------------------------------------------ writing

    def _write(self, mod: ModuleType, register: Callable[..., None],
               deregister: Callable[[type], None], cls: type,
               entry: _Entry | None) -> None:  # fmt: skip
        """Make `cls` map to `entry` (None: unregistered) through one registry's API.

        Every type registered without a serialized name shares one key of
        SERIALIZED_TYPE_TO_PYTHON_TYPE (the last one registered owns it, and
        deregistering a type deletes it, so the next such deregistration
        fails half-way with KeyError). A copy must neither move nor delete
        that key: it is put back as it was, and made present for the
        duration of a deregistration so that one completes.
        """
        by_name, no_name = mod.SERIALIZED_TYPE_TO_PYTHON_TYPE, mod.NO_SERIALIZED_TYPE_NAME_FOUND
        shared = by_name.get(no_name, _ABSENT)
        self._quiet.active = True
        try:
            if entry is None:
                by_name.setdefault(no_name, cls)
                deregister(cls)
                return
            args = (cls, entry.flatten_fn, entry.unflatten_fn)
            kwargs = {
                "serialized_type_name": entry.serialized_type_name,
                "to_dumpable_context": entry.to_dumpable_context,
                "from_dumpable_context": entry.from_dumpable_context,
                "flatten_with_keys_fn": entry.flatten_with_keys_fn,
            }
            if cls not in mod.SUPPORTED_NODES:
                register(*args, **kwargs)
                return
            # catch_warnings swaps process-wide state: only an overwrite (rare:
            # a type registered differently in both registries) goes through it.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_OVERWRITE_WARNING)
                register(*args, **kwargs)
        finally:
            self._quiet.active = False
            if shared is _ABSENT:
                by_name.pop(no_name, None)
            else:
                by_name[no_name] = shared

    def _write_cpytree(self, cls: type, entry: _Entry | None) -> None:
        ref = self._ref
        self._write(ref, ref._private_register_pytree_node, ref._deregister_pytree_node, cls, entry)

    def _write_torch(self, cls: type, entry: _Entry | None) -> None:
        self._write(self._tp, self._register_torch, self._deregister_torch, cls, entry)

    def _copy(self, cls: type, to_cpytree: bool) -> None:
        """Copy the registration of `cls` from one registry into the other."""
        if cls in self._builtins:
            return  # both implement the builtin nodes natively
        copied, other = (
            (self._copied_into_cpytree, self._copied_into_torch)
            if to_cpytree
            else (self._copied_into_torch, self._copied_into_cpytree)
        )
        # A change made through one registry makes the result that registry's own.
        other.pop(cls, None)
        source = self._in_torch(cls) if to_cpytree else self._in_cpytree(cls)
        target = self._in_cpytree(cls) if to_cpytree else self._in_torch(cls)
        if source == target:
            return
        previous = copied[cls][1] if cls in copied else target
        (self._write_cpytree if to_cpytree else self._write_torch)(cls, source)
        if source is None and previous is None:
            copied.pop(cls, None)
        else:
            written = self._in_cpytree(cls) if to_cpytree else self._in_torch(cls)
            copied[cls] = (written, previous)  # type: ignore[assignment]

    # ------------------------------------------------------------ hooks

    def _on_cpytree_change(self, cls: type, node_def: Any) -> None:
        """cpytree registration hook: copy the change into torch."""
        if getattr(self._quiet, "active", False):
            return
        self._copy(cls, to_cpytree=False)

    def _wrap_torch_register(self) -> Callable[..., None]:
        original = self._register_torch

        @functools.wraps(original)
        def _private_register_pytree_node(cls: Any, *args: Any, **kwargs: Any) -> None:
            with self._tp._NODE_REGISTRY_LOCK:
                try:
                    original(cls, *args, **kwargs)
                finally:  # torch stores the node before validating: copy even on error
                    if not getattr(self._quiet, "active", False):
                        self._copy(cls, to_cpytree=True)

        return _private_register_pytree_node

    def _wrap_torch_deregister(self) -> Callable[[type], None]:
        original = self._deregister_torch

        @functools.wraps(original)
        def _deregister_pytree_node(cls: Any) -> None:
            with self._tp._NODE_REGISTRY_LOCK:
                try:
                    original(cls)
                finally:
                    if not getattr(self._quiet, "active", False):
                        self._copy(cls, to_cpytree=True)

        return _deregister_pytree_node

    def wrappers(self) -> dict[int, tuple[Any, Any]]:
        """id(original) -> (original, wrapper) for the torch functions start() wraps."""
        return {id(orig): (orig, new) for orig, new in self._wrapped}

    # ------------------------------------------------------------ lifecycle

    def start(self, patches: "Patches") -> None:
        """Copy both ways, then keep copying until stop()."""
        tp, ref = self._tp, self._ref
        # The registration functions live in cpytree._registry and read the
        # lock there (the re-exports in cpytree and cpytree._reference are
        # plain names nobody locks with): share torch's lock there, or a
        # registration through each side at once takes the two locks in
        # opposite orders and deadlocks.
        self._saved_lock = _registry._NODE_REGISTRY_LOCK
        _registry._NODE_REGISTRY_LOCK = tp._NODE_REGISTRY_LOCK
        with tp._NODE_REGISTRY_LOCK:
            for cls in list(tp.SUPPORTED_NODES):
                self._copy(cls, to_cpytree=True)
            for cls in list(ref.SUPPORTED_NODES):
                if cls not in tp.SUPPORTED_NODES:
                    self._copy(cls, to_cpytree=False)
            self._wrapped = [
                (self._register_torch, self._wrap_torch_register()),
                (self._deregister_torch, self._wrap_torch_deregister()),
            ]
            for original, wrapper in self._wrapped:
                patches.set(tp, original.__name__, wrapper)
            ref._REGISTRATION_HOOKS.append(self._on_cpytree_change)

    def stop(self) -> None:
        """Stop copying; give each registry back the registrations made through it.

        The caller has already restored torch's registration functions.
        """
        tp, ref = self._tp, self._ref
        with tp._NODE_REGISTRY_LOCK:
            with contextlib.suppress(ValueError):
                ref._REGISTRATION_HOOKS.remove(self._on_cpytree_change)
            for copied, current, write in (
                (self._copied_into_cpytree, self._in_cpytree, self._write_cpytree),
                (self._copied_into_torch, self._in_torch, self._write_torch),
            ):
                for cls, (written, previous) in list(copied.items()):
                    if current(cls) == written:  # not changed since through its own API
                        write(cls, previous)
                copied.clear()
            _registry._NODE_REGISTRY_LOCK = self._saved_lock
