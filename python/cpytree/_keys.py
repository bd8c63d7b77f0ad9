"""Key paths of the pure-Python reference pytree.

A key path names where a value sits inside a pytree: a tuple of key entries,
one per level from the root down. Everything here behaves exactly like its
namesake in PyTorch 2.13's `torch.utils._pytree`, and `cpytree._reference`
re-exports the public names:

* the key entries `SequenceKey`, `MappingKey`, `GetAttrKey`, and the
  helpers `keystr` and `key_get`;
* the `flatten_with_keys_fn` of each builtin node type;
* `tree_flatten_with_path`, `tree_leaves_with_path`, `tree_map_with_path`;
* matching a tree against a spec for `TreeSpec.flatten_up_to`, whose
  mismatch errors name the mismatching node by key path (the one intended
  difference from torch; see docs/architecture.md, "Error messages with key
  paths").

Example:
    >>> Point = namedtuple("Point", "x y")
    >>> path = (MappingKey("a"), SequenceKey(0), GetAttrKey("x"))
    >>> keystr(path)
    "['a'][0].x"
    >>> key_get({"a": [Point(x=1, y=2)]}, path)
    1
"""

import dataclasses
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "GetAttrKey", "KeyEntry", "KeyPath", "MappingKey", "SequenceKey", "key_get", "keystr",
    "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path",
]  # fmt: skip

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class KeyEntry(Protocol):
    """What a key entry offers: hashing, equality, text, and lookup in a parent."""

    def __hash__(self) -> int: ...

    def __eq__(self, other: object) -> bool: ...

    def __str__(self) -> str: ...

    def get(self, parent: Any) -> Any: ...


KeyPath = tuple[KeyEntry, ...]
PyTree = Any
IsLeafFn = Callable[[PyTree], bool]


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey(Generic[T]):
    """Position `idx` in a sequence; prints as `[idx]`."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Sequence[T]) -> T:
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey(Generic[K, T]):
    """Key `key` of a mapping; prints as `[repr(key)]`."""

    key: K

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Mapping[K, T]) -> T:
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Attribute `name` of an object; prints as `.name`."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


def keystr(kp: KeyPath) -> str:
    """Return the text of a key path: its entries' texts, concatenated."""
    return "".join([str(entry) for entry in kp])


def key_get(obj: Any, kp: KeyPath) -> Any:
    """Return the value found in `obj` by following the key path `kp`."""
    for entry in kp:
        obj = entry.get(obj)
    return obj


# --------------------------------------------------------------------------
# flatten_with_keys_fn of the builtin node types
# --------------------------------------------------------------------------

KeyedChildren = list[tuple[KeyEntry, Any]]


def _sequence_keyed(values: Sequence[Any]) -> KeyedChildren:
    return [(SequenceKey(i), v) for i, v in enumerate(values)]


def _mapping_keyed(keys: list[Any], values: list[Any]) -> KeyedChildren:
    return [(MappingKey(k), v) for k, v in zip(keys, values, strict=True)]


def _tuple_flatten_with_keys(d: tuple[Any, ...]) -> tuple[KeyedChildren, None]:
    return _sequence_keyed(d), None


def _list_flatten_with_keys(d: list[Any]) -> tuple[KeyedChildren, None]:
    return _sequence_keyed(d), None


def _dict_flatten_with_keys(d: dict[Any, Any]) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), keys


def _namedtuple_flatten_with_keys(d: Any) -> tuple[KeyedChildren, type]:
    cls = type(d)
    keyed: KeyedChildren = [(GetAttrKey(field), v) for field, v in zip(cls._fields, d, strict=True)]
    return keyed, cls


def _ordereddict_flatten_with_keys(
    d: "OrderedDict[Any, Any]",
) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), keys


def _defaultdict_flatten_with_keys(
    d: "defaultdict[Any, Any]",
) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), [d.default_factory, keys]


def _deque_flatten_with_keys(d: "deque[Any]") -> tuple[KeyedChildren, int | None]:
    return _sequence_keyed(d), d.maxlen


# --------------------------------------------------------------------------
# Key paths of structure mismatches
# --------------------------------------------------------------------------


