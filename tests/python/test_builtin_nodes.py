"""How the engine rebuilds and orders the builtin node types, as torch does.

* Namedtuples: the engine builds them directly only when the class uses
  collections.namedtuple's own __new__; a subclass with its own __new__ or
  __init__, or a typing.NamedTuple, must still see exactly torch's calls.
* OrderedDict order survives reordering: the engine reads CPython's node list
  directly (with the dict's own order as a lockstep shortcut), so every way
  the two orders can part must still give the OrderedDict's order.
"""

from __future__ import annotations

import collections
import typing

import pytest

# --------------------------------------------------------------------------
# Rebuilding namedtuples
# --------------------------------------------------------------------------

P = collections.namedtuple("P", "x y", defaults=[0])


class Q(typing.NamedTuple):
    a: int
    b: list = []  # noqa: RUF012 - a NamedTuple field default


class Scaled(P):
    def __new__(cls, x, y):  # every construction scales x
        return super().__new__(cls, x * 100, y)


class Counted(P):
    inits = 0

    def __init__(self, *args):
        type(self).inits += 1


def _roundtrips(impl, tree):
    leaves, spec = impl.tree_flatten(tree)
    return impl.tree_unflatten(leaves, spec), impl.tree_map(lambda v: v, tree)


def test_plain_namedtuples(impl):
    for tree in (P(1, 2), Q(1, [2]), P(x=(), y={})):
        rebuilt, mapped = _roundtrips(impl, tree)
        assert type(rebuilt) is type(tree) and rebuilt == tree
        assert type(mapped) is type(tree) and mapped == tree


def test_custom_new_runs_on_every_rebuild(impl):
    tree = Scaled(1, 2)  # x == 100
    rebuilt, mapped = _roundtrips(impl, tree)
    assert rebuilt == (10000, 2) and mapped == (10000, 2)
    assert type(rebuilt) is Scaled


def test_custom_init_runs_on_every_rebuild(impl):
    tree = Counted(1, 2)
    before = Counted.inits
    rebuilt, mapped = _roundtrips(impl, tree)
    assert Counted.inits == before + 2
    assert rebuilt == (1, 2) and type(mapped) is Counted


def test_matches_torch(impl, torch_pytree):
    for tree in (Scaled(3, 4), Counted(5, 6), Q(7, [8])):
        ours = impl.tree_map(lambda v: v, tree)
        theirs = torch_pytree.tree_map(lambda v: v, tree)
        assert type(ours) is type(theirs) and ours == theirs


# --------------------------------------------------------------------------
# OrderedDict order
# --------------------------------------------------------------------------


def _reordered():
    od = collections.OrderedDict((k, i) for i, k in enumerate("abcdef"))
    od.move_to_end("a")  # a to the back
    od.move_to_end("e", last=False)  # e to the front
    del od["c"]
    od["c"] = 99  # re-inserted: at the back
    od["b"] = [1, 2]  # overwritten in place: keeps its position
    return od


def test_flatten_follows_ordereddict_order(impl):
    od = _reordered()
    leaves, spec = impl.tree_flatten(od)
    assert list(od) == ["e", "b", "d", "f", "a", "c"]
    assert spec.context == list(od)
    assert leaves == [4, 1, 2, 3, 5, 0, 99]
    assert impl.tree_leaves(od) == leaves
    rebuilt = impl.tree_unflatten(leaves, spec)
    assert type(rebuilt) is collections.OrderedDict and list(rebuilt.items()) == list(od.items())


