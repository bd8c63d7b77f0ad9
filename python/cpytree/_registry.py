"""The pytree node registry of record, and the functions that change it.

`SUPPORTED_NODES` here is the one registry of the process: the pure-Python
reference reads it directly, and the C++ engine mirrors it through
`_REGISTRATION_HOOKS` (see docs/architecture.md, "Registration flow"). The
registration functions behave exactly as their namesakes in
`torch.utils._pytree` (the same in torch 2.10-2.15 as far as cpytree's own
registry goes: `_releases.DIFFERENCES` says where torch's differ); the
builtin node types are registered by `_nodes`.

Example:
    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(
    ...     Pair,
    ...     lambda p: ([p.a, p.b], None),
    ...     lambda values, _: Pair(*values),
    ...     serialized_type_name="mymodule.Pair",
    ... )
    >>> Pair in SUPPORTED_NODES
    True
"""

import dataclasses
import threading
import types
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:  # cpytree._keys loads on first use (see _nodes)
    from typing import NamedTuple

    from ._keys import KeyEntry
else:  # compiles no code at import (see _namedtuple)
    from ._namedtuple import NamedTuple

T = TypeVar("T")

PyTree = Any
Context = Any
DumpableContext = Any  # anything json.dumps accepts
FlattenFn = Callable[[PyTree], tuple[list[Any], Context]]
UnflattenFn = Callable[[Iterable[Any], Context], PyTree]
FlattenWithKeysFn = Callable[[PyTree], tuple[list[tuple["KeyEntry", Any]], Any]]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
IsLeafFn = Callable[[PyTree], bool]
FlattenFunc = FlattenFn  # deprecated aliases, kept as torch keeps them
UnflattenFunc = UnflattenFn
FlattenWithKeysFunc = FlattenWithKeysFn
TypeAny = type[Any] | tuple[type[Any], ...] | types.UnionType

ToStrFunc = Callable[[Any, list[str]], str]  # deprecated, as in torch
MaybeFromStrFunc = Callable[[str], tuple[Any, Context, str] | None]  # deprecated, as in torch

NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


class NodeDef(NamedTuple):
    """How to take a node type apart and put it back together."""

    type: type[Any]
    flatten_fn: FlattenFn
    unflatten_fn: UnflattenFn
    flatten_with_keys_fn: FlattenWithKeysFn | None

    def _new(
        _cls: Any, type: Any, flatten_fn: Any, unflatten_fn: Any, flatten_with_keys_fn: Any
    ) -> Any:
        return tuple.__new__(_cls, (type, flatten_fn, unflatten_fn, flatten_with_keys_fn))


class _SerializeNodeDef(NamedTuple):
    """How a node type's spec is written to and read from JSON."""

    typ: type[Any]
    serialized_type_name: str
    to_dumpable_context: ToDumpableContextFn | None
    from_dumpable_context: FromDumpableContextFn | None

    def _new(
        _cls: Any,
        typ: Any,
        serialized_type_name: Any,
        to_dumpable_context: Any,
        from_dumpable_context: Any,
    ) -> Any:
        return tuple.__new__(
            _cls, (typ, serialized_type_name, to_dumpable_context, from_dumpable_context)
        )


