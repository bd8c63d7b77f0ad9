"""User code that mutates what the engine is reading, from inside a callback.

Each case is a small program in which a user callback (``__hash__``/``__eq__``
of a context item or dict key, ``__str__`` of a key entry, ``__iter__`` of a
flatten_with_keys pair, ``__getitem__`` in tree_flatten_spec) clears the very
list or dict the engine is iterating, then churns the allocator so that a stale
pointer reads garbage. The engine must succeed or raise a Python exception;
it must never read freed memory. Every case here crashed (SIGSEGV) or read
freed memory before its fix; they run in a subprocess so that a regression
fails one test instead of killing the session (and under `make sanitize`,
ASan reports the read even when it does not crash).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import support

PRELUDE = """
import cpytree
import cpytree._C as _C

def churn():
    junk = [object() for _ in range(3000)] + [[None] * 8 for _ in range(500)]
    del junk

def attempt(fn):
    try:
        fn()
    except Exception as exc:  # a Python exception is a fine outcome
        print("raised", type(exc).__name__)
"""

CASES = {
    # intern.cc ItemHash: a list context whose item's __hash__ clears the list.
    "intern_hash_list_context_shrinks": """
        class N:
            def __init__(self, ctx):
                self.ctx = ctx
        cpytree.register_pytree_node(N, lambda n: ([1], n.ctx), lambda v, c: N(c))
        ctx = []
        class H:
            def __hash__(self):
                ctx.clear(); churn(); return 1
            def __eq__(self, other):
                return self is other
        ctx.extend([H()] + [object() for _ in range(50)])
        attempt(lambda: cpytree.tree_structure(N(ctx)))
    """,
    # intern.cc ItemHash: a dict context whose key's __hash__ frees the values.
    "intern_hash_dict_context_cleared": """
        class N:
            def __init__(self, ctx):
                self.ctx = ctx
        cpytree.register_pytree_node(N, lambda n: ([1], n.ctx), lambda v, c: N(c))
        d = {}
        class K:
            armed = False
            def __hash__(self):
                if K.armed:
                    d.clear(); churn()
                return 1
            def __eq__(self, other):
                return self is other
        class V:
            def __hash__(self):
                return 7
        d[K()] = V()
        for i in range(20):
            d[i] = V()
        K.armed = True
        attempt(lambda: cpytree.tree_structure(N(d)))
    """,
    # spec_model.cc AddKeys: a dict key's __hash__ clears the key list.
    "treespec_ctor_key_hash_clears_keys": """
        keys = []
        class K:
            def __hash__(self):
                keys.clear(); churn(); return 1
            def __eq__(self, other):
                return self is other
        keys.extend([K()] + [object() for _ in range(30)])
        leaf = cpytree.tree_structure(0)
        attempt(lambda: cpytree.TreeSpec(dict, keys, [leaf] * 31))
    """,
    # spec_model.cc MakeSpec: a dict key's __hash__ swaps the children list
    # (checked to hold TreeSpecs before the keys were hashed) for non-specs.
    "treespec_ctor_key_hash_replaces_children": """
        leaf = cpytree.tree_structure(0)
        children = [leaf] * 3
        class K:
            def __hash__(self):
                children[:] = [object(), object(), object()]; churn(); return 1
            def __eq__(self, other):
                return self is other
        attempt(lambda: cpytree.TreeSpec(dict, [K(), 2, 3], children))
    """,
    # spec_walk.cc strict custom node: the context's __eq__ clears the
    # children list the node's flatten_fn returned.
    "spec_flatten_context_eq_clears_children": """
        class N:
            def __init__(self, kids, ctx):
                self.kids, self.ctx = kids, ctx
        cpytree.register_pytree_node(
            N, lambda n: (n.kids, n.ctx), lambda v, c: N(list(v), c))
        class C:
            target = None
            def __eq__(self, other):
                if C.target is not None:
                    C.target.clear(); churn()
                return True
            __hash__ = None
        spec = cpytree.tree_structure(N([object() for _ in range(20)], C()))
        kids = [object() for _ in range(20)]
        C.target = kids
        attempt(lambda: spec.flatten(N(kids, C())))
    """,
    # key_entries.cc keystr: a key entry's __str__ clears the key path list.
    "keystr_str_clears_path": """
        kp = []
        class E:
            def __str__(self):
                kp.clear(); churn(); return "x"
        kp.extend([E()] + [cpytree.SequenceKey(i) for i in range(30)])
        attempt(lambda: cpytree.keystr(kp))
    """,
    # key_entries.cc CallFlattenWithKeys: unpacking a (key, child) pair clears the
    # list flatten_with_keys_fn returned.
    "flatten_with_keys_pair_clears_list": """
        kc = []
        class P:
            def __iter__(self):
                kc.clear(); churn()
                return iter((cpytree.SequenceKey(0), 1))
        class N:
            pass
        cpytree.register_pytree_node(
            N, lambda n: ([1] * 20, None), lambda v, c: N(),
            flatten_with_keys_fn=lambda n: (kc, None))
        kc.extend([P()] + [(cpytree.SequenceKey(i), 1) for i in range(19)])
        attempt(lambda: cpytree.tree_flatten_with_path(N()))
    """,
    # spec_walk_fx.cc FxShortChildren: visiting a child clears the list the
    # fx flatten function returned (the child was borrowed from it).
    "fx_short_children_list_cleared": """
        class N:
            def __init__(self, kids):
                self.kids = kids
        cpytree.register_pytree_node(N, lambda n: (n.kids, None), lambda v, c: N(list(v)))
        spec = cpytree.tree_structure(N([{"a": 1}, {"a": 2}, 3]))
        seq = []
        class D(dict):
            def __getitem__(self, k):
                seq.clear(); churn(); return 5
        def fn(node, spec):
            seq[:] = [D(a=1), D(a=2)]
            return seq
        attempt(lambda: _C.tree_flatten_spec(N([1, 2, 3]), spec, {N: fn}))
    """,
    # registry.cc namedtuple cache: while PlainNamedTupleNew(A) ran user code
    # (a metaclass __getattribute__), another class B took A's cache slot;
    # A's answer ("build the tuple directly") was then stored as B's, and B's
    # unflatten skipped B.__init__.
    "namedtuple_cache_slot_taken_during_lookup": """
        import collections
        armed = []
        class Meta(type):
            def __getattribute__(cls, name):
                if name == "__new__" and armed:
                    armed[0]()
                return super().__getattribute__(name)
        class A(collections.namedtuple("A0", "x"), metaclass=Meta):
            pass
        keep = []
        for i in range(5000):
            class B(collections.namedtuple("B0", "x")):
                def __init__(self, *args):
                    self.tag = "init ran"
            if (id(B) >> 4) & 63 == (id(A) >> 4) & 63:  # the same cache slot
                break
            keep.append(B)
        spec_b = cpytree.tree_structure(B(2))
        spec_a = cpytree.tree_structure(A(1))  # A holds the slot
        armed.append(lambda: cpytree.tree_flatten(B(3)))  # B takes it mid-lookup
        cpytree.tree_unflatten([1], spec_a)
        armed.clear()
        out = cpytree.tree_unflatten([5], spec_b)
        assert getattr(out, "tag", None) == "init ran", "B.__init__ did not run"
    """,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_callback_mutation_is_safe(case):
    if not support.engine_active():
        pytest.skip("the C++ engine is not active")
    code = PRELUDE + textwrap.dedent(CASES[case]) + "\nprint('END')\n"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, (
        f"{case}: exit status {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    assert proc.stdout.rstrip().endswith("END"), proc.stdout
