"""One walk of a tree of trackers: what tree_flatten's fast paths read, and how.

The ``trackers`` layer's traversal (see `_trackers` for the paths and the
guards that make them sound). `Walk` reads a tree of VariableTrackers as
torch's traversal reads it: lists, tuples, dicts and namedtuples directly,
any other registered node by tracing only its registered flatten function,
`is_leaf` called on each node first. `flatten` is the finished walk of a
`tree_*(tree[, is_leaf])` call; `up_to` reads a tree against a known spec as
torch's `TreeSpec.flatten_up_to` does. A tree not answered here raises
`Fallback` (the caller traces torch's code).
"""

from __future__ import annotations

import collections
import operator
from typing import Any

import torch.utils._pytree as tp

from ._fence import (
    BuiltinVariable,
    ConstantVariable,
    ConstDictVariable,
    GuardBuilder,
    LazyVariableTracker,
    ListVariable,
    NamedTupleVariable,
    TupleVariable,
    VariableTracker,
    get_pytree_SUPPORTED_NODES_source,
    install_guard,
    on,
)

__all__ = [
    "NAMED",
    "Fallback",
    "Subtree",
    "Walk",
    "flatten",
    "getitem",
    "guard_registry",
    "is_torch_fn",
    "truth",
    "up_to",
]

_LEAF_SPEC = tp.treespec_leaf() if hasattr(tp, "treespec_leaf") else None
NAMED = collections.namedtuple  # the type of a namedtuple's spec, as torch has it


class Fallback(Exception):
    """This tree is not answered here: trace torch's code."""


# One node of a walk: (leaf tracker, None, None, [], []) for a leaf, else
# (None, node type, context, child trackers, child key paths).
_Node = tuple[Any, Any, Any, list[Any], list[Any]]


class Subtree:
    """A subtree `Walk.iter` could not answer (handed to torch's code)."""

    def __init__(self, vt: Any) -> None:
        self.vt = vt


def _truthy(value: Any) -> bool:
    # Inlined by Dynamo: a symbolic value is guarded, a tensor breaks the
    # graph, exactly as torch's `if is_leaf(node)` / `all(...)` do.
    return True if value else False  # noqa: SIM210 - a jump, not bool(): see above


def truth(tx: Any, vt: Any) -> bool:
    """Python's truth of a tracker: a constant's directly, else as Dynamo traces `if vt:`."""
    if vt.is_python_constant():
        return bool(vt.as_python_constant())
    decided = VariableTracker.build(tx, _truthy).call_function(tx, [vt], {})
    if not decided.is_python_constant():
        raise Fallback
    return bool(decided.as_python_constant())


def guard_registry() -> None:
    # What is a node is what torch's registry holds now: any registration
    # after compiling fails this guard (tracing torch's code installs it too).
    install_guard(get_pytree_SUPPORTED_NODES_source().make_guard(GuardBuilder.DICT_KEYS_MATCH))


def _path_off_for(vt: Any) -> bool:
    """Whether `vt`, not realized yet, is a node kind whose fast path is off.

    Realizing an input here and then falling back would leave its wrapping
    guard (a TYPE_MATCH) created at another point of the trace than the one
    torch's traced code creates for the same input: the same check, counted
    twice (the one extra guard of a dict-path-off trace on torch 2.15). The
    lazy tracker's type is read without realizing it (tree_map's names).
    """
    if not on("tree_map") or not isinstance(vt, LazyVariableTracker) or vt.is_realized():
        return False
    python_type = vt.peek_type()
    if python_type is dict:
        return not on("dict")
    if tp.is_namedtuple_class(python_type):
        return not on("namedtuple")
    if python_type in (list, tuple) or python_type not in tp.SUPPORTED_NODES:
        return False
    return not on("registered")


