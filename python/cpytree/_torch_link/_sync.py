"""The one link between torch's pytree registry and cpytree's: `RegistrySync`.

Libraries register their types with `torch.utils._pytree`, not with cpytree,
and install() makes torch's functions cpytree's. One mechanism serves both:

* **following** (from `import cpytree` on, `_follow.py` attaches it once
  `torch.utils._pytree` is loaded): every torch registration is copied into
  cpytree, and every later (de)registration made through torch. A type
  registered through cpytree's API is cpytree's own and wins over torch's;
  cpytree's registrations stay out of torch.
* **joined** (while install() is active, `join()` .. `leave()`): the two
  registries act as one, since a type torch knows but cpytree does not would
  be a node in Python and a leaf in C++ (and the reverse for cpytree's, a
  leaf in the code Dynamo traces). A change through either API is copied
  into the other, overwriting what it held; `leave()` gives each registry
  back the registrations made through its own API (what a copy replaced is
  put back, what was copied in where nothing was is removed), and following
  resumes.

Changes are caught in one place each. Torch's side: `attach()` wraps torch's
`_private_register_pytree_node` and `_deregister_pytree_node` (every torch
registration API ends in one of them) and `register_constant` (which marks
the type constant only after registering it), once: the wrappers stay for
the life of the process (install() and uninstall() leave them alone). A
module that bound one of those names before `attach()` bypasses them;
install() rebinds such bindings while installed (`rebindings()`). cpytree's
side: one hook in `cpytree._registry._REGISTRATION_HOOKS`.

While joined, one lock serialises both registries: cpytree's registry lock
is replaced by torch's (both are RLocks), so a registration entering through
either side, and the copy it triggers, never take the two locks in opposite
orders.

Inventory: the names of `torch.utils._pytree` this module uses are the
``registry`` rows of `_inventory.INVENTORY` (the functions in `_WRAPPED`;
the tables `SUPPORTED_NODES`, `SUPPORTED_SERIALIZED_TYPES`,
`SERIALIZED_TYPE_TO_PYTHON_TYPE`, `CONSTANT_NODES`, `BUILTIN_TYPES`, the
constant `NO_SERIALIZED_TYPE_NAME_FOUND`, `_NODE_REGISTRY_LOCK`; `_follow.py`
also reads `ConstantNode`). `attach()` checks them all before it changes
anything: on a torch that moved one it changes nothing and warns once
(`drift()` names what moved; install() then refuses). Nothing else in
cpytree touches torch's registry.

Shared state: `_copies` (the one bookkeeping: type -> `_Copy`, the
registration one registry holds as a copy of the other's and what that copy
replaced) is touched only with cpytree's registry lock held (torch's, while
joined). `_quiet` is per thread: set while this module writes into cpytree,
so its own hook ignores the change.
"""

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import _registry

if TYPE_CHECKING:
    from typing import NamedTuple
else:  # compiles no code at import (see cpytree._namedtuple)
    from .._namedtuple import NamedTuple

