"""The shared table of trees every operation is tested on.

Each entry is a :class:`TreeCase`: an ``id`` and a ``builder``. The builder is
called with a :class:`LeafMaker` ``L`` and returns a freshly built tree; every
leaf goes through ``L`` *in flatten order* (Python evaluates arguments, list
items and dict displays left to right), so ``case.build()`` returns the tree
and the exact list of leaves torch's ``tree_leaves`` gives for it:

    TreeCase("list-of-two", lambda L: [L(), L(None)])

``L()`` makes a fresh :class:`Leaf` (compared by identity), ``L(x)`` records
``x`` itself as the next leaf. Values that are not leaves (e.g. a dataclass
field left at ``None``, which ``register_dataclass`` keeps in the context) are
written without ``L``.

The module also defines the custom node types of the table and registers them
with cpytree at import (``cpytree.register_*`` lands in both the engine and the
reference: one registry). torch gets its own registration in
:func:`torch_pytree`.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import time
import typing
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable
from typing import Any

import cpytree

# --------------------------------------------------------------------------
# Leaves


class Leaf:
    """A leaf with an identity; the index is only for readable failures."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i

    def __repr__(self) -> str:
        return f"Leaf({self.i})"


_FRESH = object()


class LeafMaker:
    """Records the leaves of a tree while its builder creates them."""

    def __init__(self) -> None:
        self.leaves: list[Any] = []

    def __call__(self, value: Any = _FRESH) -> Any:
        if value is _FRESH:
            value = Leaf(len(self.leaves))
        self.leaves.append(value)
        return value


class LeafList(list):
    """A list subclass: a leaf (torch registers exact types only)."""


class LeafDict(dict):
    """A dict subclass: a leaf."""


class LeafTuple(tuple):
    """A tuple subclass that is not a namedtuple: a leaf."""


# --------------------------------------------------------------------------
# Node types

Point = namedtuple("Point", ["x", "y"])
Vec = namedtuple("Vec", ["x", "y"])  # same fields as Point, another class
Nil = namedtuple("Nil", [])  # a namedtuple without fields


class Record(typing.NamedTuple):
    a: Any
    b: Any
    c: Any = None


class Pair:
    """A plain class registered with register_pytree_node; its context is a str."""

    def __init__(self, a: Any, b: Any, tag: str = "p") -> None:
        self.a = a
        self.b = b
        self.tag = tag

    def __repr__(self) -> str:
        return f"Pair({self.a!r}, {self.b!r}, tag={self.tag!r})"


def _pair_flatten(p: Pair):
    return [p.a, p.b], p.tag


def _pair_unflatten(values, context) -> Pair:
    a, b = values
    return Pair(a, b, tag=context)


class Box:
    """A registered class whose flatten returns a *tuple* of children and an
    unhashable context (a list)."""

    def __init__(self, items: tuple, label: str = "box") -> None:
        self.items = tuple(items)
        self.label = label

    def __repr__(self) -> str:
        return f"Box({self.items!r}, label={self.label!r})"


def _box_flatten(b: Box):
    return b.items, [b.label, len(b.items)]


def _box_unflatten(values, context) -> Box:
    return Box(tuple(values), label=context[0])


@dataclasses.dataclass
class DC:
    """Registered with register_dataclass; ``None`` fields go to the context."""

    x: Any
    y: Any = None


@dataclasses.dataclass(frozen=True)
class Cfg:
    """Registered with register_constant: a node with no children."""

    name: str
    n: int = 0


def _register(mod) -> None:
    mod.register_pytree_node(
        Pair,
        _pair_flatten,
        _pair_unflatten,
        serialized_type_name="trees.Pair",
    )
    mod.register_pytree_node(Box, _box_flatten, _box_unflatten, serialized_type_name="trees.Box")
    mod.register_dataclass(DC, serialized_type_name="trees.DC")
    mod.register_constant(Cfg)


_register(cpytree)

_TORCH: Any = None
_TORCH_TRIED = False


