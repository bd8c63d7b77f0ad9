"""Exact exception types and messages, and hostile inputs.

Structure mismatches carry torch's message plus the key-path suffix of
docs/architecture.md; torch itself must give the message without the suffix.
Hostile inputs (100,000-deep trees, cycles, mutation from user callbacks) run
in a child process (``_hostile.py``) so that a crash fails tests instead of
killing the session.
"""

from __future__ import annotations

import collections
import functools
from collections import OrderedDict, defaultdict, deque

import pytest

import _hostile
import support
import trees
from support import catch
from trees import DC, Box, Cfg, Pair, Point, Record, Vec

NT = repr(collections.namedtuple)  # torch's messages print spec.type with !r


# --------------------------------------------------------------------------
# Structure mismatches: (id, tree, other, torch's message, key path)

MISMATCHES = [
    ("root-arity", [1, 2], [1, 2, 3], "Node arity mismatch; expected 2, but got 3.", ""),
    (
        "doc-example",
        [{"a": [1, 2]}],
        [{"a": [1, 2, 3]}],
        "Node arity mismatch; expected 2, but got 3.",
        "[0]['a']",
    ),
    # Chains of one-item lists and tuples (walked in a loop by the engine).
    (
        "one-item-chain-arity",
        [[([[1]],)]],
        [[([[1, 2]],)]],
        "Node arity mismatch; expected 1, but got 2.",
        "[0][0][0][0]",
    ),
    (
        "one-item-chain-type",
        ([[[(1,)]]],),
        ([[([1],)]],),
        "Node type mismatch; expected <class 'list'>, but got <class 'tuple'>.",
        "[0][0][0]",
    ),
    (
        "one-item-chain-leaf-where-node",
        [[[[[None]]]]],
        [[[None]]],
        "Node type mismatch; expected <class 'list'>, but got <class 'NoneType'>.",
        "[0][0][0]",
    ),
    (
        "list-vs-tuple",
        [1, [2]],
        [1, (2,)],
        "Node type mismatch; expected <class 'list'>, but got <class 'tuple'>.",
        "[1]",
    ),
    (
        "leaf-where-node",
        {"a": [1]},
        {"a": 5},
        "Node type mismatch; expected <class 'list'>, but got <class 'int'>.",
        "['a']",
    ),
    (
        "none-where-node",
        ((1,), 2),
        (None, 2),
        "Node type mismatch; expected <class 'tuple'>, but got <class 'NoneType'>.",
        "[0]",
    ),
    (
        "list-subclass-is-no-list",
        [[1]],
        [trees.LeafList([1])],
        "Node type mismatch; expected <class 'list'>, but got <class 'trees.LeafList'>.",
        "[0]",
    ),
    (
        "namedtuple-field",
        Point(1, [2, 3]),
        Point(1, [2]),
        "Node arity mismatch; expected 2, but got 1.",
        ".y",
    ),
    (
        "namedtuple-other-class",
        [0, Point(1, 2)],
        [0, Vec(1, 2)],
        f"Node context mismatch for node type {NT}; "
        "expected <class 'trees.Point'>, but got <class 'trees.Vec'>.",
        "[1]",
    ),
    (
        "namedtuple-vs-tuple",
        (Point(1, 2),),
        ((1, 2),),
        f"Node type mismatch; expected {NT}, but got <class 'tuple'>.",
        "[0]",
    ),
    (
        "tuple-vs-namedtuple",
        {"p": (1, 2)},
        {"p": Point(1, 2)},
        f"Node type mismatch; expected <class 'tuple'>, but got {NT}.",
        "['p']",
    ),
    (
        "typing-namedtuple-field",
        Record(0, 1, (2,)),
        Record(0, 1, (2, 3)),
        "Node arity mismatch; expected 1, but got 2.",
        ".c",
    ),
    (
        "deque-item",
        deque([1, [2]]),
        deque([1, [2, 3]]),
        "Node arity mismatch; expected 1, but got 2.",
        "[1]",
    ),
    (
        "deque-vs-list",
        [deque([1])],
        [[1]],
        "Node type mismatch; expected <class 'collections.deque'>, but got <class 'list'>.",
        "[0]",
    ),
    (
        "dict-keys",
        {"a": 1, "b": 2},
        {"a": 1, "c": 2},
        "Node keys mismatch; missing key(s): {'b'}; extra key(s): {'c'}.",
        "",
    ),
    (
        "dict-keys-int",
        [{1: 0, 2: 0, 3: 0}],
        [{1: 0, 7: 0, 8: 0}],
        "Node keys mismatch; missing key(s): {2, 3}; extra key(s): {8, 7}.",
        "[0]",
    ),
    (
        "dict-arity",
        {"a": 1, "b": 2},
        {"a": 1},
        "Node arity mismatch; expected 2, but got 1.",
        "",
    ),
    (
        "dict-vs-list",
        {"a": {"b": 1}},
        {"a": [1]},
        "Node type mismatch; expected <class 'dict'>, but got <class 'list'>.",
        "['a']",
    ),
    (
        "ordereddict-float-key",
        OrderedDict([(1.0, [1])]),
        OrderedDict([(1.0, [1, 2])]),
        "Node arity mismatch; expected 1, but got 2.",
        "[1.0]",
    ),
    (
        "defaultdict-bool-key-vs-dict",
        defaultdict(list, {True: (1,)}),
        {True: (1, 2)},
        "Node arity mismatch; expected 1, but got 2.",
        "[True]",
    ),
    (
        "dict-int-key-matches-float-key",
        {1: [0]},
        {1.0: [0, 0]},
        "Node arity mismatch; expected 1, but got 2.",
        "[1]",
    ),
    (
        "dict-tuple-key",
        {(1, "a"): [0], None: 0},
        {None: 0, (1, "a"): 0},
        "Node type mismatch; expected <class 'list'>, but got <class 'int'>.",
        "[(1, 'a')]",
    ),
    (
        "custom-type",
        [Pair(1, 2)],
        [[1, 2]],
        "Type mismatch; expected <class 'trees.Pair'>, but got <class 'list'>.",
        "[0]",
    ),
    (
        "custom-child",
        Pair(1, [2]),
        Pair(1, [2, 3]),
        "Node arity mismatch; expected 1, but got 2.",
        "[1]",
    ),
    (
        "custom-context",
        (Pair(1, 2, tag="a"),),
        (Pair(1, 2, tag="b"),),
        "Node context mismatch for custom node type <class 'trees.Pair'>.",
        "[0]",
    ),
    (
        "custom-arity",
        Box((1, 2)),
        Box((1, 2, 3)),
        "Node arity mismatch; expected 2, but got 3.",
        "",
    ),
    (
        "dataclass-child",
        DC([1], 2),
        DC([1, 2], 2),
        "Node arity mismatch; expected 1, but got 2.",
        "[0]",
    ),
    (
        "dataclass-none-field",
        {"d": DC(1, None)},
        {"d": DC(1, 2)},
        "Node arity mismatch; expected 1, but got 2.",
        "['d']",
    ),
    (
        "constant",
        [Cfg("a")],
        [Cfg("b")],
        "Node context mismatch for custom node type <class 'trees.Cfg'>.",
        "[0]",
    ),
    (
        "deep-path",
        {"x": [Point(1, (2, {"k": [1]}))]},
        {"x": [Point(1, (2, {"k": [1, 2]}))]},
        "Node arity mismatch; expected 1, but got 2.",
        "['x'][0].y[1]['k']",
    ),
    (
        "every-entry-kind",
        OrderedDict(o=deque([0, Point(0, Pair(0, {1.0: defaultdict(int, {"d": [0]})}))])),
        OrderedDict(o=deque([0, Point(0, Pair(0, {1.0: defaultdict(int, {"d": (0,)})}))])),
        "Node type mismatch; expected <class 'list'>, but got <class 'tuple'>.",
        "['o'][1].y[1][1.0]['d']",
    ),
]
MISMATCH_IDS = [m[0] for m in MISMATCHES]


