"""Torch-made inputs of extreme shape, with install() active (issue 13).

Every entry point that takes torch's own objects (torch TreeSpecs, LeafSpec,
specs mixing torch and engine children, torch-registered custom nodes with
torch.fx flatten-spec functions, key entries) must answer deep, wide, cyclic
or hostile inputs with torch's result or a Python exception (RecursionError
where torch's recursion gives up too), never a crash. Each test below is a
crash found by building such inputs (SIGSEGV before the fix; see the test's
docstring); they run in the pytest process, so a regression fails loudly.
"""

from __future__ import annotations

import pickle
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree  # noqa: E402
import torch.utils._pytree as tp  # noqa: E402

import cpytree  # noqa: E402

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp" or not hasattr(cpytree._C, "_set_torch_spec_classes"),
        reason="needs the C++ engine's torch spec interop",
    ),
]

DEEP = 100_000


@pytest.fixture(autouse=True)
def installed():
    cpytree.install()
    try:
        yield
    finally:
        cpytree.uninstall()


def torch_chain(depth, node_type=list):
    """TreeSpec(list, None, [TreeSpec(list, None, [... leaf])]), built by torch."""
    spec = tp.treespec_leaf()
    for _ in range(depth):
        spec = tp.TreeSpec(node_type, None, [spec])
    return spec


def nested_lists(depth, leaf=1):
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def chain(tree):
    """(depth, innermost leaf) of nested one-item lists, without recursion."""
    depth = 0
    while type(tree) is list and len(tree) == 1:
        tree, depth = tree[0], depth + 1
    return depth, tree