# Shared mutable state. Every write to the four tables below, and every call
# of a registration hook, happens while holding _NODE_REGISTRY_LOCK (an RLock,
# so a hook may itself register). Readers (the traversals) take no lock: a
# single dict lookup is atomic under the GIL. Hooks run under the lock so a
# mirror of the registry sees the changes in the order they were made.
_NODE_REGISTRY_LOCK = threading.RLock()
SUPPORTED_NODES: dict[type[Any], NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: dict[type[Any], _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, type[Any]] = {}
CONSTANT_NODES: set[type] = set()

# The TreeSpec classes treespec_dumps and treespec_pprint accept
# (`_serialization._check_spec`). Appended to only (a list append is atomic).
SPEC_TYPES: list[type] = []


def register_spec_type(cls: type) -> None:
    """Let `treespec_dumps` and `treespec_pprint` accept instances of `cls`."""
    if cls not in SPEC_TYPES:
        SPEC_TYPES.append(cls)


# Called as hook(cls, node_def) after each change of SUPPORTED_NODES[cls];
# node_def is None when cls was deregistered. Appended to by cpytree/__init__.
_REGISTRATION_HOOKS: list[Callable[[type, NodeDef | None], None]] = []


def _notify_hooks(cls: type[Any], node_def: NodeDef | None) -> None:
    """Tell every registration hook that `cls` now maps to `node_def`."""
    for hook in _REGISTRATION_HOOKS.copy():  # a hook may add or remove hooks
        hook(cls, node_def)


def _store_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    flatten_with_keys_fn: FlattenWithKeysFn | None,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    *,
    constant: bool = False,
    warn_overwrite: bool = True,
) -> None:
    """Register `cls` (overwriting with a UserWarning), then notify the hooks.

    As in torch the node is stored before the dumpable-context pair is
    checked, so a failed check leaves `cls` registered (and the hooks told).
    `warn_overwrite=False` is for copies of a change torch already warned of.
    """
    with _NODE_REGISTRY_LOCK:
        if warn_overwrite and cls in SUPPORTED_NODES:
            warnings.warn(
                f"{cls} is already registered as pytree node. "
                "Overwriting the previous registration.",
                stacklevel=3,
            )
        node_def = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        SUPPORTED_NODES[cls] = node_def
        try:
            if (to_dumpable_context is None) ^ (from_dumpable_context is None):
                raise ValueError(
                    f"Both to_dumpable_context and from_dumpable_context for {cls} must "
                    "be None or registered."
                )
            name = NO_SERIALIZED_TYPE_NAME_FOUND
            if serialized_type_name is not None:
                name = serialized_type_name
            SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(
                cls, name, to_dumpable_context, from_dumpable_context
            )
            SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls
            if constant:
                CONSTANT_NODES.add(cls)
        finally:
            _notify_hooks(cls, node_def)


def _store_copies(rows: list[tuple[type[Any], Any, Any, Any, str | None, Any, Any, bool]]) -> None:
    """`_store_node(*row[:7], constant=row[7], warn_overwrite=False)` for each row, in order.

    For copying a whole registry at once (`_torch_link._sync`, ~100 types when
    `import cpytree` finds torch loaded): the same tables and hook calls,
    without a call of `_store_node` per type. A row whose dumpable-context
    pair is invalid goes through `_store_node` (which raises).
    """
    nodes, serialized, by_name, constants = (
        SUPPORTED_NODES, SUPPORTED_SERIALIZED_TYPES, SERIALIZED_TYPE_TO_PYTHON_TYPE, CONSTANT_NODES
    )  # fmt: skip
    hooks = _REGISTRATION_HOOKS
    # NodeDef(...) and _SerializeNodeDef(...) without the call of their Python
    # __new__ (`_new`, which does just this): the same tuples, a third of the
    # cost of a row.
    new = tuple.__new__
    with _NODE_REGISTRY_LOCK:
        for cls, flatten_fn, unflatten_fn, with_keys_fn, name, to_dc, from_dc, constant in rows:
            if (to_dc is None) is not (from_dc is None):
                _store_node(cls, flatten_fn, unflatten_fn, with_keys_fn, name, to_dc, from_dc,
                            constant=constant, warn_overwrite=False)  # fmt: skip
                continue
            node_def = new(NodeDef, (cls, flatten_fn, unflatten_fn, with_keys_fn))
            nodes[cls] = node_def
            if name is None:
                name = NO_SERIALIZED_TYPE_NAME_FOUND
            serialized[cls] = new(_SerializeNodeDef, (cls, name, to_dc, from_dc))
            by_name[name] = cls
            if constant:
                constants.add(cls)
            for hook in hooks.copy():  # as _notify_hooks
                hook(cls, node_def)


def register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """Register `cls` as a pytree node type; ValueError if it already is one."""
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError(f"{cls} is already registered as pytree node.")
        _store_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn,
                    serialized_type_name, to_dumpable_context, from_dumpable_context)  # fmt: skip


