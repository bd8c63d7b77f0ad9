"""cpytree honours torch.utils._pytree's registrations without install().

A library that registers its types with torch only (thirdparty_models.py,
as transformers registers its model outputs) must get torch's results from
`import cpytree as pytree`, whichever of torch, cpytree and the library is
imported first, and for registrations made later. Rules checked here (see
python/cpytree/_torch/_follow.py): cpytree's own registration of a type wins
over torch's; cpytree's registrations stay out of torch unless install() is
active.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import given, strategies as st

torch = pytest.importorskip("torch")
import torch.utils._pytree as tp  # noqa: E402

import cpytree  # noqa: E402
import thirdparty_models as m  # noqa: E402  (registers with torch only)
from cpytree._torch_link import _FOLLOWER  # noqa: E402

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))

# Every answer of cpytree on thirdparty_models.sample() next to torch's.
_COMPARE = r"""
import json, sys
import torch.utils._pytree as tp
import cpytree, thirdparty_models as m

tree = m.sample()
leaves, spec = cpytree.tree_flatten(tree)
t_leaves, t_spec = tp.tree_flatten(tree)
saved = m.sample(constant=False)
text = cpytree.treespec_dumps(cpytree.tree_structure(saved))
rebuilt = cpytree.tree_unflatten(tp.tree_leaves(saved), cpytree.treespec_loads(text))
doubled = cpytree.tree_map(lambda x: x * 2, tree)
print(json.dumps({
    "leaves": leaves == t_leaves,
    "num_leaves": spec.num_leaves,
    "repr": repr(spec) == repr(t_spec),
    "dumps": text == tp.treespec_dumps(tp.tree_structure(saved)),
    "roundtrip": tp.tree_flatten(rebuilt) == tp.tree_flatten(saved),
    "types": [type(rebuilt[k]).__name__ for k in sorted(rebuilt)],
    "map": tp.tree_leaves(doubled) == [x * 2 for x in t_leaves],
    "paths": [cpytree.keystr(p) for p, _ in cpytree.tree_flatten_with_path(tree)[0]]
             == [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]],
    "constant": cpytree.is_constant_class(m.Config),
    "installed": cpytree.is_installed(),
}))
"""


def _run(prelude: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])}
    env["CPYTREE_INSTALL"] = "0"  # no install() at import, nor by torch's entry point (autoload)
    out = subprocess.run(
        [sys.executable, "-c", prelude + _COMPARE],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "prelude",
    [
        "import cpytree\nimport thirdparty_models\n",  # cpytree before torch
        "import thirdparty_models\nimport cpytree\n",  # torch and the library first
        "import torch\nimport cpytree\nimport thirdparty_models\n",  # the library last
    ],
    ids=["cpytree-first", "library-first", "torch-first"],
)
def test_a_library_registering_with_torch_only_gets_torch_results(prelude):
    report = _run(prelude)
    assert report == {
        "leaves": True,
        "num_leaves": 10,
        "repr": True,
        "dumps": True,
        "roundtrip": True,
        "types": ["Cache", "ModelOutput", "Pair", "Scaled"],
        "map": True,
        "paths": True,
        "constant": True,
        "installed": False,
    }


def test_the_follower_is_attached_in_this_process():
    assert _FOLLOWER is not None and _FOLLOWER.following()
    for cls in (torch.Size, torch.return_types.max, torch.fx.immutable_collections.immutable_dict):
        assert cls in _FOLLOWER.mirrored()
        assert cpytree.SUPPORTED_NODES[cls].flatten_fn is tp.SUPPORTED_NODES[cls].flatten_fn
    result = torch.max(torch.tensor([[1.0, 5.0]]), dim=1)
    assert cpytree.tree_leaves({"r": result}) == [result.values, result.indices]
    assert cpytree.tree_leaves(torch.Size([2, 3])) == [2, 3]


# --------------------------------------------------------------------------
# Registrations made later, in this process


class _Fresh:
    """Base of the per-test node classes (a new class per test: registries are global)."""

    def __init__(self, *children):
        self.children = list(children)

    def __eq__(self, other):
        return type(other) is type(self) and other.children == self.children


def _fresh(name: str) -> type:
    return type(name, (_Fresh,), {})


def _flatten(obj):
    return list(obj.children), None


def _unflatten_into(cls):
    return lambda values, context: cls(*values)


@pytest.fixture
def fresh():
    """A new class, deregistered from both registries at the end of the test."""
    made = []

    def make(name="Node"):
        cls = _fresh(name)
        made.append(cls)
        return cls

    yield make
    for cls in made:
        for mod in (tp, cpytree):
            if cls in mod.SUPPORTED_NODES:
                # types registered without a serialized name share one key, which
                # the first deregistration deletes (torch's KeyError otherwise)
                mod.SERIALIZED_TYPE_TO_PYTHON_TYPE.setdefault(
                    mod.NO_SERIALIZED_TYPE_NAME_FOUND, cls
                )
                mod._deregister_pytree_node(cls)
    for cls in made:
        assert cls not in cpytree.SUPPORTED_NODES and cls not in tp.SUPPORTED_NODES


def test_later_torch_registration_and_deregistration_are_followed(fresh):
    cls = fresh()
    obj = cls(1, [2])
    assert cpytree.tree_leaves(obj) == [obj]
    tp.register_pytree_node(cls, _flatten, _unflatten_into(cls), serialized_type_name="t.Node")
    assert cpytree.tree_leaves(obj) == [1, 2]
    assert cpytree.SUPPORTED_SERIALIZED_TYPES[cls].serialized_type_name == "t.Node"
    assert cpytree.SERIALIZED_TYPE_TO_PYTHON_TYPE["t.Node"] is cls
    spec = cpytree.tree_structure(obj)
    assert cpytree.treespec_dumps(spec) == tp.treespec_dumps(tp.tree_structure(obj))
    assert cpytree.tree_unflatten([3, 4], spec) == cls(3, [4])
    tp._deregister_pytree_node(cls)
    assert cls not in cpytree.SUPPORTED_NODES
    assert "t.Node" not in cpytree.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert cpytree.tree_leaves(obj) == [obj]


def test_torch_overwrite_is_followed_without_a_second_warning(fresh):
    cls = fresh()
    tp.register_pytree_node(cls, _flatten, _unflatten_into(cls))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp._private_register_pytree_node(
            cls, lambda o: (list(reversed(o.children)), None), _unflatten_into(cls)
        )
    assert [str(w.message) for w in caught] == [
        f"{cls} is already registered as pytree node. Overwriting the previous registration."
    ]
    assert cpytree.tree_leaves(cls(1, 2)) == [2, 1]


def test_torch_register_constant_and_dataclass_are_followed():
    @dataclasses.dataclass(frozen=True)
    class Const:
        v: int

    @dataclasses.dataclass
    class Data:
        a: object
        b: object = None

    tp.register_constant(Const)
    tp.register_dataclass(Data, serialized_type_name="t.Data")
    try:
        assert cpytree.is_constant_class(Const)
        leaves, spec = cpytree.tree_flatten([Const(1), Data(2)])
        assert leaves == [2]
        assert cpytree.tree_unflatten([5], spec) == [Const(1), Data(5)]
        assert spec == cpytree.tree_structure([Const(1), Data(3)])
        assert spec != cpytree.tree_structure([Const(2), Data(3)])
        assert hash(spec) == hash(cpytree.tree_structure([Const(1), Data(3)]))
    finally:
        tp._deregister_pytree_node(Const)
        tp._deregister_pytree_node(Data)
    assert not cpytree.is_constant_class(Const)
    assert Data not in cpytree.SUPPORTED_NODES


def test_cpytree_own_registration_wins_whichever_came_first(fresh):
    first, second = fresh("CpytreeFirst"), fresh("TorchFirst")
    mine = (lambda o: ([o.children[0]], None), lambda values, context: None)
    cpytree.register_pytree_node(first, *mine)
    tp.register_pytree_node(first, _flatten, _unflatten_into(first))
    assert cpytree.tree_leaves(first(1, 2)) == [1]  # cpytree's
    assert tp.tree_leaves(first(1, 2)) == [1, 2]  # torch's
    tp.register_pytree_node(second, _flatten, _unflatten_into(second))
    with pytest.raises(ValueError, match="is already registered as pytree node"):
        cpytree.register_pytree_node(second, *mine)  # as in one registry
    with pytest.warns(UserWarning, match="Overwriting the previous registration"):
        cpytree._private_register_pytree_node(second, *mine)
    with pytest.warns(UserWarning, match="Overwriting the previous registration"):
        tp._private_register_pytree_node(second, _flatten, _unflatten_into(second))
    assert cpytree.tree_leaves(second(1, 2)) == [1]  # still cpytree's own
    cpytree._deregister_pytree_node(second)
    assert cpytree.tree_leaves(second(1, 2)) == [1, 2]  # torch's shows through again


def test_cpytree_registrations_stay_out_of_torch(fresh):
    cls = fresh()
    cpytree.register_pytree_node(cls, _flatten, _unflatten_into(cls))
    assert cls not in tp.SUPPORTED_NODES
    assert tp.tree_leaves(cls(1, 2)) == [cls(1, 2)]
    assert cpytree.tree_leaves(cls(1, 2)) == [1, 2]


def test_install_joins_both_ways_and_uninstall_returns_to_following(fresh):
    from support import installed

    torch_only, cpytree_only = fresh("TorchOnly"), fresh("CpytreeOnly")
    tp.register_pytree_node(torch_only, _flatten, _unflatten_into(torch_only))
    cpytree.register_pytree_node(cpytree_only, _flatten, _unflatten_into(cpytree_only))
    with installed():
        assert cpytree_only in tp.SUPPORTED_NODES
        late = fresh("Late")
        tp.register_pytree_node(late, _flatten, _unflatten_into(late))
        assert tp.tree_leaves([torch_only(1), cpytree_only(2), late(3)]) == [1, 2, 3]
    assert cpytree_only not in tp.SUPPORTED_NODES
    assert cpytree.tree_leaves([torch_only(1), cpytree_only(2), late(3)]) == [1, 2, 3]
    assert torch_only in _FOLLOWER.mirrored() and late in _FOLLOWER.mirrored()
    assert cpytree_only not in _FOLLOWER.mirrored()


# --------------------------------------------------------------------------
# Differential: random trees of the library's types, cpytree and the reference vs torch


def _trees(constants: bool):
    leaves = st.integers(-5, 5) | st.none()
    keys = st.sampled_from(["a", "b", "c", 1, 2.5])

    def extend(children):
        nodes = [
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(keys, children, max_size=3),
            st.dictionaries(st.sampled_from(["x", "y", "z"]), children, max_size=3).map(
                lambda d: m.ModelOutput(**d)
            ),
            st.builds(m.Cache, children, children, st.none() | children),
            st.builds(m.Pair, children, children),
            st.builds(m.Scaled, children, st.sampled_from([0.5, 2.0]), st.sampled_from(["m", "é"])),
        ]
        if constants:
            nodes.append(st.builds(m.Config, st.sampled_from(["a", "b"])))
        return st.one_of(nodes)

    return st.recursive(leaves, extend, max_leaves=12)


@pytest.mark.parametrize("impl_name", ["cpytree", "cpytree._reference"])
@given(tree=_trees(constants=True))
def test_flatten_map_and_paths_equal_torch(impl_name, tree):
    impl = importlib.import_module(impl_name)  # cpytree._reference loads on first use
    leaves, spec = impl.tree_flatten(tree)
    t_leaves, t_spec = tp.tree_flatten(tree)
    assert leaves == t_leaves
    assert repr(spec) == repr(t_spec)
    assert tp.tree_flatten(impl.tree_unflatten(leaves, spec)) == (t_leaves, t_spec)
    assert tp.tree_leaves(impl.tree_map(lambda x: (x,), tree)) == tp.tree_leaves(
        tp.tree_map(lambda x: (x,), tree)
    )
    assert [impl.keystr(p) for p, _ in impl.tree_flatten_with_path(tree)[0]] == [
        tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]
    ]


@pytest.mark.parametrize("impl_name", ["cpytree", "cpytree._reference"])
@given(tree=_trees(constants=False))
def test_dumps_byte_identical_and_loads_equal_torch(impl_name, tree):
    impl = importlib.import_module(impl_name)  # cpytree._reference loads on first use
    text = tp.treespec_dumps(tp.tree_structure(tree))
    assert impl.treespec_dumps(impl.tree_structure(tree)) == text
    loaded = impl.treespec_loads(text)
    assert impl.treespec_dumps(loaded) == text
    leaves = tp.tree_leaves(tree)
    assert tp.tree_flatten(impl.tree_unflatten(leaves, loaded)) == tp.tree_flatten(tree)


# install() shares torch's registry lock with cpytree's registration code, so
# registrations through both sides at once cannot deadlock (they took the two
# locks in opposite orders before).
_LOCK_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    import cpytree, cpytree._reference as R
    import torch.utils._pytree as tp
    cpytree.install()
    class A: pass
    class B: pass
    def slow_hook(cls, node_def):
        if cls is B:
            time.sleep(0.5)  # holds cpytree's registry lock: hooks run under it
    R._REGISTRATION_HOOKS.insert(0, slow_hook)
    fl = lambda x: ([], None)
    ufl = lambda v, c: None
    tb = threading.Thread(target=lambda: cpytree.register_pytree_node(B, fl, ufl), daemon=True)
    tb.start(); time.sleep(0.1)
    ta = threading.Thread(target=lambda: tp.register_pytree_node(A, fl, ufl), daemon=True)
    ta.start()
    ta.join(20); tb.join(20)
    print("deadlocked" if ta.is_alive() or tb.is_alive() else "ok")
    sys.stdout.flush()
    os._exit(0)
    """
)


