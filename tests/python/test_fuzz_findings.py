"""Regressions found by the differential fuzzer (tests/fuzz/pytree_fuzz.py).

Each test is the smallest form of an input on which the engine and the
reference (or torch) disagreed; the fuzzer's own runs live in test_fuzz.py.
"""

from __future__ import annotations

import pytest

import support

import cpytree


class Const:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Const and other.v == self.v

    def __hash__(self):
        return hash(self.v)


class Empty:
    """A custom node that has no children."""


_REGISTERED = []


def _register():
    if not _REGISTERED:
        cpytree.register_constant(Const)
        cpytree.register_pytree_node(Empty, lambda e: ([], "ctx"), lambda v, c: Empty())
        _REGISTERED.append(True)


@pytest.fixture
def engine_c():
    if not support.engine_active():
        pytest.skip("the C++ engine is not active")
    _register()
    return cpytree._C


@pytest.mark.parametrize("make", [lambda: Const(3), lambda: Empty()], ids=["constant", "childless"])
def test_tree_flatten_spec_childless_custom_node(engine_c, make):
    # torch.fx: flat, real_spec = tree_flatten(x); a childless custom node's
    # real spec is TreeSpec(<type>, <context>, []), not a leaf. The engine
    # took any one-node traversal for a leaf and raised "Real spec * of
    # object ... is different from expected spec".
    tree = make()
    spec = cpytree.tree_structure(tree)
    assert engine_c.tree_flatten_spec(tree, spec) == []
    assert engine_c.tree_flatten_spec([tree, 1], cpytree.tree_structure([tree, 1])) == [1]
