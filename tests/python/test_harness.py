"""The profiling harness itself (`cpytree-harness`), not what it measures.

A `--quick` run in a child process (its custom-node registrations and the
backends it imports stay out of this test session) writes a report into a
temporary directory; the tests check the files, that every number in them
is positive and that every backend has its row and columns. The compile
study's bookkeeping is checked on synthetic runs (compiling takes minutes).
No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Workloads covering namedtuples, OrderedDicts, a registered custom node and
# builtin-only trees (so the floor instrument runs too, when built).
WORKLOADS = "tinymlp,resnet50-registered,kv-cache,tiny-call"


def _env() -> dict[str, str]:
    env = dict(os.environ, CPYTREE_INSTALL="0")
    floor = ROOT / "build" / "floor"
    if "CPYTREE_FLOOR_PATH" not in env and floor.is_dir():
        env["CPYTREE_FLOOR_PATH"] = str(floor)
    return env


def _harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "cpytree.harness", "--no-progress", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("harness") / "report"
    proc = _harness("--quick", "--workloads", WORKLOADS, "--scaling-max", "1000", "--out", str(out))
    return out, proc.stdout


def _numbers(obj: Any, path: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, bool) or obj is None:
        return []
    if isinstance(obj, (int, float)):
        return [(path, obj)]
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in _numbers(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [n for i, v in enumerate(obj) for n in _numbers(v, f"{path}[{i}]")]
    return []


def test_report_files(quick_run: tuple[Path, str]) -> None:
    out, stdout = quick_run
    assert (out / "report.md").is_file()
    assert (out / "results.json").is_file()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plots skipped" in (out / "report.md").read_text()
    else:
        for name in ("summary.png", "op-flatten.png", "op-loads.png", "scaling.png"):
            assert (out / name).stat().st_size > 1000, name
    assert "flatten: median us per call" in stdout
    assert "scaling: flatten, median ns per node" in stdout


def test_every_number_positive(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    doc = json.loads((out / "results.json").read_text())
    numbers = _numbers(doc["op_tables"]) + _numbers(doc["scaling"])
    assert len(numbers) > 100
    bad = [(p, v) for p, v in numbers if not v > 0]
    assert not bad, bad[:10]
    for r in doc["op_tables"]["results"]:
        assert r["min_us"] <= r["median_us"] <= r["max_us"]
        assert len(r["samples_us"]) >= 3


def test_machine_and_versions(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["machine"]["cpu_count"] >= 1
    assert meta["machine"]["versions"]["cpytree"]
    report = (out / "report.md").read_text()
    assert "## Machine and versions" in report
    assert meta["machine"]["python"] in report


def test_every_backend_row(quick_run: tuple[Path, str]) -> None:
    out, stdout = quick_run
    doc = json.loads((out / "results.json").read_text())
    report = (out / "report.md").read_text()
    backends = doc["backends"]
    assert [b["name"] for b in backends] == [
        "cpytree",
        "cpytree-reference",
        "torch",
        "optree",
        "jax",
        "dm-tree",
        "floor",
    ]
    workloads = WORKLOADS.split(",")
    ops = doc["op_tables"]["ops"]
    timed = {(r["workload"], r["backend"], r["op"]) for r in doc["op_tables"]["results"]}
    errors = {(e["workload"], e["backend"], e["op"]) for e in doc["op_tables"]["errors"]}
    assert not errors, doc["op_tables"]["errors"]
    for b in backends:
        name = b["name"]
        assert f"| {name} |" in report  # the Backends table
        if not b["available"]:
            assert f"{name:<18} MISSING" in stdout
            assert f"| {name} | **missing**" in report
            continue
        # A column in every op table, and a timed cell for every op it has
        # on every workload it can run.
        header = "| workload | nodes | " + " | ".join(x["name"] for x in backends if x["available"])
        assert report.count(header) == len(ops)
        runs = [w for w in workloads if (w, name, "leaves") in timed]
        assert runs, f"{name} ran no workload"
        for w in runs:
            for op in b["ops"]:
                assert (w, name, op) in timed, (w, name, op)
    cpytree = next(b for b in backends if b["name"] == "cpytree")
    assert cpytree["available"] and set(ops) <= set(cpytree["ops"])


def test_closest_peer_table(quick_run: tuple[Path, str]) -> None:
    """Each cell of "every cell against its closest peer" is the minimum over the peers."""
    out, stdout = quick_run
    doc = json.loads((out / "results.json").read_text())
    ops = doc["op_tables"]["ops"]
    median = {
        (r["workload"], r["backend"], r["op"]): r["median_us"] for r in doc["op_tables"]["results"]
    }
    peers = ("torch", "optree", "jax", "dm-tree")
    report = (out / "report.md").read_text()
    table = report.split("## Every cell against its closest peer")[1].split("\n## ")[0]
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in table.splitlines()
        if line.startswith("| ")
    }
    assert rows["workload"] == "| workload | " + " | ".join(ops) + " |"
    slower = 0
    marked = False  # a key-path cell through registered nodes with a peer
    for w in WORKLOADS.split(","):
        cells = rows[w].strip("| ").split(" | ")[1:]
        for op, cell in zip(ops, cells, strict=True):
            ratios = {p: median[(w, p, op)] / median[(w, "cpytree", op)]
                      for p in peers if (w, p, op) in median}  # fmt: skip
            if not ratios:
                assert cell == "-"
                continue
            peer = min(ratios, key=lambda p: (ratios[p], p))
            slower += ratios[peer] < 1
            # key paths through registered nodes carry the user-code mark
            mark = "\u2020" if (w, op) == ("resnet50-registered", "flatten-paths") else ""
            marked = marked or bool(mark)
            assert cell.split() == [cell.split()[0], peer + mark], (w, op, cell, ratios)
    assert f"below 1: the peer is faster; {slower} of " in stdout
    # The note under the table exactly when a marked cell is in it (no peer
    # installed: no cell, no note).
    note = "\u2020 key paths through registered nodes: torch's API has cpytree (as torch) call"
    assert (note in table) == marked
    assert (note in stdout) == marked


def test_own_tree(tmp_path: Path) -> None:
    """--tree module:callable, with a file path, on the cpytree backends only
    (no torch import: quick)."""
    src = tmp_path / "mytree.py"
    src.write_text(
        textwrap.dedent(
            """
            import collections
            Point = collections.namedtuple("Point", "x y")
            def make():
                return {"a": [1, 2, (3, None)], "p": Point(4.0, [5]), "s": "leaf"}
            """
        )
    )
    out = tmp_path / "report"
    proc = _harness(
        "--quick",
        "--tree",
        f"{src}:make",
        "--backends",
        "cpytree,cpytree-reference",
        "--no-plots",
        "--out",
        str(out),
        timeout=60,
    )
    doc = json.loads((out / "results.json").read_text())
    assert [w["name"] for w in doc["op_tables"]["workloads"]] == ["make"]
    assert doc["op_tables"]["workloads"][0]["nodes"] == 12
    assert "scaling" not in doc
    cells = {(r["backend"], r["op"]) for r in doc["op_tables"]["results"]}
    assert ("cpytree", "flatten-spec") in cells and ("cpytree-reference", "map-nary") in cells
    # An unregistered namedtuple cannot be dumped (as in torch): an ERR entry
    # with the reason, not a failed run.
    errors = {(e["backend"], e["op"]): e["error"] for e in doc["op_tables"]["errors"]}
    assert "namedtuple" in errors["cpytree", "dumps"]
    assert "make" in proc.stdout


def test_bad_arguments() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cpytree.harness", "--workloads", "nope"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown workload" in proc.stderr


def _run(model: str, mode: str, profile: bool, compile_s: float, digest: str) -> dict[str, Any]:
    run = {
        "model": model,
        "mode": mode,
        "backend": "inductor",
        "profile": profile,
        "install_s": 0.01 if mode == "cpytree" else 0.0,
        "compile_s": compile_s,
        "compile_cpu_s": compile_s * 0.9,
        "phases": {"dynamo_tracing_s": 0.2, "backend_compile_s": 1.0, "guards_s": 0.02},
        "graph_breaks": 0,
        "break_reasons": [],
        "graphs": 1,
        "same_structure": True,
        "allclose_to_eager": True,
        "digest": digest,
    }
    if profile:
        run.update(pytree_s=0.02, pytree_calls=1000, profiled_total_s=2.0, top=[["f", 0.01]])
    else:
        run.update(call_us=50.0, eager_call_us=20.0)
    return run


def test_compile_summary_and_plot(tmp_path: Path) -> None:
    from cpytree.harness import plots
    from cpytree.harness.studies import compile_bench

    runs = [
        _run("mlp", mode, profile, t, "d1")
        for mode in ("torch", "cpytree")
        for profile, t in ((False, 1.5), (False, 1.3), (True, 2.5))
    ]
    runs.append(_run("mlp", "cpytree", False, 1.4, "d2"))  # a different output
    runs.append({"model": "mlp", "mode": "torch", "profile": False, "error": "exit 1: boom"})
    summary = compile_bench._summarize(runs, ["mlp"])
    torch_row, cpytree_row = summary
    assert torch_row["compile_s"] == {"median": 1.4, "min": 1.3, "max": 1.5}
    assert cpytree_row["runs"] == 3 and cpytree_row["profiled_runs"] == 1
    assert cpytree_row["pytree_ms"] == pytest.approx(20.0)
    assert not cpytree_row["identical_across_modes"]
    assert torch_row["errors"] == ["exit 1: boom"]
    study = {
        "backend": "inductor",
        "settings": {"reps": 3, "profile_reps": 1, "warmup": True},
        "summary": summary,
    }
    text = compile_bench._terminal(study)
    assert "mlp: compile 1.40 s -> 1.40 s" in text and "ERROR mlp torch" in text
    assert "| mlp | cpytree |" in compile_bench._markdown(study)
    if plots.available():
        assert plots.compile_plot(study, tmp_path) == ["compile.png"]
        assert (tmp_path / "compile.png").stat().st_size > 1000


def test_subsystem_split() -> None:
    """Pytree time goes to the nearest caller outside pytree code, through
    pytree-to-pytree edges, self-recursion, mutual recursion and builtins."""
    from cpytree.harness.studies.profiling import SUBSYSTEMS, subsystem_split

    dyn = ("/x/torch/_dynamo/a.py", 1, "f")
    aot = ("/x/torch/_functorch/b.py", 1, "g")
    ind = ("/x/torch/_inductor/c.py", 1, "h")
    flat = ("/x/torch/utils/_pytree.py", 1, "tree_flatten")
    helper = ("/x/torch/utils/_pytree.py", 2, "helper")
    comp = ("/x/torch/utils/_pytree.py", 3, "<listcomp>")
    other_fn = ("/x/torch/utils/_pytree.py", 4, "tree_leaves")
    isinst = ("~", 0, "<built-in method builtins.isinstance>")
    mapb = ("~", 0, "<built-in map>")
    # key -> (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)})
    stats = {
        dyn: (1, 1, 1.0, 9.0, {}),
        aot: (1, 1, 1.0, 9.0, {}),
        ind: (1, 1, 1.0, 9.0, {}),
        # 1 s from Dynamo, 2 s from AOTAutograd; cumulative 1.5 / 4.5.
        flat: (2, 2, 3.0, 6.0, {dyn: (1, 1, 1.0, 1.5), aot: (1, 1, 2.0, 4.5)}),
        # helper <-> listcomp recursion, entered from tree_flatten only.
        helper: (4, 2, 4.0, 4.5, {flat: (2, 2, 3.0, 3.0), comp: (2, 2, 1.0, 1.5)}),
        comp: (2, 2, 0.5, 1.5, {helper: (2, 2, 0.5, 1.5)}),
        isinst: (9, 9, 1.2, 1.2, {helper: (4, 4, 0.8, 0.8), dyn: (5, 5, 0.4, 0.4)}),
        mapb: (1, 1, 0.1, 2.1, {ind: (1, 1, 0.1, 2.1)}),
        other_fn: (1, 1, 2.0, 2.0, {mapb: (1, 1, 2.0, 2.0)}),
    }
    pytree = {flat, helper, comp, other_fn}
    files: dict[str, float] = {}
    split = subsystem_split(stats, pytree, files)
    assert list(split) == list(SUBSYSTEMS)
    # tree_flatten's callers: Dynamo 1/4 and AOTAutograd 3/4 by cumulative time;
    # helper (4), listcomp (0.5) and isinstance on helper's behalf (0.8) follow.
    assert split["Dynamo"] == pytest.approx(1.0 + 0.25 * (4.0 + 0.5 + 0.8))
    assert split["AOTAutograd"] == pytest.approx(2.0 + 0.75 * (4.0 + 0.5 + 0.8))
    assert split["inductor"] == pytest.approx(2.0)  # through the builtin map
    assert split["other"] == pytest.approx(0.0)
    assert sum(split.values()) == pytest.approx(3.0 + 4.0 + 0.5 + 0.8 + 2.0)
    assert files == {}


def test_runtime_and_dynamo_sections(tmp_path: Path) -> None:
    """The runtime and Dynamo tables, terminal and Markdown, from synthetic studies."""
    from cpytree.harness.report import write_report
    from cpytree.harness.studies import dynamo_study, runtime_bench

    rt = {
        "reps": 3,
        "rounds": 15,
        "target_ms": 50.0,
        "torch_version": "2.13.0",
        "rows": [
            {"case": "vmap-dict", "what": "vmap", "torch_us": 120.0, "cpytree_us": 80.0,
             "speedup": 1.5, "torch_pytree_calls": 12.0, "torch_pytree_fn_calls": 500.0,
             "cpytree_pytree_fn_calls": 16.0, "torch_pytree_share": 0.366,
             "cpytree_pytree_share": 0.062,
             "cpytree_pytree_top": [["utils/_pytree.py:1(f)", 3.0, 0.05]], "errors": []},
            {"case": "checkpoint", "what": "ckpt", "torch_us": None, "cpytree_us": None,
             "speedup": None, "errors": ["torch: RuntimeError: boom"]},
            {"case": "fsdp2-step", "what": "fsdp", "torch_us": 9.0, "cpytree_us": 10.0,
             "speedup": 0.9, "torch_pytree_calls": 0.0, "torch_pytree_fn_calls": 0.0,
             "cpytree_pytree_fn_calls": 0.0, "errors": []},
        ],
    }  # fmt: skip
    text = runtime_bench.terminal(rt)
    assert "vmap-dict" in text and "1.50x" in text and "ERROR checkpoint torch: Runtime" in text
    assert "OVER 5% vmap-dict: pytree 6.2% with install(): utils/_pytree.py:1(f) (3/call)" in text
    md = runtime_bench.markdown(rt)
    assert "| vmap-dict | 120.0 | 80.0 | 1.50x | - | 12 | 500 | 16 | 36.6% | 6.2% | vmap |" in md
    assert "| checkpoint | - | - | - | - | - | - | - | - | - | ckpt |" in md
    assert "- vmap-dict: pytree 6.2% with install()" in md
    assert "No pytree call in either mode: fsdp2-step;" in md and "fsdp2-step;" in text
    counts = {"bytecodes": 3000, "guards": 100, "graphs": 1, "graph_breaks": 0}
    t_row = dict(counts, case="flatten_unflatten/dict/10", graph_digest="g", output_digest="o")
    c_row = dict(t_row, bytecodes=120, guards=40)
    row = dynamo_study.compare(t_row, c_row)
    row["compile_s"] = {"torch": 0.2, "cpytree": 0.1}
    dyn = {"torch_version": "2.13.0", "reps": 1, "install_s": 0.005,
           "install_imported_dynamo": False, "rows": [row]}  # fmt: skip
    assert "flatten_unflatten/dict/10" in dynamo_study.terminal(dyn)
    meta = {"command": "x", "started": "now", "elapsed_s": 1.0, "settings": {}, "phases_s": {},
            "machine": {"cpu": "c", "cpu_count": 2, "platform": "p", "python": "3", "versions": {}}}  # fmt: skip
    out = tmp_path / "r"
    write_report(out, meta, make_plots=False, dynamo=dyn, dynamo_markdown=dynamo_study.markdown(dyn),
                 runtime=rt, runtime_markdown=md)  # fmt: skip
    report = (out / "report.md").read_text()
    assert "## Dynamo suite" in report and "## Runtime: eager torch paths" in report
    doc = json.loads((out / "results.json").read_text())
    assert doc["dynamo"]["rows"][0]["bytecode_ratio"] == pytest.approx(0.04)
    from cpytree.harness import plots

    if plots.available():
        assert plots.runtime_plot(rt, tmp_path) == ["runtime.png"]
    assert doc["runtime"]["rows"][0]["speedup"] == 1.5


def test_model_needs_compile() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cpytree.harness", "--model", "x.py:make"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--model goes with --compile" in proc.stderr


_USER_MODEL = """
import dataclasses
import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    parts: dict


