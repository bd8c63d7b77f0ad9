"""Regressions found by the differential fuzzer (tests/fuzz/pytree_fuzz.py).

Each test is the smallest form of an input on which the engine and the
reference (or torch) disagreed; the fuzzer's own runs live in test_fuzz.py.
"""

from __future__ import annotations

import pytest

import cpytree
import support


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


@pytest.mark.parametrize(
    "first, second",
    [(0.0, -0.0), (-0.0, 0.0), (complex(0.0, 0.0), complex(0.0, -0.0)), ((1, 0.0), (1, -0.0))],
    ids=["zero-negzero", "negzero-zero", "complex", "tuple"],
)
def test_interning_keeps_signed_zero_keys_apart(impl, first, second):
    # 0.0 == -0.0 and both are floats, but they are different keys to give
    # back: interning merged {0.0: x} and {-0.0: x} into one spec, so the
    # second tree unflattened (and dumped) with the first tree's key.
    import math

    def sign(k):
        k = k[1] if isinstance(k, tuple) else k
        k = k.imag if isinstance(k, complex) else k
        return math.copysign(1.0, k)

    _a_leaves, a_spec = impl.tree_flatten({first: 1})
    b_leaves, b_spec = impl.tree_flatten({second: 1})
    (back,) = impl.tree_unflatten(b_leaves, b_spec).keys()
    assert sign(back) == sign(second)
    (ctx,) = b_spec.context
    assert sign(ctx) == sign(second)
    assert a_spec == b_spec  # torch's == still calls them equal
    if not isinstance(first, complex):  # complex keys do not serialize (as in torch)
        assert impl.treespec_dumps(b_spec) != impl.treespec_dumps(a_spec)
