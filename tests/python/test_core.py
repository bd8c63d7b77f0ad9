"""Every operation over every tree of the shared table, for both implementations.

Expectations come from the table itself (leaves are recorded as each tree is
built) and from the small independent statement of torch's node model in
``trees.py`` (``canon``, ``rebuild``, ``oracle_leaves``); ``repr`` is compared
with torch's own output when torch is importable.
"""

from __future__ import annotations

import collections
import copy
import pickle
import warnings
from collections import OrderedDict, defaultdict, deque

import pytest

import trees
from support import assert_same_objects
from trees import CASES, DC, Box, Cfg, Leaf, Pair, Point, Record, Vec, canon


@pytest.fixture(params=CASES, ids=trees.CASE_IDS)
def case(request):
    return request.param


class Mapped:
    """What the mapping functions return: remembers its arguments."""

    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = args


def mapped_ids(m):
    assert type(m) is Mapped, f"expected a mapped leaf, got {m!r}"
    return ("mapped",) + tuple(id(a) for a in m.args)


def positional(values):
    """A canon leaf function that reads the expected leaves in order."""
    it = iter(values)
    return lambda _x: ("leaf", id(next(it)))


def is_container_root(tree) -> bool:
    """A root node unflatten must build anew (tuples may be shared singletons)."""
    return type(tree) in (list, dict, OrderedDict, defaultdict, deque, Pair, Box, DC)


# --------------------------------------------------------------------------
# Flattening


def test_tree_flatten(impl, case):
    tree, expected = case.build()
    leaves, spec = impl.tree_flatten(tree)
    assert_same_objects(leaves, expected)
    assert isinstance(spec, impl.TreeSpec)
    assert spec.num_leaves == len(expected)
    assert spec.num_nodes == trees.node_count(tree)


def test_tree_leaves(impl, case):
    tree, expected = case.build()
    assert_same_objects(impl.tree_leaves(tree), expected)


def test_tree_structure(impl, case):
    tree, expected = case.build()
    spec = impl.tree_structure(tree)
    assert isinstance(spec, impl.TreeSpec)
    assert spec == impl.tree_flatten(tree)[1]
    assert spec.num_leaves == len(expected)
    assert spec.num_nodes == trees.node_count(tree)


def test_tree_iter(impl, case):
    tree, expected = case.build()
    it = impl.tree_iter(tree)
    assert iter(it) is it, "tree_iter must return an iterator (torch returns a generator)"
    assert_same_objects(list(it), expected)


def test_unflatten_round_trip(impl, case):
    tree, _expected = case.build()
    leaves, spec = impl.tree_flatten(tree)
    for rebuilt in (
        impl.tree_unflatten(leaves, spec),
        spec.unflatten(leaves),
        spec.unflatten(tuple(leaves)),
        spec.unflatten(iter(leaves)),  # any iterable: torch makes a list of it
    ):
        assert canon(rebuilt) == canon(tree)
        if is_container_root(tree):
            assert rebuilt is not tree
    # Fresh leaves land where the old ones were.
    fresh = [Leaf(-i) for i in range(len(leaves))]
    rebuilt = impl.tree_unflatten(fresh, spec)
    assert canon(rebuilt) == canon(tree, leaf=positional(fresh))
    # Flattening the rebuilt tree gives the same spec and the fresh leaves.
    leaves2, spec2 = impl.tree_flatten(rebuilt)
    assert_same_objects(leaves2, fresh)
    assert spec2 == spec


def test_tree_unflatten_accepts_swapped_arguments(impl):
    # torch allows tree_unflatten(treespec, leaves) as well.
    spec = impl.tree_structure([0, (0,)])
    a, b = Leaf(0), Leaf(1)
    out = impl.tree_unflatten(spec, [a, b])
    assert canon(out) == canon([a, (b,)])