def test_map_and_flatten_up_to_follow_ordereddict_order(impl):
    od = _reordered()
    mapped = impl.tree_map(lambda x: x * 10, od)
    assert list(mapped.items()) == [
        ("e", 40),
        ("b", [10, 20]),
        ("d", 30),
        ("f", 50),
        ("a", 0),
        ("c", 990),
    ]
    spec = impl.tree_structure(od)
    assert spec.flatten_up_to(od) == [4, 1, 2, 3, 5, 0, 99]
    prefix = impl.tree_structure(collections.OrderedDict((k, 0) for k in od))
    assert prefix.flatten_up_to(od) == [4, [1, 2], 3, 5, 0, 99]


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_many_keys_and_empty(impl, n):
    od = collections.OrderedDict((f"k{i}", i) for i in range(n))
    if n > 2:
        od.move_to_end("k1")
    leaves, spec = impl.tree_flatten(od)
    assert leaves == list(od.values())
    assert spec.context == list(od)


# --------------------------------------------------------------------------
# Dict keys equal but not identical (a tree built apart from its spec)
# --------------------------------------------------------------------------

# Each width of str CPython stores (1-, 2- and 4-byte), and the empty str.
KEYS = ["k0", "clé", "€uro", "x😀", ""]


def _fresh(key: str) -> str:
    """An equal str that is another object (when longer than one char)."""
    return key.encode().decode()


def _tree_and_twin():
    tree = {k: [i, None] for i, k in enumerate(KEYS)}
    twin = {_fresh(k): [i, None] for i, k in enumerate(KEYS)}
    assert [a is b for a, b in zip(tree, twin)] == [False, False, False, False, True]
    return tree, twin


def test_equal_keys_of_other_objects_match(impl):
    tree, twin = _tree_and_twin()
    spec = impl.tree_structure(tree)
    assert spec.flatten_up_to(twin) == [0, None, 1, None, 2, None, 3, None, 4, None]
    prefix = impl.tree_structure(dict.fromkeys(KEYS, 0))
    assert prefix.flatten_up_to(twin) == [[0, None], [1, None], [2, None], [3, None], [4, None]]
    assert impl.tree_structure(twin) == spec
    assert impl.tree_map(lambda a, b: (a, b), tree, twin)["€uro"] == [(2, 2), (None, None)]


def test_equal_keys_of_other_objects_match_strict(engine):
    tree, twin = _tree_and_twin()
    assert engine.tree_structure(tree).flatten(twin) == [
        0,
        None,
        1,
        None,
        2,
        None,
        3,
        None,
        4,
        None,
    ]


# (spec's key, tree's key): same length and width (1-, 2-, 4-byte; differing
# in the last char only), a prefix, longer, another width, a NUL.
OTHER_KEYS = [
    ("k0", "k1"),
    ("€uro", "€urx"),
    ("x😀😀", "x😀😁"),
    ("k0", "k"),
    ("k0", "k00"),
    ("k0", "€0"),
    ("k0", "😀0"),
    ("k0", "\x00k"),
]


@pytest.mark.parametrize(("key", "other"), OTHER_KEYS)
def test_unequal_keys_are_a_mismatch(impl, key, other):
    spec = impl.tree_structure({key: 1, "b": 2})
    with pytest.raises(ValueError) as up_to:
        spec.flatten_up_to({other: 1, "b": 2})
    assert str(up_to.value) == (
        f"Node keys mismatch; missing key(s): {{{key!r}}}; extra key(s): {{{other!r}}}. "
        "(at key path tree)"
    )


@pytest.mark.parametrize(("key", "other"), OTHER_KEYS)
def test_unequal_keys_are_a_mismatch_strict(engine, key, other):
    spec = engine.tree_structure({key: 1, "b": 2})
    with pytest.raises(ValueError) as strict:
        spec.flatten({other: 1, "b": 2})
    assert str(strict.value) == (
        f"Node keys mismatch; expected [{key!r}, 'b'], but got [{other!r}, 'b']. (at key path tree)"
    )


def test_str_subclass_key_runs_its_eq(impl):
    calls = []

    class Key(str):
        __hash__ = str.__hash__

        def __eq__(self, other):
            calls.append(other)
            return str.__eq__(self, other)

    spec = impl.tree_structure({"a": 1, "b": 2})
    assert spec.flatten_up_to({Key("a"): 10, "b": 20}) == [10, 20]
    assert calls  # the subclass's __eq__ decided the match
