"""cpytree.install() / uninstall() against the installed torch.

What is proved here, with install() active:

* torch's pytree functions are cpytree's and give torch's results: a port of
  the kinds of checks torch's own test_pytree.py makes (the shared tree table,
  n-ary and prefix tree_map, is_leaf, None, namedtuple, structseq, torch.Size,
  registered and constant nodes, tree_map_only/tree_all_only, errors);
* the registries are one: torch's registrations made before and after install
  reach cpytree with their serialization hooks, cpytree's reach torch, and no
  overwrite warns twice;
* torch.compile gives the same outputs, graphs and graph breaks (an MLP, a
  transformer block with backward, a model taking and returning dicts and
  namedtuples, user code calling torch.utils._pytree inside the compiled
  function with fullgraph=True, one inductor case), and torch.export of a
  model round-trips its in/out specs;
* uninstall() puts back every attribute of every torch module, both
  registries and Dynamo's tables exactly; install() is idempotent and safe to
  race.

Tests needing the engine's torch spec interop ("full" mode) skip until the
engine provides `cpytree._C._set_torch_spec_classes`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import pickle
import subprocess
import sys
import threading
import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

torch = pytest.importorskip("torch")

import torch.fx._pytree as fx_pytree
import torch.utils._pytree as tp

import cpytree
import trees
from cpytree import _reference, _torch as torch_install
from cpytree._torch._signature import engine_of

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp", reason="install() needs the C++ engine (cpytree._C)"
    ),
]

trees.torch_pytree()  # the table's custom types, registered in torch too

SWAPPED_ALWAYS = ("tree_leaves", "tree_iter", "arg_tree_leaves", "tree_map", "tree_map_")
ORIGINAL_REGISTER = tp._private_register_pytree_node
ORIGINALS = {name: getattr(tp, name) for name in (*SWAPPED_ALWAYS, "tree_flatten",
                                                  "tree_structure", "tree_unflatten")}  # fmt: skip


@pytest.fixture(autouse=True)
def _never_left_installed():
    """A failing test must not leave torch patched for the rest of the session."""
    yield
    cpytree.uninstall()


@contextlib.contextmanager
def installed(**kwargs):
    cpytree.install(**kwargs)
    try:
        yield torch_install.status()
    finally:
        cpytree.uninstall()


needs_full_mode = pytest.mark.skipif(
    not hasattr(cpytree._C, "_set_torch_spec_classes"),
    reason="needs the engine's torch spec interop (cpytree._C._set_torch_spec_classes)",
)


# --------------------------------------------------------------------------
# Exact restoration


@needs_full_mode
def test_uninstall_restores_the_hash_of_specs_with_constant_contexts():
    # Installed, engine specs hash by torch's rule (only torch's ConstantNode
    # hashes by value). That rule outlived uninstall(): a spec made after it
    # (a cpytree ConstantNode context) hashed that context as None, unlike
    # the same spec made before install() and unlike torch's own spec.
    tree = {"cfg": trees.Cfg("c", 1), "x": [1, trees.Cfg("d")]}
    torchs = hash(trees.torch_pytree().tree_structure(tree))
    before = hash(cpytree.tree_structure(tree))  # not kept: interning would return it
    assert before == torchs
    with installed():
        pass
    assert hash(cpytree.tree_structure(tree)) == before


def _torch_namespaces() -> dict[str, dict]:
    return {
        name: dict(vars(module))
        for name, module in list(sys.modules.items())
        if (name == "torch" or name.startswith(("torch.", "functorch.")))
        and isinstance(getattr(module, "__dict__", None), dict)
    }


def _dynamo_tables() -> dict[str, object]:
    from torch._dynamo import trace_rules
    from torch._dynamo.variables import PolyfilledFunctionVariable
    from torch._dynamo.variables.builder import SourcelessBuilder, VariableBuilder

    return {
        "id_dispatch": dict(VariableBuilder._id_dispatch()),
        "polyfilled_ids": set(trace_rules._polyfilled_function_ids()),
        "rule_map": dict(trace_rules.get_torch_obj_rule_map()),
        "handlers": dict(PolyfilledFunctionVariable._get_polyfill_handlers()),
        "type_dispatch": [dict(VariableBuilder._type_dispatch_impl(t)) for t in (False, True)],
        "sourceless": dict(SourcelessBuilder._type_handlers),
    }


def _registries() -> dict[str, object]:
    out = {}
    for label, mod in (("torch", tp), ("cpytree", _reference)):
        out[label] = (
            dict(mod.SUPPORTED_NODES),
            dict(mod.SUPPORTED_SERIALIZED_TYPES),
            dict(mod.SERIALIZED_TYPE_TO_PYTHON_TYPE),
            set(mod.CONSTANT_NODES),
        )
    out["hooks"] = list(_reference._REGISTRATION_HOOKS)
    out["lock"] = _reference._NODE_REGISTRY_LOCK
    return out


def _assert_same_objects(before: dict, after: dict, what: str) -> None:
    """Same keys, and every value the very same object."""
    assert before.keys() == after.keys(), f"{what}: keys differ"
    changed = [key for key in before if before[key] is not after[key]]
    assert not changed, f"{what}: values replaced: {changed[:10]}"


class _Unnamed:
    """Registered without a serialized name: the case torch's tables handle worst."""

    def __init__(self, a):
        self.a = a


