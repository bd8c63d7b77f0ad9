"""cpytree: a C++ pytree engine with the API of ``torch.utils._pytree``.

Use it as a drop-in::

    import cpytree as pytree

    leaves, spec = pytree.tree_flatten({"a": [1, 2], "b": (3, None)})
    pytree.tree_unflatten(leaves, spec)

The hot functions (``tree_flatten``, ``tree_leaves``, ``tree_structure``,
``tree_unflatten``, ``tree_map``, ``tree_map_``, ``tree_is_leaf``) are C
functions of the extension ``cpytree._C`` bound here directly. When the
extension cannot be imported, the pure-Python reference implementation
(``cpytree._reference``, same semantics) is used instead, with a warning.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable

from . import _reference
from ._reference import (  # noqa: F401  (re-exported: the registry and helpers are shared)
    CONSTANT_NODES,
    NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE,
    SUPPORTED_NODES,
    SUPPORTED_SERIALIZED_TYPES,
    ConstantNode,
    GetAttrKey,
    MappingKey,
    NodeDef,
    SequenceKey,
    _deregister_pytree_node,
    _private_register_pytree_node,
    is_constant_class,
    is_namedtuple,
    is_namedtuple_class,
    is_namedtuple_instance,
    is_structseq,
    is_structseq_class,
    is_structseq_instance,
    keystr,
    key_get,
    map_only,
    register_constant,
    register_dataclass,
    register_pytree_node,
)

__version__ = "0.1.0"

try:
    from . import _C
except ImportError as _error:  # pragma: no cover - exercised by the fallback test
    _C = None
    warnings.warn(
        f"cpytree: the C++ engine could not be imported ({_error}); "
        "using the pure-Python reference implementation.",
        RuntimeWarning,
        stacklevel=2,
    )

#: "cpp" when the C++ engine is active, "python" for the reference fallback.
ENGINE = "cpp" if _C is not None else "python"

if _C is not None:
    from ._C import (  # noqa: F401
        TreeSpec,
        key_get,
        keystr,
        tree_flatten,
        tree_flatten_with_path,
        tree_is_leaf,
        tree_leaves,
        tree_leaves_with_path,
        tree_map,
        tree_map_,
        tree_map_with_path,
        tree_structure,
        tree_unflatten,
    )

    # The engine builds key entries with the very classes users see.
    _C._set_key_types(SequenceKey, MappingKey, GetAttrKey)

    _BUILTIN_NODE_TYPES = frozenset(
        {tuple, list, dict, *_reference.BUILTIN_TYPES}  # handled natively by the engine
    )

    def _mirror_registration(cls: type, node_def: NodeDef | None) -> None:
        """Keeps the engine's registry equal to SUPPORTED_NODES."""
        if cls in _BUILTIN_NODE_TYPES:
            return
        if node_def is None:
            _C._unregister_node(cls)
        else:
            _C._register_node(
                cls, node_def.flatten_fn, node_def.unflatten_fn, node_def.flatten_with_keys_fn
            )

    for _cls, _node_def in list(SUPPORTED_NODES.items()):
        _mirror_registration(_cls, _node_def)
    _reference._REGISTRATION_HOOKS.append(_mirror_registration)
    _LEAF_SPEC = _C._LEAF_SPEC
else:
    from ._reference import (  # noqa: F401
        TreeSpec,
        tree_flatten,
        tree_flatten_with_path,
        tree_leaves_with_path,
        tree_map_with_path,
        tree_is_leaf,
        tree_leaves,
        tree_map,
        tree_map_,
        tree_structure,
        tree_unflatten,
    )

    _LEAF_SPEC = _reference.treespec_leaf()

PyTree = Any


def treespec_leaf() -> TreeSpec:
    """The spec of a single leaf."""
    return _LEAF_SPEC


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> Iterable[Any]:
    """An iterator over the leaves of a pytree."""
    yield from tree_leaves(tree, is_leaf=is_leaf)


def tree_all(
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    """Whether ``pred`` holds for every leaf (stops at the first false)."""
    return all(map(pred, tree_leaves(tree, is_leaf=is_leaf)))


def tree_any(
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    """Whether ``pred`` holds for some leaf (stops at the first true)."""
    return any(map(pred, tree_leaves(tree, is_leaf=is_leaf)))


def tree_all_only(
    type_or_types: Any,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    """Whether ``pred`` holds for every leaf that is an instance of ``type_or_types``."""
    return all(pred(x) for x in tree_leaves(tree, is_leaf=is_leaf) if isinstance(x, type_or_types))


def tree_any_only(
    type_or_types: Any,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    """Whether ``pred`` holds for some leaf that is an instance of ``type_or_types``."""
    return any(pred(x) for x in tree_leaves(tree, is_leaf=is_leaf) if isinstance(x, type_or_types))


def tree_map_only(
    type_or_types_or_pred: Any,
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    """``tree_map`` applying ``func`` only to leaves selected by type or predicate."""
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(
    type_or_types_or_pred: Any,
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    """``tree_map_`` applying ``func`` only to leaves selected by type or predicate."""
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)
