"""Pure-Python reference implementation of cpytree's pytree API.

It re-implements the core of PyTorch 2.13's `torch.utils._pytree` with the
same names, signatures, results, exception types and messages, using only the
standard library (it never imports torch). It has three jobs:

* the oracle that differential tests compare the C++ engine against;
* the fallback that `cpytree/__init__.py` binds when the extension cannot load;
* the registry of record: `SUPPORTED_NODES` here is the one registry, and
  `_REGISTRATION_HOOKS` announce every change of it (the C++ engine mirrors
  the registry through a hook).

It differs from torch on purpose in two ways only:

1. `_REGISTRATION_HOOKS`: every (de)registration calls `hook(cls, node_def)`
   (`node_def` None on deregistration) after `SUPPORTED_NODES` changed.
2. Structure mismatches found by `TreeSpec.flatten_up_to` (so also by n-ary
   `tree_map`/`tree_map_`) end their message with ` (at key path tree<keystr>)`.

Example:
    >>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
    >>> leaves
    [1, 2, 3]
    >>> tree_unflatten([x * 10 for x in leaves], spec)
    {'a': (10, 20), 'b': [30]}

Traversals are plain recursion, so deep or cyclic trees raise RecursionError.
Key paths (key entries, `*_with_path`, the tree-against-spec matching of
`flatten_up_to`) live in `cpytree._keys` and are re-exported here.
"""

import dataclasses
import functools
import importlib
import threading
import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, NamedTuple, TypeVar, cast

from ._keys import (
    GetAttrKey,
    KeyEntry,
    KeyPath,
    MappingKey,
    SequenceKey,
    _defaultdict_flatten_with_keys,
    _deque_flatten_with_keys,
    _dict_flatten_with_keys,
    _flatten_up_to,
    _generate_key_paths,  # noqa: F401  (a module attribute in torch too)
    _list_flatten_with_keys,
    _namedtuple_flatten_with_keys,
    _ordereddict_flatten_with_keys,
    _StructureMismatch,
    _tuple_flatten_with_keys,
    key_get,
    keystr,
    tree_flatten_with_path,
    tree_leaves_with_path,
    tree_map_with_path,
)

# torch's __all__, plus the key entry names (re-exported from _keys).
__all__ = [
    "Context", "DumpableContext", "FlattenFn", "FromDumpableContextFn", "GetAttrKey",
    "KeyEntry", "KeyPath", "LeafSpec", "MappingKey", "PyTree", "PyTreeSpec", "SequenceKey",
    "ToDumpableContextFn", "TreeSpec", "UnflattenFn", "is_namedtuple", "is_namedtuple_class",
    "is_namedtuple_instance", "is_structseq", "is_structseq_class", "is_structseq_instance",
    "key_get", "keystr", "register_pytree_node", "tree_all", "tree_all_only", "tree_any",
    "tree_any_only", "tree_flatten", "tree_flatten_with_path", "tree_is_leaf", "tree_iter",
    "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_", "tree_map_only",
    "tree_map_only_", "tree_map_with_path", "tree_structure", "tree_unflatten",
]  # fmt: skip

T = TypeVar("T")

PyTree = Any
Context = Any
DumpableContext = Any  # anything json.dumps accepts
FlattenFn = Callable[[PyTree], tuple[list[Any], Context]]
UnflattenFn = Callable[[Iterable[Any], Context], PyTree]
FlattenWithKeysFn = Callable[[PyTree], tuple[list[tuple[KeyEntry, Any]], Any]]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
IsLeafFn = Callable[[PyTree], bool]
FlattenFunc = FlattenFn  # deprecated aliases, kept as torch keeps them
UnflattenFunc = UnflattenFn
FlattenWithKeysFunc = FlattenWithKeysFn
TypeAny = type[Any] | tuple[type[Any], ...] | types.UnionType

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


