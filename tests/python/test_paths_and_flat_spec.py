"""Key paths of custom nodes and flattening a flat list against a spec.

* tree_flatten_with_path / tree_leaves_with_path / tree_map_with_path on a
  custom node whose flatten_fn and flatten_with_keys_fn disagree give
  torch's results exactly: the spec from flatten_fn's children and context,
  the (path, leaf) pairs from flatten_with_keys_fn's children (torch runs two
  traversals and checks nothing between them). tree_leaves_with_path calls
  flatten_with_keys_fn alone, as torch does.
* spec.flatten / spec.flatten_up_to on flat lists and tuples of leaves (the
  engine builds the result list directly there): exact leaves, and the same
  errors as the general walk, for every kind of item at a leaf position.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest

import cpytree
import cpytree._reference as ref
from support import catch, engine_active

torch_pytree = pytest.importorskip("torch.utils._pytree")

pytestmark = pytest.mark.torch

IMPLS = [cpytree, ref, torch_pytree]
IDS = ["cpytree", "reference", "torch"]


class Box:
    """A custom node whose two flatten functions can be made to disagree."""

    def __init__(self, xs: list[Any]) -> None:
        self.xs = xs


CALLS: list[str] = []
# How flatten_with_keys_fn departs from flatten_fn; set by each test.
MODE = {"how": "agree"}


def _flatten(box: Box) -> tuple[list[Any], Any]:
    CALLS.append("flatten")
    return list(box.xs), ("ctx", len(box.xs))


def _flatten_with_keys(mod: Any):  # type: ignore[no-untyped-def]
    def fk(box: Box) -> tuple[list[tuple[Any, Any]], Any]:
        CALLS.append("keys")
        how = MODE["how"]
        xs = list(box.xs)
        if how == "fewer":
            xs = xs[:-1]
        elif how == "more":
            xs = [*xs, "extra"]
        elif how == "other":
            xs = [("other", x) for x in xs]
        ctx = "keys-ctx" if how == "context" else ("ctx", len(box.xs))
        return [(mod.MappingKey(f"k{i}"), x) for i, x in enumerate(xs)], ctx

    return fk


def _unflatten(xs: Any, ctx: Any) -> Box:
    return Box(list(xs))


@pytest.fixture(scope="module", autouse=True)
def _register():  # type: ignore[no-untyped-def]
    # cpytree's registry is also the reference's (one registry, mirrored).
    for mod in (cpytree, torch_pytree):
        mod.register_pytree_node(
            Box, _flatten, _unflatten, flatten_with_keys_fn=_flatten_with_keys(mod)
        )
    yield
    for mod in (cpytree, torch_pytree):
        mod._deregister_pytree_node(Box)


def _tree() -> Any:
    inner = Box([3, (4, None)])
    return {"a": [Box([1, 2, inner]), 5], "b": Box([])}


def _canon_leaf(x: Any) -> Any:
    if isinstance(x, Box):
        return ("Box", [_canon_leaf(y) for y in x.xs])
    if isinstance(x, tuple):
        return tuple(_canon_leaf(y) for y in x)
    return x


def _canon_pairs(pairs: list[tuple[tuple[Any, ...], Any]]) -> list[Any]:
    return [
        (tuple((type(k).__name__, str(k)) for k in path), _canon_leaf(leaf)) for path, leaf in pairs
    ]


def _run(mod: Any, fn: str) -> tuple[Any, list[str]]:
    CALLS.clear()
    tree = _tree()
    if fn == "flatten_with_path":
        pairs, spec = mod.tree_flatten_with_path(tree)
        out: Any = (_canon_pairs(pairs), repr(spec), spec.num_leaves, spec.num_nodes)
    elif fn == "leaves_with_path":
        out = _canon_pairs(mod.tree_leaves_with_path(tree))
    else:
        seen: list[Any] = []

        def func(p: Any, x: Any, *rest: Any) -> Any:
            seen.append((len(p), _canon_leaf(x), *rest))
            return len(p)

        rests = (_tree(),) if fn == "map_with_path_rests" else ()
        try:
            mapped = mod.tree_map_with_path(func, tree, *rests)
            out = ("ok", repr(mod.tree_flatten(mapped)[0]))
        except ValueError as e:
            # torch's message ends with the spec's repr: the same text in all three.
            out = ("error", str(e))
        out = (out, [s[:2] for s in seen])
    return out, list(CALLS)


@pytest.mark.parametrize("how", ["agree", "fewer", "more", "other", "context"])
@pytest.mark.parametrize(
    "fn", ["flatten_with_path", "leaves_with_path", "map_with_path", "map_with_path_rests"]
)
def test_disagreeing_flatten_functions_match_torch(how: str, fn: str) -> None:
    MODE["how"] = how
    try:
        want, want_calls = _run(torch_pytree, fn)
        for mod in (cpytree, ref):
            got, calls = _run(mod, fn)
            assert got == want, mod.__name__
            # The same calls, each function once per node (torch runs all of
            # flatten_fn first, the engine interleaves: compare as multisets).
            assert sorted(calls) == sorted(want_calls), mod.__name__
    finally:
        MODE["how"] = "agree"


def test_leaves_with_path_calls_flatten_with_keys_only() -> None:
    CALLS.clear()
    cpytree.tree_leaves_with_path(_tree())
    assert CALLS == ["keys"] * 3  # three Box nodes, flatten_fn never called


def test_disagreement_exact_result() -> None:
    MODE["how"] = "fewer"
    try:
        pairs, spec = cpytree.tree_flatten_with_path([Box([1, 2, 3]), 4])
    finally:
        MODE["how"] = "agree"
    assert [(cpytree.keystr(p), x) for p, x in pairs] == [
        ("[0]['k0']", 1),
        ("[0]['k1']", 2),
        ("[1]", 4),
    ]
    assert spec.num_leaves == 4  # flatten_fn's three children, and 4
    assert spec.child(0).context == ("ctx", 3)


def test_disagreement_with_is_leaf_matches_torch() -> None:
    MODE["how"] = "other"
    try:
        outs = []
        for mod in IMPLS:
            pairs, spec = mod.tree_flatten_with_path(
                _tree(), is_leaf=lambda x: isinstance(x, tuple)
            )
            outs.append((_canon_pairs(pairs), repr(spec)))
    finally:
        MODE["how"] = "agree"
    assert outs[0] == outs[2] and outs[1] == outs[2]


# --------------------------------------------------------------------------
# Flat lists against a spec


class Leafy:
    pass


class Other:
    pass


Point = collections.namedtuple("Point", "x y")


def _items() -> list[Any]:
    return [1, 2.5, "s", True, 1j, None, Leafy(), Other(), b"bytes", (1,), Point(1, 2), [],
            [1], {"a": 1}, collections.OrderedDict(), Box([1])]  # fmt: skip


def _general(spec: Any, tree: Any) -> Any:
    """spec.flatten's contract: the leaves when tree_structure(tree) == spec."""
    leaves, real = cpytree.tree_flatten(tree)
    return leaves if real == spec else "mismatch"


