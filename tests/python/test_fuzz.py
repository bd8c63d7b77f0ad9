"""The short run of the differential fuzzer (tests/fuzz/pytree_fuzz.py).

`make fuzz` runs the long campaign; here, within `make test`, a bounded
coverage-guided atheris run (when atheris is installed) and a fixed-seed run
of random inputs, each in a subprocess so that a crash fails the test and
reports the input instead of killing the session. See pytree_fuzz.py for the
modes (clean differential, hostile keys, mutation, loads, TreeSpec(...), and
the torch mode with install() active: torch_mode.py) and what each input must
satisfy.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

import support

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ = os.path.join(HERE, "..", "fuzz", "pytree_fuzz.py")
ATHERIS_RUNS = int(os.environ.get("CPYTREE_FUZZ_SHORT_RUNS", "20000"))
ATHERIS_SECONDS = int(os.environ.get("CPYTREE_FUZZ_SHORT_SECONDS", "10"))


def run_fuzzer(args, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, FUZZ, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"fuzzer failed (exit {proc.returncode}):\n{out[-6000:]}"
    return out


def inputs_tried(out):
    m = re.search(r"pytree_fuzz: (\d+) inputs", out)
    return int(m.group(1)) if m else 0


@pytest.fixture
def engine_on():
    if not support.engine_active():
        pytest.skip("the C++ engine is not active: nothing to compare")


def test_fuzz_random_inputs(engine_on):
    out = run_fuzzer(["--random", "3000", "--seed", "1", "--seconds", "20"], timeout=300)
    assert inputs_tried(out) > 0, out[-2000:]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_fuzz_torch_mode(engine_on):
    """The torch mode (install() active, torch-made specs vs torch): a short run."""
    seconds = os.environ.get("CPYTREE_FUZZ_TORCH_SECONDS", "20")
    out = run_fuzzer(["--torch", "--random", "5000", "--seed", "1", "--seconds", seconds],
                     timeout=int(seconds) * 5 + 240)
    assert inputs_tried(out) > 0, out[-2000:]


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
def test_fuzz_atheris_short_campaign(engine_on, tmp_path):
    if os.environ.get("CPYTREE_SANITIZED"):
        pytest.skip("atheris does not run with gcc's ASan preloaded (make fuzz replays instead)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    out = run_fuzzer(
        [f"-runs={ATHERIS_RUNS}", f"-max_total_time={ATHERIS_SECONDS}", "-seed=1", "-max_len=512",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        timeout=ATHERIS_SECONDS * 10 + 120,
    )
    assert re.search(r"Done \d+ runs", out), out[-2000:]
