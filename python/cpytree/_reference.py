"""Pure-Python reference implementation of cpytree's pytree API.

It re-implements `torch.utils._pytree` (of the release `cpytree._releases`
follows) with the same names,
signatures, results, exception types and messages, using only the standard
library (it never imports torch). It has three jobs:

* the oracle that differential tests compare the C++ engine against;
* the fallback that `cpytree/__init__.py` binds when the extension cannot load;
* the registry's Python face: `SUPPORTED_NODES` and `_REGISTRATION_HOOKS`
  are `cpytree._registry`'s (the registry of record, which the C++ engine
  mirrors through a hook), bound here under torch's names.

It differs from torch on purpose in three ways only:

1. `_REGISTRATION_HOOKS`: every (de)registration calls `hook(cls, node_def)`
   (`node_def` None on deregistration) after `SUPPORTED_NODES` changed.
2. Structure mismatches found by `TreeSpec.flatten_up_to` (so also by n-ary
   `tree_map`/`tree_map_`) end their message with ` (at key path tree<keystr>)`.
3. `treespec_loads` never imports or calls anything nobody registered (see
   `cpytree._serialization`).

Example:
    >>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
    >>> leaves
    [1, 2, 3]
    >>> tree_unflatten([x * 10 for x in leaves], spec)
    {'a': (10, 20), 'b': [30]}

This module holds TreeSpec and the traversals; it re-exports the rest, so
every name lives here as it does in torch's single module (which names, from
where: the table `cpytree._names`):

| module | concern |
|---|---|
| `_registry` | the registry tables, `register_*`, `NodeDef`, the type aliases |
| `_keys` | key entries, `keystr`, `key_get` |
| `_nodes` | the builtin node types (flatten/unflatten/with keys), namedtuple detection |
| `_match` | matching a tree against a spec for `flatten_up_to`, the key paths of its errors |
| `_serialization` | `treespec_dumps` / `treespec_loads` / `treespec_pprint` |
| `_derived` | `tree_all`, `treespec_tuple`, ...: written once, bound here and in the package |

Imports run one way: `_keys` -> `_registry` -> `_nodes` -> `_match`,
`_serialization`, `_derived` -> this module -> the package.

Traversals are plain recursion, so deep or cyclic trees raise RecursionError.
"""

import dataclasses
import importlib
import warnings
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, SupportsIndex, cast

from . import _names, _releases, _serialization
from ._derived import bind, map_only as map_only
from ._keys import KeyPath, key_get as key_get, keystr as keystr
from ._match import _flatten_up_to, _StructureMismatch
from ._nodes import (
    BUILTIN_TYPES,
    _get_node_type,
)
from ._registry import (
    SUPPORTED_NODES,
    ConstantNode,
    Context,
    IsLeafFn,
    PyTree,
)

# torch's __all__ of every supported release, plus the key entry names: the
# package's __all__ too (cpytree._names, the one table of names).
__all__ = list(_names.PUBLIC)

# The rest of torch's module-level names: re-exported from the modules this
# one shares with the package (`_names.SHARED`) and the ones the package
# loads on first use (`_names.LAZY`, all loaded here), as the table says.
for _module, _exported in (*_names.SHARED.items(), *_names.LAZY.items()):
    if _module != "_reference":
        _source = vars(importlib.import_module(f"{__package__}.{_module}"))
        globals().update(
            {
                n: _source[n]
                for n in _exported
                if n in _source and n not in globals() and n not in _names.LIVE
            }
        )
del _module, _exported, _source


def __getattr__(name: str) -> Any:
    # `_names.LIVE`: read where it lives on each access (its home rebinds it).
    if name in _names.LIVE:
        return getattr(importlib.import_module(f"{__package__}._registry"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------
# TreeSpec
# --------------------------------------------------------------------------


def _leaf_assertion(text: str) -> AssertionError:
    """The AssertionError the active torch release raises for a malformed leaf spec."""
    return AssertionError(text) if _releases.has("leaf_assert_messages") else AssertionError()


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
            # torch 2.10 ran bare asserts (`_releases.DIFFERENCES["leaf_assert_messages"]`)
            if self._context is not None:
                raise _leaf_assertion("leaf node should not have a context")
            if len(self._children) != 0:
                raise _leaf_assertion("leaf node should not have children")
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

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # torch 2.14+ reduces to the shared leaf spec, without the warning;
        # before, to a new LeafSpec (`_releases.DIFFERENCES["leafspec_reduce"]`).
        if _releases.has("leafspec_reduce"):
            return (treespec_leaf, ())
        return object.__reduce_ex__(self, protocol)  # (a slots dataclass: no bare super())


_LEAF_SPEC = object.__new__(LeafSpec)  # the spec of every leaf; made without the warning
LeafSpec.__init__(_LEAF_SPEC)


def treespec_leaf() -> LeafSpec:
    """The spec of a leaf."""
    return _LEAF_SPEC


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


def arg_tree_leaves(*args: PyTree, **kwargs: PyTree) -> list[Any]:
    """The leaves of `(args, kwargs)`, without building that tuple."""
    leaves: list[Any] = []
    for arg in args:
        _collect_leaves(arg, leaves, None)
    for arg in kwargs.values():
        _collect_leaves(arg, leaves, None)
    return leaves


def _is_leaf(tree: PyTree, is_leaf: IsLeafFn | None = None) -> bool:
    """Deprecated (FutureWarning): `tree_is_leaf`, as torch keeps it."""
    warnings.warn(
        "cpytree._is_leaf is private and will be removed in a future release. "
        "Please use cpytree.tree_is_leaf instead.",
        FutureWarning,
        stacklevel=2,
    )
    return tree_is_leaf(tree, is_leaf=is_leaf)


def _is_constant_holder(spec: TreeSpec) -> bool:
    """Whether `spec` describes a registered constant."""
    return isinstance(spec.context, ConstantNode)


def _retrieve_constant(spec: TreeSpec) -> Any:
    """The constant that a constant-node spec holds."""
    if not _is_constant_holder(spec):
        raise AssertionError("spec does not correspond to a registered constant pytree")
    return spec.unflatten([])


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
    node_type = _get_node_type(tree)
    node_def = SUPPORTED_NODES.get(node_type)
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
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """`tree_flatten`, with each leaf paired with its key path."""
    _, treespec = tree_flatten(tree, is_leaf)
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


# --------------------------------------------------------------------------
# Helpers derived from the traversals above (cpytree._derived; the package
# binds the same definitions to the C++ engine's traversals)
# --------------------------------------------------------------------------

(
    tree_all,
    tree_any,
    tree_all_only,
    tree_any_only,
    tree_map_only,
    tree_map_only_,
    treespec_tuple,
    treespec_dict,
    _broadcast_to_and_flatten,
) = bind(__name__, TreeSpec, tree_iter, tree_map, tree_map_, tree_structure, tree_unflatten)


# --------------------------------------------------------------------------
# Serialization (cpytree._serialization, bound to this TreeSpec)
# --------------------------------------------------------------------------

treespec_dumps = _serialization.treespec_dumps
treespec_loads, str_to_pytree = _serialization.bind_loads(TreeSpec, _LEAF_SPEC, __name__)