def test_concurrent_registrations_through_both_sides_do_not_deadlock():
    out = subprocess.run(
        [sys.executable, "-c", _LOCK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.stdout.strip().splitlines()[-1] == "ok", out.stderr


def test_deregistering_through_cpytree_while_installed_reaches_torch(fresh):
    # Two wrappers of torch's registration function (follow, then install's)
    # once undid this: the follower copied torch's copy back into cpytree.
    from support import installed

    own, torch_only = fresh("Own"), fresh("TorchOnly")
    # (Serialized names: deregistering unnamed types goes through one shared key.)
    tp.register_pytree_node(
        torch_only, _flatten, _unflatten_into(torch_only), serialized_type_name="t.TorchOnly"
    )
    with installed():
        cpytree.register_pytree_node(
            own, _flatten, _unflatten_into(own), serialized_type_name="t.Own"
        )
        assert own in tp.SUPPORTED_NODES
        cpytree._deregister_pytree_node(own)
        assert own not in tp.SUPPORTED_NODES and own not in cpytree.SUPPORTED_NODES
        cpytree._deregister_pytree_node(torch_only)
        assert torch_only not in tp.SUPPORTED_NODES and torch_only not in cpytree.SUPPORTED_NODES
    # uninstall(): torch gets its registration back, and cpytree follows it again
    assert torch_only in tp.SUPPORTED_NODES and torch_only in _FOLLOWER.mirrored()
    assert cpytree.tree_leaves(torch_only(1, 2)) == [1, 2]
    assert own not in tp.SUPPORTED_NODES and own not in cpytree.SUPPORTED_NODES


def test_install_copies_what_torch_changed_behind_its_functions_since_attach():
    # join() skips the copies attach() made whose four table entries are still
    # those it left; a change written straight into torch's tables (no wrapped
    # function ran, so nothing was copied) is not one of them.
    code = textwrap.dedent(
        """
        import json
        import torch.utils._pytree as tp
        import cpytree
        from cpytree._torch_link import _FOLLOWER

        copies = _FOLLOWER.sync._copies
        batch = [c for c, copy in copies.items() if copy.seen is not None
                 and c not in tp.CONSTANT_NODES]
        changed, flagged, untouched = batch[:3]
        old = tp.SUPPORTED_NODES[changed]

        def other_flatten(x):
            return old.flatten_fn(x)

        tp.SUPPORTED_NODES[changed] = old._replace(flatten_fn=other_flatten)
        tp.CONSTANT_NODES.add(flagged)
        kept = cpytree.SUPPORTED_NODES[untouched]
        before = [cpytree.SUPPORTED_NODES[changed].flatten_fn is other_flatten,
                  cpytree.is_constant_class(flagged)]
        cpytree.install()
        print(json.dumps({
            "batch": len(batch) > 50,
            "before": before,
            "after": [cpytree.SUPPORTED_NODES[changed].flatten_fn is other_flatten,
                      cpytree.is_constant_class(flagged)],
            "kept": cpytree.SUPPORTED_NODES[untouched] is kept
                    and copies[untouched].seen is not None,
            "installed": cpytree.is_installed(),
            "types": [type(cpytree.SUPPORTED_NODES[untouched]).__qualname__,
                      type(cpytree.SUPPORTED_SERIALIZED_TYPES[untouched]).__qualname__,
                      type(copies[untouched].written).__qualname__,
                      cpytree.SUPPORTED_NODES[untouched] == tuple(tp.SUPPORTED_NODES[untouched])],
        }))
        """
    )
    env = {**os.environ, "CPYTREE_INSTALL": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "batch": True,
        "before": [False, False],
        "after": [True, True],
        "kept": True,
        "installed": True,
        "types": ["NodeDef", "_SerializeNodeDef", "_Entry", True],
    }