def test_uninstall_restores_every_torch_attribute_exactly():
    importlib.import_module("torch._dynamo")  # loaded first: install() adds its entries at once

    with installed():  # warm up: everything install() imports is loaded
        pass

    class TorchOnly(_Unnamed):
        pass

    class CpytreeOnly(_Unnamed):
        pass

    tp.register_pytree_node(TorchOnly, lambda o: ([o.a], None), lambda v, _: TorchOnly(v[0]))
    cpytree.register_pytree_node(CpytreeOnly, lambda o: ([o.a], None),
                                 lambda v, _: CpytreeOnly(v[0]))  # fmt: skip
    namespaces, registries, tables = _torch_namespaces(), _registries(), _dynamo_tables()
    cpytree.install()
    assert engine_of(tp.tree_map) is cpytree.tree_map
    assert _dynamo_tables() != tables
    assert CpytreeOnly in tp.SUPPORTED_NODES and TorchOnly in cpytree.SUPPORTED_NODES
    cpytree.uninstall()
    after = _torch_namespaces()
    assert namespaces.keys() <= after.keys()
    for name, namespace in namespaces.items():
        _assert_same_objects(namespace, after[name], name)
    # Registrations: the same functions and hooks for the same types (a
    # registration install() replaced is put back through the registry's API,
    # so its NodeDef is an equal tuple, not the same one).
    after_registries = _registries()
    for label in ("torch", "cpytree"):
        assert after_registries[label] == registries[label], f"{label} registry"
    assert after_registries["hooks"] == registries["hooks"]
    assert after_registries["lock"] is registries["lock"]
    assert _dynamo_tables() == tables
    tp._deregister_pytree_node(TorchOnly)  # the last unnamed registration: no KeyError
    cpytree._deregister_pytree_node(CpytreeOnly)


def test_install_swaps_the_engine_functions():
    with installed() as state:
        for name in SWAPPED_ALWAYS:
            assert engine_of(getattr(tp, name)) is getattr(cpytree, name), name
            # torch's function as torch's code and tests see it (issue 38)
            assert inspect.signature(getattr(tp, name)) == inspect.signature(ORIGINALS[name])
            assert inspect.isfunction(getattr(tp, name))
        assert state["mode"] in ("full", "spec-free")
        assert "torch.utils._pytree.tree_is_leaf" not in state["swapped"]
        assert tp.tree_is_leaf is not cpytree.tree_is_leaf  # see TARGETS in cpytree._torch
        if state["mode"] == "spec-free":
            assert tp.tree_flatten is ORIGINALS["tree_flatten"]
            assert "_set_torch_spec_classes" in state["skipped"]["torch.utils._pytree.tree_flatten"]
    for name, original in ORIGINALS.items():
        assert getattr(tp, name) is original


def test_install_and_uninstall_are_idempotent():
    assert not cpytree.is_installed()
    cpytree.uninstall()  # no-op
    cpytree.install()
    patches = len(torch_install._state.patches)
    cpytree.install()
    assert len(torch_install._state.patches) == patches
    assert cpytree.is_installed()
    cpytree.uninstall()
    cpytree.uninstall()
    assert not cpytree.is_installed()
    assert tp.tree_map is ORIGINALS["tree_map"]


