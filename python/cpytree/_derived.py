"""The helpers derived from the core traversals, written once for both implementations.

`tree_all`, `tree_any`, `tree_all_only`, `tree_any_only`, `tree_map_only`,
`tree_map_only_`, `treespec_tuple`, `treespec_dict` and
`_broadcast_to_and_flatten` only call the core functions (`tree_iter`,
`tree_map`, `tree_map_`, `tree_structure`, `tree_unflatten`) and build
`TreeSpec`s. `bind` defines them once over the core functions (and the
`spec_class` that `treespec_tuple`/`treespec_dict` build) it is given:
`_reference` binds them to the pure-Python core, the package to the C++
engine's. A breakpoint in this file stops in both. `map_only` needs no core
function and is defined here once.

Example:
    >>> derived = bind(__name__, TreeSpec, tree_iter, tree_map, tree_map_,
    ...                tree_structure, tree_unflatten)
    >>> derived.tree_all(lambda x: x > 0, [1, (2, 3)])
    True
"""

import functools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._registry import IsLeafFn, PyTree, TypeAny

if TYPE_CHECKING:
    from typing import NamedTuple
else:  # compiles no code at import (see _namedtuple)
    from ._namedtuple import NamedTuple


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


class Derived(NamedTuple):
    """The derived helpers of one implementation (see `bind`)."""

    tree_all: Callable[..., bool]
    tree_any: Callable[..., bool]
    tree_all_only: Callable[..., bool]
    tree_any_only: Callable[..., bool]
    tree_map_only: Callable[..., PyTree]
    tree_map_only_: Callable[..., PyTree]
    treespec_tuple: Callable[..., Any]
    treespec_dict: Callable[..., Any]
    broadcast_to_and_flatten: Callable[..., list[Any] | None]

    def _new(
        _cls: Any,
        tree_all: Any,
        tree_any: Any,
        tree_all_only: Any,
        tree_any_only: Any,
        tree_map_only: Any,
        tree_map_only_: Any,
        treespec_tuple: Any,
        treespec_dict: Any,
        broadcast_to_and_flatten: Any,
    ) -> Any:
        return tuple.__new__(
            _cls,
            (
                tree_all,
                tree_any,
                tree_all_only,
                tree_any_only,
                tree_map_only,
                tree_map_only_,
                treespec_tuple,
                treespec_dict,
                broadcast_to_and_flatten,
            ),
        )


def bind(
    module: str,
    spec_class: Any,
    tree_iter: Callable[..., Iterator[Any]],
    tree_map: Callable[..., PyTree],
    tree_map_: Callable[..., PyTree],
    tree_structure: Callable[..., Any],
    tree_unflatten: Callable[..., PyTree],
) -> Derived:
    """The derived helpers over the given core functions, reported as defined in `module`."""

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

    def tree_all(
        pred: Callable[[Any], bool], tree: PyTree, is_leaf: IsLeafFn | None = None
    ) -> bool:
        """Whether `pred` holds for every leaf (stops at the first that fails)."""
        return all(map(pred, tree_iter(tree, is_leaf=is_leaf)))

    def tree_any(
        pred: Callable[[Any], bool], tree: PyTree, is_leaf: IsLeafFn | None = None
    ) -> bool:
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
        return all(
            pred(x) for x in tree_iter(tree, is_leaf=is_leaf) if isinstance(x, type_or_types)
        )

    def tree_any_only(
        type_or_types: TypeAny,
        /,
        pred: Callable[[Any], bool],
        tree: PyTree,
        is_leaf: IsLeafFn | None = None,
    ) -> bool:
        """Whether `pred` holds for some leaf that is an instance of `type_or_types`."""
        return any(
            pred(x) for x in tree_iter(tree, is_leaf=is_leaf) if isinstance(x, type_or_types)
        )

    def treespec_tuple(iterable: Iterable[Any] = (), /) -> Any:
        """The spec of a tuple whose items have the given specs."""
        children = list(iterable)
        if any(not isinstance(child, spec_class) for child in children):
            raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
        return spec_class(tuple, None, children)

    def treespec_dict(
        mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (),
        /,
        **kwargs: Any,
    ) -> Any:
        """The spec of a dict whose values have the given specs."""
        dct = dict(mapping, **kwargs)
        if any(not isinstance(child, spec_class) for child in dct.values()):
            raise ValueError(f"Expected a dictionary of TreeSpec values, got: {dct!r}.")
        return spec_class(dict, list(dct.keys()), list(dct.values()))

    def _broadcast_to_and_flatten(
        tree: PyTree, treespec: Any, is_leaf: IsLeafFn | None = None
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

    derived = Derived(
        tree_all,
        tree_any,
        tree_all_only,
        tree_any_only,
        tree_map_only,
        tree_map_only_,
        treespec_tuple,
        treespec_dict,
        _broadcast_to_and_flatten,
    )
    for function in derived:  # named as if defined at the top of `module`, as torch's are
        function.__module__ = module
        function.__qualname__ = function.__name__
    return derived