class _SerializeNodeDef(NamedTuple):
    """How a node type's spec is written to and read from JSON."""

    typ: type[Any]
    serialized_type_name: str
    to_dumpable_context: ToDumpableContextFn | None
    from_dumpable_context: FromDumpableContextFn | None


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
) -> None:
    """Register `cls` (overwriting with a UserWarning), then notify the hooks.

    As in torch the node is stored before the dumpable-context pair is
    checked, so a failed check leaves `cls` registered (and the hooks told).
    """
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
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

    def flatten_with_keys(obj: Any) -> tuple[list[tuple[KeyEntry, Any]], Context]:
        values, (flat_names, _) = flatten(obj)
        keyed: list[tuple[KeyEntry, Any]] = [
            (GetAttrKey(name), value) for name, value in zip(flat_names, values, strict=True)
        ]
        return keyed, flat_names

    _store_node(cls, flatten, unflatten, flatten_with_keys, serialized_type_name)


@dataclasses.dataclass(frozen=True, slots=True)
class ConstantNode(Generic[T]):
    """The context of a constant node: the constant itself."""

    value: T


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

    def flatten_with_keys(value: Any) -> tuple[list[tuple[KeyEntry, Any]], Context]:
        return [], ConstantNode(value)

    _store_node(cls, flatten, unflatten, flatten_with_keys, constant=True)


def is_constant_class(cls: type[Any]) -> bool:
    """Whether `cls` was registered with `register_constant`."""
    return isinstance(cls, type) and cls in CONSTANT_NODES


def _is_constant_holder(spec: "TreeSpec") -> bool:
    """Whether `spec` describes a registered constant."""
    return isinstance(spec._context, ConstantNode)


def _retrieve_constant(spec: "TreeSpec") -> Any:
    """The constant that a constant-node spec holds."""
    if not _is_constant_holder(spec):
        raise AssertionError("spec does not correspond to a registered constant pytree")
    return tree_unflatten([], spec)


# --------------------------------------------------------------------------
# namedtuple and PyStructSequence detection
# --------------------------------------------------------------------------


def is_namedtuple(obj: object | type) -> bool:
    """Whether `obj` is a namedtuple class or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_class(cls: type) -> bool:
    """Whether `cls` is a tuple subclass with str `_fields`, `_make` and `_asdict`."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return False
    fields = getattr(cls, "_fields", None)
    return (
        isinstance(fields, tuple)
        and all(type(field) is str for field in fields)
        and callable(getattr(cls, "_make", None))
        and callable(getattr(cls, "_asdict", None))
    )


def is_namedtuple_instance(obj: object) -> bool:
    """Whether `obj` is a namedtuple instance."""
    return is_namedtuple_class(type(obj))


Py_TPFLAGS_BASETYPE: int = 1 << 10  # CPython: the type may be subclassed


def is_structseq(obj: object | type) -> bool:
    """Whether `obj` is a PyStructSequence class or instance."""
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: type) -> bool:
    """Whether `cls` is a PyStructSequence type such as `os.stat_result`."""
    return (
        isinstance(cls, type)
        and cls.__bases__ == (tuple,)
        and isinstance(getattr(cls, "n_fields", None), int)
        and isinstance(getattr(cls, "n_sequence_fields", None), int)
        and isinstance(getattr(cls, "n_unnamed_fields", None), int)
        and not cls.__flags__ & Py_TPFLAGS_BASETYPE
    )


def is_structseq_instance(obj: object) -> bool:
    """Whether `obj` is a PyStructSequence instance."""
    return is_structseq_class(type(obj))


def _get_node_type(tree: Any) -> Any:
    """The registry key of `tree`: its type, or `namedtuple` for any namedtuple."""
    node_type = type(tree)
    if node_type is not tuple and issubclass(node_type, tuple) and is_namedtuple_class(node_type):
        return namedtuple
    return node_type


# --------------------------------------------------------------------------
# Builtin node types (their flatten_with_keys_fn live in _keys)
# --------------------------------------------------------------------------


