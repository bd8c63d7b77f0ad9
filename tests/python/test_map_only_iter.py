"""tree_map_only / tree_map_only_ (type filters checked in C), the lazy C
tree_iter (and the tree_any / tree_all built on it) and arg_tree_leaves.

Each is compared with the pure-Python reference on the shared tree table and,
when torch is installed, with torch.utils._pytree: same results, same calls of
the user's functions in the same order, same exceptions.
"""

from __future__ import annotations

import gc
import weakref
from collections import OrderedDict

import pytest

import cpytree
import trees
from cpytree import _reference

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine's functions"),
]


def _torch_pytree():
    torch = pytest.importorskip("torch")
    trees.torch_pytree()
    return torch.utils._pytree


IMPLS = [pytest.param(_reference, id="reference")]


# --------------------------------------------------------------------------
# tree_map_only


SELECTORS = [
    pytest.param(trees.Leaf, id="type"),
    pytest.param((trees.Leaf, int), id="tuple"),
    pytest.param(trees.Leaf | str, id="union"),
    pytest.param(lambda x: isinstance(x, trees.Leaf) and id(x) % 2 == 0, id="predicate"),
]


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("case", trees.CASES, ids=trees.CASE_IDS)
def test_tree_map_only_matches_the_reference(case, selector):
    tree, _ = case.build()
    calls, expected_calls = [], []
    got = cpytree.tree_map_only(selector, lambda x: calls.append(x) or ("mapped", x), tree)
    want = _reference.tree_map_only(
        selector, lambda x: expected_calls.append(x) or ("mapped", x), tree
    )
    assert trees.canon(got) == trees.canon(want)
    assert [id(x) for x in calls] == [id(x) for x in expected_calls]


@pytest.mark.parametrize("case", trees.CASES, ids=trees.CASE_IDS)
def test_tree_map_only_inplace_calls_selected_leaves_in_order(case):
    tree, leaves = case.build()
    calls = []
    assert cpytree.tree_map_only_(trees.Leaf, calls.append, tree) is tree
    assert [id(x) for x in calls] == [id(x) for x in leaves if isinstance(x, trees.Leaf)]


def test_tree_map_only_is_leaf_and_keywords():
    tree = [1, [2, 3], (4, [5])]
    is_list = lambda x: isinstance(x, list) and len(x) == 2  # noqa: E731
    got = cpytree.tree_map_only(list, len, tree, is_leaf=is_list)
    assert got == _reference.tree_map_only(list, len, tree, is_leaf=is_list) == [1, 2, (4, [5])]
    assert cpytree.tree_map_only(int, func=str, tree=tree) == [
        "1", ["2", "3"], ("4", ["5"])]  # fmt: skip
    assert cpytree.tree_map_only(int, str, tree, None) == cpytree.tree_map_only(int, str, tree)


@pytest.mark.parametrize("fn", ["tree_map_only", "tree_map_only_"])
def test_tree_map_only_errors_are_torchs(fn):
    tp = _torch_pytree()
    for bad in (3, "x", None):
        for impl in (cpytree, tp):
            with pytest.raises(TypeError) as info:
                getattr(impl, fn)(bad, str, [1])
            assert str(info.value) == "Argument must be a type, a tuple of types, or a callable."
    with pytest.raises(TypeError, match="missing required argument"):
        getattr(cpytree, fn)(int)
    with pytest.raises(TypeError, match="positional arguments but 5 were given"):
        getattr(cpytree, fn)(int, str, [1], None, None)
    with pytest.raises(TypeError, match="isinstance"):
        getattr(cpytree, fn)((int, 3), str, ["a"])  # at the first leaf not an int, as in torch

    def boom(x):
        raise KeyError(x)

    with pytest.raises(KeyError, match="1"):
        getattr(cpytree, fn)(int, boom, ["a", 1])
    with pytest.raises(ZeroDivisionError):
        getattr(cpytree, fn)(lambda x: 1 / 0, str, [1])


@pytest.mark.parametrize("fn", ["tree_map_only", "tree_map_only_"])
def test_tree_map_only_matches_torch(fn):
    tp = _torch_pytree()
    for case in trees.CASES:
        tree, _ = case.build()
        ours, theirs = [], []
        a = getattr(cpytree, fn)(trees.Leaf, lambda x: ours.append(x) or 7, tree)
        b = getattr(tp, fn)(trees.Leaf, lambda x: theirs.append(x) or 7, tree)
        assert trees.canon(a) == trees.canon(b), case.id
        assert [id(x) for x in ours] == [id(x) for x in theirs], case.id