# The torch functions wrapped; each one's first argument is the type.
_WRAPPED = ("_private_register_pytree_node", "_deregister_pytree_node", "register_constant")
# Overwriting a registration warns in torch and in cpytree; a copy must not
# warn a second time for the one overwrite the user made.
_OVERWRITE_WARNING = r".* is already registered as pytree node\. Overwriting"
_ABSENT = object()
_NO_LOCK = contextlib.nullcontext()
_TUPLE_NEW = tuple.__new__


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
    # _Entry(...) without the call of its Python __new__ (`_new`): the same tuple.
    return _TUPLE_NEW(
        _Entry,
        (
            node.flatten_fn,
            node.unflatten_fn,
            node.flatten_with_keys_fn,
            name,
            ser.to_dumpable_context if ser is not None else None,
            ser.from_dumpable_context if ser is not None else None,
        ),
    )


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Hold cpytree's registry lock: the one in place once it is held.

    join() and leave() replace the lock; a thread that read the old one
    just before takes the new one instead once it gets the old.
    """
    while True:
        lock = _registry._NODE_REGISTRY_LOCK
        with lock:
            if lock is _registry._NODE_REGISTRY_LOCK:
                yield
                return


class _Copy:
    """A registration one registry holds as a copy of the other's (a plain
    class: no code compiled at import)."""

    __slots__ = ("constant", "into_torch", "replaced", "replaced_constant", "seen", "written")

    def __init__(
        self,
        into_torch: bool,
        written: _Entry | None,
        constant: bool,
        replaced: _Entry | None,
        replaced_constant: bool,
    ) -> None:
        self.into_torch = into_torch  # the registry written: torch's, else cpytree's
        self.written = written  # what was written there (None: a deregistration)
        self.constant = constant  # cpytree's constant flag written with it
        # What the destination held through its own API before (None: nothing,
        # always so for a copy into cpytree made while following).
        self.replaced = replaced
        self.replaced_constant = replaced_constant
        # (_copy_all's copies) The four table values the copy left: torch's
        # NodeDef and _SerializeNodeDef of the type, then cpytree's. join()
        # skips a copy whose tables still hold these (nothing to compare).
        self.seen: tuple[Any, ...] | None = None


class RegistrySync:
    """Copies between torch.utils._pytree's registry and cpytree's: one way, or both."""

    def __init__(self, builtin_types: frozenset[type]) -> None:
        self._builtins = builtin_types
        self._tp: ModuleType | None = None
        self._originals: dict[str, Callable[..., Any]] = {}
        self._wrappers: dict[str, Callable[..., Any]] = {}
        self._copies: dict[type, _Copy] = {}
        self._joined = False
        self._tp_lock: Any = None  # torch's registry lock (an RLock), once attached
        self._saved_lock: Any = None
        self._quiet = threading.local()
        self._drift: list[str] = []  # the registry names torch moved (attach() refused)

    def drift(self) -> list[str]:
        """The registry names the loaded torch lacks (attach() then changed nothing)."""
        return list(self._drift)

    def attached(self) -> bool:
        """Whether torch's registry is linked (torch's functions wrapped)."""
        return self._tp is not None

    def copied_into_cpytree(self) -> list[type]:
        """The types whose registration in cpytree is a copy of torch's."""
        return [cls for cls, copy in self._copies.items() if not copy.into_torch]

    def rebindings(self) -> dict[int, tuple[Any, Any]]:
        """id(original) -> (original, wrapper) for the torch functions `attach()` wrapped."""
        originals = self._originals
        return {id(originals[name]): (originals[name], new) for name, new in self._wrappers.items()}

    # ------------------------------------------------------------ reading

    def _in_torch(self, cls: type) -> _Entry | None:
        tp = self._tp
        assert tp is not None
        return _entry(tp.SUPPORTED_NODES, tp.SUPPORTED_SERIALIZED_TYPES,
                      tp.NO_SERIALIZED_TYPE_NAME_FOUND, cls)  # fmt: skip

    def _in_cpytree(self, cls: type) -> _Entry | None:
        return _entry(_registry.SUPPORTED_NODES, _registry.SUPPORTED_SERIALIZED_TYPES,
                      _registry.NO_SERIALIZED_TYPE_NAME_FOUND, cls)  # fmt: skip

    # ------------------------------------------------------------ writing

    def _write_cpytree(
        self, cls: type, entry: _Entry | None, constant: bool, keep_shared_name: bool
    ) -> None:
        """Make cpytree map `cls` to `entry` (None: unregistered), without warning.

        `keep_shared_name`: the key of SERIALIZED_TYPE_TO_PYTHON_TYPE that
        every type registered without a serialized name shares stays where it
        was. A copy of a change just made in torch moves it as torch did; a
        write that replaces or restores cpytree's own registration must not.
        """
        by_name = _registry.SERIALIZED_TYPE_TO_PYTHON_TYPE
        no_name = _registry.NO_SERIALIZED_TYPE_NAME_FOUND
        shared = by_name.get(no_name, _ABSENT)
        self._quiet.active = True
        try:
            if entry is None:
                _registry._remove_node(cls)
                return
            _registry._store_node(
                cls, entry.flatten_fn, entry.unflatten_fn, entry.flatten_with_keys_fn,
                entry.serialized_type_name, entry.to_dumpable_context,
                entry.from_dumpable_context, constant=constant, warn_overwrite=False,
            )  # fmt: skip
            if not constant:
                _registry.CONSTANT_NODES.discard(cls)
        finally:
            self._quiet.active = False
            if keep_shared_name:
                _restore(by_name, no_name, shared)

    def _write_torch(self, cls: type, entry: _Entry | None) -> None:
        """Make torch map `cls` to `entry` (None: unregistered) through torch's API.

        Every type registered without a serialized name shares one key of
        SERIALIZED_TYPE_TO_PYTHON_TYPE (the last one registered owns it, and
        deregistering a type deletes it, so the next such deregistration
        fails half-way with KeyError). A copy must neither move nor delete
        that key: it is put back as it was, and made present for the
        duration of a deregistration so that one completes.
        """
        tp = self._tp
        assert tp is not None
        by_name, no_name = tp.SERIALIZED_TYPE_TO_PYTHON_TYPE, tp.NO_SERIALIZED_TYPE_NAME_FOUND
        shared = by_name.get(no_name, _ABSENT)
        try:
            if entry is None:
                by_name.setdefault(no_name, cls)
                self._originals["_deregister_pytree_node"](cls)
                return
            register = self._originals["_private_register_pytree_node"]
            args = (cls, entry.flatten_fn, entry.unflatten_fn)
            kwargs = {
                "serialized_type_name": entry.serialized_type_name,
                "to_dumpable_context": entry.to_dumpable_context,
                "from_dumpable_context": entry.from_dumpable_context,
                "flatten_with_keys_fn": entry.flatten_with_keys_fn,
            }
            if cls not in tp.SUPPORTED_NODES:
                register(*args, **kwargs)
                return
            # catch_warnings swaps process-wide state: only an overwrite (rare:
            # a type registered differently in both registries) goes through it.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_OVERWRITE_WARNING)
                register(*args, **kwargs)
        finally:
            _restore(by_name, no_name, shared)

    # ------------------------------------------------------------ copying

    def _from_torch(self, cls: type) -> None:
        """A change of `cls` made through torch: copy it into cpytree.

        While following, cpytree's own registration of `cls` wins (nothing
        is copied). While joined, the copy replaces it until `leave()`.
        """
        with _registry_lock():
            self._from_torch_locked(cls)

    def _from_torch_locked(self, cls: type) -> None:
        """`_from_torch` with cpytree's registry lock held (join() holds it for all types)."""
        tp = self._tp
        if tp is None or cls in self._builtins:
            return
        copy = self._copies.get(cls)
        if copy is not None and copy.into_torch:
            # A change made through torch makes the result torch's own.
            self._copies.pop(cls, None)
            copy = None
        own = copy is None and cls in _registry.SUPPORTED_NODES
        if own and not self._joined:
            return  # cpytree's own registration wins
        source, constant = self._in_torch(cls), cls in tp.CONSTANT_NODES
        current = self._in_cpytree(cls)
        if current == source and (cls in _registry.CONSTANT_NODES) == constant:
            return
        if copy is not None:
            replaced, replaced_constant = copy.replaced, copy.replaced_constant
        elif own:
            replaced, replaced_constant = current, cls in _registry.CONSTANT_NODES
        else:
            replaced, replaced_constant = None, False
        self._write_cpytree(cls, source, constant, keep_shared_name=replaced is not None)
        if source is None and replaced is None:
            self._copies.pop(cls, None)
        else:
            self._copies[cls] = _Copy(False, source, constant, replaced, replaced_constant)

    def _into_torch(self, cls: type) -> None:
        """(Joined) copy cpytree's registration of `cls` into torch."""
        if cls in self._builtins:
            return  # both implement the builtin nodes natively
        source, target = self._in_cpytree(cls), self._in_torch(cls)
        if source == target:
            return
        copy = self._copies.get(cls)
        replaced = copy.replaced if copy is not None and copy.into_torch else target
        self._write_torch(cls, source)
        if source is None and replaced is None:
            self._copies.pop(cls, None)
        else:
            self._copies[cls] = _Copy(True, self._in_torch(cls), False, replaced, False)

    def _on_cpytree_change(self, cls: type, node_def: Any) -> None:
        """cpytree registration hook (lock held): the change makes `cls` cpytree's own."""
        if getattr(self._quiet, "active", False):
            return
        with _registry_lock():  # the change may have been made under the lock join() replaced
            copy = self._copies.get(cls)
            if copy is not None and not copy.into_torch:
                self._copies.pop(cls, None)
            if self._joined:
                self._into_torch(cls)
            elif node_def is None:
                self._from_torch(cls)  # torch's registration, if any, shows through again

    def _copy_all(self, classes: list[type]) -> None:
        """`_from_torch` of each of `classes` (following, none copied yet), stored in one batch.

        The caller holds cpytree's registry lock.
        """
        tp = self._tp
        assert tp is not None
        nodes, serialized, no_name = (
            tp.SUPPORTED_NODES, tp.SUPPORTED_SERIALIZED_TYPES, tp.NO_SERIALIZED_TYPE_NAME_FOUND
        )  # fmt: skip
        own, builtins, copies = _registry.SUPPORTED_NODES, self._builtins, self._copies
        rows = []
        made = []
        for cls in classes:
            if cls in builtins or cls in copies:
                continue
            if cls in own:
                continue  # cpytree's own registration wins
            source = _entry(nodes, serialized, no_name, cls)
            if source is None:
                continue
            constant = cls in tp.CONSTANT_NODES
            rows.append((cls, *source, constant))
            made.append((cls, source, constant))
        self._quiet.active = True
        try:
            _registry._store_copies(rows)
            own_serialized = _registry.SUPPORTED_SERIALIZED_TYPES
            for cls, source, constant in made:
                if not constant:
                    _registry.CONSTANT_NODES.discard(cls)
                copy = copies[cls] = _Copy(False, source, constant, None, False)
                copy.seen = (nodes.get(cls), serialized.get(cls), own.get(cls),
                             own_serialized.get(cls))  # fmt: skip
        finally:
            self._quiet.active = False

    # ------------------------------------------------------------ torch's functions

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def sync_from_torch(cls: Any, *args: Any, **kwargs: Any) -> Any:
            # Joined, torch's change and its copy happen under the one lock
            # (torch's). Following, torch's function takes torch's lock and
            # the copy cpytree's, one after the other: never torch's while
            # waiting for cpytree's, which a registration through cpytree
            # holds when its hook copies into torch.
            with self._tp_lock if self._joined else _NO_LOCK:
                try:
                    return original(cls, *args, **kwargs)
                finally:  # torch stores a node before validating it: copy even on error
                    if isinstance(cls, type):
                        self._from_torch(cls)

        return sync_from_torch

    # ------------------------------------------------------------ lifecycle

    def attach(self, torch_pytree: ModuleType) -> bool:
        """Start following: wrap torch's functions, copy its registrations into cpytree.

        Checks the ``registry`` names of the inventory first: on a torch that
        moved one, nothing is changed and False is returned (`drift()` says
        what moved). Any failure midway undoes what was done, then raises.
        """
        with _registry_lock():
            if self._tp is not None:
                return True
            from . import _inventory

            self._drift = [str(name) for name in _inventory.missing("registry")]
            if self._drift:
                return False
            originals = {name: getattr(torch_pytree, name) for name in _WRAPPED}
            self._tp = torch_pytree
            self._tp_lock = torch_pytree._NODE_REGISTRY_LOCK
            self._builtins = self._builtins | frozenset(torch_pytree.BUILTIN_TYPES)
            try:
                for name, original in originals.items():
                    self._originals[name] = original
                    self._wrappers[name] = self._wrap(original)
                    setattr(torch_pytree, name, self._wrappers[name])
                self._copy_all(list(torch_pytree.SUPPORTED_NODES))
                _registry._REGISTRATION_HOOKS.append(self._on_cpytree_change)
            except BaseException:
                self.detach()
                raise
            return True

    def join(self) -> None:
        """(install()) Join the registries both ways, until `leave()`."""
        tp = self._tp
        assert tp is not None, "attach() first"
        # The registration functions live in cpytree._registry and read the
        # lock there (the re-exports in cpytree and cpytree._reference are
        # plain names nobody locks with): share torch's lock there, or a
        # registration through each side at once takes the two locks in
        # opposite orders and deadlocks.
        with _registry_lock():  # a copy in flight under cpytree's own lock completes first
            self._saved_lock = _registry._NODE_REGISTRY_LOCK
            _registry._NODE_REGISTRY_LOCK = tp._NODE_REGISTRY_LOCK
        # Held for the whole walk: torch's lock is cpytree's registry lock now (set
        # above), so `_from_torch`'s own `_registry_lock()` would take it again for
        # each of torch's ~100 types.
        nodes, serialized, constants = (
            tp.SUPPORTED_NODES,
            tp.SUPPORTED_SERIALIZED_TYPES,
            tp.CONSTANT_NODES,
        )
        own, own_serialized = _registry.SUPPORTED_NODES, _registry.SUPPORTED_SERIALIZED_TYPES
        own_constants = _registry.CONSTANT_NODES
        copies = self._copies
        with tp._NODE_REGISTRY_LOCK:
            self._joined = True
            for cls in list(nodes):
                copy = copies.get(cls)
                # A copy of attach()'s whose four table values are still those it
                # left (so both sides still describe cls alike), with both constant
                # flags as written: `_from_torch_locked` would find nothing to do.
                if (
                    copy is not None
                    and copy.seen is not None
                    and not copy.into_torch
                    and copy.seen == (nodes.get(cls), serialized.get(cls), own.get(cls),
                                      own_serialized.get(cls))
                    and (cls in constants) is copy.constant is (cls in own_constants)
                ):  # fmt: skip
                    continue
                self._from_torch_locked(cls)
            for cls in list(_registry.SUPPORTED_NODES):
                if cls in tp.SUPPORTED_NODES:
                    continue
                copy = self._copies.get(cls)
                if copy is not None and not copy.into_torch:
                    # A copy of torch's registration, whose deregistration
                    # (made just now, following) is still on its way: not
                    # cpytree's own, so not for torch.
                    self._from_torch(cls)
                else:
                    self._into_torch(cls)

    def leave(self) -> None:
        """(uninstall()) Back to following; each registry gets back the
        registrations made through its own API."""
        tp = self._tp
        if tp is None or not self._joined:
            return
        with tp._NODE_REGISTRY_LOCK:
            self._joined = False
            back_in_torch = []
            for cls, copy in list(self._copies.items()):
                if copy.into_torch:
                    self._copies.pop(cls, None)
                    if self._in_torch(cls) == copy.written:  # not changed since through torch
                        self._write_torch(cls, copy.replaced)
                        back_in_torch.append(cls)
                elif copy.replaced is not None:
                    self._copies.pop(cls, None)
                    if self._in_cpytree(cls) == copy.written:  # not changed since through cpytree
                        self._write_cpytree(cls, copy.replaced, copy.replaced_constant,
                                            keep_shared_name=True)  # fmt: skip
                # else: a copy of torch's where cpytree had none: still followed
            for cls in back_in_torch:
                self._from_torch(cls)  # following: torch's shows through where cpytree has none
            _registry._NODE_REGISTRY_LOCK = self._saved_lock

    def detach(self) -> None:
        """Stop following: unwrap torch's functions, drop the copies (tests, teardown)."""
        tp = self._tp
        if tp is None:
            return
        self.leave()
        with _registry_lock():
            for name, original in self._originals.items():
                setattr(tp, name, original)
            self._originals.clear()
            self._wrappers.clear()
            if self._on_cpytree_change in _registry._REGISTRATION_HOOKS:
                _registry._REGISTRATION_HOOKS.remove(self._on_cpytree_change)
            self._quiet.active = True
            try:
                for cls in self.copied_into_cpytree():
                    _registry._remove_node(cls)
            finally:
                self._quiet.active = False
            self._copies.clear()
        self._tp = None


def _restore(table: dict[str, Any], key: str, value: Any) -> None:
    """Put `table[key]` back to `value` (`_ABSENT`: no such key)."""
    if value is _ABSENT:
        table.pop(key, None)
    else:
        table[key] = value