def _tuple_flatten(d: tuple[Any, ...]) -> tuple[list[Any], Context]:
    return list(d), None


def _tuple_unflatten(values: Iterable[Any], context: Context) -> tuple[Any, ...]:
    return tuple(values)


def _list_flatten(d: list[Any]) -> tuple[list[Any], Context]:
    return d, None


def _list_unflatten(values: Iterable[Any], context: Context) -> list[Any]:
    return list(values)


def _dict_flatten(d: dict[Any, Any]) -> tuple[list[Any], Context]:
    return list(d.values()), list(d.keys())


def _dict_unflatten(values: Iterable[Any], context: Context) -> dict[Any, Any]:
    return dict(zip(context, values, strict=True))


def _namedtuple_flatten(d: Any) -> tuple[list[Any], Context]:
    return list(d), type(d)


def _namedtuple_unflatten(values: Iterable[Any], context: Context) -> Any:
    return context(*values)


def _namedtuple_serialize(context: Context) -> DumpableContext:
    if context not in SUPPORTED_SERIALIZED_TYPES:
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we "
            "didn't register a serializated_type_name. Please register using "
            "`_register_namedtuple`."
        )
    name = SUPPORTED_SERIALIZED_TYPES[context].serialized_type_name
    if name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we "
            "couldn't find a serializated_type_name. Please register using "
            "`_register_namedtuple`."
        )
    return name


def _namedtuple_deserialize(dumpable_context: DumpableContext) -> Context:
    if dumpable_context not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(
            f"Can't deserialize TreeSpec of namedtuple class {dumpable_context} "
            "because we couldn't find a serializated name."
        )
    return SERIALIZED_TYPE_TO_PYTHON_TYPE[dumpable_context]


def _register_namedtuple(cls: type[Any], *, serialized_type_name: str) -> None:
    """Register namedtuple class `cls` under a name, so its specs can be serialized."""
    _store_node(cls, _namedtuple_flatten, _namedtuple_unflatten, _namedtuple_flatten_with_keys,
                serialized_type_name, _namedtuple_serialize, _namedtuple_deserialize)  # fmt: skip


def _ordereddict_flatten(d: "OrderedDict[Any, Any]") -> tuple[list[Any], Context]:
    return list(d.values()), list(d.keys())


def _ordereddict_unflatten(values: Iterable[Any], context: Context) -> "OrderedDict[Any, Any]":
    return OrderedDict(zip(context, values, strict=True))


_odict_flatten, _odict_unflatten = _ordereddict_flatten, _ordereddict_unflatten  # torch's aliases


def _defaultdict_flatten(d: "defaultdict[Any, Any]") -> tuple[list[Any], Context]:
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_unflatten(values: Iterable[Any], context: Context) -> "defaultdict[Any, Any]":
    default_factory, keys = context
    return defaultdict(default_factory, _dict_unflatten(values, keys))


def _defaultdict_serialize(context: Context) -> DumpableContext:
    default_factory, keys = context
    return {
        "default_factory_module": default_factory.__module__,
        "default_factory_name": default_factory.__qualname__,
        "dict_context": keys,
    }


def _defaultdict_deserialize(dumpable_context: DumpableContext) -> Context:
    if not isinstance(dumpable_context, dict):
        raise AssertionError("dumpable_context must be a dict")  # noqa: TRY004 (as torch)
    expected_keys = {"default_factory_module", "default_factory_name", "dict_context"}
    if set(dumpable_context) != expected_keys:
        raise AssertionError(
            f"dumpable_context keys must be {expected_keys}, got {set(dumpable_context)}"
        )
    module_name = dumpable_context["default_factory_module"]
    factory_name = dumpable_context["default_factory_name"]
    if not isinstance(module_name, str):
        raise AssertionError("default_factory_module must be a string")  # noqa: TRY004 (as torch)
    if not isinstance(factory_name, str):
        raise AssertionError("default_factory_name must be a string")  # noqa: TRY004 (as torch)
    default_factory = getattr(importlib.import_module(module_name), factory_name)
    return [default_factory, dumpable_context["dict_context"]]