def _private_register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """Register `cls`, overwriting (with a UserWarning) any previous registration."""
    _store_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn,
                serialized_type_name, to_dumpable_context, from_dumpable_context)  # fmt: skip


def _register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    to_str_fn: ToStrFunc | None = None,  # deprecated
    maybe_from_str_fn: MaybeFromStrFunc | None = None,  # deprecated
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """Deprecated (FutureWarning): `_private_register_pytree_node`, as torch keeps it."""
    warnings.warn(
        "`cpytree._register_pytree_node` is deprecated. "
        "Please use `cpytree.register_pytree_node` instead.",
        FutureWarning,
        stacklevel=2,
    )
    if to_str_fn is not None or maybe_from_str_fn is not None:
        warnings.warn(
            "`to_str_fn` and `maybe_from_str_fn` is deprecated. "
            "Please use `to_dumpable_context` and `from_dumpable_context` instead.",
            FutureWarning,
            stacklevel=2,
        )
    _store_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn,
                serialized_type_name, to_dumpable_context, from_dumpable_context)  # fmt: skip


def _deregister_pytree_node(cls: type[Any]) -> None:
    """Remove `cls` from the registry, then notify the hooks with None.

    Follows torch step by step, including its KeyError when a type registered
    later under the same serialized name (e.g. two types registered without
    one) already removed that name: `cls` has left SUPPORTED_NODES by then.
    """
    with _NODE_REGISTRY_LOCK:
        del SUPPORTED_NODES[cls]
        try:
            name = SUPPORTED_SERIALIZED_TYPES[cls].serialized_type_name
            del SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
            del SUPPORTED_SERIALIZED_TYPES[cls]
            CONSTANT_NODES.discard(cls)
        finally:
            _notify_hooks(cls, None)


def _remove_node(cls: type[Any]) -> None:
    """Remove `cls` from every table, then notify the hooks with None.

    Unlike `_deregister_pytree_node` (torch's steps, torch's KeyError), this
    leaves a serialized name that another type has taken since to that type.
    """
    with _NODE_REGISTRY_LOCK:
        SUPPORTED_NODES.pop(cls, None)
        serialized = SUPPORTED_SERIALIZED_TYPES.pop(cls, None)
        if (
            serialized is not None
            and SERIALIZED_TYPE_TO_PYTHON_TYPE.get(serialized.serialized_type_name) is cls
        ):
            del SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized.serialized_type_name]
        CONSTANT_NODES.discard(cls)
        _notify_hooks(cls, None)


def _dataclass_field_names(
    cls: type[Any], field_names: list[str] | None, drop_field_names: list[str]
) -> list[str]:
    """Check and return the fields that `register_dataclass` flattens."""
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError(
                "field_names must be specified with a list of all fields used to "
                f"initialize {cls}, as it is not a dataclass."
            )
        return field_names
    if field_names is None:
        return [f.name for f in dataclasses.fields(cls) if f.init]
    init_fields = {f.name for f in dataclasses.fields(cls) if f.init}
    init_fields.difference_update(drop_field_names)
    if init_fields == set(field_names):
        return field_names
    message = "field_names does not include all dataclass fields.\n"
    if missing := init_fields - set(field_names):
        message += (
            f"Missing fields in `field_names`: {missing}. If you want "
            "to include these fields in the pytree, please add them "
            "to `field_names`, otherwise please add them to "
            "`drop_field_names`.\n"
        )
    if unexpected := set(field_names) - init_fields:
        message += (
            f"Unexpected fields in `field_names`: {unexpected}. "
            "Please remove these fields, or add them to `drop_field_names`.\n"
        )
    raise ValueError(message)


