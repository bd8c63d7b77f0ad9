"""The harness's deep workload family (chains 200 and 2,000 deep) and how
backends too shallow for them are shown (`RecErr`), and the instruction
counts of the compile study's report (`--compile-counts`)."""

from __future__ import annotations

import pytest

from cpytree.harness.ops import backends, workloads
from cpytree.harness.ops.deep_probe import PROBE_DEPTH, probe
from cpytree.harness.ops.optable import plan_ops
from cpytree.harness.ops.tables import markdown_notes

KINDS = {"list": list, "tuple": tuple, "dict": dict, "custom": workloads.ModuleNode}


def _children(node):
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, workloads.ModuleNode):
        return list(node.values)
    return list(node)


@pytest.mark.parametrize("depth", workloads.CHAIN_DEPTHS)
@pytest.mark.parametrize("kind", workloads.CHAIN_KINDS)
def test_chain_structure(kind: str, depth: int) -> None:
    (w,) = workloads.get_workloads([f"chain-{kind}-{depth}"])
    assert (w.nodes, w.depth, w.builtin_only) == (depth + 1, depth, kind != "custom")
    assert w.custom_nodes == ((workloads.ModuleNode,) if kind == "custom" else ())
    tree = w.build()
    levels = 0
    node = tree
    while not isinstance(node, workloads.Leaf):
        assert type(node) is KINDS[kind]
        (node,) = _children(node)  # exactly one child per level
        levels += 1
    assert levels == depth and node.name == "bottom"
    assert workloads.count_nodes(tree) == depth + 1
    assert workloads.expected_leaves(tree) == [node]
    if kind == "dict":
        assert list(tree) == ["next"]


def test_chains_are_default_workloads_after_the_wide_ones() -> None:
    names = [w.name for w in workloads.default_workloads()]
    chains = [f"chain-{k}-{d}" for d in (200, 2000) for k in ("list", "tuple", "dict", "custom")]
    assert names[-len(chains) :] == chains
    assert names.index("deep-200") < names.index("chain-list-200")


def test_chain_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown chain kind 'set'"):
        workloads.chain("set", 3)


@pytest.mark.parametrize("kind", workloads.CHAIN_KINDS)
def test_engine_runs_200_deep(kind: str) -> None:
    (cpytree,) = backends.discover(["cpytree"])
    tree = workloads.chain(kind, 200)
    leaves, spec = cpytree.flatten(tree)
    assert [leaf.name for leaf in leaves] == ["bottom"]
    assert (spec.num_nodes, spec.num_leaves) == (201, 1)


def test_probe_verdicts() -> None:
    assert PROBE_DEPTH < 2000
    deep = probe("cpytree", "chain-list-2000", ["flatten", "unflatten"])
    assert set(deep) == {"leaves()", "flatten", "unflatten"}
    assert all(v.startswith("RecursionError") for v in deep.values()), deep
    assert probe("cpytree", "chain-list-200", ["flatten"]) == {"leaves()": "", "flatten": ""}


def test_recursion_errors_show_as_recerr() -> None:
    found = backends.discover(["cpytree", "cpytree-reference"])
    ws = workloads.get_workloads(["chain-list-200", "chain-list-2000"])
    res = plan_ops(ws, found, ["flatten", "leaves"])
    shallow, deep = ws
    for b in ("cpytree", "cpytree-reference"):
        for op in ("flatten", "leaves"):
            assert res.entry(shallow, b, op) is res.cell("chain-list-200", b, op)
            assert res.entry(deep, b, op) == "RecErr"
            assert res.errors[("chain-list-2000", b, op)].startswith("RecursionError")
    notes = markdown_notes(res)
    assert "`RecErr` the backend raised RecursionError" in notes
    assert "- cpytree on chain-list-2000: flatten, leaves" in notes
    assert "`ERR`" not in notes


def test_other_errors_stay_err() -> None:
    found = backends.discover(["cpytree"])
    (w,) = workloads.get_workloads(["tiny-call"])
    res = plan_ops([w], found, ["flatten"])
    res.errors[("tiny-call", "cpytree", "leaves")] = "TypeError: boom"
    assert res.entry(w, "cpytree", "leaves") == "ERR"


@pytest.mark.torch  # imports the compile study (torch)
def test_compile_counts_in_report() -> None:
    from cpytree.harness.studies import compile_bench, compile_count

    phases = dict.fromkeys(compile_count.PHASES, 0)
    assert "import watch" not in phases
    torch_phases = dict(phases, **{"import torch": 5_000_000_000, "dynamo": 3_000_000_000})
    cpytree_phases = dict(torch_phases, **{"cpytree install": 40_000_000, "dynamo": 2_900_000_000})
    counts = [
        {"model": "m", "mode": "torch", "total": 8_000_000_000, "phases": torch_phases},
        {"model": "m", "mode": "cpytree", "total": 7_940_000_000, "phases": cpytree_phases},
    ]
    summary = compile_bench._summarize([], ["m"], ("torch", "cpytree"), counts)
    torch_row, cpytree_row = summary
    assert torch_row["instructions"] == 8_000_000_000
    assert cpytree_row["instructions_by_phase"]["cpytree install"] == 40_000_000
    assert compile_bench._instructions(torch_row, torch_row) == "8.000"
    assert compile_bench._instructions(cpytree_row, torch_row) == "7.940 (-0.75%)"
    lines = compile_bench.count_lines(summary)
    assert lines[0].startswith("m: instructions of the whole process by phase")
    assert "  import torch     5,000.0 | 5,000.0 | +0.0" in lines
    assert "  cpytree install  0.0 | 40.0 | +40.0" in lines
    assert "  dynamo           3,000.0 | 2,900.0 | -100.0" in lines
    assert lines[-1] == "  total            8,000.0 | 7,940.0 | -60.0"
    failed = compile_bench._summarize(
        [], ["m"], ("torch", "cpytree"), [{"model": "m", "mode": "torch", "error": "callgrind: x"}]
    )
    assert failed[0]["instructions"] is None and failed[0]["errors"] == ["callgrind: x"]


def test_dump_order() -> None:
    from pathlib import Path

    from cpytree.harness.studies.compile_count import _dump_number

    names = ["cg.out", "cg.out.10", "cg.out.2", "cg.out.1"]
    assert sorted(names, key=lambda n: _dump_number(Path(n))) == [
        "cg.out.1",
        "cg.out.2",
        "cg.out.10",
        "cg.out",
    ]
