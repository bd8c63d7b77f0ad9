"""Leak checks: every operation many times, memory and refcounts stay flat.

For each operation (success and error paths), after a warm-up:

* ``N`` iterations (100,000 against the C++ engine) with
  ``sys.getallocatedblocks()`` (every live pymalloc block: one leaked object
  per call shows as +N), the process RSS (C++ allocations that Python never
  sees) and ``sys.getrefcount`` of the leaves, dict keys and contexts
  involved (exactly unchanged);
* then ``N_TRACED`` more iterations under ``tracemalloc``: traced memory may
  grow by at most ``TRACED_SLACK`` bytes.

The pure-Python reference cannot leak C references; it runs a tenth of the
iterations to keep the suite quick (override both with
``CPYTREE_LEAK_ITERATIONS``).
"""

from __future__ import annotations

import gc
import itertools
import os
import resource
import sys
import tracemalloc
from collections import OrderedDict, defaultdict, deque

import pytest

import support
from trees import DC, Cfg, Leaf, Pair, Point

WARMUP = 2_000
TRACED_SLACK = 16 * 1024  # bytes of traced growth over N_TRACED calls
BLOCKS_SLACK = 500  # pymalloc blocks (freelists, caches settling)
RSS_SLACK = 2 * 1024 * 1024  # bytes; a 20-byte C++ leak per call is 2 MB