@pytest.mark.parametrize("root", [list, tuple])
@pytest.mark.parametrize("index", range(len(_items())))
def test_flat_spec_flatten_each_item_kind(root: type, index: int) -> None:
    base = [Leafy() for _ in range(5)]
    spec = cpytree.tree_structure(root(base))
    for pos in (0, 2, 4):
        items = list(base)
        items[pos] = _items()[index]
        tree = root(items)
        want = _general(spec, tree)
        got = catch(lambda: spec.flatten(tree))
        if want == "mismatch":
            assert isinstance(got, ValueError)
            assert f"(at key path tree[{pos}])" in str(got)
            assert str(got).startswith("Node type mismatch; expected a leaf, but got ")
        else:
            got = spec.flatten(tree)
            assert type(got) is list
            assert all(a is b for a, b in zip(got, want, strict=True))
        # flatten_up_to takes any item at a leaf position, as torch does.
        up = spec.flatten_up_to(tree)
        want_up = ref.tree_structure(root(base)).flatten_up_to(tree)
        assert len(up) == len(want_up) and all(a is b for a, b in zip(up, want_up, strict=True))


def test_flat_spec_exact_errors() -> None:
    spec = cpytree.tree_structure([1, 2, 3])
    cases = {
        "tuple-item": ([1, (2,), 3], "Node type mismatch; expected a leaf, but got <class 'tuple'>. (at key path tree[1])"),
        "short": ([1, 2], "Node arity mismatch; expected 3, but got 2. (at key path tree)"),
        "root-type": ((1, 2, 3), "Node type mismatch; expected <class 'list'>, but got <class 'tuple'>. (at key path tree)"),
        "list-item": ([1, 2, [3]], "Node type mismatch; expected a leaf, but got <class 'list'>. (at key path tree[2])"),
    }  # fmt: skip
    for name, (tree, msg) in cases.items():
        err = catch(lambda: spec.flatten(tree))
        assert isinstance(err, ValueError) and str(err) == msg, name


def test_flat_spec_with_empty_container_child() -> None:
    # A spec child that is one node but no leaf ([] here) is not a leaf slot.
    spec = cpytree.tree_structure([1, [], 3])
    assert spec.flatten([7, [], 9]) == [7, 9]
    err = catch(lambda: spec.flatten([7, 8, 9]))
    assert isinstance(err, ValueError)
    assert (
        str(err)
        == "Node type mismatch; expected <class 'list'>, but got <class 'int'>. (at key path tree[1])"
    )
    assert spec.flatten_up_to([7, [], 9]) == [7, 9]


def test_flat_spec_mixed_leaf_types_and_refcounts() -> None:
    import sys

    a, b = Leafy(), Other()
    tree = [a, b, a, None, 3, b] * 50
    spec = cpytree.tree_structure(tree)
    before = sys.getrefcount(a), sys.getrefcount(b)
    for _ in range(3):
        out = spec.flatten(tree)
        assert out == tree and all(x is y for x, y in zip(out, tree, strict=True))
        del out
    err = catch(lambda: spec.flatten([*tree[:-1], (1,)]))
    assert isinstance(err, ValueError)
    assert (sys.getrefcount(a), sys.getrefcount(b)) == before


@pytest.mark.skipif(not engine_active(), reason="C++ engine not loaded")
def test_flat_spec_against_torch_fx() -> None:
    import torch.fx._pytree as fx

    base = [Leafy() for _ in range(4)]
    tspec = torch_pytree.tree_structure(base)
    cspec = cpytree.tree_structure(base)
    twin = [Leafy(), None, 3, "x"]
    assert fx.tree_flatten_spec(twin, tspec) == cspec.flatten(twin) == twin