def test_tree_is_leaf(impl, case):
    tree, _ = case.build()
    assert impl.tree_is_leaf(tree) is (not trees.is_node(tree))
    assert impl.tree_is_leaf(tree, is_leaf=lambda x: True) is True
    assert impl.tree_is_leaf(tree, is_leaf=lambda x: False) is (not trees.is_node(tree))
    seen = []
    impl.tree_is_leaf(tree, is_leaf=lambda x: seen.append(x) or False)
    assert len(seen) == 1 and seen[0] is tree


# --------------------------------------------------------------------------
# Mapping


def test_tree_map_unary(impl, case):
    tree, expected = case.build()
    calls = []

    def f(x):
        calls.append(x)
        return Mapped(x)

    out = impl.tree_map(f, tree)
    assert_same_objects(calls, expected)
    assert canon(out, leaf=mapped_ids) == canon(tree, leaf=lambda x: ("mapped", id(x)))
    if is_container_root(tree):
        assert out is not tree


def _expand(tree, factory=lambda x: [x, {"k": (x,)}]):
    """tree with every leaf x replaced by a subtree holding x; the subtrees."""
    made = []

    def sub(x):
        s = factory(x)
        made.append(s)
        return s

    return trees.rebuild(tree, sub), made


def test_tree_map_nary_prefix(impl, case):
    # `tree` must be a prefix of each of `rests`: func gets the whole subtree
    # of each rest that sits where `tree` has a leaf.
    tree, expected = case.build()
    rest1, subs1 = _expand(tree)
    rest2, subs2 = _expand(tree, lambda x: Pair(x, None))
    rest3 = trees.rebuild(tree, lambda x: x)  # same structure, same leaves
    out = impl.tree_map(Mapped, tree, rest1, rest2, rest3)
    it1, it2, it3 = iter(subs1), iter(subs2), iter(expected)
    want = canon(
        tree, leaf=lambda x: ("mapped", id(x), id(next(it1)), id(next(it2)), id(next(it3)))
    )
    assert canon(out, leaf=mapped_ids) == want


def test_tree_map_inplace(impl, case):
    tree, expected = case.build()
    before = canon(tree)
    calls = []
    ret = impl.tree_map_(lambda x: calls.append(x), tree)
    assert ret is tree
    assert_same_objects(calls, expected)
    assert canon(tree) == before  # the return values are discarded
    # n-ary
    rest, subs = _expand(tree)
    pairs = []
    ret = impl.tree_map_(lambda x, s: pairs.append((x, s)), tree, rest)
    assert ret is tree
    assert_same_objects([p[0] for p in pairs], expected)
    assert_same_objects([p[1] for p in pairs], subs)


def test_tree_map_only(impl, case):
    tree, expected = case.build()
    calls = []

    def f(x):
        calls.append(x)
        return Mapped(x)

    out = impl.tree_map_only(Leaf, f, tree)
    assert_same_objects(calls, [x for x in expected if isinstance(x, Leaf)])
    want = canon(tree, leaf=lambda x: ("mapped", id(x)) if isinstance(x, Leaf) else ("leaf", id(x)))
    got = canon(out, leaf=lambda x: mapped_ids(x) if type(x) is Mapped else ("leaf", id(x)))
    assert got == want
    # a tuple of types and a predicate work the same way
    out2 = impl.tree_map_only((type(None), str), lambda x: Mapped(x), tree)
    want2 = canon(
        tree,
        leaf=lambda x: ("mapped", id(x)) if isinstance(x, (type(None), str)) else ("leaf", id(x)),
    )
    assert (
        canon(out2, leaf=lambda x: mapped_ids(x) if type(x) is Mapped else ("leaf", id(x))) == want2
    )
    out3 = impl.tree_map_only(lambda x: x is None, lambda x: Mapped(x), tree)
    want3 = canon(tree, leaf=lambda x: ("mapped", id(x)) if x is None else ("leaf", id(x)))
    assert (
        canon(out3, leaf=lambda x: mapped_ids(x) if type(x) is Mapped else ("leaf", id(x))) == want3
    )