def with_path(msg: str, path: str) -> str:
    return f"{msg} (at key path tree{path})"


@pytest.fixture(params=MISMATCHES, ids=MISMATCH_IDS)
def mismatch(request):
    return request.param


def _check(exc, want):
    assert exc is not None, "no exception raised"
    assert type(exc) is ValueError, f"{type(exc).__name__}: {exc}"
    assert str(exc) == want


def test_flatten_up_to_mismatch(impl, mismatch):
    _, tree, other, msg, path = mismatch
    spec = impl.tree_structure(tree)
    _check(catch(lambda: spec.flatten_up_to(other)), with_path(msg, path))


def test_nary_tree_map_mismatch(impl, mismatch):
    _, tree, other, msg, path = mismatch
    calls = []
    f = lambda *a: calls.append(a)  # noqa: E731
    _check(catch(lambda: impl.tree_map(f, tree, other)), with_path(msg, path))
    # the mismatching rest may come after one that matches
    _check(catch(lambda: impl.tree_map(f, tree, tree, other)), with_path(msg, path))
    _check(catch(lambda: impl.tree_map_(f, tree, other)), with_path(msg, path))
    assert calls == []  # func is never called when a rest does not match


def test_mismatch_message_is_torchs(torch_pytree, mismatch):
    _, tree, other, msg, _path = mismatch
    spec = torch_pytree.tree_structure(tree)
    _check(catch(lambda: spec.flatten_up_to(other)), msg)
    _check(catch(lambda: torch_pytree.tree_map(lambda *a: a, tree, other)), msg)