pytree.register_dataclass(Out)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, batch):
        extra = pytree.tree_map(lambda t: t * 2.0, batch["extra"])
        h = torch.relu(self.a(batch["x"])) + extra[0]
        return Out(self.b(h), {"h": h, "sums": [h.sum(), extra[1].sum()]})


def make():
    torch.manual_seed(1)
    batch = {"x": torch.randn(3, 4), "extra": [torch.randn(3, 4), torch.randn(2)]}
    return Net(), batch  # a single argument, not a tuple
"""


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_compile_user_model(tmp_path: Path) -> None:
    """--compile --model path.py:make on a model defined outside the project:
    both modes compile it (fresh processes), Dynamo's counts, the pytree time
    split by subsystem and the plot land in the report (aot_eager: quick)."""
    src = tmp_path / "usermodel.py"
    src.write_text(_USER_MODEL)
    target = f"{src}:make"
    out = tmp_path / "report"
    proc = _harness(
        "--compile", "--model", target, "--quick", "--compile-backend", "aot_eager",
        "--out", str(out), timeout=900,
    )  # fmt: skip
    doc = json.loads((out / "results.json").read_text())
    assert "runtime" not in doc  # the runtime section belongs to the zoo run
    rows = doc["compile"]["summary"]
    assert [(r["model"], r["mode"]) for r in rows] == [(target, "torch"), (target, "cpytree")]
    for r in rows:
        assert r["errors"] == [], r["errors"]
        assert r["graphs"] == 1 and r["graph_breaks"] == 0
        assert r["allclose_to_eager"] and r["identical_across_modes"]
        assert r["call_us"]["median"] > 0 and r["compile_s"]["median"] > 0
        assert r["call_pytree_calls"] >= 0
        split = r["subsystems_ms"]
        assert set(split) == {"Dynamo", "AOTAutograd", "FakeTensor/proxy", "export",
                              "inductor", "other"}  # fmt: skip
        assert sum(split.values()) == pytest.approx(r["pytree_ms"], rel=1e-6)
        assert split["AOTAutograd"] + split["FakeTensor/proxy"] > 0
    dyn = doc["dynamo"]
    assert "error" not in dyn, dyn
    (row,) = dyn["rows"]
    assert row["case"] == target
    assert row["bytecodes"]["torch"] > 0 and row["bytecodes"]["cpytree"] > 0
    assert row["guards"]["cpytree"] <= row["guards"]["torch"]
    assert row["same_graphs"] and row["same_output"]
    report = (out / "report.md").read_text()
    assert "by the torch subsystem that called it" in report
    assert "## Dynamo suite" in report and target in report
    assert "pytree time during the compile by calling subsystem" in proc.stdout
    assert "Dynamo suite (with / without cpytree.install())" in proc.stdout
    from cpytree.harness import plots

    if plots.available():
        assert (out / "pytree-subsystems.png").stat().st_size > 1000


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_runtime_quick(tmp_path: Path) -> None:
    """--runtime --quick on a local and a distributed case: the structure of
    the tables and of results.json in both modes, counts beside the times."""
    cases = ["export-module", "checkpoint", "dtensor-ops"]
    out = tmp_path / "report"
    proc = _harness("--runtime", "--quick", "--no-plots", "--out", str(out),
                    "--runtime-cases", ",".join(cases), timeout=600)  # fmt: skip
    doc = json.loads((out / "results.json").read_text())
    assert "compile" not in doc and "dynamo" not in doc
    rows = {r["case"]: r for r in doc["runtime"]["rows"]}
    assert list(rows) == cases
    for r in rows.values():
        assert r["errors"] == [], r["errors"]
        assert r["torch_us"] > 0 and r["cpytree_us"] > 0 and r["speedup"] > 0
        for mode in ("torch", "cpytree"):
            assert r[f"{mode}_pytree_fn_calls"] >= r[f"{mode}_pytree_calls"] >= 0
            assert 0 <= r[f"{mode}_pytree_share"] <= 1
        assert r["case"] in proc.stdout
    # The export call checks its input with pytree on every call; the engine
    # does in one call what torch's Python pytree does in hundreds.
    export = rows["export-module"]
    assert export["torch_pytree_calls"] > 0
    assert export["cpytree_pytree_fn_calls"] < export["torch_pytree_fn_calls"]
    header = next(line for line in proc.stdout.splitlines() if line.startswith("case "))
    assert "pytree fn calls" in header and "pytree share" in header
    report = (out / "report.md").read_text()
    assert "## Runtime: eager torch paths that call pytree" in report
    assert "| dtensor-ops |" in report


def test_runtime_unknown_case(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cpytree.harness", "--runtime", "--runtime-cases", "nope",
         "--out", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "unknown runtime case(s): nope" in proc.stderr


def test_peers_name_custom_children_in_key_paths() -> None:
    """flatten-paths compares equal work: jax names a registered node's
    children through the same user function as torch (`flatten_with_keys`),
    instead of numbering them, and plain flatten keeps the plain function."""
    jtu = pytest.importorskip("jax.tree_util")
    from cpytree.harness.ops.backends import _load_jax
    from cpytree.harness.ops.workloads import ModuleNode

    assert _load_jax().available
    node = ModuleNode(("conv", "bn"), (1, [2]))
    paths, _ = jtu.tree_flatten_with_path(node)
    assert paths == [((jtu.DictKey("conv"),), 1), ((jtu.DictKey("bn"), jtu.SequenceKey(0)), 2)]
    leaves, treedef = jtu.tree_flatten(node)
    assert leaves == [1, 2]
    assert jtu.tree_unflatten(treedef, leaves) == node