def test_tree_map_only_inplace(impl, case):
    tree, expected = case.build()
    calls = []
    ret = impl.tree_map_only_(Leaf, calls.append, tree)
    assert ret is tree
    assert_same_objects(calls, [x for x in expected if isinstance(x, Leaf)])
    calls.clear()
    impl.tree_map_only_(lambda x: x is None, calls.append, tree)
    assert_same_objects(calls, [x for x in expected if x is None])


# --------------------------------------------------------------------------
# Predicates


def test_tree_all_any(impl, case):
    tree, expected = case.build()
    assert impl.tree_all(lambda x: True, tree) is True
    assert impl.tree_any(lambda x: True, tree) is bool(expected)
    assert impl.tree_all(lambda x: False, tree) is (not expected)
    assert impl.tree_any(lambda x: False, tree) is False
    # The predicate sees the leaves in order and stops at the answer.
    calls = []
    last = expected[-1] if expected else None
    result = impl.tree_all(lambda x: calls.append(x) or x is not last, tree)
    if expected:
        stop = next(i for i, x in enumerate(expected) if x is last)
        assert result is False
        assert_same_objects(calls, expected[: stop + 1])
    else:
        assert result is True and calls == []
    calls = []
    result = impl.tree_any(lambda x: calls.append(x) or x is last, tree)
    if expected:
        assert result is True
        assert_same_objects(calls, expected[: stop + 1])
    else:
        assert result is False and calls == []


def test_tree_all_any_only(impl, case):
    tree, expected = case.build()
    only = [x for x in expected if isinstance(x, Leaf)]
    calls = []
    assert impl.tree_all_only(Leaf, lambda x: calls.append(x) or True, tree) is True
    assert_same_objects(calls, only)
    assert impl.tree_all_only(Leaf, lambda x: False, tree) is (not only)
    assert impl.tree_any_only(Leaf, lambda x: True, tree) is bool(only)
    calls = []
    assert impl.tree_any_only(Leaf, lambda x: calls.append(x) or False, tree) is False
    assert_same_objects(calls, only)
    nones = [x for x in expected if x is None]
    assert impl.tree_any_only(type(None), lambda x: x is None, tree) is bool(nones)
    assert impl.tree_all_only((str, bytes), lambda x: isinstance(x, (str, bytes)), tree) is True


# --------------------------------------------------------------------------
# is_leaf


def test_is_leaf_called_on_every_node_in_preorder(impl, case):
    tree, expected = case.build()
    seen = []
    leaves, spec = impl.tree_flatten(tree, is_leaf=lambda x: seen.append(x) or False)
    assert_same_objects(leaves, expected)
    assert_same_objects(seen, trees.preorder(tree))
    assert spec.num_nodes == len(seen)


IS_LEAF_PREDICATES = {
    "always": lambda x: True,
    "lists": lambda x: type(x) is list,
    "dicts": lambda x: isinstance(x, dict),
    "tuples": lambda x: isinstance(x, tuple),
    "namedtuples": lambda x: trees.is_namedtuple_class(type(x)),
    "customs": lambda x: type(x) in (Pair, Box, DC, Cfg),
    "deques": lambda x: type(x) is deque,
    "leaf-objects": lambda x: isinstance(x, Leaf),
}


