"""Differential tests: the C++ engine vs the pure-Python reference vs torch.

Hypothesis generates trees of every node kind (builtins, namedtuples, the
table's custom nodes, constants), None, mixed dict keys (1 / 1.0 / True
included) and empty containers, then checks that every implementation gives
the same leaves (by identity), the same spec text and counts, the same rebuilt
trees (exact types), the same tree_map results, the same spec equality, and
for a second tree that differs at one generated place, the same n-ary map
result or the same error (type and message; cpytree's carries the key path
of that place).

torch takes part when it is importable; the engine/reference comparison runs
regardless.
"""

from __future__ import annotations

import time
from collections import OrderedDict, defaultdict, deque

import pytest
from hypothesis import given, note, strategies as st

import cpytree
import cpytree._reference as reference
import trees
from support import catch
from trees import (
    DC,
    Box,
    Cfg,
    Leaf,
    LeafDict,
    LeafList,
    LeafTuple,
    Nil,
    Pair,
    Point,
    Record,
    Vec,
    canon,
)

pytestmark = pytest.mark.torch


def implementations():
    """(name, module) of every implementation taking part."""
    impls = [("cpytree", cpytree), ("reference", reference)]
    tp = trees.torch_pytree()
    if tp is not None:
        impls.append(("torch", tp))
    return impls


IMPLS = implementations()
OURS = [(n, m) for n, m in IMPLS if n != "torch"]


# --------------------------------------------------------------------------
# Strategies

_SHARED_LEAVES = [LeafList([1]), LeafDict(a=1), LeafTuple((1,)), time.gmtime(0), b"x", int, 2.5]

leaf_values = st.one_of(
    st.none(),
    st.integers(-3, 1000),
    st.booleans(),
    st.text(max_size=2),
    st.builds(Leaf, st.integers(0, 99)),
    st.sampled_from(_SHARED_LEAVES),
)

dict_keys = st.one_of(
    st.sampled_from([1, 1.0, True, 0, 0.0, False, -0.0, 2, 2.0]),
    st.integers(-2, 5),
    st.text(max_size=2),
    st.none(),
    st.tuples(st.integers(0, 2), st.text(max_size=1)),
    st.floats(-3, 3, allow_nan=False),
)


def _containers(children):
    small = st.lists(children, max_size=4)
    mapping = st.dictionaries(dict_keys, children, max_size=4)
    return st.one_of(
        small,
        small.map(tuple),
        mapping,
        mapping.map(OrderedDict),
        st.builds(lambda f, d: defaultdict(f, d), st.sampled_from([list, int, None]), mapping),
        st.builds(
            lambda xs, m: deque(xs, maxlen=m), small, st.one_of(st.none(), st.integers(4, 6))
        ),
        st.builds(Point, children, children),
        st.builds(Record, children, children, children),
        st.just(Nil()),
        st.builds(Pair, children, children, st.sampled_from(["p", "q"])),
        st.builds(
            lambda xs, lab: Box(tuple(xs), lab),
            st.lists(children, max_size=3),
            st.sampled_from(["b", "c"]),
        ),
        st.builds(DC, st.one_of(st.none(), children), st.one_of(st.none(), children)),
        st.builds(Cfg, st.sampled_from(["a", "b"]), st.integers(0, 2)),
    )


pytrees = st.recursive(leaf_values, _containers, max_leaves=25)


# --------------------------------------------------------------------------
# Positions and edits


def entries(node):
    """Key-path entries of node's children (docs/architecture.md)."""
    t = type(node)
    kids = trees.children_of(node)
    if t in (dict, OrderedDict, defaultdict):
        return [f"[{k!r}]" for k in node]
    if trees.is_namedtuple_class(t):
        return [f".{f}" for f in t._fields]
    return [f"[{i}]" for i in range(len(kids))]


def positions(tree, path=(), text=""):
    """(index path, key-path text, subtree) of every position, in preorder."""
    out = [(path, text, tree)]
    if trees.is_node(tree):
        for i, (kid, e) in enumerate(zip(trees.children_of(tree), entries(tree))):
            out.extend(positions(kid, path + (i,), text + e))
    return out


def with_children(node, kids):
    t = type(node)
    if t is tuple:
        return tuple(kids)
    if t is list:
        return list(kids)
    if t in (dict, OrderedDict):
        return t(zip(list(node), kids))
    if t is defaultdict:
        return defaultdict(node.default_factory, zip(list(node), kids))
    if t is deque:
        return deque(kids, maxlen=node.maxlen)
    if trees.is_namedtuple_class(t):
        return t(*kids)
    if t is Pair:
        return Pair(kids[0], kids[1], tag=node.tag)
    if t is Box:
        return Box(tuple(kids), label=node.label)
    if t is DC:
        it = iter(kids)
        return DC(None if node.x is None else next(it), None if node.y is None else next(it))
    raise TypeError(t)