def _deque_flatten(d: "deque[Any]") -> tuple[list[Any], Context]:
    return list(d), d.maxlen


def _deque_unflatten(values: Iterable[Any], context: Context) -> "deque[Any]":
    return deque(values, maxlen=context)


def _register_builtin_nodes() -> None:
    """Register the node types every pytree knows (run once, at import)."""
    _store_node(tuple, _tuple_flatten, _tuple_unflatten, _tuple_flatten_with_keys, "builtins.tuple")
    _store_node(list, _list_flatten, _list_unflatten, _list_flatten_with_keys, "builtins.list")
    _store_node(dict, _dict_flatten, _dict_unflatten, _dict_flatten_with_keys, "builtins.dict")
    _store_node(
        cast(type, namedtuple),
        _namedtuple_flatten,
        _namedtuple_unflatten,
        _namedtuple_flatten_with_keys,
        "collections.namedtuple",
        _namedtuple_serialize,
        _namedtuple_deserialize,
    )
    _store_node(
        OrderedDict,
        _ordereddict_flatten,
        _ordereddict_unflatten,
        _ordereddict_flatten_with_keys,
        "collections.OrderedDict",
    )
    _store_node(
        defaultdict,
        _defaultdict_flatten,
        _defaultdict_unflatten,
        _defaultdict_flatten_with_keys,
        "collections.defaultdict",
        _defaultdict_serialize,
        _defaultdict_deserialize,
    )
    _store_node(
        deque, _deque_flatten, _deque_unflatten, _deque_flatten_with_keys, "collections.deque"
    )


_register_builtin_nodes()

STANDARD_DICT_TYPES: frozenset[type] = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES: frozenset[Any] = frozenset(
    {tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque}
)


# --------------------------------------------------------------------------
# TreeSpec
# --------------------------------------------------------------------------


