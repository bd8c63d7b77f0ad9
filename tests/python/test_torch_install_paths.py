"""install() swaps torch's tree_flatten_with_path / tree_leaves_with_path for
the engine's `_torch_tree_*_with_path`: differential against torch's originals.

The swapped functions must give torch's very results: key entries of
torch's own classes (torch code matches them with isinstance), equal key
paths and leaves (the same objects), an equal spec; torch's errors (type and
text); and user code (is_leaf, flatten_fn, flatten_with_keys_fn) called in
torch's order: tree_flatten's pass first, then the key paths' pass. A with-path
call of cpytree's own API made from inside such user code keeps cpytree's key
classes, and torch's come back after it.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

torch = pytest.importorskip("torch")

import torch.utils._pytree as tp

import cpytree
import trees
from cpytree._torch._signature import engine_of

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp" or not hasattr(cpytree._C, "_torch_tree_flatten_with_path"),
        reason="needs the C++ engine with _torch_tree_flatten_with_path",
    ),
]

trees.torch_pytree()  # the table's custom types, registered in torch too

FLATTEN = tp.tree_flatten_with_path
LEAVES = tp.tree_leaves_with_path


@pytest.fixture
def installed():
    cpytree.install()
    try:
        yield
    finally:
        cpytree.uninstall()


def _same_pairs(got, want) -> None:
    assert len(got) == len(want)
    for (gk, gl), (wk, wl) in zip(got, want, strict=True):
        assert gl is wl
        assert gk == wk
        assert [type(k) for k in gk] == [type(k) for k in wk]


def test_swapped_and_restored(installed):
    assert engine_of(tp.tree_flatten_with_path) is cpytree._C._torch_tree_flatten_with_path
    assert engine_of(tp.tree_leaves_with_path) is cpytree._C._torch_tree_leaves_with_path
    cpytree.uninstall()
    assert tp.tree_flatten_with_path is FLATTEN and tp.tree_leaves_with_path is LEAVES


@pytest.mark.parametrize("case", trees.CASES, ids=trees.CASE_IDS)
def test_table_against_torch(case, installed):
    tree, _ = case.build()
    try:
        want_pairs, want_spec = FLATTEN(tree)
    except Exception as exc:  # noqa: BLE001 - the swapped function must raise the same
        with pytest.raises(type(exc)) as got:
            tp.tree_flatten_with_path(tree)
        assert str(got.value) == str(exc)
        return
    pairs, spec = tp.tree_flatten_with_path(tree)
    _same_pairs(pairs, want_pairs)
    assert spec == want_spec and want_spec == spec
    _same_pairs(tp.tree_leaves_with_path(tree), LEAVES(tree))
    assert [tp.keystr(k) for k, _ in pairs] == [tp.keystr(k) for k, _ in want_pairs]


def test_every_builtin_kind_and_key_class(installed):
    Point = namedtuple("Point", "x y")
    dd = defaultdict(list, {"b": [1], "a": (2,)})
    tree = {
        "list": [1, [2, None]],
        "tuple": (3, (4,)),
        "nt": Point(5, {"k": 6}),
        "od": OrderedDict([(2, 7), (1, 8)]),
        "dd": dd,
        "dq": deque([9, 10], maxlen=3),
        1.0: torch.ones(1),
    }
    pairs, spec = tp.tree_flatten_with_path(tree)
    want_pairs, want_spec = FLATTEN(tree)
    _same_pairs(pairs, want_pairs)
    assert spec == want_spec
    kinds = {type(k) for path, _ in pairs for k in path}
    assert kinds == {tp.SequenceKey, tp.MappingKey, tp.GetAttrKey}
    for path, leaf in pairs:  # torch's key_get follows torch's keys
        assert tp.key_get(tree, path) is leaf


def test_is_leaf_calls_in_torch_order(installed):
    tree = {"a": [1, (2, 3)], "b": {"c": 4}}

    def log_of(fn):
        seen = []

        def is_leaf(x):
            seen.append(repr(x))
            return isinstance(x, tuple)

        result = fn(tree, is_leaf=is_leaf)
        return seen, result

    got_log, (pairs, spec) = log_of(tp.tree_flatten_with_path)
    want_log, (want_pairs, want_spec) = log_of(FLATTEN)
    assert got_log == want_log  # flatten's pass, then the key paths' pass
    _same_pairs(pairs, want_pairs)
    assert spec == want_spec
    got_log, got = log_of(tp.tree_leaves_with_path)
    want_log, want = log_of(LEAVES)
    assert got_log == want_log
    _same_pairs(got, want)


class _Node:
    def __init__(self, a, b):
        self.a, self.b = a, b


@pytest.fixture
def node_registered():
    """_Node registered with torch; yields the log of its flatten functions' calls."""
    log = []

    def flatten(n):
        log.append(("flatten", n.a))
        return [n.a, n.b], "ctx"

    def with_keys(n):
        log.append(("keys", n.a))
        return [(tp.GetAttrKey("a"), n.a), (tp.GetAttrKey("b"), n.b)], "ctx"

    tp.register_pytree_node(_Node, flatten, lambda v, c: _Node(*v), flatten_with_keys_fn=with_keys)
    try:
        yield log
    finally:
        tp._deregister_pytree_node(_Node)


