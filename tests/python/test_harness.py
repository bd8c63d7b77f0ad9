"""The profiling harness itself (`cpytree-harness`), not what it measures.

A `--quick` run in a child process (its custom-node registrations and the
backends it imports stay out of this test session) writes a report into a
temporary directory; the tests check the files, that every number in them
is positive and that every backend has its row and columns. The compile
study's bookkeeping is checked on synthetic runs (compiling takes minutes).
No timing is asserted.
"""

from __future__ import annotations

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
    from cpytree.harness import compile_bench, plots

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