def test_dict_keys_mismatch_many_keys_like_torch(impl, torch_pytree):
    # Set order in the message is whatever torch's set operations give.
    tree = {f"k{i}": 0 for i in range(6)}
    other = {f"k{i}": 0 for i in range(3)} | {f"x{i}": 0 for i in range(3)}
    want = str(catch(lambda: torch_pytree.tree_structure(tree).flatten_up_to(other)))
    _check(catch(lambda: impl.tree_structure(tree).flatten_up_to(other)), with_path(want, ""))


def test_prefix_rests_are_fine(impl):
    # A rest with more structure below the first tree's leaves is no mismatch.
    out = impl.tree_map(lambda a, b: (a, b), [1, {"k": 2}], [[9], {"k": {"deep": (3,)}}])
    assert out == [(1, [9]), {"k": (2, {"deep": (3,)})}]


# --------------------------------------------------------------------------
# Wrong number of leaves


UNFLATTEN_TREES = [
    [1, (2,)],
    {"a": 1, "b": [2, 3]},
    Point(1, Pair(2, 3)),
    (),
    5,
    defaultdict(list, {True: deque([1], maxlen=2)}),
]


@pytest.mark.parametrize(
    "tree", UNFLATTEN_TREES, ids=[f"t{i}" for i in range(len(UNFLATTEN_TREES))]
)
@pytest.mark.parametrize("delta", [-1, 1, 5])
def test_unflatten_wrong_leaf_count(impl, tree, delta):
    spec = impl.tree_structure(tree)
    n = spec.num_leaves + delta
    if n < 0:  # a spec without leaves: too many instead
        n = spec.num_leaves - delta + 1
    want = (
        f"treespec.unflatten(leaves): `leaves` has length {n} but the spec refers to a "
        f"pytree that holds {spec.num_leaves} items ({spec})."
    )
    for call in (
        lambda: spec.unflatten(list(range(n))),
        lambda: impl.tree_unflatten(list(range(n)), spec),
        lambda: spec.unflatten(tuple(range(n))),
        lambda: spec.unflatten(iter(range(n))),
    ):
        exc = catch(call)
        assert type(exc) is ValueError, exc
        assert str(exc) == want


def test_unflatten_wrong_leaf_count_like_torch(impl, torch_pytree):
    tree = {"a": [1, (2, Point(3, 4))], "b": None}
    mine = catch(lambda: impl.tree_structure(tree).unflatten([1, 2]))
    theirs = catch(lambda: torch_pytree.tree_structure(tree).unflatten([1, 2]))
    assert type(mine) is type(theirs) is ValueError
    assert str(mine) == str(theirs)


@pytest.mark.parametrize("bad", [[1, 2], None, 3, "spec"], ids=["list", "None", "int", "str"])
def test_tree_unflatten_needs_a_spec(impl, bad):
    exc = catch(lambda: impl.tree_unflatten([1, 2], bad))
    assert type(exc) is TypeError
    assert str(exc) == (
        f"Expected `treespec` to be an instance of PyTreeSpec but got item of type {type(bad)}."
    )


# --------------------------------------------------------------------------
# User code that raises: the very same exception object comes out.


class Exploding:
    """A registered node whose flatten / unflatten raise ``self.exc``."""

    def __init__(self, exc, child=0):
        self.exc = exc
        self.child = child


class Stop(BaseException):
    """Not an Exception: must propagate just the same."""


EXPLODE_ON_UNFLATTEN = []


def _exploding_flatten(e):
    raise e.exc