def replace_at(tree, path, fn):
    if not path:
        return fn(tree)
    kids = trees.children_of(tree)
    kids[path[0]] = replace_at(kids[path[0]], path[1:], fn)
    return with_children(tree, kids)


NEW = Leaf(-1)


def edit(kind, x):
    """One structural edit of x (may or may not be a mismatch for torch)."""
    t = type(x)
    if kind == "leaf":
        return NEW
    if kind == "grow":
        if t in (list, tuple):
            return t(list(x) + [NEW])
        if t is deque:
            return deque(list(x) + [NEW], maxlen=None if x.maxlen is None else x.maxlen + 1)
        if t in (dict, OrderedDict, defaultdict):
            y = with_children(x, trees.children_of(x))
            y["__new__"] = NEW
            return y
        if trees.is_namedtuple_class(t):
            return tuple(x) + (NEW,)
        if t is Box:
            return Box(x.items + (NEW,), x.label)
        if t is DC:
            return DC(NEW if x.x is None else x.x, NEW if x.y is None else x.y)
        if t in (Pair, Cfg):
            return Box((x,))
        return [x, (x, NEW)]  # a leaf grows into a subtree: still a prefix
    if kind == "retype":
        swaps = {
            list: tuple,
            tuple: list,
            dict: OrderedDict,
            OrderedDict: dict,
            deque: list,
        }
        if t in swaps:
            return swaps[t](x)
        if t is defaultdict:
            return defaultdict(int if x.default_factory is not int else list, x)
        if t is Point:
            return Vec(*x)
        if trees.is_namedtuple_class(t):
            return tuple(x)
        if t is Pair:
            return Pair(x.a, x.b, tag=x.tag + "!")
        if t is Box:
            return Box(x.items, label=x.label + "!")
        if t is DC:
            return Pair(x.x, x.y)
        if t is Cfg:
            return Cfg(x.name + "!", x.n)
        return Pair(x, None)
    if kind == "rekey":
        if t in (dict, OrderedDict, defaultdict) and len(x):
            keys = list(x)
            first = keys[0]
            # An equal key of another type: 1 -> 1.0 -> True -> 1, 0 -> 0.0 -> False -> 0
            # (looked up by type and value: as dict keys, 1, 1.0 and True are one key).
            twins = {(int, 1): 1.0, (float, 1.0): True, (bool, True): 1,
                     (int, 0): 0.0, (float, 0.0): False, (bool, False): 0}  # fmt: skip
            new = twins.get((type(first), first), "__other__")
            if new in keys[1:]:
                new = "__other__"
            y = with_children(x, [])
            y.clear()
            for k, v in zip([new] + keys[1:], x.values()):
                y[k] = v
            return y
        return edit("grow", x)
    if kind == "reorder":
        if t in (dict, OrderedDict, defaultdict):
            y = with_children(x, [])
            y.clear()
            for k in reversed(list(x)):
                y[k] = x[k]
            return y
        if t in (list, tuple) and len(x) > 1:
            return t(reversed(list(x)))
        return edit("retype", x)
    raise ValueError(kind)


EDITS = ["leaf", "grow", "retype", "rekey", "reorder"]


# --------------------------------------------------------------------------
# Helpers


def mapper(*args):
    return MappedLeaf(args)


class MappedLeaf:
    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args


def mapped_canon(tree):
    def leaf(x):
        assert type(x) is MappedLeaf, x
        return ("mapped",) + tuple(id(a) for a in x.args)

    return canon(tree, leaf=leaf)


def strip_suffix(msg):
    head, sep, tail = msg.rpartition(" (at key path tree")
    assert sep and tail.endswith(")"), f"no key path suffix in {msg!r}"
    return head, tail[:-1]


# --------------------------------------------------------------------------
# Tests


@given(pytrees)
def test_flatten_unflatten_map_agree(tree):
    ref_leaves = None
    reprs, counts, rebuilt, maps = {}, {}, {}, {}
    for name, mod in IMPLS:
        leaves, spec = mod.tree_flatten(tree)
        if ref_leaves is None:
            ref_leaves = leaves
        assert len(leaves) == len(ref_leaves), name
        assert all(a is b for a, b in zip(leaves, ref_leaves)), name
        assert all(a is b for a, b in zip(mod.tree_leaves(tree), ref_leaves)), name
        assert mod.tree_structure(tree) == spec, name
        reprs[name] = repr(spec)
        counts[name] = (spec.num_nodes, spec.num_leaves, spec.num_children, spec.is_leaf())
        rebuilt[name] = canon(spec.unflatten(leaves))
        maps[name] = mapped_canon(mod.tree_map(mapper, tree))
    note(reprs["cpytree"])
    for table in (reprs, counts, rebuilt, maps):
        assert all(v == table["cpytree"] for v in table.values()), table
    assert rebuilt["cpytree"] == canon(tree)
    assert counts["cpytree"][1] == len(trees.oracle_leaves(tree))
    assert counts["cpytree"][0] == trees.node_count(tree)