def test_racing_install_and_uninstall_end_consistent():
    errors = []

    def flip(n: int) -> None:
        try:
            for i in range(n):
                (cpytree.install if i % 2 == 0 else cpytree.uninstall)()
        except Exception as error:  # noqa: BLE001 - reported by the assert below
            errors.append(error)

    threads = [threading.Thread(target=flip, args=(7 + k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    if cpytree.is_installed():
        assert engine_of(tp.tree_map) is cpytree.tree_map
    cpytree.uninstall()
    assert tp.tree_map is ORIGINALS["tree_map"]
    assert tp._private_register_pytree_node is ORIGINAL_REGISTER
    assert _reference._NODE_REGISTRY_LOCK is not tp._NODE_REGISTRY_LOCK


# --------------------------------------------------------------------------
# Import-time bindings


def test_import_time_bindings_are_rebound_and_restored():
    fake_tensor = sys.modules["torch._subclasses.fake_tensor"]
    assert fake_tensor.tree_map is ORIGINALS["tree_map"]
    with installed() as state:
        assert state["rebound_imports"] > 0
        assert fake_tensor.tree_map is tp.tree_map and engine_of(tp.tree_map) is cpytree.tree_map
        assert fake_tensor.tree_map_ is tp.tree_map_
    assert fake_tensor.tree_map is ORIGINALS["tree_map"]
    with installed(rebind_imports=False) as state:
        assert state["rebound_imports"] == 0
        assert fake_tensor.tree_map is ORIGINALS["tree_map"]
        assert engine_of(tp.tree_map) is cpytree.tree_map


def test_bindings_made_while_installed_are_reset_by_uninstall():
    name = "torch._cpytree_test_late_import"
    with installed():
        late = types.ModuleType(name)
        late.tree_map = tp.tree_map  # `from torch.utils._pytree import tree_map`, run now
        late.register = tp._private_register_pytree_node
        sys.modules[name] = late
    try:
        assert late.tree_map is ORIGINALS["tree_map"]
        assert late.register is tp._private_register_pytree_node
    finally:
        del sys.modules[name]


# --------------------------------------------------------------------------
# Registries


def test_torch_registrations_made_before_install_reach_cpytree():
    with installed():
        for cls in (
            torch.Size,
            torch.return_types.max,
            torch.fx.immutable_collections.immutable_list,
        ):
            assert cls in cpytree.SUPPORTED_NODES, cls
            assert cpytree.SUPPORTED_NODES[cls].flatten_fn is tp.SUPPORTED_NODES[cls].flatten_fn
        name = cpytree.SUPPORTED_SERIALIZED_TYPES[torch.Size].serialized_type_name
        assert name == tp.SUPPORTED_SERIALIZED_TYPES[torch.Size].serialized_type_name
        size = torch.Size([2, 3])
        assert cpytree.tree_leaves(size) == [2, 3]
        result = torch.max(torch.tensor([[1.0, 5.0]]), dim=1)
        leaves = tp.tree_leaves({"r": result})
        assert leaves[0] is result.values and leaves[1] is result.indices
    # torch's registrations count without install() too (cpytree follows torch's registry)
    assert (
        cpytree.SUPPORTED_NODES[torch.Size].flatten_fn is tp.SUPPORTED_NODES[torch.Size].flatten_fn
    )
    assert cpytree.tree_leaves(torch.Size([2, 3])) == [2, 3]


@dataclasses.dataclass
class _Point3:
    x: object
    y: object
    z: object = None


class _Tagged:
    def __init__(self, value, tag):
        self.value, self.tag = value, tag

    def __eq__(self, other):
        return type(other) is _Tagged and (self.value, self.tag) == (other.value, other.tag)


def _tagged_flatten(t):
    return [t.value], t.tag


def _tagged_unflatten(values, tag):
    return _Tagged(values[0], tag)


def test_torch_registrations_made_after_install_reach_cpytree_with_serialization():
    with installed():
        tp.register_pytree_node(
            _Tagged,
            _tagged_flatten,
            _tagged_unflatten,
            serialized_type_name="test_torch_install._Tagged",
            to_dumpable_context=lambda tag: {"tag": tag},
            from_dumpable_context=lambda d: d["tag"],
            flatten_with_keys_fn=lambda t: ([(tp.GetAttrKey("value"), t.value)], t.tag),
        )
        tp.register_dataclass(_Point3, serialized_type_name="test_torch_install._Point3")
        try:
            assert cpytree.SUPPORTED_NODES[_Tagged].unflatten_fn is _tagged_unflatten
            ser = cpytree.SUPPORTED_SERIALIZED_TYPES[_Tagged]
            assert ser.serialized_type_name == "test_torch_install._Tagged"
            assert ser.to_dumpable_context("t") == {"tag": "t"}
            tree = [_Tagged({"k": 1}, "t"), _Point3(2, 3)]
            assert tp.tree_leaves(tree) == [1, 2, 3]
            assert tp.tree_map(lambda v: v * 10, tree) == [_Tagged({"k": 10}, "t"), _Point3(20, 30)]
            spec = cpytree.tree_structure(tree)
            dumped = cpytree.treespec_dumps(spec)
            assert dumped == tp.treespec_dumps(ORIGINALS["tree_structure"](tree))
            assert cpytree.treespec_loads(dumped) == spec
        finally:
            tp._deregister_pytree_node(_Tagged)
            tp._deregister_pytree_node(_Point3)
        assert _Tagged not in cpytree.SUPPORTED_NODES and _Point3 not in cpytree.SUPPORTED_NODES
        assert tp.tree_leaves(_Tagged(1, "t"))[0].tag == "t"  # a leaf again


def test_overwriting_a_registration_warns_once():
    class Twice(_Tagged):  # a fresh type: torch never unregisters from optree's registry
        pass

    with installed():
        tp.register_pytree_node(Twice, _tagged_flatten, _tagged_unflatten)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tp._private_register_pytree_node(Twice, _tagged_flatten, _tagged_unflatten)
            messages = [str(w.message) for w in caught if "already registered" in str(w.message)]
            assert len(messages) == 1, messages
        finally:
            tp._deregister_pytree_node(Twice)


def test_cpytree_registrations_reach_torch_and_each_registry_keeps_its_own():
    class OnlyCpytree:
        def __init__(self, a):
            self.a = a

    class OnlyTorch:
        def __init__(self, a):
            self.a = a

    # (Serialized names: torch deregisters unnamed types through one shared key.)
    cpytree.register_pytree_node(
        OnlyCpytree,
        lambda o: ([o.a], None),
        lambda v, _: OnlyCpytree(v[0]),
        serialized_type_name="t.OnlyCpytree",
    )
    try:
        with installed():
            # Dynamo traces torch's Python originals: they must see cpytree's type too.
            assert ORIGINALS["tree_leaves"](OnlyCpytree(7)) == [7]
            tp.register_pytree_node(
                OnlyTorch,
                lambda o: ([o.a], None),
                lambda v, _: OnlyTorch(v[0]),
                serialized_type_name="t.OnlyTorch",
            )
            assert cpytree.tree_leaves(OnlyTorch(8)) == [8]

            class Later:
                pass

            cpytree.register_pytree_node(
                Later, lambda o: ([], None), lambda v, _: Later(), serialized_type_name="t.Later"
            )
            assert Later in tp.SUPPORTED_NODES
        assert OnlyCpytree not in tp.SUPPORTED_NODES and Later not in tp.SUPPORTED_NODES
        # torch's registration is still followed without install() (_torch/_follow.py)
        assert OnlyTorch in tp.SUPPORTED_NODES and OnlyTorch in cpytree.SUPPORTED_NODES
        assert OnlyCpytree in cpytree.SUPPORTED_NODES and Later in cpytree.SUPPORTED_NODES
        tp._deregister_pytree_node(OnlyTorch)
        assert OnlyTorch not in cpytree.SUPPORTED_NODES
        cpytree._deregister_pytree_node(Later)
    finally:
        cpytree._deregister_pytree_node(OnlyCpytree)


def test_constant_registered_while_installed():
    @dataclasses.dataclass(frozen=True)
    class Knob:
        level: int

    with installed():
        tp.register_constant(Knob)
        try:
            tree = {"k": Knob(3), "x": 1}
            assert tp.tree_leaves(tree) == [1]
            assert tp.tree_map(lambda v: v + 1, tree) == {"k": Knob(3), "x": 2}
        finally:
            tp._deregister_pytree_node(Knob)


# --------------------------------------------------------------------------
# torch's pytree behaviour with install() active (after torch's test_pytree.py)


@pytest.mark.parametrize("case", trees.CASES, ids=trees.CASE_IDS)
def test_table_through_torch_functions(case):
    tree, expected = case.build()
    with installed():
        leaves = tp.tree_leaves(tree)
        assert len(leaves) == len(expected) and all(a is b for a, b in zip(leaves, expected))
        assert list(tp.tree_iter(tree)) == leaves
        assert tp.arg_tree_leaves(tree, k=tree) == leaves + leaves
        mapped = tp.tree_map(lambda x: x, tree)
        assert tp.tree_leaves(mapped) == leaves
        seen = []
        assert tp.tree_map_(seen.append, tree) is tree
        assert seen == leaves
        leaves2, spec = tp.tree_flatten(tree)
        assert leaves2 == leaves
        assert tp.tree_structure(tp.tree_unflatten(leaves2, spec)) == spec
        assert tp.tree_all(lambda _: True, tree) and not tp.tree_any(lambda _: False, tree)
        assert spec == ORIGINALS["tree_structure"](tree)


def test_tree_map_nary_prefix_and_mismatch():
    with installed():
        assert tp.tree_map(lambda x, y: [x] + y, [5, 6], [[7, 9], [1, 2]]) == [[5, 7, 9], [6, 1, 2]]
        assert tp.tree_map(lambda x, y: x + y, {"a": 1, "b": (2,)}, {"b": (20,), "a": 10}) == {
            "a": 11,
            "b": (22,),
        }
        with pytest.raises(ValueError):
            tp.tree_map(lambda x, y: x, [1, 2], [1, 2, 3])
        with pytest.raises(ValueError):
            tp.tree_map(lambda x, y: x, (1, 2), [1, 2])
        with pytest.raises(ValueError):
            tp.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
        with pytest.raises(TypeError):
            tp.tree_map(lambda x: x)  # missing tree


def test_is_leaf_none_and_builtin_nodes():
    point = namedtuple("point", "x y")
    tree = {
        "n": None,
        "p": point(1, [2]),
        "o": OrderedDict(z=3),
        "d": defaultdict(list, {"k": 4}),
        "q": deque([5], maxlen=3),
    }
    with installed():
        assert tp.tree_leaves(tree) == [None, 1, 2, 3, 4, 5]
        assert tp.tree_leaves(tree, is_leaf=lambda x: isinstance(x, list)) == [
            None,
            1,
            [2],
            3,
            4,
            5,
        ]
        out = tp.tree_map(lambda x: x, tree)
        assert type(out["p"]) is point and type(out["o"]) is OrderedDict
        assert out["d"].default_factory is list and out["q"].maxlen == 3
        assert tp.tree_map(lambda x: 0, tree, is_leaf=lambda x: x is tree["p"])["p"] == 0


def test_structseq_size_and_tensors():
    with installed():
        values = torch.arange(6.0).reshape(2, 3)
        result = torch.max(values, dim=1)
        mapped = tp.tree_map(lambda t: t * 2, result)
        assert type(mapped) is type(result)
        assert torch.equal(mapped.values, result.values * 2)
        assert tp.tree_leaves(torch.Size([4, 5])) == [4, 5]
        size = torch.Size([4, 5])
        assert type(tp.tree_map(abs, size)) is type(ORIGINALS["tree_map"](abs, size))  # tuple
        assert tp.tree_leaves(os.stat_result(range(10))) == [os.stat_result(range(10))]


def test_tree_map_only_and_all_only():
    tree = {"a": torch.ones(2), "b": [1, 2.0, "s"], "c": (torch.zeros(1),)}
    with installed():
        out = tp.tree_map_only(torch.Tensor, lambda t: t + 1, tree)
        assert torch.equal(out["a"], torch.full((2,), 2.0)) and out["b"] == [1, 2.0, "s"]
        out = tp.tree_map_only((int, float), lambda x: -x, tree)
        assert out["b"] == [-1, -2.0, "s"]
        assert tp.tree_all_only(torch.Tensor, lambda t: t.dim() == 1, tree)
        assert tp.tree_any_only(str, lambda s: s == "s", tree)
        assert not tp.tree_any(lambda x: x is None, tree)
        seen = []
        tp.tree_map_only_(torch.Tensor, seen.append, tree)
        assert len(seen) == 2


# --------------------------------------------------------------------------
# torch.compile


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class Block(torch.nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                      torch.nn.Linear(4 * d, d))  # fmt: skip

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(self.ln2(x))


Out = namedtuple("Out", ["logits", "aux"])


class DictModel(torch.nn.Module):
    """Takes a dict with a list inside, returns a namedtuple holding a dict."""

    def __init__(self):
        super().__init__()
        self.enc, self.head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)

    def forward(self, batch):
        h = torch.tanh(self.enc(batch["x"] + batch["extra"][0]))
        return Out(self.head(h), {"h": h, "norm": (h.norm(), h.mean())})


def user_pytree_code(x, tree):
    """User code calling torch.utils._pytree inside the compiled function."""
    doubled = tp.tree_map(lambda t: t * 2, tree)
    flat = tp.tree_leaves(doubled) + tp.arg_tree_leaves(x, k=x)
    shifted = tp.tree_map_only(torch.Tensor, lambda t: t + x, doubled)
    tp.tree_map_(lambda t: t.add_(0), shifted)
    leaves, spec = tp.tree_flatten(shifted)
    total = sum(t.sum() for t in flat)
    return tp.tree_unflatten([t + total for t in leaves], spec)


def _compile_run(fn, args, backend, fullgraph=False):
    """(output, unique graphs, graph breaks) of a fresh compile of fn(*args)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(fn, backend=backend, fullgraph=fullgraph)(*args)
    breaks = sum(counters["graph_break"].values())
    return out, counters["stats"]["unique_graphs"], breaks


def _assert_close_trees(a, b):
    # Compare with the saved originals: independent of what install() swapped.
    la, sa = ORIGINALS["tree_flatten"](a)
    lb, sb = ORIGINALS["tree_flatten"](b)
    assert sa == sb
    for x, y in zip(la, lb):
        assert torch.allclose(x, y, atol=1e-6)


def _user_args():
    return torch.randn(3), {"a": torch.randn(3), "b": (torch.randn(3), [torch.randn(3)])}


CASES = {
    "mlp": (MLP, lambda: (torch.randn(4, 16),)),
    "block": (Block, lambda: (torch.randn(2, 5, 32),)),
    "dict-namedtuple": (
        DictModel,
        lambda: ({"x": torch.randn(2, 8), "extra": [torch.randn(2, 8)]},),
    ),
    "user-pytree-code": (lambda: user_pytree_code, _user_args),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(CASES))
def test_compile_same_outputs_graphs_and_breaks(name, backend):
    make, make_args = CASES[name]
    torch.manual_seed(0)
    fn, args = make(), make_args()
    expected = fn(*args)
    without = _compile_run(fn, args, backend)
    with installed():
        with_install = _compile_run(fn, args, backend)
    _assert_close_trees(without[0], expected)
    _assert_close_trees(with_install[0], expected)
    assert with_install[1:] == without[1:], "(unique graphs, graph breaks) differ"
    assert with_install[2] == 0


def test_user_pytree_calls_do_not_break_the_graph():
    x, tree = _user_args()
    with installed():
        out, graphs, breaks = _compile_run(user_pytree_code, (x, tree), "eager", fullgraph=True)
    _assert_close_trees(out, user_pytree_code(x, tree))
    assert (graphs, breaks) == (1, 0)


def test_compile_with_backward_same_gradients():
    torch.manual_seed(0)
    model, x = Block(), torch.randn(2, 5, 32, requires_grad=True)

    def grads():
        model.zero_grad()
        x.grad = None
        torch._dynamo.reset()
        torch.compile(model, backend="aot_eager")(x).square().sum().backward()
        return [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]

    without = grads()
    with installed():
        with_install = grads()
    for a, b in zip(without, with_install):
        assert torch.allclose(a, b, atol=1e-6)


def test_compile_inductor_mlp():
    torch.manual_seed(0)
    model, x = MLP(), torch.randn(4, 16)
    with installed():
        out, graphs, breaks = _compile_run(model, (x,), "inductor")
    assert torch.allclose(out, model(x), atol=1e-5)
    assert (graphs, breaks) == (1, 0)


# --------------------------------------------------------------------------
# torch.export


@pytest.fixture
def out_registered():
    tp._register_namedtuple(Out, serialized_type_name="test_torch_install.Out")
    yield
    tp._deregister_pytree_node(Out)


def _export(model, args):
    import io

    ep = torch.export.export(model, args)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return ep, torch.export.load(buffer)


def test_export_specs_round_trip(out_registered):
    torch.manual_seed(0)
    model = DictModel()
    args = ({"x": torch.randn(2, 8), "extra": [torch.randn(2, 8)]},)
    ep_without, _ = _export(model, args)
    with installed():
        ep, loaded = _export(model, args)
        for spec in (ep.call_spec.in_spec, ep.call_spec.out_spec):
            dumped = tp.treespec_dumps(spec)
            assert tp.treespec_loads(dumped) == spec
            assert cpytree.treespec_dumps(cpytree.treespec_loads(dumped)) == dumped
        assert loaded.call_spec.in_spec == ep.call_spec.in_spec
        assert loaded.call_spec.out_spec == ep.call_spec.out_spec
        _assert_close_trees(loaded.module()(*args), model(*args))
        _assert_close_trees(ep.module()(*args), model(*args))
    for a, b in ((ep.call_spec.in_spec, ep_without.call_spec.in_spec),
                 (ep.call_spec.out_spec, ep_without.call_spec.out_spec)):  # fmt: skip
        assert tp.treespec_dumps(a) == tp.treespec_dumps(b)


def test_compile_of_an_exported_module(out_registered):
    torch.manual_seed(0)
    model = DictModel()
    args = ({"x": torch.randn(2, 8), "extra": [torch.randn(2, 8)]},)
    without = _compile_run(torch.export.export(model, args).module(), args, "eager")
    with installed():
        with_install = _compile_run(torch.export.export(model, args).module(), args, "eager")
    _assert_close_trees(with_install[0], model(*args))
    assert with_install[1:] == without[1:]


# --------------------------------------------------------------------------
# Full mode: the engine's specs stand in for torch's


@needs_full_mode
def test_full_mode_specs_interoperate():
    tree = {"a": [1, (2, 3)], "b": OrderedDict(c=None)}
    torch_spec = ORIGINALS["tree_structure"](tree)
    with installed() as state:
        assert state["mode"] == "full", state["skipped"]
        leaves, spec = tp.tree_flatten(tree)
        assert type(spec) is cpytree.TreeSpec
        assert isinstance(spec, tp.TreeSpec) and isinstance(spec.child(0), tp.TreeSpec)
        assert spec == torch_spec and torch_spec == spec and hash(spec) == hash(torch_spec)
        assert tp.tree_unflatten(leaves, torch_spec) == tree
        assert tp.treespec_tuple([spec]) == tp.TreeSpec(tuple, None, [torch_spec])
        assert tp.treespec_loads(tp.treespec_dumps(spec)) == spec
        assert fx_pytree.tree_flatten_spec(tree, torch_spec) == leaves


# --------------------------------------------------------------------------
# Environment variable, `python -m cpytree`, fallback engine


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )


def test_env_var_installs_at_import():
    code = (
        "import cpytree, torch.utils._pytree as tp\n"
        "from cpytree._torch._signature import engine_of\n"
        "assert cpytree.is_installed() and engine_of(tp.tree_map) is cpytree.tree_map\n"
        "import runpy; runpy.run_module('cpytree', run_name='__main__')\n"
    )
    proc = _python(code, CPYTREE_INSTALL="1")
    assert proc.returncode == 0, proc.stderr
    assert "install(): in effect" in proc.stdout
    assert "engine: cpp" in proc.stdout
    proc = _python("import cpytree, sys; assert not cpytree.is_installed()\n"
                   "assert 'torch' not in sys.modules", CPYTREE_INSTALL="0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_install_with_the_fallback_engine_leaves_torch_alone():
    code = (
        "import sys, warnings; sys.modules['cpytree._C'] = None\n"
        "warnings.simplefilter('ignore')\n"
        "import cpytree, torch.utils._pytree as tp\n"
        "assert cpytree.ENGINE == 'python'\n"
        "original = tp.tree_map\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    cpytree.install()\n"
        "assert tp.tree_map is original and not cpytree.is_installed()\n"
        "assert any('C++ engine is not available' in str(w.message) for w in caught)\n"
    )
    proc = _python(code, CPYTREE_INSTALL="")
    assert proc.returncode == 0, proc.stderr


# After uninstall(), cpytree specs pickle in cpytree's own form again (while
# installed they pickle as torch's, so caches load in processes without cpytree).
def test_pickle_form_follows_install_state():
    import cpytree

    if cpytree.ENGINE != "cpp":
        pytest.skip("needs the C++ engine")
    spec = cpytree.tree_structure({"a": [1, (2, None)]})
    cpytree.install()
    try:
        assert type(pickle.loads(pickle.dumps(spec))) is tp.TreeSpec
    finally:
        cpytree.uninstall()
    loaded = pickle.loads(pickle.dumps(spec))
    assert type(loaded) is cpytree.TreeSpec
    assert loaded is spec  # interned again