def _exploding_unflatten(values, context):
    raise EXPLODE_ON_UNFLATTEN[-1]


class Shapeshifter:
    """A registered node whose flatten returns ``self.result`` as is."""

    def __init__(self, result):
        self.result = result


@functools.cache
def _register_error_types(mod_name: str) -> None:
    if mod_name == "torch":
        mod = trees.torch_pytree()
    else:
        import cpytree as mod
    mod.register_pytree_node(Exploding, _exploding_flatten, _exploding_unflatten)
    mod.register_pytree_node(Shapeshifter, lambda s: s.result, lambda v, c: Shapeshifter((v, c)))


_register_error_types("cpytree")

EXC_KINDS = {
    "KeyError": lambda: KeyError("boom"),
    "custom-exception": lambda: type("CustomError", (Exception,), {})("custom"),
    "BaseException": lambda: Stop("stop"),
    "RecursionError": lambda: RecursionError("fake"),
}


def flatten_ops(impl):
    return {
        "tree_flatten": lambda t: impl.tree_flatten(t),
        "tree_leaves": lambda t: impl.tree_leaves(t),
        "tree_structure": lambda t: impl.tree_structure(t),
        "tree_iter": lambda t: list(impl.tree_iter(t)),
        "tree_map": lambda t: impl.tree_map(lambda x: x, t),
        "tree_map_nary": lambda t: impl.tree_map(lambda x, y: x, t, t),
        "tree_map_": lambda t: impl.tree_map_(lambda x: x, t),
        "tree_map_only": lambda t: impl.tree_map_only(int, lambda x: x, t),
        "tree_map_only_": lambda t: impl.tree_map_only_(int, lambda x: x, t),
        "tree_all": lambda t: impl.tree_all(lambda x: True, t),
        "tree_any": lambda t: impl.tree_any(lambda x: False, t),
        "tree_all_only": lambda t: impl.tree_all_only(int, lambda x: True, t),
        "tree_any_only": lambda t: impl.tree_any_only(int, lambda x: False, t),
        "flatten_up_to": lambda t: impl.TreeSpec(
            list,
            None,
            [impl.tree_structure(0), impl.TreeSpec(Exploding, None, [impl.tree_structure(0)])],
        ).flatten_up_to(t),
    }


OP_NAMES = list(flatten_ops(None))


@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("kind", sorted(EXC_KINDS))
def test_custom_flatten_exception_propagates_unchanged(impl, op, kind):
    exc = EXC_KINDS[kind]()
    tree = [0, Exploding(exc)]
    got = catch(lambda: flatten_ops(impl)[op](tree))
    assert got is exc


@pytest.mark.parametrize("kind", sorted(EXC_KINDS))
def test_custom_unflatten_exception_propagates_unchanged(impl, kind):
    exc = EXC_KINDS[kind]()
    EXPLODE_ON_UNFLATTEN.append(exc)
    try:
        spec = impl.TreeSpec(
            list,
            None,
            [impl.tree_structure(0), impl.TreeSpec(Exploding, None, [impl.tree_structure(0)])],
        )
        assert catch(lambda: spec.unflatten([1, 2])) is exc
        assert catch(lambda: impl.tree_unflatten([1, 2], spec)) is exc
    finally:
        EXPLODE_ON_UNFLATTEN.pop()


@pytest.mark.parametrize("kind", sorted(EXC_KINDS))
def test_callback_exceptions_propagate_unchanged(impl, kind):
    tree = {"a": [1, 2], "b": (3, Point(4, 5))}
    exc = EXC_KINDS[kind]()

    def boom(*_):
        raise exc

    def boom_late(x, *_):
        if x == 4:
            raise exc
        return x

    assert catch(lambda: impl.tree_flatten(tree, is_leaf=boom)) is exc
    assert catch(lambda: impl.tree_leaves(tree, is_leaf=boom)) is exc
    assert catch(lambda: impl.tree_structure(tree, is_leaf=boom)) is exc
    assert catch(lambda: impl.tree_is_leaf(tree, is_leaf=boom)) is exc
    assert catch(lambda: impl.tree_map(lambda x: x, tree, is_leaf=boom)) is exc
    assert catch(lambda: impl.tree_map(boom, tree)) is exc
    assert catch(lambda: impl.tree_map(boom_late, tree)) is exc
    assert catch(lambda: impl.tree_map(boom_late, tree, tree)) is exc
    assert catch(lambda: impl.tree_map_(boom_late, tree)) is exc
    assert catch(lambda: impl.tree_map_only(int, boom_late, tree)) is exc
    assert catch(lambda: impl.tree_all(boom, tree)) is exc
    assert catch(lambda: impl.tree_any(boom, tree)) is exc
    assert catch(lambda: impl.tree_all_only(int, boom, tree)) is exc
    assert catch(lambda: impl.tree_any_only(int, boom, tree)) is exc
    is_leaf_late = lambda x: boom_late(x) if type(x) is int else False  # noqa: E731
    assert catch(lambda: impl.tree_flatten(tree, is_leaf=is_leaf_late)) is exc
    assert catch(lambda: list(impl.tree_iter(tree, is_leaf=is_leaf_late))) is exc