@pytest.mark.parametrize("pred_name", sorted(IS_LEAF_PREDICATES))
def test_is_leaf_makes_subtree_one_leaf(impl, case, pred_name):
    pred = IS_LEAF_PREDICATES[pred_name]
    tree, _ = case.build()
    want = trees.oracle_leaves(tree, pred)
    leaves, spec = impl.tree_flatten(tree, is_leaf=pred)
    assert_same_objects(leaves, want)
    assert_same_objects(impl.tree_leaves(tree, is_leaf=pred), want)
    assert_same_objects(list(impl.tree_iter(tree, is_leaf=pred)), want)
    assert impl.tree_structure(tree, is_leaf=pred) == spec
    assert spec.num_leaves == len(want)
    # unflatten puts each leaf-subtree back where it was
    assert canon(spec.unflatten(leaves)) == canon(tree)
    assert spec.flatten_up_to(tree) == leaves
    out = impl.tree_map(Mapped, tree, is_leaf=pred)
    assert_same_objects([m.args[0] for m in impl.tree_leaves(out)], want)
    calls = []
    impl.tree_map_(calls.append, tree, is_leaf=pred)
    assert_same_objects(calls, want)
    assert impl.tree_all(lambda x: any(x is w for w in want), tree, is_leaf=pred) is True
    assert impl.tree_any(lambda x: x is tree, tree, is_leaf=pred) is (want == [tree])


def test_is_leaf_not_consulted_for_rests(impl):
    # n-ary map: is_leaf shapes `tree`; the rests are cut at its leaves.
    seen = []
    tree = [[1, 2], (3,)]
    rest = [[10, 20], (30,)]

    def is_leaf(x):
        seen.append(x)
        return type(x) is list and len(x) == 2 and x is not tree

    out = impl.tree_map(lambda a, b: (a, b), tree, rest, is_leaf=is_leaf)
    assert out == [([1, 2], [10, 20]), ((3, 30),)]
    assert all(any(s is n for n in trees.preorder(tree)) for s in seen)


# --------------------------------------------------------------------------
# TreeSpec API


def _context_form(ctx):
    """Contexts compared with key types (1, 1.0 and True are distinct)."""
    if type(ctx) is list:
        return ("list", [_context_form(c) for c in ctx])
    return (type(ctx), ctx)


def test_spec_type_and_context(impl, case):
    tree, _ = case.build()
    spec = impl.tree_structure(tree)
    if not trees.is_node(tree):
        assert spec.type is None
        assert spec.context is None
        return
    if type(tree) is Cfg:
        assert spec.type is Cfg
        assert type(spec.context).__name__ == "ConstantNode"
        assert spec.context.value is tree
        return
    want_type, want_ctx = trees.expected_type_and_context(tree)
    assert spec.type is want_type
    assert _context_form(spec.context) == _context_form(want_ctx)


def test_spec_children(impl, case):
    tree, _ = case.build()
    spec = impl.tree_structure(tree)
    if not trees.is_node(tree):
        assert spec.is_leaf() is True
        assert spec.children() == []
        assert spec.num_children == 0
        assert (spec.num_nodes, spec.num_leaves) == (1, 1)
        with pytest.raises(IndexError):
            spec.child(0)
        return
    kids = trees.children_of(tree)
    assert spec.is_leaf() is False
    assert spec.num_children == len(kids)
    children = spec.children()
    assert type(children) is list and len(children) == len(kids)
    for i, (child_spec, kid) in enumerate(zip(children, kids)):
        assert isinstance(child_spec, impl.TreeSpec)
        assert child_spec == impl.tree_structure(kid)
        assert child_spec == spec.child(i)
        assert repr(child_spec) == repr(impl.tree_structure(kid))
        assert child_spec.num_leaves == len(trees.oracle_leaves(kid))
        assert child_spec.num_nodes == trees.node_count(kid)
    assert spec.num_nodes == 1 + sum(c.num_nodes for c in children)
    assert spec.num_leaves == sum(c.num_leaves for c in children)
    if kids:
        assert spec.child(-1) == children[-1]
    with pytest.raises(IndexError):
        spec.child(len(kids))
    # children() is a copy
    children.append(children[0] if children else spec)
    children.clear()
    assert len(spec.children()) == len(kids)