class _StructureMismatch(Exception):
    """A mismatch found by flatten_up_to, collecting its key path on the way up.

    Internal: each level of the traversal that the exception passes through
    adds the entry naming its child; flatten_up_to then turns it into the
    ValueError users see. The path text is built only then.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.reversed_path: list[KeyEntry] = []  # innermost entry first

    def to_error(self) -> ValueError:
        """The ValueError users see: the message, then ` (at key path tree...)`."""
        path = keystr(tuple(reversed(self.reversed_path)))
        return ValueError(f"{self.message} (at key path tree{path})")


def _child_key(node_type: Any, context: Any, index: int) -> KeyEntry:
    """The key entry that names child `index` of a spec node in mismatch messages.

    A namedtuple child is `.field`, a child of a dict kind `[repr(key)]`, any
    other child (tuple, list, deque, custom node) `[index]`.
    """
    if node_type is namedtuple:
        return GetAttrKey(context._fields[index])
    if node_type is dict or node_type is OrderedDict:
        return MappingKey(context[index])
    if node_type is defaultdict:
        return MappingKey(context[1][index])
    return SequenceKey(index)


# --------------------------------------------------------------------------
# flatten_up_to: match a tree against a spec, tracking the key path
# --------------------------------------------------------------------------


def _flatten_up_to(spec: "_reference.TreeSpec", node: PyTree, subtrees: list[PyTree]) -> None:
    """Append to `subtrees` the subtrees of `node` found at the leaves of `spec`."""
    if spec.is_leaf():
        subtrees.append(node)
        return
    children = _matching_children(spec, node)
    for index, (child, child_spec) in enumerate(zip(children, spec._children, strict=True)):
        try:
            _flatten_up_to(child_spec, child, subtrees)
        except _StructureMismatch as mismatch:  # the error path only: name this level
            mismatch.reversed_path.append(_child_key(spec.type, spec._context, index))
            raise


def _matching_children(spec: "_reference.TreeSpec", node: PyTree) -> list[PyTree]:
    """The children of `node`, once checked against the root of `spec` as torch does."""
    node_type = _reference._get_node_type(node)
    if spec.type not in _reference.BUILTIN_TYPES:  # a custom node must match exactly
        if node_type != spec.type:
            raise _StructureMismatch(
                f"Type mismatch; expected {spec.type!r}, but got {node_type!r}."
            )
        children, context = _reference.SUPPORTED_NODES[node_type].flatten_fn(node)
        _check_arity(spec, len(children))
        if context != spec._context:
            raise _StructureMismatch(f"Node context mismatch for custom node type {spec.type!r}.")
        return children
    dict_types = _reference.STANDARD_DICT_TYPES
    both_dicts = spec.type in dict_types and node_type in dict_types
    if not both_dicts and node_type != spec.type:
        raise _StructureMismatch(
            f"Node type mismatch; expected {spec.type!r}, but got {node_type!r}."
        )
    _check_arity(spec, len(node))
    if both_dicts:  # dict, OrderedDict and defaultdict match each other by keys
        return _matching_dict_values(spec, node)
    children, context = _reference.SUPPORTED_NODES[node_type].flatten_fn(node)
    if node_type is not deque and context != spec._context:  # a deque's maxlen may differ
        raise _StructureMismatch(
            f"Node context mismatch for node type {spec.type!r}; "
            f"expected {spec._context!r}, but got {context!r}."
        )
    return children


def _check_arity(spec: "_reference.TreeSpec", arity: int) -> None:
    if arity != spec.num_children:
        raise _StructureMismatch(
            f"Node arity mismatch; expected {spec.num_children}, but got {arity}."
        )


def _matching_dict_values(spec: "_reference.TreeSpec", node: Mapping[Any, Any]) -> list[PyTree]:
    """The values of `node` in the key order of `spec`; the key sets must be equal."""
    expected_keys = spec._context if spec.type is not defaultdict else spec._context[1]
    got_key_set = set(node)
    expected_key_set = set(expected_keys)
    if got_key_set != expected_key_set:
        missing_keys = expected_key_set.difference(got_key_set)
        extra_keys = got_key_set.difference(expected_key_set)
        details = ""
        if missing_keys:
            details += f"; missing key(s): {missing_keys}"
        if extra_keys:
            details += f"; extra key(s): {extra_keys}"
        raise _StructureMismatch(f"Node keys mismatch{details}.")
    return [node[key] for key in expected_keys]


# --------------------------------------------------------------------------
# Traversals with key paths
# --------------------------------------------------------------------------


def _generate_key_paths(
    key_path: KeyPath, tree: PyTree, is_leaf: IsLeafFn | None = None
) -> Iterator[tuple[KeyPath, Any]]:
    """Yield `(key path, leaf)` for each leaf of `tree`, paths starting with `key_path`."""
    if is_leaf and is_leaf(tree):
        yield key_path, tree
        return
    node_type = _reference._get_node_type(tree)
    node_def = _reference.SUPPORTED_NODES.get(node_type)
    if not node_def:
        yield key_path, tree
        return
    if not node_def.flatten_with_keys_fn:
        raise ValueError(
            f"Did not find a flatten_with_keys_fn for type: {node_type}. "
            "Please pass a flatten_with_keys_fn argument to register_pytree_node."
        )
    keyed_children, _ = node_def.flatten_with_keys_fn(tree)
    for key, child in keyed_children:
        yield from _generate_key_paths((*key_path, key), child, is_leaf)


def tree_flatten_with_path(
    tree: PyTree, is_leaf: IsLeafFn | None = None
) -> tuple[list[tuple[KeyPath, Any]], "_reference.TreeSpec"]:
    """`tree_flatten`, with each leaf paired with its key path."""
    _, treespec = _reference.tree_flatten(tree, is_leaf)
    return list(_generate_key_paths((), tree, is_leaf)), treespec


def tree_leaves_with_path(
    tree: PyTree, is_leaf: IsLeafFn | None = None
) -> list[tuple[KeyPath, Any]]:
    """`tree_leaves`, with each leaf paired with its key path."""
    return list(_generate_key_paths((), tree, is_leaf))


def tree_map_with_path(
    func: Callable[..., Any], tree: PyTree, *rests: PyTree, is_leaf: IsLeafFn | None = None
) -> PyTree:
    """`tree_map` whose `func` gets the leaf's key path as its first argument."""
    path_leaf_pairs, treespec = tree_flatten_with_path(tree, is_leaf)
    columns: list[Any] = list(zip(*path_leaf_pairs, strict=True))
    columns += [treespec.flatten_up_to(rest) for rest in rests]
    return treespec.unflatten(func(*xs) for xs in zip(*columns, strict=True))


# Imported last, as a module: _reference imports names from this module at
# its top, and the functions above only look into _reference when called.
from . import _reference  # noqa: E402
