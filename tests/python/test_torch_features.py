"""torch's own features that call pytree inside Dynamo behave exactly as without cpytree.

torch's higher-order operators, nonstrict_trace, leaf functions and strict
export hand pytree functions to Dynamo's tracer from torch's own code
(`_make_inlined(tx, pytree.tree_flatten)`), reading the module attribute
install() swapped. Proved here, each mode in a fresh process
(`feature_probe`: "torch" with CPYTREE_INSTALL=0, "autoload" as a user gets
it), over operands of every node kind (harness/studies/feature_cases):

* every case has the same outcome (output digest, or exception type and
  first line) and the same graphs (canonical digests) in both modes;
* Dynamo steps no more bytecodes and installs no more guards with cpytree
  (inside the operators the same: torch's originals traced as torch traces
  them, node names included; fewer where user code calls pytree);
* a path torch has never had (our own operator handing the swapped functions
  to Dynamo's tracer every way Dynamo can meet them) works and matches eager;
* the fast answers inside an operator are sound: a changed operand structure
  recompiles and gives torch's eager result.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch
import torch._dynamo
import torch.utils._pytree as tp

import cpytree
import support
from cpytree._torch._signature import engine_of
from cpytree.harness.studies import feature_cases, feature_study

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp", reason="install() needs the C++ engine (cpytree._C)"
    ),
]

# Groups of features, one test (two children) each.
GROUPS = {
    "control_flow": ("cond", "cond_tree_out", "while_loop", "scan", "associative_scan", "map"),
    "regions": (
        "nested_compile_region",
        "checkpoint",
        "wrap",
        "nonstrict_trace",
        "leaf_function",
        "func",
    ),
    "attention_and_grads": ("flex_attention", "cond_grad", "while_loop_grad", "scan_grad"),
    "export": (
        "export",
        "export_cond",
        "export_while_loop",
        "export_scan",
        "export_map",
        "export_decompose",
    ),
}

# Cases that must succeed with torch alone on every supported release (so a
# comparison of two identical failures cannot pass for coverage).
MUST_RUN = (
    "cond/dict/eager", "cond/nested/compiled", "cond_tree_out/nested/eager",
    "while_loop/dict/eager", "while_loop/namedtuple/compiled", "scan/dict/eager",
    "scan/nested/compiled", "associative_scan/dict/compiled", "map/dict/eager",
    "map/custom/compiled", "nested_compile_region/dataclass/compiled",
    "checkpoint/custom/compiled", "wrap/nested/compiled", "nonstrict_trace/dict/compiled",
    "flex_attention/score_mod/eager", "flex_attention/block_mask/compiled",
    "func/nested/compiled", "cond_grad/nested/grad", "while_loop_grad/dict/grad",
    "scan_grad/nested/grad", "export/dict/strict", "export/dataclass/strict",
    "export_cond/dict/strict", "export_cond/nested/nonstrict",
    "export_decompose/nested/nonstrict",
    "export_while_loop/dict/strict",
    "export_scan/nested/strict",
    "export_map/dict/strict",
)  # fmt: skip


def _leaf_functions() -> bool:
    try:
        from torch._dynamo.decorators import leaf_function  # noqa: F401
    except ImportError:
        return False
    return True


def _cases(group: str) -> list[str]:
    features = GROUPS[group]
    names = [n for n in feature_cases.names() if n.split("/")[0] in features]
    if not _leaf_functions():  # torch 2.10, 2.11
        names = [n for n in names if not n.startswith("leaf_function/")]
    return names


@pytest.mark.parametrize("group", list(GROUPS))
def test_features_as_without_cpytree(group: str) -> None:
    names = _cases(group)
    study = feature_study.run(names)
    assert study["installed"] == {"torch": False, "autoload": True}
    problems = []
    for row in study["rows"]:
        a, b = row["torch"], row["cpytree"]
        if not row["same_outcome"]:
            problems.append(f"{row['case']}: {a['outcome']!r} alone, {b['outcome']!r} with cpytree")
        elif not row["same_graphs"]:
            problems.append(f"{row['case']}: graphs differ ({a['graphs']} vs {b['graphs']})")
        if b["bytecodes"] > a["bytecodes"] or b["guards"] > a["guards"]:
            problems.append(f"{row['case']}: bytecodes {a['bytecodes']} -> {b['bytecodes']}, "
                            f"guards {a['guards']} -> {b['guards']}")  # fmt: skip
    assert problems == []
    alone = {row["case"]: row["torch"] for row in study["rows"]}
    alone_modes = ("torch", "cpytree")
    for name in MUST_RUN:
        if name in alone:
            assert alone[name]["outcome"].startswith("ok "), (name, alone[name]["outcome"])
    # Inside the operators torch's originals are traced as torch traces them
    # (the same bytecodes); the user code around and inside their bodies
    # calls pytree through the fast paths: fewer bytecodes over the group.
    total = {mode: sum(row[mode]["bytecodes"] for row in study["rows"]) for mode in alone_modes}
    assert total["cpytree"] < total["torch"], total


# --------------------------------------------------------------------------
# A path no torch release has: every way Dynamo can meet a swapped function


@pytest.fixture
def installed():
    with support.installed():
        yield
    torch._dynamo.reset()


def _our_operator_rule(route: str):
    """A tracker class for `our_operator` that hands pytree's functions to Dynamo by `route`."""
    from torch._dynamo.variables.base import VariableTracker
    from torch._dynamo.variables.builder import SourcelessBuilder
    from torch._dynamo.variables.functions import UserFunctionVariable

    def tracer(tx, fn):
        # What a newer torch might write; each reads the module attribute now.
        if route == "call_function":  # torch 2.10-2.12's _make_inlined
            return lambda *args: UserFunctionVariable(fn).call_function(tx, list(args), {})
        if route == "inline":  # torch 2.13+'s _make_inlined
            return lambda *args: tx.inline_user_function_return(
                UserFunctionVariable(fn), list(args), {}
            )
        if route == "build":
            return lambda *args: VariableTracker.build(tx, fn).call_function(tx, list(args), {})
        return lambda *args: SourcelessBuilder.create(tx, fn).call_function(tx, list(args), {})

    class OurOperatorVariable(VariableTracker):
        def __init__(self, value, **kwargs):
            super().__init__(**kwargs)
            self.value = value

        @classmethod
        def create_with_source(cls, value, source):
            return cls(value, source=source)

        def call_function(self, tx, args, kwargs):
            flat = tracer(tx, tp.tree_flatten)(args[0])
            leaves_vt, spec_vt = flat.unpack_var_sequence(tx)
            leaves = [leaf.call_method(tx, "__mul__", [VariableTracker.build(tx, 2)], {})
                      for leaf in leaves_vt.unpack_var_sequence(tx)]  # fmt: skip
            from torch._dynamo.variables import ListVariable

            return tracer(tx, tp.tree_unflatten)(ListVariable(leaves), spec_vt)

    return OurOperatorVariable


