"""Threads: 8 threads flattening, mapping, comparing specs and registering
new types at once, for a bounded time.

Every result is checked against the one computed single-threaded beforehand
(leaves by identity, the interned spec object itself, map results, repr and
hash of specs). The switch interval is set to a microsecond so that the GIL
changes hands inside traversals, and user code in the trees (a custom node's
flatten, dict keys' __eq__ during interning, is_leaf) sleeps(0) to hand it over
at the worst moments: mid-lookup in the intern table, between a registry
lookup and its use, while another thread publishes a new registry map.

`make test` runs 3 seconds; `make stress` (CPYTREE_STRESS=1) runs 30.
"""

from __future__ import annotations

import collections
import os
import threading
import time

import cpytree
from support import Serial, start_and_join

SECONDS = float(
    os.environ.get("CPYTREE_THREAD_SECONDS", "30" if os.environ.get("CPYTREE_STRESS") else "3")
)
THREADS = 8


class Slow:
    """A registered node whose flatten hands the GIL to other threads."""

    def __init__(self, a, b):
        self.a, self.b = a, b


def _slow_flatten(s):
    time.sleep(0)
    return [s.a, s.b], "slow"


class YieldKey:
    """A dict key whose __eq__ (run by interning) hands the GIL over."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        time.sleep(0)
        return type(other) is YieldKey and other.v == self.v

    def __hash__(self):
        return hash(self.v)

    def __repr__(self):
        return f"YieldKey({self.v})"


_REGISTERED = []


def _register():
    if not _REGISTERED:
        cpytree.register_pytree_node(Slow, _slow_flatten, lambda v, c: Slow(*v))
        _REGISTERED.append(True)


def make_trees():
    leaves = [object() for _ in range(64)]
    keys = [YieldKey(i) for i in range(4)]
    Point = collections.namedtuple("Point", "x y")
    trees = [
        [leaves[0], (leaves[1], leaves[2]), {"a": leaves[3], "b": [leaves[4]]}],
        {keys[0]: leaves[5], keys[1]: [leaves[6], leaves[7]]},
        Slow(leaves[8], [Slow(leaves[9], leaves[10]), {"k": leaves[11]}]),
        collections.OrderedDict(z=leaves[12], a=collections.deque([leaves[13], leaves[14]])),
        Point(leaves[15], collections.defaultdict(list, {keys[2]: leaves[16]})),
        [[[leaves[17 + i]] for i in range(10)]],
        {i: leaves[30 + i] for i in range(20)},
    ]
    return trees


def canon(x):
    t = type(x)
    if t in (list, tuple):
        return (t, [canon(v) for v in x])
    if isinstance(x, dict):
        return (t, [(k, canon(v)) for k, v in x.items()])
    if t is collections.deque:
        return (t, [canon(v) for v in x])
    if isinstance(x, tuple):  # namedtuple
        return (t, [canon(v) for v in x])
    if t is Slow:
        return (t, canon(x.a), canon(x.b))
    return ("leaf", id(x))


def expected_results(trees):
    out = []
    for t in trees:
        leaves, spec = cpytree.tree_flatten(t)
        out.append(
            {
                "leaves": leaves,
                "spec": spec,
                "repr": repr(spec),
                "hash": hash(spec),
                "map": canon(cpytree.tree_map(lambda x: (x,), t)),
                "nary": canon(cpytree.tree_map(lambda x, y: y, t, t)),
                "paths": [cpytree.keystr(kp) for kp, _ in cpytree.tree_flatten_with_path(t)[0]]
                if type(t) is not Slow and not any(type(x) is Slow for x in t)
                else None,
            }
        )
    return out


def run_threads(workers, seconds):
    stop = time.monotonic() + seconds
    errors: list = []
    counts = collections.Counter()
    start = threading.Barrier(len(workers))

    def wrap(name, fn):
        def run():
            start.wait()
            try:
                while time.monotonic() < stop:
                    fn()
                    counts[name] += 1
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append((name, repr(exc)))

        return run

    start_and_join([threading.Thread(target=wrap(n, f), name=n) for n, f in workers], seconds + 60)
    assert not errors, errors[:5]
    return counts


def test_threads_flatten_map_compare_register():
    _register()
    trees = make_trees()
    want = expected_results(trees)
    table_before = (
        cpytree._C._intern_table_size() if hasattr(cpytree, "_C") and cpytree._C else None
    )

    def flattener():
        for t, w in zip(trees, want):
            leaves, spec = cpytree.tree_flatten(t)
            assert spec is w["spec"] or spec == w["spec"], (spec, w["spec"])
            assert len(leaves) == len(w["leaves"]) and all(
                a is b for a, b in zip(leaves, w["leaves"])
            )
            assert canon(cpytree.tree_unflatten(leaves, spec)) == canon(t)

    def mapper():
        for t, w in zip(trees, want):
            assert canon(cpytree.tree_map(lambda x: (x,), t)) == w["map"]
            assert canon(cpytree.tree_map(lambda x, y: y, t, t)) == w["nary"]

    def comparer():
        for t, w in zip(trees, want):
            spec = cpytree.tree_structure(t)
            assert spec == w["spec"] and hash(spec) == w["hash"] and repr(spec) == w["repr"]
            assert [c == d for c, d in zip(spec.children(), w["spec"].children())] == [
                True
            ] * spec.num_children
            assert spec.flatten_up_to(t) == [x for x in spec.flatten_up_to(t)]

    def pather():
        for t, w in zip(trees, want):
            if w["paths"] is not None:
                got = [cpytree.keystr(kp) for kp, _ in cpytree.tree_flatten_with_path(t)[0]]
                assert got == w["paths"]

    serial = Serial()

    def registrar():
        # A brand-new type per round: register, flatten, unregister.
        i = next(serial)
        cls = type(f"Fresh{i}", (), {})
        # A serialized name of its own: torch's deregistration deletes the
        # entry of that name (two unnamed types share one and the second
        # deregistration raises KeyError, threads or not).
        cpytree.register_pytree_node(
            cls,
            lambda o: ([o.v, o.w], i),
            lambda v, c: cls(),
            serialized_type_name=f"test_threads.Fresh{i}",
        )
        obj = cls()
        obj.v, obj.w = trees[0], i
        leaves, spec = cpytree.tree_flatten([obj, trees[1]])
        assert leaves[-1] is want[1]["leaves"][-1] and leaves[len(want[0]["leaves"])] == i
        assert spec.child(1) == want[1]["spec"]
        cpytree._deregister_pytree_node(cls)
        assert cpytree.tree_leaves(obj) == [obj]

    def churner():
        # Distinct structures from fresh keys: intern-table inserts and
        # removals while the others look specs up.
        i = next(serial)
        spec = cpytree.tree_structure({YieldKey(i + 1): 1, YieldKey(-i - 1): [2]})
        assert spec.num_leaves == 2
        cpytree.tree_leaves(trees, is_leaf=lambda x: time.sleep(0) or False)

    workers = [
        ("flatten", flattener),
        ("map", mapper),
        ("compare", comparer),
        ("paths", pather),
        ("register", registrar),
        ("register2", registrar),
        ("churn", churner),
        ("flatten2", flattener),
    ]
    assert len(workers) == THREADS
    counts = run_threads(workers, SECONDS)
    assert all(counts[n] > 0 for n, _ in workers), counts
    print(f"thread rounds in {SECONDS:.0f} s: {dict(counts)}")
    if table_before is not None:
        import gc

        gc.collect()
        # Only the specs the checks above still hold (want) may remain.
        assert cpytree._C._intern_table_size() <= table_before + 64