def test_spec_children_specs_property(impl):
    spec = impl.tree_structure([1, (2, 3)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        kids = spec.children_specs
    assert list(kids) == spec.children()


def test_flatten_up_to(impl, case):
    tree, expected = case.build()
    spec = impl.tree_structure(tree)
    assert_same_objects(spec.flatten_up_to(tree), expected)
    rest, subs = _expand(tree)
    assert_same_objects(spec.flatten_up_to(rest), subs)
    # a separately built tree of the same structure
    other, other_leaves = case.build()
    assert_same_objects(spec.flatten_up_to(other), other_leaves)


def test_repr_matches_torch(impl, case, torch_pytree):
    tree, _ = case.build()
    assert repr(impl.tree_structure(tree)) == repr(torch_pytree.tree_structure(tree))
    assert str(impl.tree_structure(tree)) == str(torch_pytree.tree_structure(tree))


REPRS = [
    (lambda: 1, "*"),
    (lambda: None, "*"),
    (lambda: [], "TreeSpec(list, None, [])"),
    (lambda: {1: 0}, "TreeSpec(dict, [1], [*])"),
    (lambda: {1.0: 0}, "TreeSpec(dict, [1.0], [*])"),
    (lambda: {True: 0}, "TreeSpec(dict, [True], [*])"),
    (lambda: (1, [2, 3]), "TreeSpec(tuple, None, [*,\n  TreeSpec(list, None, [*,\n    *])])"),
    (
        lambda: [1, [2, 3], {"a": (4, 5), "b": 6}],
        "TreeSpec(list, None, [*,\n  TreeSpec(list, None, [*,\n    *]),\n"
        "  TreeSpec(dict, ['a', 'b'], [TreeSpec(tuple, None, [*,\n      *]),\n    *])])",
    ),
    (lambda: deque([1, 2], maxlen=3), "TreeSpec(deque, 3, [*,\n  *])"),
    (lambda: deque(), "TreeSpec(deque, None, [])"),
    (lambda: defaultdict(list, {"a": 1}), "TreeSpec(defaultdict, [<class 'list'>, ['a']], [*])"),
    (lambda: OrderedDict(b=1), "TreeSpec(OrderedDict, ['b'], [*])"),
    (lambda: Point(1, 2), "TreeSpec(namedtuple, <class 'trees.Point'>, [*,\n  *])"),
    (lambda: Pair(1, 2, tag="t"), "TreeSpec(Pair, t, [*,\n  *])"),
    (lambda: Box((1,), label="b"), "TreeSpec(Box, ['b', 1], [*])"),
    (lambda: DC(1, None), "TreeSpec(DC, [['x'], ['y']], [*])"),
    (lambda: Cfg("z"), "TreeSpec(Cfg, ConstantNode(value=Cfg(name='z', n=0)), [])"),
]


@pytest.mark.parametrize(
    "build,text", REPRS, ids=[t.split("(")[0] + str(i) for i, (_, t) in enumerate(REPRS)]
)
def test_repr_literal(impl, build, text):
    assert repr(impl.tree_structure(build())) == text
    assert str(impl.tree_structure(build())) == text


def test_hash_equals_torchs(impl, case, torch_pytree):
    # hash(spec) is torch's own value, so specs of both implementations can
    # share dicts and caches (install() mixes them).
    tree, _ = case.build()
    spec, torch_spec = impl.tree_structure(tree), torch_pytree.tree_structure(tree)
    try:
        expected = hash(torch_spec)
    except TypeError:
        pytest.skip("torch cannot hash this spec")
    assert hash(spec) == expected


def test_eq_and_hash(impl, case):
    t1, _ = case.build()
    t2, _ = case.build()
    s1, s2 = impl.tree_structure(t1), impl.tree_structure(t2)
    assert s1 == s2
    assert not (s1 != s2)  # noqa: SIM202 - tests __ne__ itself
    assert hash(s1) == hash(s2)
    wrapped = impl.tree_structure([t1])
    assert s1 != wrapped and not (s1 == wrapped)  # noqa: SIM201 - tests __eq__ itself
    assert wrapped == impl.tree_structure([t2])
    assert (s1 == 0) is False
    assert (s1 != "x") is True
    assert {s1: 1}[s2] == 1


STRUCTURALLY_DIFFERENT = [
    ([1, 2], (1, 2)),
    ([1, 2], [1, 2, 3]),
    ([1, [2]], [1, 2]),
    ({"a": 1, "b": 2}, {"b": 1, "a": 2}),  # insertion order is structure
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, OrderedDict(a=1)),
    ({"a": 1}, defaultdict(list, a=1)),
    (defaultdict(list, a=1), defaultdict(int, a=1)),
    (deque([1]), deque([1], maxlen=1)),
    (deque([1], maxlen=2), deque([1], maxlen=3)),
    (Point(1, 2), Vec(1, 2)),
    (Point(1, 2), (1, 2)),
    (Pair(1, 2, tag="a"), Pair(1, 2, tag="b")),
    (Box((1,), "a"), Box((1,), "b")),
    (DC(1, 2), DC(1, None)),
    (Cfg("a"), Cfg("b")),
    ({1: 0}, {2: 0}),
    ({1: 0}, {"1": 0}),
]


@pytest.mark.parametrize(
    "a,b", STRUCTURALLY_DIFFERENT, ids=[f"diff{i}" for i in range(len(STRUCTURALLY_DIFFERENT))]
)
def test_different_structures_unequal(impl, a, b):
    sa, sb = impl.tree_structure(a), impl.tree_structure(b)
    assert sa != sb and not (sa == sb)  # noqa: SIM201 - tests __eq__ itself
    assert sb != sa and not (sb == sa)  # noqa: SIM201


def test_equal_keys_of_different_types(impl):
    # torch: specs of {1: x}, {1.0: x}, {True: x} are == and hash alike, yet each
    # unflattens to its own key type.
    variants = [1, 1.0, True]
    for make in (dict, OrderedDict, lambda d: defaultdict(list, d)):
        specs = [impl.tree_structure(make({k: 0})) for k in variants]
        for sa in specs:
            for sb in specs:
                assert sa == sb
                assert hash(sa) == hash(sb)
        for k, spec in zip(variants, specs):
            (key,) = spec.unflatten([Leaf(0)]).keys()
            assert type(key) is type(k)
            keys = spec.context[1] if spec.type is defaultdict else spec.context
            assert [type(x) for x in keys] == [type(k)]
    # nested in one tree, also in the reverse order and under namedtuples
    for order in (variants, variants[::-1]):
        tree = [Point({k: 0}, {k: [0]}) for k in order]
        spec = impl.tree_structure(tree)
        out = spec.unflatten(list(range(spec.num_leaves)))
        for k, p in zip(order, out):
            assert [type(x) for x in p.x] == [type(k)]
            assert [type(x) for x in p.y] == [type(k)]
        # specs built one after another in either order
        for k in order:
            s = impl.tree_structure({k: 0, 2: 0})
            assert [type(x) for x in s.unflatten([0, 0])] == [type(k), int]


def test_equal_keys_specs_match_torch(impl, torch_pytree):
    for a in (1, 1.0, True):
        for b in (1, 1.0, True):
            mine = impl.tree_structure({a: 0}) == impl.tree_structure({b: 0})
            theirs = torch_pytree.tree_structure({a: 0}) == torch_pytree.tree_structure({b: 0})
            assert mine == theirs


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(impl, case, protocol):
    tree, leaves = case.build()
    spec = impl.tree_structure(tree)
    loaded = pickle.loads(pickle.dumps(spec, protocol=protocol))
    assert isinstance(loaded, impl.TreeSpec)
    assert loaded == spec and hash(loaded) == hash(spec)
    assert repr(loaded) == repr(spec)
    assert (loaded.num_nodes, loaded.num_leaves, loaded.num_children) == (
        spec.num_nodes,
        spec.num_leaves,
        spec.num_children,
    )
    assert canon(loaded.unflatten(leaves)) == canon(tree)


def test_copy_and_deepcopy(impl, case):
    tree, leaves = case.build()
    spec = impl.tree_structure(tree)
    for dup in (copy.copy(spec), copy.deepcopy(spec)):
        assert isinstance(dup, impl.TreeSpec)
        assert dup == spec and hash(dup) == hash(spec)
        assert repr(dup) == repr(spec)
        assert canon(dup.unflatten(leaves)) == canon(tree)
    # deepcopy of a tree holding the spec works too
    holder = copy.deepcopy({"spec": spec})
    assert holder["spec"] == spec


def _rebuild_spec(impl, spec):
    if spec.is_leaf():
        return spec
    return impl.TreeSpec(spec.type, spec.context, [_rebuild_spec(impl, c) for c in spec.children()])


def test_constructor_rebuilds_every_spec(impl, case):
    tree, leaves = case.build()
    spec = impl.tree_structure(tree)
    made = _rebuild_spec(impl, spec)
    assert isinstance(made, impl.TreeSpec)
    assert made == spec and spec == made and hash(made) == hash(spec)
    assert repr(made) == repr(spec)
    assert (made.num_nodes, made.num_leaves, made.num_children) == (
        spec.num_nodes,
        spec.num_leaves,
        spec.num_children,
    )
    assert canon(made.unflatten(leaves)) == canon(tree)
    assert_same_objects(made.flatten_up_to(tree), leaves)


def test_constructor_by_hand(impl):
    leaf = impl.tree_structure(0)
    s = impl.TreeSpec(list, None, [leaf, leaf])
    assert s == impl.tree_structure([1, 2])
    assert (s.num_nodes, s.num_leaves, s.num_children) == (3, 2, 2)
    assert s.unflatten(["a", "b"]) == ["a", "b"]
    d = impl.TreeSpec(dict, [1.0, "k"], [leaf, s])
    assert repr(d) == "TreeSpec(dict, [1.0, 'k'], [*,\n  TreeSpec(list, None, [*,\n    *])])"
    out = d.unflatten([1, 2, 3])
    assert out == {1.0: 1, "k": [2, 3]} and [type(k) for k in out] == [float, str]
    nt = impl.TreeSpec(collections.namedtuple, Point, [leaf, leaf])
    assert nt == impl.tree_structure(Point(0, 0))
    p = nt.unflatten([5, 6])
    assert type(p) is Point and p == (5, 6)
    dq = impl.TreeSpec(deque, 4, [leaf])
    out = dq.unflatten([9])
    assert type(out) is deque and out.maxlen == 4 and list(out) == [9]
    pair = impl.TreeSpec(Pair, "hand", [leaf, s])
    out = pair.unflatten([1, 2, 3])
    assert type(out) is Pair and out.tag == "hand" and out.a == 1 and out.b == [2, 3]
    assert pair == impl.tree_structure(Pair(0, [0, 0], tag="hand"))
    e = impl.TreeSpec(tuple, None, [])
    assert e == impl.tree_structure(()) and e.unflatten([]) == () and e.num_leaves == 0
    none_leaf = impl.TreeSpec(None, None, [])
    assert none_leaf.is_leaf() and (none_leaf.num_nodes, none_leaf.num_leaves) == (1, 1)
    assert none_leaf.unflatten(["x"]) == "x"


def test_interning(engine, case):
    # Specs of equal structure are one object (contexts compared by type and
    # value); custom nodes with unhashable contexts (Box, DC) may opt out.
    t1, _ = case.build()
    t2, _ = case.build()
    s1, s2 = engine.tree_structure(t1), engine.tree_structure(t2)
    assert s1 == s2
    if not trees.contains_type(t1, (Box, DC)):
        assert s1 is s2
        assert engine.tree_flatten(t2)[1] is s1


def test_interning_keeps_key_types_apart(engine):
    a, b, c = (engine.tree_structure({k: 0}) for k in (1, 1.0, True))
    assert a == b == c
    assert a is not b and b is not c and a is not c
    assert [type(next(iter(s.unflatten([0])))) for s in (a, b, c)] == [int, float, bool]
    assert engine.tree_structure({1.0: 0}) is b
    nested = engine.tree_structure([{1: 0}, {1.0: 0}, {True: 0}])
    assert [type(next(iter(d))) for d in nested.unflatten([0, 0, 0])] == [int, float, bool]


def test_nary_map_dict_kinds_are_compatible(impl):
    # dict, OrderedDict and defaultdict match each other, keys in any order;
    # the result follows the first tree's type and key order.
    tree = {"a": 1, "b": 2}
    for rest in (
        OrderedDict([("b", 20), ("a", 10)]),
        defaultdict(int, {"b": 20, "a": 10}),
        {"b": 20, "a": 10},
    ):
        out = impl.tree_map(lambda x, y: (x, y), tree, rest)
        assert type(out) is dict and list(out) == ["a", "b"]
        assert out == {"a": (1, 10), "b": (2, 20)}
    od = OrderedDict([("b", 1), ("a", 2)])
    out = impl.tree_map(lambda x, y: x + y, od, {"a": 10, "b": 20})
    assert type(out) is OrderedDict and list(out.items()) == [("b", 21), ("a", 12)]
    dd = defaultdict(list, {1.0: 1})
    out = impl.tree_map(lambda x, y: x + y, dd, defaultdict(int, {1: 5}))
    assert type(out) is defaultdict and out.default_factory is list
    assert [(type(k), k, v) for k, v in out.items()] == [(float, 1.0, 6)]


def test_nary_map_deque_maxlen_ignored(impl):
    out = impl.tree_map(lambda x, y: x + y, deque([1, 2], maxlen=5), deque([10, 20]))
    assert type(out) is deque and out.maxlen == 5 and list(out) == [11, 22]


def test_map_preserves_node_types(impl):
    tree = (Point([1], Record(2, 3)), deque([4], maxlen=7), defaultdict(set, {"k": 5}), trees.Nil())
    out = impl.tree_map(lambda x: None if x is None else x * 10, tree)
    assert type(out[0]) is Point and type(out[0].y) is Record and out[0].y == (20, 30, None)
    assert out[0].x == [10]
    assert out[1].maxlen == 7 and list(out[1]) == [40]
    assert out[2].default_factory is set and out[2] == {"k": 50}
    assert type(out[3]) is trees.Nil


def test_tree_map_example_from_torch_docs(impl):
    assert impl.tree_map(lambda x: x + 1, {"x": 7, "y": (42, 64)}) == {"x": 8, "y": (43, 65)}
    assert impl.tree_map(lambda x, y: [x] + y, [5, 6], [[7, 9], [1, 2]]) == [[5, 7, 9], [6, 1, 2]]
    assert impl.tree_map(lambda x: x is None, {"x": 7, "y": (42, 64), "z": None}) == {
        "x": False,
        "y": (False, False),
        "z": True,
    }


def test_registration_reaches_both_implementations():
    # cpytree.register_pytree_node is the registry of record for both.
    import cpytree
    import cpytree._reference as reference

    class Fresh:
        def __init__(self, v, c):
            self.v, self.c = v, c

    cpytree.register_pytree_node(Fresh, lambda f: ([f.v], f.c), lambda vals, c: Fresh(vals[0], c))
    for mod in (cpytree, reference):
        leaf = Leaf(0)
        leaves, spec = mod.tree_flatten([Fresh(leaf, "ctx")])
        assert_same_objects(leaves, [leaf])
        assert spec.child(0).type is Fresh and spec.child(0).context == "ctx"
        out = spec.unflatten([1])
        assert type(out[0]) is Fresh and (out[0].v, out[0].c) == (1, "ctx")
        assert mod.tree_is_leaf(Fresh(1, 2)) is False