def torch_pytree():
    """torch.utils._pytree with this module's types registered, or None."""
    global _TORCH, _TORCH_TRIED
    if not _TORCH_TRIED:
        _TORCH_TRIED = True
        try:
            import torch.utils._pytree as tp
        except Exception:  # torch missing or broken: the torch parts skip
            tp = None
        if tp is not None:
            _register(tp)
        _TORCH = tp
    return _TORCH


# --------------------------------------------------------------------------
# The table


@dataclasses.dataclass(frozen=True)
class TreeCase:
    id: str
    builder: Callable[[LeafMaker], Any]

    def build(self) -> tuple[Any, list[Any]]:
        """A fresh tree and its leaves in flatten order."""
        maker = LeafMaker()
        tree = self.builder(maker)
        return tree, maker.leaves

    def __repr__(self) -> str:
        return self.id


def _deep_mixed(L, depth: int):
    """A chain ``depth`` levels deep cycling through every node kind.

    Built from the root down, creating each level's leaf before or after its
    child exactly where flatten visits it.
    """

    def build(level: int):
        if level == depth:
            return L()
        k = level % 10
        if k == 0:
            leaf = L()
            return [leaf, build(level + 1)]
        if k == 1:
            child = build(level + 1)
            return (child, L())
        if k == 2:
            child = build(level + 1)
            return {"k": child, 0: L()}
        if k == 3:
            child = build(level + 1)
            return Point(child, L())
        if k == 4:
            leaf = L()
            return Pair(leaf, build(level + 1))
        if k == 5:
            return deque([build(level + 1)])
        if k == 6:
            return OrderedDict(o=build(level + 1))
        if k == 7:
            return DC(build(level + 1), None)
        if k == 8:
            return Box((build(level + 1),))
        return defaultdict(list, {1.0: build(level + 1)})

    return build(0)


def _deep_list(L, depth: int):
    tree = L()
    for _ in range(depth):
        tree = [tree]
    return tree


