"""Rebuilding namedtuples: the engine builds them directly only when the class
uses collections.namedtuple's own __new__; a subclass with its own __new__ or
__init__, or a typing.NamedTuple, must still see exactly torch's calls."""

from __future__ import annotations

import collections
import typing

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