# --------------------------------------------------------------------------
# tree_iter: lazy, in C


@pytest.mark.parametrize("case", trees.CASES, ids=trees.CASE_IDS)
def test_tree_iter_yields_the_leaves(case):
    tree, leaves = case.build()
    assert [id(x) for x in cpytree.tree_iter(tree)] == [id(x) for x in leaves]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    got = list(cpytree.tree_iter(tree, is_leaf=is_tuple))
    want = list(_reference.tree_iter(tree, is_leaf=is_tuple))
    assert [id(x) for x in got] == [id(x) for x in want]


class Bomb:
    """A custom node whose flatten raises: reaching it is an error."""


cpytree.register_pytree_node(Bomb, lambda b: 1 / 0, lambda values, context: Bomb())


def test_tree_iter_is_lazy():
    visited = []

    def is_leaf(x):
        visited.append(x)
        return False

    it = cpytree.tree_iter([1, [2, Bomb()]], is_leaf=is_leaf)
    assert visited == []  # nothing visited before the first next()
    assert next(it) == 1
    assert len(visited) == 2 and visited[1] == 1  # the root, then the first leaf
    assert next(it) == 2
    with pytest.raises(ZeroDivisionError):
        next(it)
    assert list(it) == []  # exhausted after raising, like a generator


def test_tree_any_and_tree_all_stop_at_the_first_answer():
    assert cpytree.tree_any(lambda x: x == 1, [1, Bomb()]) is True
    assert cpytree.tree_all(lambda x: x == 2, [1, Bomb()]) is False
    assert cpytree.tree_any_only(int, lambda x: x == 1, [1, Bomb()]) is True
    with pytest.raises(ZeroDivisionError):
        cpytree.tree_any(lambda x: x == 5, [1, Bomb()])


def test_tree_iter_matches_torch_on_live_list_mutation():
    tp = _torch_pytree()
    for impl in (cpytree, tp):
        tree = [1, 2]
        out = []
        for x in impl.tree_iter(tree):
            out.append(x)
            if x == 1:
                tree.append(3)  # torch iterates the live list
        assert out == [1, 2, 3], impl


def test_tree_iter_depth_and_cycles_raise_recursion_error():
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        list(cpytree.tree_iter(cycle))
    deep: list = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    with pytest.raises(RecursionError):
        list(cpytree.tree_iter(deep))


class Holder:
    it: object = None


def test_tree_iter_in_a_reference_cycle_is_collected():
    holder = Holder()
    it = cpytree.tree_iter([holder, 1])
    holder.it = it  # the iterator holds the tree, which holds the iterator
    ref = weakref.ref(holder)
    del it, holder
    gc.collect()
    assert ref() is None


def test_tree_iter_signature_and_type():
    tp = _torch_pytree()
    it = cpytree.tree_iter(tree=OrderedDict(a=1), is_leaf=None)
    assert iter(it) is it and list(it) == [1]
    assert cpytree.tree_iter.__text_signature__ == "(tree, is_leaf=None)"
    assert list(cpytree.tree_iter(None)) == list(tp.tree_iter(None)) == [None]


# --------------------------------------------------------------------------
# arg_tree_leaves


def test_arg_tree_leaves_matches_torch():
    tp = _torch_pytree()
    args = ([1, (2, 3)], {"a": 4}, None)
    kwargs = {"x": [5, {"y": 6}], "z": 7}
    assert cpytree.arg_tree_leaves(*args, **kwargs) == tp.arg_tree_leaves(*args, **kwargs)
    assert cpytree.arg_tree_leaves() == [] and cpytree.arg_tree_leaves(x=1) == [1]


def test_known_flattens_give_torchs_results_while_installed():
    torch = pytest.importorskip("torch")
    import torch.fx.immutable_collections as ic
    import torch.utils._pytree as tp

    tree = ic.immutable_dict(b=ic.immutable_list([1, 2]), a=(3, ic.immutable_dict(c=4)))
    expected = tp.tree_flatten(tree)
    cpytree.install()
    try:
        leaves, spec = tp.tree_flatten(tree)
        assert leaves == expected[0] and spec == expected[1]
        assert tp.tree_unflatten(leaves, spec) == tree
        assert type(tp.tree_unflatten(leaves, spec)["b"]) is ic.immutable_list
        assert list(tp.tree_iter(tree)) == [1, 2, 3, 4]
    finally:
        cpytree.uninstall()
    assert torch is not None