def in_thread(fn, stack_size):
    """fn() in a thread with a small C stack; its result or exception."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            out["error"] = error

    old = threading.stack_size(stack_size)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    if "error" in out:
        raise out["error"]
    return out["value"]


# --------------------------------------------------------------------------
# Deep torch specs: the conversion to an engine spec recursed once per level
# with its depth check never advancing (SIGSEGV at 100,000 levels).


@pytest.mark.parametrize(
    "entry",
    [
        "cpytree.tree_unflatten",
        "tp.tree_unflatten",
        "fx.tree_flatten_spec",
        "TreeSpec(...)",
        "spec.unflatten",
    ],
)
def test_deep_torch_spec_raises_recursion_error(entry):
    spec = torch_chain(DEEP)
    calls = {
        "cpytree.tree_unflatten": lambda: cpytree.tree_unflatten([1], spec),
        "tp.tree_unflatten": lambda: tp.tree_unflatten([1], spec),
        "fx.tree_flatten_spec": lambda: fx_pytree.tree_flatten_spec([1], spec),
        "TreeSpec(...)": lambda: cpytree.TreeSpec(list, None, [spec]),
        "spec.unflatten": lambda: spec.unflatten([1]),  # torch's own method: its recursion
    }
    with pytest.raises(RecursionError):
        calls[entry]()


def test_torch_spec_within_the_limit_converts_like_torch():
    depth = sys.getrecursionlimit() // 4  # torch's own recursion manages this
    spec = torch_chain(depth)
    assert cpytree.tree_unflatten([7], spec) == nested_lists(depth, 7)
    engine = cpytree.TreeSpec(list, None, [spec])
    assert engine.num_nodes == depth + 2 and engine == tp.TreeSpec(list, None, [spec])
    assert fx_pytree.tree_flatten_spec(nested_lists(depth, 7), spec) == [7]


def test_cyclic_torch_spec_raises_recursion_error():
    """A torch spec whose `_children` holds itself (torch specs are mutable)."""
    spec = tp.TreeSpec(list, None, [tp.treespec_leaf()])
    spec._children.append(spec)
    with pytest.raises(RecursionError):
        cpytree.tree_unflatten([1, 2], spec)
    with pytest.raises(RecursionError):
        cpytree.TreeSpec(tuple, None, [spec])
    spec._children.pop()  # break the cycle for the collector


def test_deep_torch_spec_in_a_small_thread():
    """Conversion is iterative: a small C stack does not matter (it crashed)."""
    spec = torch_chain(50_000)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(RecursionError):
            in_thread(lambda: cpytree.tree_unflatten([1], spec), 256 << 10)
        small = torch_chain(200)
        assert in_thread(lambda: cpytree.tree_unflatten([1], small), 256 << 10) == nested_lists(200)
    finally:
        sys.setrecursionlimit(old)


def test_mixed_torch_and_engine_children_at_depth():
    spec = cpytree.treespec_leaf()
    for k in range(3000):
        spec = (tp.TreeSpec if k % 2 else cpytree.TreeSpec)(list, None, [spec])
    assert chain(cpytree.tree_unflatten([1], spec)) == (3000, 1)
    engine = cpytree.TreeSpec(list, None, [spec])
    assert engine.num_nodes == 3002 and engine.num_leaves == 1
    assert hash(engine) == hash(engine) and engine == engine


def test_wide_torch_spec():
    width = 200_000
    spec = tp.TreeSpec(tuple, None, [tp.treespec_leaf()] * width)
    leaves = list(range(width))
    assert cpytree.tree_unflatten(leaves, spec) == tuple(leaves)
    assert fx_pytree.tree_flatten_spec(tuple(leaves), spec) == leaves
    assert cpytree.TreeSpec(list, None, [spec]).num_leaves == width


def test_hostile_torch_spec_children_raise_torch_errors():
    spec = tp.TreeSpec(list, None, [tp.treespec_leaf()])
    spec._children.append("not a spec")
    with pytest.raises(TypeError, match="PyTreeSpec"):
        cpytree.tree_unflatten([1, 2], spec)
    bad_keys = tp.TreeSpec(dict, ["a"], [tp.treespec_leaf()])
    bad_keys._context.append("b")  # two keys, one child
    with pytest.raises(ValueError, match="needs 1 keys"):
        cpytree.tree_unflatten([1], bad_keys)


# --------------------------------------------------------------------------
# torch.fx flatten-spec functions returning fewer children than the spec has:
# the walk of those children restarted its depth count at 1, so nested custom
# nodes recursed without bound (SIGSEGV at 20,000 levels).


@pytest.fixture
def pair_registered():
    """A fresh custom node type registered with torch, with an fx flatten-spec
    function one child short (a fresh class each time: torch also registers
    with optree, which has no deregistration)."""

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tp.register_pytree_node(
        Pair,
        lambda p: ([p.a, p.b], None),
        lambda c, _: Pair(*c),
        serialized_type_name=f"test_torch_interop_limits.Pair{id(Pair)}",
    )
    fx_pytree.register_pytree_flatten_spec(Pair, lambda p, spec: [p.a])
    try:
        yield Pair
    finally:
        fx_pytree.SUPPORTED_NODES.pop(Pair, None)
        tp._deregister_pytree_node(Pair)


def test_fx_short_children_nested_deep(pair_registered):
    Pair = pair_registered
    depth = 5_000  # past the depth limit (about the recursion limit)
    spec = cpytree.treespec_leaf()
    tree = 1
    for _ in range(depth):
        spec = cpytree.TreeSpec(Pair, None, [spec, cpytree.treespec_leaf()])
        tree = Pair(tree, 2)
    with pytest.raises(RecursionError):
        fx_pytree.tree_flatten_spec(tree, spec)


def test_fx_short_children_shallow_match_torch(pair_registered):
    Pair = pair_registered
    tree = Pair(Pair(1, 2), 3)
    spec = tp.tree_structure(tree)
    got = fx_pytree.tree_flatten_spec(tree, spec)
    cpytree.uninstall()
    assert got == fx_pytree.tree_flatten_spec(tree, spec) == [1]


# --------------------------------------------------------------------------
# repr of a deep spec built with the constructor: the depth bound was a fixed
# 20,000 levels, more than a thread's small stack holds (SIGSEGV in a 1 MB
# thread); it now follows the C stack left, like the traversals.


def test_repr_of_deep_constructed_spec_in_a_small_thread():
    # 30,000 levels would take 600 KB at 20 bytes a level: no build's frames
    # are that small, so the 1 MiB thread's stack (less the 256 KiB kept free)
    # stops repr before the engine's 20,000-level cap does.
    spec = cpytree.treespec_leaf()
    for _ in range(30_000):
        spec = cpytree.TreeSpec(list, None, [spec])
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(RecursionError, match="TreeSpec repr") as raised:
            in_thread(lambda: repr(spec), 1 << 20)
    finally:
        sys.setrecursionlimit(old)
    reached = int(str(raised.value).split("nested deeper than ")[1].split()[0])
    assert 0 < reached < 20_000, reached


# --------------------------------------------------------------------------
# Equality, hashing, pickling and dumps of deep torch specs: torch's own
# recursion raises RecursionError; mixing in engine specs must not crash.


def test_eq_hash_pickle_dumps_of_deep_torch_specs():
    spec = torch_chain(DEEP)
    engine = cpytree.tree_structure(nested_lists(10))
    assert (engine == spec) is False and (spec == engine) is False
    for op in (
        lambda: hash(spec),
        lambda: pickle.dumps(spec),
        lambda: tp.treespec_dumps(spec),
        lambda: cpytree.treespec_dumps(spec),
    ):
        with pytest.raises(RecursionError):
            op()


def test_treespec_dumps_accepts_torch_specs_like_torch():
    tree = {"a": [1, (2, 3)], "b": None}
    spec = tp.TreeSpec(
        dict,
        ["a", "b"],
        [
            tp.TreeSpec(
                list, None, [tp.treespec_leaf(), tp.TreeSpec(tuple, None, [tp.treespec_leaf()] * 2)]
            ),
            tp.treespec_leaf(),
        ],
    )
    assert cpytree.treespec_dumps(spec) == tp.treespec_dumps(spec)
    assert cpytree.treespec_dumps(spec) == cpytree.treespec_dumps(cpytree.tree_structure(tree))


# --------------------------------------------------------------------------
# Key entries handed back by torch code.


def test_key_get_with_a_key_path_mutated_by_its_entries():
    class Shrinking(tp.SequenceKey):
        def get(self, seq):
            path.clear()  # drops this very entry and the rest of the path
            return super().get(seq)

    path = [Shrinking(0), tp.SequenceKey(0)]
    got = cpytree.key_get([[5]], path)
    path = [Shrinking(0), tp.SequenceKey(0)]
    assert got == tp.key_get([[5]], path) == [5]  # torch iterates the live list


def test_key_paths_of_extreme_length():
    deep = nested_lists(DEEP, "x")
    path = [tp.SequenceKey(0)] * DEEP
    assert cpytree.key_get(deep, path) == tp.key_get(deep, path) == "x"
    path = [tp.MappingKey("k")] * DEEP
    assert cpytree.keystr(path) == tp.keystr(path)