@dataclasses.dataclass(init=False, frozen=True, eq=True, repr=False, slots=True)
class TreeSpec:
    """The structure of a pytree: node type, context and child specs.

    A leaf has `type` None. Frozen; pickles and copies field by field.
    `==` compares `str(type)`, the contexts with `==` and the children in
    order; the hash leaves out a custom node's context (may be unhashable).
    """

    type: Any
    _context: Context
    _children: "list[TreeSpec]"

    num_nodes: int = dataclasses.field(init=False)
    num_leaves: int = dataclasses.field(init=False)
    num_children: int = dataclasses.field(init=False)

    def __init__(self, type: Any, context: Context, children_specs: "list[TreeSpec]") -> None:
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "_context", context)
        object.__setattr__(self, "_children", children_specs)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.type is None:
            if self._context is not None:
                raise AssertionError("leaf node should not have a context")
            if len(self._children) != 0:
                raise AssertionError("leaf node should not have children")
            num_nodes, num_leaves = 1, 1
        else:
            num_nodes = 1 + sum(child.num_nodes for child in self._children)
            num_leaves = sum(child.num_leaves for child in self._children)
        object.__setattr__(self, "num_nodes", num_nodes)
        object.__setattr__(self, "num_leaves", num_leaves)
        object.__setattr__(self, "num_children", len(self._children))

    def __repr__(self, indent: int = 0) -> str:
        head = f"TreeSpec({self.type.__name__}, {self._context}, ["
        if self.num_children == 0:
            return head + "])"
        indent += 2
        parts = []
        for child in self._children:  # a loop, not a generator: one frame per level
            parts.append(child.__repr__(indent))
        return head + (",\n" + " " * indent).join(parts) + "])"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        if str(self.type) != str(other.type):  # torch compares type names, not types
            return False
        if self._context != other._context:
            return False
        return not self._children != other._children

    def __hash__(self) -> int:
        node_type = self.type
        context: Any
        if node_type is defaultdict:
            context = (self._context[0], tuple(self._context[1]))
        elif node_type is dict or node_type is OrderedDict:
            context = tuple(self._context)
        elif node_type is None or node_type in BUILTIN_TYPES:
            context = self._context
        elif isinstance(self._context, ConstantNode):
            context = self._context.value
        else:
            context = None  # a custom node's context may be unhashable
        return hash((node_type, context, tuple(self._children)))

    @property
    def context(self) -> Context:
        return self._context

    @property
    def children_specs(self) -> "list[TreeSpec]":
        """Deprecated (FutureWarning): the list of child specs itself."""
        warnings.warn(
            "`treespec.children_specs` is deprecated. "
            "Use `treespec.child(index)` to access a single child, "
            "or `treespec.children()` to get all children.",
            FutureWarning,
            stacklevel=2,
        )
        return self._children

    def is_leaf(self) -> bool:
        """Whether this spec describes a single leaf."""
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self) -> "list[TreeSpec]":
        """A new list of the child specs."""
        return self._children.copy()

    def child(self, index: int) -> "TreeSpec":
        """The child spec at `index`."""
        return self._children[index]

    def flatten_up_to(self, tree: PyTree) -> list[PyTree]:
        """The subtrees of `tree` at this spec's leaves; ValueError, with key path, if none."""
        subtrees: list[PyTree] = []
        try:
            _flatten_up_to(self, tree, subtrees)
        except _StructureMismatch as mismatch:
            error = mismatch.to_error()
        else:
            return subtrees
        raise error  # outside the handler: no chained internal exception

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """The pytree of this structure holding `leaves`."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                f"but the spec refers to a pytree that holds {self.num_leaves} "
                f"items ({self}).",
            )
        return _unflatten_node(self, iter(leaves))


PyTreeSpec = TreeSpec


@dataclasses.dataclass(init=False, frozen=True, eq=False, repr=False, slots=True)
class LeafSpec(TreeSpec):
    """Deprecated class of leaf specs: making one warns (FutureWarning)."""

    type: Any = dataclasses.field(default=None, init=False)
    _context: Context = dataclasses.field(default=None, init=False)
    _children: "list[TreeSpec]" = dataclasses.field(default_factory=list, init=False)

    def __new__(cls) -> "LeafSpec":  # noqa: PYI034
        if cls is LeafSpec:  # as torch's @deprecated: also on copy and unpickling
            warnings.warn(
                "`isinstance(treespec, LeafSpec)` is deprecated, "
                "use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.",
                FutureWarning,
                stacklevel=2,
            )
        return object.__new__(cls)

    def __init__(self) -> None:
        object.__setattr__(self, "type", None)
        object.__setattr__(self, "_context", None)
        object.__setattr__(self, "_children", [])
        object.__setattr__(self, "num_nodes", 1)
        object.__setattr__(self, "num_leaves", 1)
        object.__setattr__(self, "num_children", 0)

    def __repr__(self, indent: int = 0) -> str:
        return "*"


_LEAF_SPEC = object.__new__(LeafSpec)  # the spec of every leaf; made without the warning
LeafSpec.__init__(_LEAF_SPEC)


def treespec_leaf() -> LeafSpec:
    """The spec of a leaf."""
    return _LEAF_SPEC


def treespec_tuple(iterable: Iterable[TreeSpec] = (), /) -> TreeSpec:
    """The spec of a tuple whose items have the given specs."""
    children = list(iterable)
    if any(not isinstance(child, TreeSpec) for child in children):
        raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
    return TreeSpec(tuple, None, children)


def treespec_dict(
    mapping: Mapping[Any, TreeSpec] | Iterable[tuple[Any, TreeSpec]] = (),
    /,
    **kwargs: TreeSpec,
) -> TreeSpec:
    """The spec of a dict whose values have the given specs."""
    dct = dict(mapping, **kwargs)
    if any(not isinstance(child, TreeSpec) for child in dct.values()):
        raise ValueError(f"Expected a dictionary of TreeSpec values, got: {dct!r}.")
    return TreeSpec(dict, list(dct.keys()), list(dct.values()))


def _is_pytreespec_instance(obj: Any) -> bool:
    return isinstance(obj, TreeSpec)


def _unflatten_node(spec: TreeSpec, leaves: Iterator[Any]) -> PyTree:
    """Build the subtree of `spec`, taking its leaves from `leaves` in order."""
    if spec.is_leaf():
        return next(leaves)
    unflatten_fn = SUPPORTED_NODES[spec.type].unflatten_fn
    children = []
    for child_spec in spec._children:
        children.append(_unflatten_node(child_spec, leaves))
    return unflatten_fn(children, spec._context)


# --------------------------------------------------------------------------
# Traversals
# --------------------------------------------------------------------------


def tree_is_leaf(tree: PyTree, is_leaf: IsLeafFn | None = None) -> bool:
    """Whether `tree` is a leaf: `is_leaf(tree)` is true, or its type is no node type."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _get_node_type(tree) not in SUPPORTED_NODES


