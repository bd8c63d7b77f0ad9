"""Registry churn: registering and deregistering types in a loop keeps memory
bounded (issue 13, item 4).

The engine's registry used to retire every replaced map and registration
forever (about 870 bytes per round, 3.3 KB with a fresh class per round, the
class itself kept alive). Now a writer frees what no map holds any more (on
free-threaded builds once no lookup in another thread can still read it: a
grace period, src/base/grace.h), and traversals pin a registration they use
across user code. Checked here, on every build: a
deregistered class is collectable, 100,000 rounds leave RSS flat (a bound far
below the old growth, not a timing), and user code that deregisters the very
type being flattened, mapped or unflattened cannot pull it from under the
traversal.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import pytest

import cpytree
import support

ROUNDS = 100_000

pytestmark = pytest.mark.skipif(not support.engine_active(), reason="the C++ engine's registry")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def churn_round(i: int, cls: type | None = None) -> None:
    cls = cls or type(f"Churn{i}", (), {})
    cpytree.register_pytree_node(
        cls,
        lambda o: ([1], None),
        lambda c, _: cls(),
        serialized_type_name=f"test_registry_churn.Churn{i}",
    )
    leaves, spec = cpytree.tree_flatten([cls()])
    assert leaves == [1]
    cpytree._deregister_pytree_node(cls)
    del spec


def gone_class_collected() -> bool:
    """Registers, flattens and deregisters a class; whether it is then collected."""
    cls = type("Gone", (), {})
    cpytree.register_pytree_node(
        cls,
        lambda o: ([], None),
        lambda c, _: None,
        serialized_type_name="test_registry_churn.Gone",
    )
    cpytree.tree_flatten([cls()])
    cpytree._deregister_pytree_node(cls)
    ref = weakref.ref(cls)
    del cls
    gc.collect()
    return ref() is None


def churn_growth_mib(fresh: bool) -> float:
    """RSS growth over ROUNDS churn rounds (after a warm-up)."""
    same = type("Same", (), {})
    for i in range(2000):  # warm up: allocator pools, caches
        churn_round(i, None if fresh else same)
    gc.collect()
    before = rss_mib()
    for i in range(ROUNDS):
        churn_round(i, None if fresh else same)
        if fresh and support.FREE_THREADED and i % 1000 == 0:
            # 3.13t's collector lets the dead classes (cycles) pile up before
            # it runs: +20 MiB per 100,000 classes with no cpytree call at
            # all, +0.3 MiB collecting every 1,000 (measured). Collected here,
            # the growth left is what the registry keeps.
            gc.collect()
    gc.collect()
    return rss_mib() - before


def in_fresh_interpreter(expr: str) -> str:
    """The repr of `expr` (this module's names in scope) evaluated in a new
    interpreter that has started no thread. CPython 3.13t makes every class
    (and top-level function) created after the process's first thread
    started immortal (gh-117783, Python/pystate.c): a class can be collected
    there only in a process that never had a second thread, and this suite
    runs thread tests first. Same code on every build."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); from test_registry_churn import *; print(repr({expr}))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_deregistered_class_is_collectable():
    assert in_fresh_interpreter("gone_class_collected()") == "True"


@pytest.mark.skipif(
    bool(os.environ.get("CPYTREE_SANITIZED")),
    reason="a sanitizer's allocator (ASan's quarantine, TSan's shadow of every address "
    "touched) moves RSS: it is measured on the normal build",
)
@pytest.mark.skipif(not support.HAS_PROCFS, reason=f"the test {support.NO_PROCFS}")
@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-class", "same-class"])
def test_churn_keeps_memory_flat(fresh):
    grown = float(in_fresh_interpreter(f"churn_growth_mib({fresh})"))
    # Before the fix: +83 MiB (same class) and +314 MiB (fresh classes).
    assert grown < 8, f"RSS grew {grown:.1f} MiB over {ROUNDS} rounds"


class SelfRemoving:
    def __init__(self, *kids):
        self.kids = list(kids)


def _self_removing_flatten(obj):
    cpytree._deregister_pytree_node(SelfRemoving)  # mid-traversal
    gc.collect()
    return obj.kids, None


def _register_self_removing():
    cpytree.register_pytree_node(
        SelfRemoving,
        _self_removing_flatten,
        lambda kids, _: SelfRemoving(*kids),
        serialized_type_name="test_registry_churn.SelfRemoving",
    )


@pytest.mark.parametrize("op", ["flatten", "map", "with_path", "unflatten", "flatten_up_to"])
def test_deregistering_the_type_being_traversed(op):
    _register_self_removing()
    tree = [SelfRemoving(1, 2)]
    try:
        if op == "flatten":
            leaves, spec = cpytree.tree_flatten(tree)
            assert leaves == [1, 2] and spec.num_leaves == 2
        elif op == "map":
            out = cpytree.tree_map(lambda x: x + 1, tree)
            assert out[0].kids == [2, 3]
        elif op == "with_path":
            with pytest.raises(ValueError, match="flatten_with_keys_fn"):
                cpytree.tree_flatten_with_path(tree)
        elif op == "unflatten":
            spec = cpytree.tree_structure(tree)  # deregisters
            _register_self_removing()
            unflatten_calls = []

            def unflatten(kids, _):
                cpytree._deregister_pytree_node(SelfRemoving)
                gc.collect()
                unflatten_calls.append(kids)
                return SelfRemoving(*kids)

            cpytree._deregister_pytree_node(SelfRemoving)
            cpytree.register_pytree_node(
                SelfRemoving,
                _self_removing_flatten,
                unflatten,
                serialized_type_name="test_registry_churn.SelfRemoving",
            )
            out = cpytree.tree_unflatten([5, 6], spec)
            assert out[0].kids == [5, 6] and unflatten_calls == [[5, 6]]
        else:
            spec = cpytree.tree_structure(tree)
            _register_self_removing()
            assert spec.flatten_up_to(tree) == [1, 2]
    finally:
        if SelfRemoving in cpytree.SUPPORTED_NODES:
            cpytree._deregister_pytree_node(SelfRemoving)