def register_dataclass(
    cls: type[Any],
    *,
    field_names: list[str] | None = None,
    drop_field_names: list[str] | None = None,
    serialized_type_name: str | None = None,
) -> None:
    """Register a type built as `cls(**fields)`; None-valued fields go to the context."""
    names = _dataclass_field_names(cls, field_names, drop_field_names or [])

    def flatten(obj: Any) -> tuple[list[Any], Context]:
        values: list[Any] = []
        flat_names: list[str] = []
        none_names: list[str] = []
        for name in names:
            value = getattr(obj, name)
            if value is None:
                none_names.append(name)
            else:
                values.append(value)
                flat_names.append(name)
        return values, [flat_names, none_names]

    def unflatten(values: Iterable[Any], context: Context) -> Any:
        flat_names, none_names = context
        return cls(**dict(zip(flat_names, values, strict=True)), **dict.fromkeys(none_names))

    from ._keys import GetAttrKey

    def flatten_with_keys(obj: Any) -> tuple[list[tuple["KeyEntry", Any]], Context]:
        values, (flat_names, _) = flatten(obj)
        keyed: list[tuple[KeyEntry, Any]] = [
            (GetAttrKey(name), value) for name, value in zip(flat_names, values, strict=True)
        ]
        return keyed, flat_names

    _store_node(cls, flatten, unflatten, flatten_with_keys, serialized_type_name)


_REPR_RUNNING: set[tuple[int, int]] = set()  # (id, thread) of ConstantNode reprs under way


class ConstantNode(Generic[T]):
    """The context of a constant node: the constant itself."""

    # torch's ConstantNode is `@dataclass(frozen=True, slots=True)`, whose six
    # generated methods were compiled at every `import cpytree` (a quarter of
    # its cost). These are what that decorator generates, written out; the
    # decorator below adds the dataclass fields (it generates no code with
    # init, repr and eq off), and tests/python/test_import_cost.py compares
    # the class with the decorator's own.
    __slots__ = ("value",)
    value: T

    def __init__(self, value: T) -> None:
        object.__setattr__(self, "value", value)

    def __repr__(self) -> str:
        key = id(self), threading.get_ident()
        if key in _REPR_RUNNING:
            return "..."
        _REPR_RUNNING.add(key)
        try:
            return f"{self.__class__.__qualname__}(value={self.value!r})"
        finally:
            _REPR_RUNNING.discard(key)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return (self.value,) == (other.value,)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.value,))

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) is ConstantNode or name == "value":
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is ConstantNode or name == "value":
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)

    def __getstate__(self) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(cast(Any, self))]

    def __setstate__(self, state: list[Any]) -> None:
        for field, value in zip(dataclasses.fields(cast(Any, self)), state, strict=False):
            object.__setattr__(self, field.name, value)


dataclasses.dataclass(init=False, repr=False, eq=False)(ConstantNode)
# What `__dataclass_params__` says of torch's (frozen=True, slots=True):
# subclassing it as a dataclass checks `frozen`.
for _param in ("init", "repr", "eq", "frozen", "slots"):
    if hasattr(ConstantNode.__dataclass_params__, _param):  # type: ignore[attr-defined]
        setattr(ConstantNode.__dataclass_params__, _param, True)  # type: ignore[attr-defined]
del _param


def register_constant(cls: type[Any]) -> None:
    """Register `cls` as a node without children, its value kept in the context."""
    if cls.__eq__ is object.__eq__:  # type: ignore[comparison-overlap]
        raise TypeError(
            "register_constant(cls) expects `cls` to have a non-default `__eq__` implementation."
        )
    if cls.__hash__ is None:
        raise TypeError(
            "register_constant(cls) expects `cls` to have a non-default `__hash__` implementation."
        )

    def flatten(value: Any) -> tuple[list[Any], Context]:
        return [], ConstantNode(value)

    def unflatten(_: Iterable[Any], context: Context) -> Any:
        return context.value

    def flatten_with_keys(value: Any) -> tuple[list[tuple["KeyEntry", Any]], Context]:
        return [], ConstantNode(value)

    _store_node(cls, flatten, unflatten, flatten_with_keys, constant=True)


def is_constant_class(cls: type[Any]) -> bool:
    """Whether `cls` was registered with `register_constant`."""
    return isinstance(cls, type) and cls in CONSTANT_NODES