WRONG_SHAPES = {
    "not-a-tuple": 5,
    "none": None,
    "three-items": ([1], None, "extra"),
    "one-item": ([1],),
    "children-not-iterable": (5, None),
    "children-none": (None, None),
}


@pytest.mark.parametrize("op", [o for o in OP_NAMES if o != "flatten_up_to"])
@pytest.mark.parametrize("shape", sorted(WRONG_SHAPES))
def test_custom_flatten_wrong_shape(impl, op, shape):
    tree = [0, Shapeshifter(WRONG_SHAPES[shape])]
    exc = catch(lambda: flatten_ops(impl)[op](tree))
    assert isinstance(exc, (TypeError, ValueError)), repr(exc)


@pytest.mark.parametrize("shape", sorted(WRONG_SHAPES))
def test_custom_flatten_wrong_shape_like_torch(impl, torch_pytree, shape):
    _register_error_types("torch")
    tree = [0, Shapeshifter(WRONG_SHAPES[shape])]
    theirs = catch(lambda: torch_pytree.tree_flatten(tree))
    mine = catch(lambda: impl.tree_flatten(tree))
    assert isinstance(theirs, (TypeError, ValueError))
    assert isinstance(mine, (TypeError, ValueError))


def test_custom_flatten_tuple_children_work(impl):
    tree = [Shapeshifter(((1, 2), "ctx"))]
    leaves, spec = impl.tree_flatten(tree)
    assert leaves == [1, 2] and spec.num_leaves == 2
    out = spec.unflatten(["a", "b"])
    assert type(out[0]) is Shapeshifter and out[0].result == (["a", "b"], "ctx")


# --------------------------------------------------------------------------
# Dict keys with hostile __eq__ / __hash__: torch never compares keys while
# flattening, so neither may we (interning must cope).


class RaisingEqKey:
    def __init__(self, h):
        self.h = h

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        if self is other:
            return True
        raise RuntimeError("__eq__ called")


class AlwaysEqKey:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return True


def test_keys_whose_eq_raises(impl):
    k1, k2 = RaisingEqKey(7), RaisingEqKey(7)  # same hash, __eq__ raises
    s1 = impl.tree_structure({k1: 0})
    s2 = impl.tree_structure({k2: 0})
    s1b = impl.tree_structure({k1: 1})
    assert s1 == s1b  # identical key objects: no __eq__ call needed
    (got1,) = s1.unflatten([0])
    (got2,) = s2.unflatten([0])
    assert got1 is k1 and got2 is k2
    leaves, spec = impl.tree_flatten([{k1: 1}, {k2: 2}, {k1: 3}])
    assert leaves == [1, 2, 3]
    out = spec.unflatten(leaves)
    assert [next(iter(d)) for d in out] == [k1, k2, k1] and next(iter(out[1])) is k2


def test_keys_equal_to_everything_keep_their_type(impl):
    k = AlwaysEqKey()
    s_int = impl.tree_structure({1: 0})
    s_odd = impl.tree_structure({k: 0})
    (got,) = s_odd.unflatten([0])
    assert got is k
    (got,) = s_int.unflatten([0])
    assert type(got) is int
    (got,) = impl.tree_structure({1: 0}).unflatten([0])
    assert type(got) is int


def test_register_twice_is_an_error():
    import cpytree

    class Fresh:
        pass

    cpytree.register_pytree_node(Fresh, lambda x: ([], None), lambda v, c: Fresh())
    exc = catch(
        lambda: cpytree.register_pytree_node(Fresh, lambda x: ([], None), lambda v, c: Fresh())
    )
    assert type(exc) is ValueError
    assert str(exc) == f"{Fresh} is already registered as pytree node."


