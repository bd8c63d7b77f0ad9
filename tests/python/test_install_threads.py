"""Threads working through torch's pytree module while another thread calls
install()/uninstall() and others register types (issue 13, item 3).

Workers call torch.utils._pytree's and torch.fx._pytree's functions as torch
code does (module attributes, looked up at each call), so each call is
answered by whichever implementation is in place at that moment: torch's or
the engine. Every answer is checked against what torch computed beforehand
(leaves by identity, specs by ==, hash and repr, unflattened and mapped trees,
fx leaves, key paths). A registrar thread registers and deregisters fresh types
through torch and through cpytree meanwhile. The switch interval is a
microsecond so that the GIL changes hands inside install() and inside
traversals. Afterwards: no crash, no error, and once uninstalled, both
registries are what they were (and torch's functions are its own again).

`make test` runs 3 seconds; CPYTREE_STRESS=1 (`make stress`) runs 30.
"""

from __future__ import annotations

import collections
import os
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree  # noqa: E402
import torch.utils._pytree as tp  # noqa: E402

import cpytree  # noqa: E402
from cpytree import _reference  # noqa: E402
from support import start_and_join  # noqa: E402

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="install() needs the C++ engine"),
]

SECONDS = float(
    os.environ.get("CPYTREE_THREAD_SECONDS", "30" if os.environ.get("CPYTREE_STRESS") else "3")
)


class Point:
    """Registered with torch before the run: both implementations know it."""

    def __init__(self, x, y):
        self.x, self.y = x, y


def _registries():
    return {
        label: (
            set(mod.SUPPORTED_NODES),
            set(mod.SUPPORTED_SERIALIZED_TYPES),
            set(mod.SERIALIZED_TYPE_TO_PYTHON_TYPE),
        )
        for label, mod in (("torch", tp), ("cpytree", _reference))
    }


def _canon(x):
    t = type(x)
    if isinstance(x, (list, tuple)):  # namedtuples too
        return (t, [_canon(v) for v in x])
    if isinstance(x, dict):
        return (t, [(k, _canon(v)) for k, v in x.items()])
    if t is Point:
        return (t, _canon(x.x), _canon(x.y))
    return ("leaf", id(x))


def test_threads_through_torch_while_installing_and_registering():
    if Point not in tp.SUPPORTED_NODES:
        tp.register_pytree_node(
            Point,
            lambda p: ([p.x, p.y], None),
            lambda v, c: Point(*v),
            serialized_type_name="test_install_threads.Point",
            flatten_with_keys_fn=lambda p: (
                [(tp.GetAttrKey("x"), p.x), (tp.GetAttrKey("y"), p.y)],
                None,
            ),
        )
    cpytree.install()  # warm up: what install() imports is loaded once
    cpytree.uninstall()
    before = _registries()
    objs = [object() for _ in range(16)]
    Pair = collections.namedtuple("Pair", "a b")
    trees = [
        [objs[0], (objs[1], {"k": objs[2]}), Point(objs[3], [objs[4]])],
        {"a": Pair(objs[5], objs[6]), "b": collections.OrderedDict(z=objs[7])},
        [[[objs[8 + i]] for i in range(4)]],
    ]
    want = []
    for tree in trees:  # torch's own answers
        leaves, spec = tp.tree_flatten(tree)
        want.append(
            {
                "leaves": leaves,
                "spec": spec,
                "hash": hash(spec),
                "repr": repr(spec),
                "map": _canon(tp.tree_map(lambda v: (v,), tree)),
                "paths": [tp.keystr(kp) for kp, _ in tp.tree_flatten_with_path(tree)[0]],
                "unflatten": _canon(tp.tree_unflatten(leaves, spec)),
            }
        )
    stop = time.monotonic() + SECONDS
    errors: list = []
    counts: collections.Counter = collections.Counter()

    def loop(name, body):
        def run():
            try:
                while time.monotonic() < stop:
                    body()
                    counts[name] += 1
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append((name, repr(error)))

        return threading.Thread(target=run, name=name)

    def flattener():
        for tree, w in zip(trees, want):
            leaves, spec = tp.tree_flatten(tree)  # engine or torch, either way right
            assert all(a is b for a, b in zip(leaves, w["leaves"])) and len(leaves) == len(
                w["leaves"]
            )
            assert spec == w["spec"] and w["spec"] == spec
            assert hash(spec) == w["hash"] and repr(spec) == w["repr"]
            got = tp.tree_unflatten(leaves, w["spec"])
            assert _canon(got) == w["unflatten"]
            got = tp.tree_unflatten(leaves, spec)
            assert _canon(got) == w["unflatten"]

    def mapper():
        for tree, w in zip(trees, want):
            assert _canon(tp.tree_map(lambda v: (v,), tree)) == w["map"]
            got = fx_pytree.tree_flatten_spec(tree, w["spec"])
            assert all(a is b for a, b in zip(got, w["leaves"])) and len(got) == len(w["leaves"])

    def pather():
        for tree, w in zip(trees, want):
            pairs, _ = tp.tree_flatten_with_path(tree)
            assert [tp.keystr(kp) for kp, _ in pairs] == w["paths"]
            assert all(tp.key_get(tree, kp) is leaf for kp, leaf in pairs)

    serial = iter(range(10**9))

    def registrar():
        i = next(serial)
        cls = type(f"Fresh{i}", (), {})
        register = cpytree.register_pytree_node if i % 2 else tp.register_pytree_node
        deregister = cpytree._deregister_pytree_node if i % 2 else tp._deregister_pytree_node
        register(
            cls,
            lambda o: ([o.v], None),
            lambda v, c: cls(),
            serialized_type_name=f"test_install_threads.Fresh{i}",
        )
        obj = cls()
        obj.v = objs[15]
        got_torch, got_engine = tp.tree_leaves([obj]), cpytree.tree_leaves([obj])
        # The registry it went to sees it; the other one does while install()
        # mirrors them (either implementation may answer tp's call).
        assert got_torch in ([objs[15]], [obj]) and got_engine in ([objs[15]], [obj])
        own = cpytree._reference.tree_leaves([obj]) if i % 2 else tp.SUPPORTED_NODES.get(cls)
        assert own == [objs[15]] if i % 2 else own is not None, ("own registry", i)
        deregister(cls)

    flips = [0]

    def installer():
        cpytree.install() if flips[0] % 2 == 0 else cpytree.uninstall()
        flips[0] += 1

    threads = [
        loop("flatten", flattener),
        loop("flatten2", flattener),
        loop("map", mapper),
        loop("paths", pather),
        loop("register", registrar),
        loop("install", installer),
    ]
    try:
        start_and_join(threads, SECONDS + 120)
    finally:
        cpytree.uninstall()
    assert not errors, errors[:5]
    assert counts["install"] >= 1 and all(counts[n] > 0 for n in ("flatten", "map", "register"))
    after = _registries()
    assert after == before, "registries changed: " + repr(
        {k: [s ^ t for s, t in zip(before[k], after[k])] for k in before}
    )
    assert tp.tree_flatten.__module__ == "torch.utils._pytree"
    assert fx_pytree.tree_flatten_spec.__module__ == "torch.fx._pytree"
    # The engine's registry agrees with the registry of record.
    probe = type("Probe", (), {})
    assert cpytree.tree_leaves([probe()])[0].__class__ is probe
    assert tp.tree_flatten(trees[0])[0] == want[0]["leaves"]