def test_custom_node_calls_in_torch_order(node_registered, installed):
    log = node_registered
    tree = [_Node(1, _Node(2, 3)), _Node(4, 5)]
    want_pairs, want_spec = FLATTEN(tree)
    want_log = list(log)
    log.clear()
    pairs, spec = tp.tree_flatten_with_path(tree)
    assert log == want_log
    _same_pairs(pairs, want_pairs)
    assert spec == want_spec


def test_missing_flatten_with_keys_is_torch_error(installed):
    class NoKeys:
        def __init__(self, v):
            self.v = v

    tp.register_pytree_node(NoKeys, lambda n: ([n.v], None), lambda v, c: NoKeys(v[0]))
    try:
        tree = [1, NoKeys(2)]
        for fn, orig in ((tp.tree_flatten_with_path, FLATTEN), (tp.tree_leaves_with_path, LEAVES)):
            with pytest.raises(ValueError) as want:
                orig(tree)
            with pytest.raises(ValueError) as got:
                fn(tree)
            assert str(got.value) == str(want.value)
    finally:
        tp._deregister_pytree_node(NoKeys)


def test_is_leaf_error_propagates(installed):
    def boom(x):
        if x == 2:
            raise KeyError("boom")
        return False

    for fn in (tp.tree_flatten_with_path, tp.tree_leaves_with_path):
        with pytest.raises(KeyError, match="boom"):
            fn([1, [2]], is_leaf=boom)


def test_nested_cpytree_call_keeps_its_own_key_classes(installed):
    inner = []

    def is_leaf(x):
        if isinstance(x, list) and x == [7]:
            inner.append(cpytree.tree_flatten_with_path({"z": x})[0])
            inner.append(cpytree.tree_leaves_with_path((x,)))
        return False

    pairs, _ = tp.tree_flatten_with_path({"a": [7]}, is_leaf=is_leaf)
    assert [type(k) for k in pairs[0][0]] == [tp.MappingKey, tp.SequenceKey]
    assert inner and all(
        type(k).__module__ == "cpytree._keys" for got in inner for path, _ in got for k in path
    )
    # And cpytree's own function, called directly while installed.
    ((path, _),) = cpytree.tree_leaves_with_path([1])
    assert type(path[0]) is cpytree.SequenceKey


def test_export_call_checks_inputs_with_the_swap(installed):
    class M(torch.nn.Module):
        def forward(self, batch):
            return batch["x"] + batch["ys"][0]

    batch = {"x": torch.ones(2), "ys": [torch.ones(2)]}
    mod = torch.export.export(M(), (batch,)).module()
    assert torch.equal(mod(batch), torch.full((2,), 2.0))
    with pytest.raises(ValueError, match="Trying to flatten user inputs"):
        mod({"x": torch.ones(2), "ys": [torch.ones(2), torch.ones(2)]})


def test_compiled_function_calling_with_path(installed):
    from torch._dynamo.utils import counters

    def f(t):
        pairs, _ = tp.tree_flatten_with_path(t)
        return sum(v for _, v in pairs) + len(tp.tree_leaves_with_path(t))

    counters.clear()
    torch._dynamo.reset()
    t = {"a": torch.ones(2), "b": [torch.ones(2)]}
    got = torch.compile(f, backend="eager", fullgraph=True)(t)
    assert torch.equal(got, f(t))
    assert not counters["graph_break"]