@given(pytrees, st.data())
def test_nary_map_and_errors_agree(tree, data):
    spots = positions(tree)
    path, text, _sub = data.draw(st.sampled_from(spots), label="position")
    kind = data.draw(st.sampled_from(EDITS), label="edit")
    other = replace_at(tree, path, lambda x: edit(kind, x))
    note(f"edit {kind} at tree{text}: {other!r}")
    results = {}
    for name, mod in IMPLS:
        results[name] = (
            catch(lambda: mod.tree_map(mapper, tree, other)),
            catch(lambda: mod.tree_structure(tree).flatten_up_to(other)),
            catch(lambda: mod.tree_map_(lambda *a: None, tree, other)),
        )
    engine = results["cpytree"]
    for name, excs in results.items():
        for exc, base in zip(excs, engine):
            assert (exc is None) == (base is None), (name, exc, base)
            if exc is None:
                continue
            assert type(exc) is ValueError, (name, exc)
            if name == "torch":
                assert str(exc) == strip_suffix(str(base))[0]
            else:
                assert str(exc) == str(base), name
    if engine[0] is None:
        outs = {name: mapped_canon(mod.tree_map(mapper, tree, other)) for name, mod in IMPLS}
        assert all(v == outs["cpytree"] for v in outs.values())
        return
    # The error names the place that was edited, or a place below it (an
    # edit that reorders children can make a child mismatch first).
    for exc in engine:
        where = strip_suffix(str(exc))[1]
        assert where.startswith(text), (where, text)
        if kind in ("leaf", "grow", "rekey"):
            assert where == text


@given(pytrees, st.data())
def test_spec_equality_agrees(tree, data):
    spots = positions(tree)
    path, _text, _ = data.draw(st.sampled_from(spots), label="position")
    kind = data.draw(st.sampled_from(EDITS), label="edit")
    other = replace_at(tree, path, lambda x: edit(kind, x))
    verdicts = {}
    for name, mod in IMPLS:
        s1, s2 = mod.tree_structure(tree), mod.tree_structure(other)
        verdicts[name] = (s1 == s2, s2 == s1, s1 != s2)
        if s1 == s2:
            assert hash(s1) == hash(s2), name
        # a separately built copy of the same structure is always equal
        s3 = mod.tree_structure(trees.rebuild(tree, lambda x: x))
        assert s1 == s3 and hash(s1) == hash(s3), name
    assert len(set(verdicts.values())) == 1, verdicts
    a, b, c = verdicts["cpytree"]
    assert a == b == (not c)


IS_LEAF = {
    "none": None,
    "lists": lambda x: type(x) is list,
    "dict-kinds": lambda x: isinstance(x, dict),
    "small-tuples": lambda x: isinstance(x, tuple) and len(x) < 2,
    "customs": lambda x: type(x) in (Pair, Box, DC),
    "ints": lambda x: type(x) is int,
}


@given(pytrees, st.sampled_from(sorted(IS_LEAF)))
def test_is_leaf_agrees(tree, pred_name):
    pred = IS_LEAF[pred_name]
    want = trees.oracle_leaves(tree, pred)
    reprs = set()
    for name, mod in IMPLS:
        leaves, spec = mod.tree_flatten(tree, is_leaf=pred)
        assert len(leaves) == len(want) and all(a is b for a, b in zip(leaves, want)), name
        reprs.add(repr(spec))
        assert canon(spec.unflatten(leaves)) == canon(tree), name
        out = mod.tree_map(mapper, tree, is_leaf=pred)
        got = [m.args[0] for m in mod.tree_leaves(out, is_leaf=lambda x: type(x) is MappedLeaf)]
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), name
        assert mod.tree_all(lambda x: True, tree, is_leaf=pred) is True
        assert mod.tree_any(lambda x: x is NEW, tree, is_leaf=pred) is False
    assert len(reprs) == 1, reprs


@given(pytrees)
def test_unflatten_wrong_count_agrees(tree):
    msgs = set()
    for name, mod in IMPLS:
        spec = mod.tree_structure(tree)
        exc = catch(lambda: spec.unflatten([0] * (spec.num_leaves + 1)))
        assert type(exc) is ValueError, name
        msgs.add(str(exc))
    assert len(msgs) == 1, msgs


@given(pytrees)
def test_engine_specs_match_reference_specs(tree):
    # Reading a spec: every attribute torch code uses, compared recursively.
    def walk(a, b):
        assert a.type is b.type
        assert repr(a.context) == repr(b.context)
        assert (a.num_nodes, a.num_leaves, a.num_children, a.is_leaf()) == (
            b.num_nodes,
            b.num_leaves,
            b.num_children,
            b.is_leaf(),
        )
        ka, kb = a.children(), b.children()
        assert len(ka) == len(kb)
        for i, (x, y) in enumerate(zip(ka, kb)):
            assert repr(a.child(i)) == repr(x)
            walk(x, y)

    walk(cpytree.tree_structure(tree), reference.tree_structure(tree))
