"""OrderedDict order survives reordering: the engine reads CPython's node list
directly (with the dict's own order as a lockstep shortcut), so every way the
two orders can part must still give the OrderedDict's order."""

from __future__ import annotations

import collections

import pytest


def _reordered():
    od = collections.OrderedDict((k, i) for i, k in enumerate("abcdef"))
    od.move_to_end("a")                 # a to the back
    od.move_to_end("e", last=False)     # e to the front
    del od["c"]
    od["c"] = 99                        # re-inserted: at the back
    od["b"] = [1, 2]                    # overwritten in place: keeps its position
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
    assert list(mapped.items()) == [("e", 40), ("b", [10, 20]), ("d", 30), ("f", 50),
                                    ("a", 0), ("c", 990)]
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
