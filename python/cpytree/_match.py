"""Matching a tree against a spec, for `TreeSpec.flatten_up_to`.

`flatten_up_to` (so also n-ary `tree_map`/`tree_map_`) checks a tree against
a spec as `torch.utils._pytree` does; the one intended
difference is that a mismatch error ends with the key path of the
mismatching node, ` (at key path tree<keystr>)` (see docs/architecture.md,
"Error messages with key paths"). The path is collected on the way up by the
internal `_StructureMismatch` and turned into text only when the error is
raised.

Example:
    >>> subtrees: list[Any] = []
    >>> _flatten_up_to(_reference.tree_structure([0, 0]), [1, {"a": 2}], subtrees)
    >>> subtrees
    [1, {'a': 2}]
"""

from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ._keys import GetAttrKey, KeyEntry, MappingKey, SequenceKey, keystr
from ._nodes import BUILTIN_TYPES, STANDARD_DICT_TYPES, _get_node_type
from ._registry import SUPPORTED_NODES, PyTree


class _SpecNode(Protocol):
    """What the walk reads of a spec node (the reference's TreeSpec has it)."""

    @property
    def type(self) -> Any: ...

    @property
    def _context(self) -> Any: ...

    @property
    def _children(self) -> Sequence["_SpecNode"]: ...

    @property
    def num_children(self) -> int: ...

    def is_leaf(self) -> bool: ...


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


def _flatten_up_to(spec: "_SpecNode", node: PyTree, subtrees: list[PyTree]) -> None:
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


def _matching_children(spec: "_SpecNode", node: PyTree) -> list[PyTree]:
    """The children of `node`, once checked against the root of `spec` as torch does."""
    node_type = _get_node_type(node)
    if spec.type not in BUILTIN_TYPES:  # a custom node must match exactly
        if node_type != spec.type:
            raise _StructureMismatch(
                f"Type mismatch; expected {spec.type!r}, but got {node_type!r}."
            )
        children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
        _check_arity(spec, len(children))
        if context != spec._context:
            raise _StructureMismatch(f"Node context mismatch for custom node type {spec.type!r}.")
        return children
    dict_types = STANDARD_DICT_TYPES
    both_dicts = spec.type in dict_types and node_type in dict_types
    if not both_dicts and node_type != spec.type:
        raise _StructureMismatch(
            f"Node type mismatch; expected {spec.type!r}, but got {node_type!r}."
        )
    _check_arity(spec, len(node))
    if both_dicts:  # dict, OrderedDict and defaultdict match each other by keys
        return _matching_dict_values(spec, node)
    children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
    if node_type is not deque and context != spec._context:  # a deque's maxlen may differ
        raise _StructureMismatch(
            f"Node context mismatch for node type {spec.type!r}; "
            f"expected {spec._context!r}, but got {context!r}."
        )
    return children


def _check_arity(spec: "_SpecNode", arity: int) -> None:
    if arity != spec.num_children:
        raise _StructureMismatch(
            f"Node arity mismatch; expected {spec.num_children}, but got {arity}."
        )


def _matching_dict_values(spec: "_SpecNode", node: Mapping[Any, Any]) -> list[PyTree]:
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