# --------------------------------------------------------------------------
# Hostile inputs, in a child process.

DEEP_SHAPES = list(_hostile.SHAPES) + ["mixed"]
CYCLIC_SHAPES = ["list", "dict", "ordereddict", "deque", "custom", "mixed"]
TREE_OPS = list(_hostile.tree_ops(None, None))
SPEC_OPS = [
    "unflatten",
    "tree_unflatten",
    "repr",
    "eq",
    "hash",
    "flatten_up_to_deep_tree",
]
MUTATION_OPS = list(_hostile.mutation_cases(None))

IMPL_PARAMS = pytest.mark.parametrize(
    "impl_name", ["cpytree", "cpytree._reference"], ids=["cpytree", "reference"]
)


@functools.cache
def hostile(impl_name: str, scenario: str) -> dict:
    return support.run_isolated(impl_name, scenario)


def _record(impl_name: str, scenario: str, op: str) -> dict:
    import cpytree

    res = hostile(impl_name, scenario)
    proc = res["__process__"]
    header = proc["header"]
    assert header, f"child did not start: {proc['stderr']}"
    assert header["cpytree_file"] == cpytree.__file__, "child imported another cpytree"
    assert header["engine"] == support.engine_active()
    if op not in res:
        pytest.fail(
            f"child exited with {proc['returncode']} while running {proc['running']!r} "
            f"(before reaching {op!r}); stderr tail:\n{proc['stderr']}"
        )
    return res[op]


@IMPL_PARAMS
@pytest.mark.parametrize("shape", DEEP_SHAPES)
@pytest.mark.parametrize("op", TREE_OPS)
def test_deep_tree_raises_recursion_error(impl_name, shape, op):
    rec = _record(impl_name, f"deep:{shape}", op)
    assert rec["exc"] == "RecursionError", rec


@IMPL_PARAMS
@pytest.mark.parametrize("shape", CYCLIC_SHAPES)
@pytest.mark.parametrize("op", TREE_OPS)
def test_cyclic_tree_raises_recursion_error(impl_name, shape, op):
    rec = _record(impl_name, f"cyclic:{shape}", op)
    assert rec["exc"] == "RecursionError", rec


@IMPL_PARAMS
@pytest.mark.parametrize("shape", DEEP_SHAPES)
def test_deep_spec_can_be_built(impl_name, shape):
    rec = _record(impl_name, f"deep:{shape}", "TreeSpec_build_deep")
    assert rec["exc"] is None and rec["ok"] is True, rec


@IMPL_PARAMS
@pytest.mark.parametrize("shape", DEEP_SHAPES)
@pytest.mark.parametrize("op", SPEC_OPS)
def test_deep_spec_ops_raise_recursion_error_or_work(impl_name, shape, op):
    # A 5,000-deep spec (torch: RecursionError for each of these); an engine
    # that handles it without recursion must give the right answer instead.
    rec = _record(impl_name, f"deep:{shape}", op)
    assert rec["exc"] == "RecursionError" or (rec["exc"] is None and rec["ok"] is True), rec


@IMPL_PARAMS
def test_flatten_up_to_cyclic_tree(impl_name):
    rec = _record(impl_name, "deep:list", "flatten_up_to_cyclic")
    assert rec["exc"] == "RecursionError" or (rec["exc"] is None and rec["ok"] is True), rec


@IMPL_PARAMS
@pytest.mark.parametrize("op", MUTATION_OPS)
def test_mutation_during_traversal(impl_name, op):
    rec = _record(impl_name, "mutation", op)
    assert rec["exc"] is None and rec["ok"] is True, rec


def test_hostile_expectations_hold_for_torch(torch_pytree):
    # The expectations above are torch's behaviour.
    res = support.run_isolated("torch", "deep:mixed,cyclic:mixed,mutation")
    assert res["__process__"]["returncode"] == 0, res["__process__"]["stderr"]
    ops = [op for op in res if op != "__process__"]
    assert len(ops) == len(TREE_OPS) * 2 + len(SPEC_OPS) + 1 + len(MUTATION_OPS)
    for op in ops:
        rec = res[op]
        if op.startswith("mutation|") or op.endswith("|TreeSpec_build_deep"):
            assert rec["exc"] is None and rec["ok"] is True, rec
        else:
            assert rec["exc"] == "RecursionError", rec