class Walk:
    """One traversal of a tree of trackers: its leaves (with key paths) and spec."""

    def __init__(self, tx: Any, is_leaf: Any, with_paths: bool) -> None:
        self.tx = tx
        self.is_leaf = is_leaf  # a tracker, or None
        self.with_paths = with_paths
        self.leaves: list[Any] = []
        self.paths: list[tuple[Any, ...]] = []
        self.tree_spec: Any = None  # the spec of the whole tree, once walked

    def _leaf(self, vt: Any, path: tuple[Any, ...]) -> Any:
        self.leaves.append(vt)
        if self.with_paths:
            self.paths.append(path)
        return _LEAF_SPEC

    def _at(self, path: tuple[Any, ...], key_type: str, key: Any) -> tuple[Any, ...]:
        """The key path of a child (built only when key paths are asked for).

        `key_type` names torch's key class, read only then (the "key_paths" path).
        """
        return (*path, getattr(tp, key_type)(key)) if self.with_paths else path

    def spec(self, vt: Any, path: tuple[Any, ...] = ()) -> Any:
        """The spec of the tree `vt`, appending its leaves; raises Fallback."""
        leaf, node_type, context, children, paths = self._expand(vt, path)
        if leaf is not None:
            return self._leaf(leaf, path)
        return tp.TreeSpec(node_type, context, [self.spec(child, child_path) for child, child_path
                                                in zip(children, paths, strict=True)])  # fmt: skip

    def iter(self, vt: Any, path: tuple[Any, ...] = ()) -> Any:
        """The leaves of `vt` one by one, as torch's `tree_iter` meets them (lazily).

        A node not answered here is yielded as a `Subtree` (its is_leaf
        decision already made once), for the caller to hand to torch's code.
        """
        try:
            leaf, _, _, children, paths = self._expand(vt, path)
        except Fallback:
            yield Subtree(vt)
            return
        if leaf is not None:
            yield leaf
            return
        for child, child_path in zip(children, paths, strict=True):
            yield from self.iter(child, child_path)

    def _expand(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        """One node: (leaf tracker, None, None, [], []) for a leaf, else
        (None, node type, context, child trackers, child key paths); raises Fallback."""
        if self.is_leaf is not None:
            decided = self.is_leaf.call_function(self.tx, [vt], {})
            if truth(self.tx, decided):
                return vt, None, None, [], []
        if _path_off_for(vt):
            raise Fallback  # before realizing it: see _path_off_for
        vt = vt.realize()
        kind = type(vt)
        if kind is ListVariable or kind is TupleVariable:
            node_type = list if kind is ListVariable else tuple
            if vt.python_type() is not node_type:
                raise Fallback
            paths = [self._at(path, "SequenceKey", i) for i in range(len(vt.items))]
            return None, node_type, None, list(vt.items), paths
        if kind is ConstDictVariable and vt.python_type() is dict:
            if not on("dict"):
                raise Fallback
            return self._mapping(vt, path)
        if kind is NamedTupleVariable:
            if not on("namedtuple"):
                raise Fallback
            cls = vt.tuple_cls
            if not tp.is_namedtuple_class(cls) or cls in tp.SUPPORTED_NODES:
                raise Fallback
            fields = cls._fields
            paths = [self._at(path, "GetAttrKey", fields[i]) for i in range(len(vt.items))]
            return None, NAMED, cls, list(vt.items), paths
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            raise Fallback from None
        if tp.is_namedtuple_class(python_type):
            raise Fallback  # a namedtuple Dynamo tracks some other way
        node = tp.SUPPORTED_NODES.get(python_type)
        if node is not None:
            if not on("registered") or (python_type is dict and not on("dict")):
                raise Fallback
            return self._registered(vt, node, path)
        return vt, None, None, [], []

    def _mapping(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        if not all(key.vt.is_python_constant() for key in vt.items):
            raise Fallback
        if vt.source is not None:
            vt.install_dict_keys_match_guard()
            self.tx.output.guard_on_key_order.add(vt.source)
        keys = [key.vt.as_python_constant() for key in vt.items]
        paths = [self._at(path, "MappingKey", k) for k in keys]
        return None, dict, keys, list(vt.items.values()), paths

    def _defaultdict(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        """A defaultdict tracked as a dict (torch 2.15): torch's `_defaultdict_flatten`,
        the factory read as traced code reads it, the keys as a dict's."""
        read = VariableTracker.build(self.tx, getattr).call_function(
            self.tx, [vt, ConstantVariable.create("default_factory")], {}
        )
        if not read.is_python_constant():
            # torch 2.10: the tracker answers no getattr of its factory (a
            # GetAttrVariable); its field is what 2.11+'s getattr returns, the
            # tracker the builder made (guarded) for an input's factory.
            read = getattr(vt, "default_factory", None)  # VERSIONS
            if read is None or not read.is_python_constant():
                raise Fallback
        _, _, keys, children, paths = self._mapping(vt, path)
        context = [read.as_python_constant(), keys]
        return None, collections.defaultdict, context, children, paths

    def _registered(self, vt: Any, node: Any, path: tuple[Any, ...]) -> _Node:
        """A registered node (OrderedDict, defaultdict, deque, dataclass, custom).

        Its registered flatten function is traced, as torch's traversal traces
        it: the guards on what it reads are the ones torch's code gets. Only
        the traversal around it is not. Key paths: for torch's own kinds the
        key entries follow from the flatten result (`_derived_keys`), else
        flatten_with_keys_fn is traced too, as torch's key-path walk does.
        """
        if (
            on("dict")
            and isinstance(vt, ConstDictVariable)
            and is_torch_fn(node.flatten_fn, "_defaultdict_flatten")
        ):
            return self._defaultdict(vt, path)
        children_vt, context = _call_flatten(self.tx, node.flatten_fn, vt)
        if not self.with_paths:
            return (
                None,
                node.type,
                context,
                list(children_vt.items),
                [path] * len(children_vt.items),
            )
        keys = _derived_keys(node, context, len(children_vt.items))
        if keys is None:
            if node.flatten_with_keys_fn is None:
                raise Fallback  # torch raises its error
            pairs_vt, _ = _call_flatten(self.tx, node.flatten_with_keys_fn, vt)
            keys, children_vt = [], pairs_vt
            for pair in pairs_vt.items:
                pair = pair.realize()
                if type(pair) is not TupleVariable or len(pair.items) != 2:
                    raise Fallback
                if not pair.items[0].is_python_constant():
                    raise Fallback
                keys.append(pair.items[0].as_python_constant())
            children_vt = ListVariable([pair.realize().items[1] for pair in pairs_vt.items])
        if len(keys) != len(children_vt.items):
            raise Fallback
        return None, node.type, context, list(children_vt.items), [(*path, key) for key in keys]


def _call_flatten(tx: Any, fn: Any, vt: Any) -> tuple[Any, Any]:
    """(children tracker, constant context) of a traced flatten function."""
    flat = VariableTracker.build(tx, fn).call_function(tx, [vt], {}).realize()
    if type(flat) is not TupleVariable or len(flat.items) != 2:
        raise Fallback
    children_vt, context_vt = (item.realize() for item in flat.items)
    if type(children_vt) not in (ListVariable, TupleVariable):
        raise Fallback
    if not context_vt.is_python_constant():
        raise Fallback
    return children_vt, context_vt.as_python_constant()


def _derived_keys(node: Any, context: Any, count: int) -> list[Any] | None:
    """The key entries torch's own flatten_with_keys_fn gives, from the flatten context.

    None when the node's function is not one of torch's (then it is traced).
    """
    fn = node.flatten_with_keys_fn
    if fn is None or getattr(fn, "__module__", None) != tp.__name__:
        return None
    name = getattr(fn, "__qualname__", "")
    if name in ("_ordereddict_flatten_with_keys", "_dict_flatten_with_keys"):
        return [tp.MappingKey(k) for k in context]
    if name == "_defaultdict_flatten_with_keys":
        return [tp.MappingKey(k) for k in context[1]]
    if name in ("_deque_flatten_with_keys", "_list_flatten_with_keys", "_tuple_flatten_with_keys"):
        return [tp.SequenceKey(i) for i in range(count)]
    if name == "register_dataclass.<locals>._flatten_fn_with_keys":
        return [tp.GetAttrKey(k) for k in context[0]]
    return None


def flatten(
    tx: Any, args: list[Any], kwargs: dict[str, Any], with_paths: bool, spec_pass: bool = False
) -> Walk | None:
    """The finished walk of `tree_*(tree[, is_leaf])`, or None to fall back.

    With key paths and `is_leaf`, the predicate is called as torch calls it:
    `tree_leaves_with_path` walks once (its key-path walk);
    `tree_flatten_with_path` (`spec_pass`) first walks as `tree_flatten` does
    for the spec, then again for the key paths, each walk calling it once
    per node it reaches.
    """
    if kwargs.keys() - {"is_leaf"} or not 1 <= len(args) + len(kwargs) <= 2:
        return None
    if len(args) == 2:
        if "is_leaf" in kwargs:
            return None
        is_leaf = args[1]
    elif len(args) == 1:
        is_leaf = kwargs.get("is_leaf")
    else:
        return None
    if is_leaf is not None and is_leaf.is_constant_none():
        is_leaf = None
    walk = Walk(tx, is_leaf, with_paths)
    try:
        if with_paths and spec_pass and is_leaf is not None:
            first = Walk(tx, is_leaf, with_paths=False)
            first.tree_spec = first.spec(args[0])
            walk.spec(args[0])
            walk.tree_spec = first.tree_spec  # torch returns tree_flatten's spec
        else:
            walk.tree_spec = walk.spec(args[0])
    except Fallback:
        return None
    guard_registry()
    return walk


def is_torch_fn(fn: Any, name: str) -> bool:
    """Whether `fn` is torch.utils._pytree's function `name`."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    return module == tp.__name__ and qualname == name


_STANDARD_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def getitem(tx: Any, vt: Any, key: Any) -> Any:
    """`vt[key]` for a constant key, as Dynamo traces the subscript."""
    return BuiltinVariable(operator.getitem).call_function(
        tx, [vt, VariableTracker.build(tx, key)], {}
    )


def up_to(tx: Any, spec: Any, vt: Any, out: list[Any]) -> None:
    """torch's `spec.flatten_up_to(vt)`: the subtrees of `vt` at the leaves of `spec`.

    torch's checks at each node of the spec: the node's type (dict,
    OrderedDict and defaultdict interchangeable, keys compared as sets and
    read in the spec's order), its arity and, for other types, its flatten
    context (a deque's maxlen excepted). Guards: the type guards of the
    trackers reached, DICT_KEYS_MATCH on each dict read, and what tracing
    a registered node's flatten function installs (torch traces the same).
    A mismatch or a node not read here raises Fallback (torch's code then
    raises its error).
    """
    if spec.is_leaf():
        out.append(vt)
        return
    vt = vt.realize()
    kind = type(vt)
    if spec.type is list or spec.type is tuple:
        if kind not in (ListVariable, TupleVariable) or vt.python_type() is not spec.type:
            raise Fallback
        children = list(vt.items)
    elif spec.type is NAMED:
        if not on("namedtuple") or kind is not NamedTupleVariable:
            raise Fallback
        if vt.tuple_cls is not spec.context:
            raise Fallback
        children = list(vt.items)
    elif (spec.type in _STANDARD_DICTS and isinstance(vt, ConstDictVariable)
          and vt.python_type() in _STANDARD_DICTS):  # fmt: skip
        if not on("dict"):
            raise Fallback
        if not all(key.vt.is_python_constant() for key in vt.items):
            raise Fallback
        if vt.source is not None:
            vt.install_dict_keys_match_guard()
        keys = spec.context[1] if spec.type is collections.defaultdict else spec.context
        got = [key.vt.as_python_constant() for key in vt.items]
        if len(got) != len(keys) or set(got) != set(keys):
            raise Fallback
        children = [getitem(tx, vt, key) for key in keys]
    else:
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            raise Fallback from None
        node = tp.SUPPORTED_NODES.get(python_type)
        if python_type is not spec.type or node is None or not on("registered"):
            raise Fallback
        children_vt, context = _call_flatten(tx, node.flatten_fn, vt)
        if python_type is not collections.deque and context != spec.context:
            raise Fallback
        children = list(children_vt.items)
    if len(children) != spec.num_children:
        raise Fallback
    for child, child_spec in zip(children, spec.children(), strict=True):
        up_to(tx, child_spec, child, out)