def _flatten_into(node: PyTree, leaves: list[Any], is_leaf: IsLeafFn | None) -> TreeSpec:
    """Append the leaves of `node` to `leaves` and return its spec."""
    if is_leaf is not None and is_leaf(node):
        leaves.append(node)
        return _LEAF_SPEC
    node_type = _get_node_type(node)
    node_def = SUPPORTED_NODES.get(node_type)
    if node_def is None:
        leaves.append(node)
        return _LEAF_SPEC
    children, context = node_def.flatten_fn(node)
    child_specs = []
    for child in children:  # a loop, not a comprehension: one frame per level
        child_specs.append(_flatten_into(child, leaves, is_leaf))
    return TreeSpec(node_type, context, child_specs)


def tree_flatten(tree: PyTree, is_leaf: IsLeafFn | None = None) -> tuple[list[Any], TreeSpec]:
    """The leaves of `tree` in pre-order, and the spec that rebuilds it."""
    leaves: list[Any] = []
    spec = _flatten_into(tree, leaves, is_leaf)
    return leaves, spec


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree:
    """The pytree of `treespec` holding `leaves` (the two may come swapped)."""
    if not _is_pytreespec_instance(treespec):
        if not _is_pytreespec_instance(leaves):
            raise TypeError(
                f"Expected `treespec` to be an instance of "
                f"PyTreeSpec but got item of type {type(treespec)}."
            )
        leaves, treespec = cast(Iterable[Any], treespec), cast(TreeSpec, leaves)
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: IsLeafFn | None = None) -> Iterator[Any]:
    """Yield the leaves of `tree` in pre-order, flattening lazily."""
    if tree_is_leaf(tree, is_leaf=is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)
    for child in children:
        yield from tree_iter(child, is_leaf=is_leaf)


def _collect_leaves(node: PyTree, leaves: list[Any], is_leaf: IsLeafFn | None) -> None:
    """Append the leaves of `node` to `leaves` (a flatten that builds no spec)."""
    if is_leaf is not None and is_leaf(node):
        leaves.append(node)
        return
    node_def = SUPPORTED_NODES.get(_get_node_type(node))
    if node_def is None:
        leaves.append(node)
        return
    children, _ = node_def.flatten_fn(node)
    for child in children:
        _collect_leaves(child, leaves, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: IsLeafFn | None = None) -> list[Any]:
    """The leaves of `tree` in pre-order."""
    leaves: list[Any] = []
    _collect_leaves(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree: PyTree, is_leaf: IsLeafFn | None = None) -> TreeSpec:
    """The spec of `tree`."""
    return tree_flatten(tree, is_leaf=is_leaf)[1]