def iterations(impl) -> tuple[int, int]:
    env = os.environ.get("CPYTREE_LEAK_ITERATIONS")
    if env:
        n = int(env)
    elif impl.__name__ == "cpytree" and support.engine_active():
        n = 100_000
    else:
        n = 10_000
    return n, max(n // 10, 1_000)


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:  # not Linux: the RSS check is skipped
        return 0


def make_list():
    return []


# Objects whose reference counts must not drift: leaves, dict keys, contexts.
KEY = "".join(["k", "e", "y"])  # a key object only these tests hold
FKEY = float("1.5")
TAG = "".join(["t", "a", "g"])
CFG = Cfg("leaky", 3)
LEAVES = [Leaf(i) for i in range(6)]


def make_tree():
    a, b, c, d, e, f = LEAVES
    return {
        KEY: [a, (b, None)],
        "nt": Point(c, Pair(d, 7, tag=TAG)),
        FKEY: deque([e], maxlen=3),
        "dd": defaultdict(make_list, {True: CFG}),
        "od": OrderedDict(x=DC(f, None)),
    }


TREE = make_tree()
WATCHED = [*LEAVES, KEY, FKEY, TAG, CFG, make_list, Point, Pair, DC, Cfg, TREE, TREE[KEY]]


class Boom(Exception):
    pass


class Raiser:
    """A registered node whose flatten always raises."""


def _raiser_flatten(_):
    raise Boom("flatten failed")


_REGISTERED = []


def _register_raiser():
    if not _REGISTERED:
        import cpytree

        cpytree.register_pytree_node(Raiser, _raiser_flatten, lambda v, c: Raiser())
        _REGISTERED.append(True)


def ops(impl):
    """name -> zero-argument callable running one operation once."""
    _register_raiser()
    tree = TREE
    leaves, spec = impl.tree_flatten(tree)
    rest = impl.tree_map(lambda x: [x, {"s": x}], tree)  # tree is a prefix of rest
    bad = make_tree()
    bad[KEY] = [LEAVES[0], (LEAVES[1], None, LEAVES[2])]  # arity mismatch below KEY
    bad_keys = make_tree()
    bad_keys["nt"] = Point(LEAVES[2], Pair(LEAVES[3], 7, tag="other"))  # context mismatch
    raising_tree = [LEAVES[0], {KEY: Raiser()}]
    ident = lambda x: x  # noqa: E731
    counter = itertools.count(1000)

    def swallow(exc_type, fn):
        def run():
            try:
                fn()
            except exc_type:
                pass
            else:  # pragma: no cover - the test below would be meaningless
                raise AssertionError("expected an exception")

        return run

    def raise_midway(x):
        if x is LEAVES[3]:
            raise Boom("func failed")
        return x

    return {
        "tree_flatten": lambda: impl.tree_flatten(tree),
        "tree_flatten_is_leaf": lambda: impl.tree_flatten(tree, is_leaf=lambda x: type(x) is tuple),
        "tree_leaves": lambda: impl.tree_leaves(tree),
        "tree_structure": lambda: impl.tree_structure(tree),
        "tree_iter": lambda: list(impl.tree_iter(tree)),
        "tree_unflatten": lambda: impl.tree_unflatten(leaves, spec),
        "spec.unflatten": lambda: spec.unflatten(leaves),
        "tree_map": lambda: impl.tree_map(ident, tree),
        "tree_map_nary": lambda: impl.tree_map(lambda x, y: y, tree, rest),
        "tree_map_": lambda: impl.tree_map_(ident, tree),
        "tree_map_only": lambda: impl.tree_map_only(Leaf, ident, tree),
        "tree_all_any": lambda: (impl.tree_all(bool, tree), impl.tree_any(bool, tree)),
        "flatten_up_to": lambda: spec.flatten_up_to(rest),
        "spec_eq_hash_repr": lambda: (spec == impl.tree_structure(tree), hash(spec), repr(spec)),
        "spec_children": lambda: (spec.children(), spec.child(0), spec.context, spec.num_leaves),
        "distinct_structures": lambda: impl.tree_structure({next(counter): 0, KEY: [0]}),
        "error:flatten_up_to": swallow(ValueError, lambda: spec.flatten_up_to(bad)),
        "error:flatten_up_to_context": swallow(ValueError, lambda: spec.flatten_up_to(bad_keys)),
        "error:tree_map_nary": swallow(ValueError, lambda: impl.tree_map(lambda x, y: x, tree, bad)),
        "error:unflatten_count": swallow(ValueError, lambda: spec.unflatten(leaves[:-1])),
        "error:tree_unflatten_type": swallow(TypeError, lambda: impl.tree_unflatten(leaves, leaves)),
        "error:custom_flatten": swallow(Boom, lambda: impl.tree_flatten(raising_tree)),
        "error:custom_flatten_map": swallow(Boom, lambda: impl.tree_map(ident, raising_tree)),
        "error:func_midway": swallow(Boom, lambda: impl.tree_map(raise_midway, tree)),
        "error:is_leaf": swallow(
            Boom, lambda: impl.tree_leaves(tree, is_leaf=lambda x: raise_midway(x) is None)
        ),
    }


OP_NAMES = list(ops(__import__("cpytree._reference", fromlist=["_"])))


@pytest.mark.parametrize("op", OP_NAMES)
def test_no_leak(impl, op):
    fn = ops(impl)[op]
    n, n_traced = iterations(impl)
    for _ in range(WARMUP):
        fn()
    gc.collect()

    refs_before = [sys.getrefcount(o) for o in WATCHED]
    blocks_before = sys.getallocatedblocks()
    rss_before = rss_bytes()
    for _ in range(n):
        fn()
    gc.collect()
    blocks_after = sys.getallocatedblocks()
    rss_after = rss_bytes()
    refs_after = [sys.getrefcount(o) for o in WATCHED]

    tracemalloc.start()
    try:
        fn()
        gc.collect()
        traced_before, _ = tracemalloc.get_traced_memory()
        for _ in range(n_traced):
            fn()
        gc.collect()
        traced_after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    drift = {repr(o)[:40]: a - b for o, a, b in zip(WATCHED, refs_after, refs_before) if a != b}
    assert not drift, f"refcounts changed over {n} calls: {drift}"
    assert blocks_after - blocks_before < BLOCKS_SLACK, (
        f"{blocks_after - blocks_before} more allocated blocks after {n} calls"
    )
    if rss_before:
        assert rss_after - rss_before < RSS_SLACK, (
            f"RSS grew by {(rss_after - rss_before) / 1e6:.1f} MB over {n} calls"
        )
    assert traced_after - traced_before < TRACED_SLACK, (
        f"traced memory grew by {traced_after - traced_before} bytes over {n_traced} calls"
    )


def test_leak_checks_can_fail(impl):
    # The harness itself: a deliberate leak of one reference per call must be
    # seen by the refcount and block checks.
    sink = []
    n, _ = iterations(impl)
    leaf = LEAVES[0]
    before_ref = sys.getrefcount(leaf)
    before_blocks = sys.getallocatedblocks()
    for _ in range(n):
        sink.append((leaf,))
    grew_refs = sys.getrefcount(leaf) - before_ref
    grew_blocks = sys.getallocatedblocks() - before_blocks
    sink.clear()
    assert grew_refs == n
    assert grew_blocks >= BLOCKS_SLACK