def _one_item_chain(L, depth: int):
    """One-item lists and tuples nested ``depth`` levels (twice, broken by a
    two-item list), ending in a dict and with a one-item chain to a leaf in it."""
    tree = {"x": L(), "y": (L(), [[(L(),)]])}
    for half in range(2):
        for i in range(depth // 2):
            tree = [tree] if i % 2 else (tree,)
        if half == 0:
            tree = [tree, L()]
    return tree


def _shared_subtree(L):
    sub = [L(), L()]
    L(sub[0])
    L(sub[1])
    return [sub, sub]


def _stat_result():
    return os.stat_result((0o100644, 1, 2, 3, 4, 5, 6, 7, 8, 9))


CASES: list[TreeCase] = [
    # Leaves at the root.
    TreeCase("leaf-int", lambda L: L(7)),
    TreeCase("leaf-none", lambda L: L(None)),
    TreeCase("leaf-object", lambda L: L()),
    TreeCase("leaf-str", lambda L: L("a string is a leaf")),
    TreeCase("leaf-bytes", lambda L: L(b"bytes")),
    TreeCase("leaf-list-subclass", lambda L: L(LeafList([1, [2, 3]]))),
    TreeCase("leaf-dict-subclass", lambda L: L(LeafDict(a=[1, 2]))),
    TreeCase("leaf-tuple-subclass", lambda L: L(LeafTuple((1, 2)))),
    TreeCase("leaf-structseq-struct_time", lambda L: L(time.gmtime(0))),
    TreeCase("leaf-structseq-stat_result", lambda L: L(_stat_result())),
    TreeCase("leaf-type", lambda L: L(int)),
    # Empty containers.
    TreeCase("empty-tuple", lambda L: ()),
    TreeCase("empty-list", lambda L: []),
    TreeCase("empty-dict", lambda L: {}),
    TreeCase("empty-ordereddict", lambda L: OrderedDict()),
    TreeCase("empty-defaultdict", lambda L: defaultdict(list)),
    TreeCase("empty-deque", lambda L: deque()),
    TreeCase("empty-deque-maxlen0", lambda L: deque(maxlen=0)),
    TreeCase("empty-namedtuple", lambda L: Nil()),
    TreeCase("empty-box", lambda L: Box(())),
    TreeCase("dataclass-all-none", lambda L: DC(None, None)),
    TreeCase(
        "all-empties",
        lambda L: ((), [], {}, OrderedDict(), defaultdict(int), deque(), Nil(), [[]], ((),)),
    ),
    # Every node type with leaves.
    TreeCase("tuple", lambda L: (L(), L(), L())),
    TreeCase("list", lambda L: [L(), L(), L()]),
    TreeCase("dict-insertion-order", lambda L: {"b": L(), "a": L(), "c": L()}),
    TreeCase("namedtuple", lambda L: Point(L(), L())),
    TreeCase("typing-namedtuple", lambda L: Record(L(), L(), L())),
    TreeCase("ordereddict", lambda L: OrderedDict([("z", L()), ("y", L())])),
    TreeCase("defaultdict-list", lambda L: defaultdict(list, {"b": L(), "a": L()})),
    TreeCase("defaultdict-none-factory", lambda L: defaultdict(None, {"k": L()})),
    TreeCase("deque", lambda L: deque([L(), L(), L()])),
    TreeCase("deque-maxlen", lambda L: deque([L(), L()], maxlen=5)),
    TreeCase("deque-full-maxlen", lambda L: deque([L(), L()], maxlen=2)),
    TreeCase("custom-pair", lambda L: Pair(L(), L(), tag="t")),
    TreeCase("custom-box-tuple-children", lambda L: Box((L(), L(), L()), label="b")),
    TreeCase("dataclass", lambda L: DC(L(), L())),
    TreeCase("dataclass-none-field", lambda L: DC(L(), None)),
    TreeCase("constant", lambda L: Cfg("c", 1)),
    # None everywhere.
    TreeCase("none-in-list", lambda L: [L(None), L(None)]),
    TreeCase(
        "none-everywhere",
        lambda L: (
            L(None),
            [L(None), {"n": L(None), None: L(None)}],
            Point(L(None), L(None)),
            Pair(L(None), L(None)),
            deque([L(None)]),
            OrderedDict(n=L(None)),
            defaultdict(None, {None: L(None)}),
            DC(None, None),
            Box((L(None),)),
        ),
    ),
    # Dict keys that are == but of different types.
    TreeCase("dict-key-int-1", lambda L: {1: L()}),
    TreeCase("dict-key-float-1.0", lambda L: {1.0: L()}),
    TreeCase("dict-key-bool-True", lambda L: {True: L()}),
    TreeCase("dict-key-zeros", lambda L: [{0: L()}, {0.0: L()}, {False: L()}, {-0.0: L()}]),
    TreeCase("dict-keys-1-1.0-True-siblings", lambda L: [{1: L()}, {1.0: L()}, {True: L()}]),
    TreeCase(
        "dict-keys-1-1.0-True-in-every-dict-kind",
        lambda L: (
            OrderedDict([(1.0, L())]),
            OrderedDict([(True, L())]),
            OrderedDict([(1, L())]),
            defaultdict(int, {True: L()}),
            defaultdict(int, {1.0: L()}),
            defaultdict(int, {1: L()}),
        ),
    ),
    TreeCase(
        "dict-mixed-keys",
        lambda L: {
            1: L(),
            2.5: L(),
            False: L(),
            "s": L(),
            None: L(),
            (1, "t"): L(),
            b"b": L(),
            frozenset({3}): L(),
            int: L(),
        },
    ),
    TreeCase(
        "dict-same-keys-other-order",
        lambda L: [{"a": L(), "b": L()}, {"b": L(), "a": L()}],
    ),
    # Nesting.
    TreeCase(
        "nested-builtins",
        lambda L: [L(), (L(), [L(), {"a": L(), "b": (L(), L())}]), {"c": [L()], "d": ()}],
    ),
    TreeCase(
        "nested-customs",
        lambda L: Pair(
            DC(L(), Pair(L(), Box((L(), Cfg("inner"), L())), tag="inner")),
            Box((DC(L(), None), [L(), Cfg("x", 2)])),
            tag="outer",
        ),
    ),
    TreeCase(
        "namedtuple-of-containers",
        lambda L: Point([L(), L()], {"k": Record(L(), (L(),), c=Nil())}),
    ),
    TreeCase(
        "leaves-of-every-leaf-kind-inside-nodes",
        lambda L: [
            L(LeafList([1, 2])),
            (L(LeafDict(z=1)), L(LeafTuple((3,)))),
            {"t": L(time.gmtime(0)), "s": L(_stat_result())},
            Point(L("str"), L(b"by")),
            L(sys.version_info),
            L(3.5),
            L(True),
            L(10**30),
        ],
    ),
    TreeCase("shared-subtree", _shared_subtree),
    TreeCase("flat-list-1000", lambda L: [L() for _ in range(1000)]),
    TreeCase("flat-dict-300", lambda L: {f"k{i}": L() for i in range(300)}),
    TreeCase("deep-mixed-60", lambda L: _deep_mixed(L, 60)),
    TreeCase("deep-list-100", lambda L: _deep_list(L, 100)),
    TreeCase("one-item-chain-80", lambda L: _one_item_chain(L, 80)),
    TreeCase(
        "everything",
        lambda L: {
            "tuple": (L(), L(None)),
            "list": [L(), []],
            "dict": {1: L(), 2.0: L(), "t": L()},
            "nt": Point(L(), Vec(L(), L())),
            "od": OrderedDict(b=L(), a=L()),
            "dd": defaultdict(list, {"x": deque([L()], maxlen=3)}),
            "dq": deque([L(), L()]),
            "pair": Pair(L(), L()),
            "box": Box((L(),)),
            "dc": DC(L(), None),
            "cfg": Cfg("e"),
            "leaves": [L(LeafList()), L(time.gmtime(0))],
        },
    ),
]

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate TreeCase ids"
CASES_BY_ID = {c.id: c for c in CASES}


# --------------------------------------------------------------------------
# Canonical form: an independent statement of torch's node model for the
# table's types, used to compare trees exactly (types, key types, order,
# contexts, leaf identity).


def is_namedtuple_class(cls: type) -> bool:
    return (
        isinstance(cls, type)
        and issubclass(cls, tuple)
        and isinstance(getattr(cls, "_fields", None), tuple)
        and all(type(f) is str for f in cls._fields)
        and callable(getattr(cls, "_make", None))
        and callable(getattr(cls, "_asdict", None))
    )


def leaf_identity(x: Any) -> Any:
    return ("leaf", id(x))


def canon(tree: Any, leaf: Callable[[Any], Any] = leaf_identity) -> Any:
    """A hashable-free, exactly comparable description of ``tree``."""
    t = type(tree)
    if t is tuple or t is list:
        return (t, [canon(c, leaf) for c in tree])
    if t is dict or t is OrderedDict:
        return (t, [(type(k), k, canon(v, leaf)) for k, v in tree.items()])
    if t is defaultdict:
        return (
            t,
            ("factory", id(tree.default_factory)),
            [(type(k), k, canon(v, leaf)) for k, v in tree.items()],
        )
    if t is deque:
        return (t, tree.maxlen, [canon(c, leaf) for c in tree])
    if is_namedtuple_class(t):
        return (t, [canon(c, leaf) for c in tree])
    if t is Pair:
        return (t, tree.tag, canon(tree.a, leaf), canon(tree.b, leaf))
    if t is Box:
        return (t, tree.label, [canon(c, leaf) for c in tree.items])
    if t is DC:
        return (
            t,
            [("none-field",) if v is None else canon(v, leaf) for v in (tree.x, tree.y)],
        )
    if t is Cfg:
        return (t, tree)
    return leaf(tree)


def node_count(tree: Any) -> int:
    """torch's ``num_nodes`` computed independently (leaves count as nodes)."""
    t = type(tree)
    if t in (tuple, list, deque) or is_namedtuple_class(t):
        return 1 + sum(node_count(c) for c in tree)
    if t in (dict, OrderedDict, defaultdict):
        return 1 + sum(node_count(c) for c in tree.values())
    if t is Pair:
        return 1 + node_count(tree.a) + node_count(tree.b)
    if t is Box:
        return 1 + sum(node_count(c) for c in tree.items)
    if t is DC:
        return 1 + sum(node_count(v) for v in (tree.x, tree.y) if v is not None)
    if t is Cfg:
        return 1
    return 1


def children_of(tree: Any) -> list[Any]:
    """The children torch's flatten gives a node (no leaves)."""
    t = type(tree)
    if t in (tuple, list, deque) or is_namedtuple_class(t):
        return list(tree)
    if t in (dict, OrderedDict, defaultdict):
        return list(tree.values())
    if t is Pair:
        return [tree.a, tree.b]
    if t is Box:
        return list(tree.items)
    if t is DC:
        return [v for v in (tree.x, tree.y) if v is not None]
    if t is Cfg:
        return []
    raise TypeError(f"{tree!r} is a leaf")


def is_node(tree: Any) -> bool:
    t = type(tree)
    return t in (
        tuple,
        list,
        dict,
        OrderedDict,
        defaultdict,
        deque,
        Pair,
        Box,
        DC,
        Cfg,
    ) or is_namedtuple_class(t)


def expected_type_and_context(tree: Any) -> tuple[Any, Any]:
    """(spec.type, spec.context) torch gives the root node of ``tree``."""
    t = type(tree)
    if is_namedtuple_class(t):
        return collections.namedtuple, t
    if t in (tuple, list):
        return t, None
    if t in (dict, OrderedDict):
        return t, list(tree.keys())
    if t is defaultdict:
        return t, [tree.default_factory, list(tree.keys())]
    if t is deque:
        return t, tree.maxlen
    if t is Pair:
        return t, tree.tag
    if t is Box:
        return t, [tree.label, len(tree.items)]
    if t is DC:
        flat = [n for n in ("x", "y") if getattr(tree, n) is not None]
        none = [n for n in ("x", "y") if getattr(tree, n) is None]
        return t, [flat, none]
    raise TypeError(f"no simple context for {t}")


def rebuild(tree: Any, leaf_fn: Callable[[Any], Any]) -> Any:
    """``tree`` rebuilt with every leaf replaced by ``leaf_fn(leaf)``, called in
    flatten order; node types and contexts are kept (constants are shared)."""
    t = type(tree)
    if t is tuple:
        return tuple([rebuild(c, leaf_fn) for c in tree])
    if t is list:
        return [rebuild(c, leaf_fn) for c in tree]
    if t is dict or t is OrderedDict:
        return t([(k, rebuild(v, leaf_fn)) for k, v in tree.items()])
    if t is defaultdict:
        return defaultdict(
            tree.default_factory, [(k, rebuild(v, leaf_fn)) for k, v in tree.items()]
        )
    if t is deque:
        return deque([rebuild(c, leaf_fn) for c in tree], maxlen=tree.maxlen)
    if is_namedtuple_class(t):
        return t(*[rebuild(c, leaf_fn) for c in tree])
    if t is Pair:
        a = rebuild(tree.a, leaf_fn)
        return Pair(a, rebuild(tree.b, leaf_fn), tag=tree.tag)
    if t is Box:
        return Box(tuple([rebuild(c, leaf_fn) for c in tree.items]), label=tree.label)
    if t is DC:
        x = None if tree.x is None else rebuild(tree.x, leaf_fn)
        y = None if tree.y is None else rebuild(tree.y, leaf_fn)
        return DC(x, y)
    if t is Cfg:
        return tree
    return leaf_fn(tree)


def preorder(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """Every object flatten visits (and asks ``is_leaf`` about), in order."""
    out = [tree]
    if (is_leaf is not None and is_leaf(tree)) or not is_node(tree):
        return out
    for c in children_of(tree):
        out.extend(preorder(c, is_leaf))
    return out


def oracle_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """torch's ``tree_leaves(tree, is_leaf)`` for the table's types."""
    if (is_leaf is not None and is_leaf(tree)) or not is_node(tree):
        return [tree]
    out: list[Any] = []
    for c in children_of(tree):
        out.extend(oracle_leaves(c, is_leaf))
    return out


def contains_type(tree: Any, types: tuple) -> bool:
    if isinstance(tree, types):
        return True
    if not is_node(tree):
        return False
    return any(contains_type(c, types) for c in children_of(tree))