def tree_map(
    func: Callable[..., Any], tree: PyTree, *rests: PyTree, is_leaf: IsLeafFn | None = None
) -> PyTree:
    """A tree shaped like `tree` whose leaves are `func(leaf, *matching subtrees of rests)`.

    `tree` must be a prefix of each tree in `rests`.
    """
    leaves, treespec = tree_flatten(tree, is_leaf=is_leaf)
    flat_args = [leaves] + [treespec.flatten_up_to(rest) for rest in rests]
    return treespec.unflatten(map(func, *flat_args))


def tree_map_(
    func: Callable[..., Any], tree: PyTree, *rests: PyTree, is_leaf: IsLeafFn | None = None
) -> PyTree:
    """Call `func` as `tree_map` does, for its effects only; return `tree` itself."""
    leaves, treespec = tree_flatten(tree, is_leaf=is_leaf)
    flat_args = [leaves] + [treespec.flatten_up_to(rest) for rest in rests]
    deque(map(func, *flat_args), maxlen=0)  # run func on every leaf, keep nothing
    return tree


def map_only(
    type_or_types_or_pred: TypeAny | Callable[[Any], bool], /
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: apply the function only to values of the types (or passing the predicate)."""
    pred: Callable[[Any], bool]
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        selected = type_or_types_or_pred

        def is_selected(x: Any) -> bool:
            return isinstance(x, selected)

        pred = is_selected
    elif callable(type_or_types_or_pred):
        pred = type_or_types_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapper(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(func)
        def wrapped(x: Any) -> Any:
            return func(x) if pred(x) else x

        return wrapped

    return wrapper


def tree_map_only(
    type_or_types_or_pred: TypeAny | Callable[[Any], bool],
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: IsLeafFn | None = None,
) -> PyTree:
    """`tree_map` of `func` over the leaves `map_only` selects; others are kept."""
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(
    type_or_types_or_pred: TypeAny | Callable[[Any], bool],
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: IsLeafFn | None = None,
) -> PyTree:
    """`tree_map_` of `func` over the leaves `map_only` selects."""
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: PyTree, is_leaf: IsLeafFn | None = None) -> bool:
    """Whether `pred` holds for every leaf (stops at the first that fails)."""
    return all(map(pred, tree_iter(tree, is_leaf=is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: PyTree, is_leaf: IsLeafFn | None = None) -> bool:
    """Whether `pred` holds for some leaf (stops at the first that does)."""
    return any(map(pred, tree_iter(tree, is_leaf=is_leaf)))


def tree_all_only(
    type_or_types: TypeAny,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: IsLeafFn | None = None,
) -> bool:
    """Whether `pred` holds for every leaf that is an instance of `type_or_types`."""
    return all(pred(x) for x in tree_iter(tree, is_leaf=is_leaf) if isinstance(x, type_or_types))


def tree_any_only(
    type_or_types: TypeAny,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: IsLeafFn | None = None,
) -> bool:
    """Whether `pred` holds for some leaf that is an instance of `type_or_types`."""
    return any(pred(x) for x in tree_iter(tree, is_leaf=is_leaf) if isinstance(x, type_or_types))


def arg_tree_leaves(*args: PyTree, **kwargs: PyTree) -> list[Any]:
    """The leaves of `(args, kwargs)`, without building that tuple."""
    leaves: list[Any] = []
    for arg in args:
        _collect_leaves(arg, leaves, None)
    for arg in kwargs.values():
        _collect_leaves(arg, leaves, None)
    return leaves


def _broadcast_to_and_flatten(
    tree: PyTree, treespec: TreeSpec, is_leaf: IsLeafFn | None = None
) -> list[Any] | None:
    """The leaves of prefix `tree` broadcast to `treespec`, or None if it is no prefix."""
    full_tree = tree_unflatten([0] * treespec.num_leaves, treespec)
    result: list[Any] = []

    def add_leaves(x: Any, subtree: PyTree) -> None:
        result.extend([x] * tree_structure(subtree, is_leaf=is_leaf).num_leaves)

    try:
        tree_map_(add_leaves, tree, full_tree, is_leaf=is_leaf)
    except ValueError:
        return None
    return result
