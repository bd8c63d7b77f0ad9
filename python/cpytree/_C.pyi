"""Type stub of the C++ engine ``cpytree._C`` (src/module.cc, src/treespec.cc).

The signatures are those of the namesakes in ``torch.utils._pytree`` (and
``torch.fx._pytree.tree_flatten_spec``); arguments the C functions take
positionally only (METH_O, METH_FASTCALL without keywords) are marked ``/``,
``keystr`` and ``key_get`` included, whose ``__text_signature__`` shows torch's
``(kp)`` and ``(obj, kp)`` although they refuse keywords.
"""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, final

from typing_extensions import deprecated

from ._keys import KeyPath
from ._registry import Context, FlattenFn, FlattenWithKeysFn, PyTree, UnflattenFn

@final
class TreeSpec:
    """The structure of a pytree (interned and immutable)."""

    def __new__(cls, type: Any, context: Context, children_specs: list[TreeSpec]) -> TreeSpec: ...
    @property
    def type(self) -> Any: ...
    @property
    def context(self) -> Context: ...
    @property
    def _context(self) -> Context: ...
    @property
    def _children(self) -> list[TreeSpec]: ...
    @property
    @deprecated(
        "`treespec.children_specs` is deprecated. Use `treespec.child(index)` to access a "
        "single child, or `treespec.children()` to get all children."
    )
    def children_specs(self) -> list[TreeSpec]: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_leaves(self) -> int: ...
    @property
    def num_children(self) -> int: ...
    def children(self) -> list[TreeSpec]: ...
    def child(self, index: int) -> TreeSpec: ...
    def is_leaf(self) -> bool: ...
    def unflatten(self, leaves: Iterable[Any]) -> PyTree: ...
    def flatten_up_to(self, tree: PyTree) -> list[PyTree]: ...
    def flatten(self, tree: PyTree) -> list[Any]:
        """The leaves of ``tree``, whose structure must equal this spec (cpytree only)."""
    def __repr__(self, indent: int = 0) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __copy__(self) -> TreeSpec: ...
    def __deepcopy__(self, memo: dict[int, Any] | None, /) -> TreeSpec: ...
    def __sizeof__(self) -> int: ...

_LEAF_SPEC: TreeSpec

def tree_flatten(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> tuple[list[Any], TreeSpec]: ...
def tree_leaves(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> list[Any]: ...
def tree_structure(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> TreeSpec: ...
def tree_is_leaf(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool: ...
def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree: ...
def tree_map(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree: ...
def tree_map_(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree: ...
def arg_tree_leaves(*args: PyTree, **kwargs: PyTree) -> list[Any]: ...
def _find_bound_in_modules(
    modules: dict[str, Any],
    objects: tuple[Any, ...],
    names: tuple[str, ...],
    prefixes: tuple[str, ...],
    /,
) -> list[tuple[str, Any]]: ...
def _set_known_flattens(
    dict_like: tuple[Callable[..., Any], ...], list_like: tuple[Callable[..., Any], ...], /
) -> None: ...
def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> Iterator[Any]: ...
def tree_map_only(
    type_or_types_or_pred: type | tuple[type, ...] | Callable[[Any], bool],
    /,
    func: Callable[..., Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree: ...
def tree_map_only_(
    type_or_types_or_pred: type | tuple[type, ...] | Callable[[Any], bool],
    /,
    func: Callable[..., Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree: ...
def tree_flatten_spec(
    pytree: PyTree,
    spec: TreeSpec,
    registry: dict[type[Any], Callable[[PyTree, Any], list[Any]]] | None = None,
) -> list[Any]:
    """``torch.fx._pytree.tree_flatten_spec``; ``spec`` may also be a torch TreeSpec."""

def tree_flatten_with_path(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]: ...
def tree_leaves_with_path(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> list[tuple[KeyPath, Any]]: ...
def tree_map_with_path(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree: ...
def keystr(kp: KeyPath, /) -> str: ...
def treespec_dumps(treespec: TreeSpec, protocol: int | None = None) -> str: ...
def treespec_loads(serialized: str) -> TreeSpec: ...
def _set_serialization(state: tuple[Any, ...], /) -> None: ...
def key_get(obj: Any, kp: KeyPath, /) -> Any: ...

# Private hooks of the package, all called from cpytree/_engine.py.
def _set_loaders(
    keys: Callable[[], tuple[type[Any], type[Any], type[Any]]],
    serialization: Callable[[], tuple[Any, ...]],
    /,
) -> None: ...
def _set_torch_key_types(
    SequenceKey: type[Any], MappingKey: type[Any], GetAttrKey: type[Any], /
) -> None: ...
def _torch_tree_flatten_with_path(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> tuple[list[tuple[tuple[Any, ...], Any]], TreeSpec]:
    """``torch.utils._pytree.tree_flatten_with_path``, with torch's key classes."""

def _torch_tree_leaves_with_path(
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> list[tuple[tuple[Any, ...], Any]]:
    """``torch.utils._pytree.tree_leaves_with_path``, with torch's key classes."""

def _set_constant_types(classes: tuple[type[Any], ...], /) -> None: ...
def _set_torch_spec_classes(
    TreeSpec: type[Any] | None,
    LeafSpec: type[Any] | None,
    treespec_leaf: Callable[[], Any] | None,
    ConstantNode: type[Any] | None,
    /,
) -> None: ...
def _set_torch_pickling(flag: bool, /) -> None: ...
def _register_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    flatten_with_keys_fn: FlattenWithKeysFn | None,
    /,
) -> None: ...
def _unregister_node(cls: type[Any], /) -> None: ...
def _mark_exiting() -> None: ...
def _intern_table_size() -> int: ...