def our_operator(tree):
    """Eager meaning of the operator: every leaf doubled."""
    leaves, spec = tp.tree_flatten(tree)
    return tp.tree_unflatten([leaf * 2 for leaf in leaves], spec)


@pytest.mark.parametrize("route", ["call_function", "inline", "build", "sourceless"])
def test_a_site_torch_never_had(installed, route: str) -> None:
    from torch._dynamo import trace_rules

    from cpytree.harness.studies.dynamo_probe import counting_steps

    # The operator reads the module attribute: install() put cpytree's function there.
    assert engine_of(tp.tree_flatten) is cpytree.tree_flatten
    rules = trace_rules.get_torch_obj_rule_map()
    rules[our_operator] = _our_operator_rule(route)
    try:
        tree = {"a": torch.ones(2), "b": [torch.arange(2.0), (torch.zeros(2),)]}
        expected = our_operator(tree)

        def fn(t):
            return our_operator(t)

        counts = {}
        for mode in ("torch", "cpytree"):
            if mode == "torch":
                cpytree.uninstall()
            torch._dynamo.reset()
            with counting_steps() as steps:
                got = torch.compile(fn, fullgraph=True, backend="eager")(tree)
            counts[mode] = steps[0]
            assert tp.tree_structure(got) == tp.tree_structure(expected)
            for g, e in zip(tp.tree_leaves(got), tp.tree_leaves(expected), strict=True):
                assert torch.equal(g, e)
            if mode == "torch":
                cpytree.install()
        # Dynamo's own route: torch's original, traced exactly as torch traces it.
        assert counts["cpytree"] == counts["torch"], counts
    finally:
        del rules[our_operator]


def test_cond_operand_structure_guarded(installed) -> None:
    """The trackers answer cond's operand flatten without tracing: guards still catch changes."""

    def branch(sign):
        return lambda ops: sum(tp.tree_leaves(ops)) * sign

    def fn(x, ops):
        return torch.cond(x.sum() > 0, branch(1), branch(-1), (ops,))

    compiled = torch.compile(fn, fullgraph=True, backend="eager")
    x = torch.ones(2)
    trees = [
        {"a": torch.ones(2), "b": torch.ones(2)},
        {"a": torch.ones(2), "b": torch.ones(2), "c": torch.ones(2)},  # a key more
        {"b": torch.ones(2) * 3, "a": torch.ones(2)},  # key order
        {"a": torch.ones(2), "b": [torch.ones(2), torch.ones(2)]},  # leaf became a list
        [torch.ones(2), torch.ones(2) * 5],  # another node type
    ]
    for tree in trees:
        assert torch.equal(compiled(x, tree), fn(x, tree))
        assert torch.equal(compiled(-x, tree), fn(-x, tree))


def test_uninstall_takes_the_choke_point_out() -> None:
    from torch._dynamo.variables.functions import UserFunctionVariable

    was = cpytree.is_installed()
    cpytree.uninstall()
    try:
        init = vars(UserFunctionVariable)["__init__"]
        cpytree.install()
        assert vars(UserFunctionVariable)["__init__"] is not init
        cpytree.uninstall()
        assert vars(UserFunctionVariable)["__init__"] is init
        # torch alone again: the C function is refused as torch refuses it.
        with pytest.raises(Exception, match="not implemented in python"):
            UserFunctionVariable(cpytree.tree_flatten)
    finally:
        if was:
            cpytree.install()
