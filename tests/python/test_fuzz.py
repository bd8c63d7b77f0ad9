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

import cpytree
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


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_fuzz_torch_mode(engine_on):
    """The torch mode (install() active, torch-made specs vs torch): a short run."""
    seconds = os.environ.get("CPYTREE_FUZZ_TORCH_SECONDS", "20")
    out = run_fuzzer(
        ["--torch", "--random", "5000", "--seed", "1", "--seconds", seconds],
        timeout=int(seconds) * 5 + 240,
    )
    assert inputs_tried(out) > 0, out[-2000:]


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
def test_fuzz_atheris_short_campaign(engine_on, tmp_path):
    if os.environ.get("CPYTREE_SANITIZED"):
        pytest.skip("atheris does not run with gcc's ASan preloaded (make fuzz replays instead)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    out = run_fuzzer(
        [
            f"-runs={ATHERIS_RUNS}",
            f"-max_total_time={ATHERIS_SECONDS}",
            "-seed=1",
            "-max_len=512",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
        ],
        timeout=ATHERIS_SECONDS * 10 + 120,
    )
    assert re.search(r"Done \d+ runs", out), out[-2000:]


# --------------------------------------------------------------------------
# Regressions the fuzzer found: each test is the smallest form of an input on
# which the engine and the reference (or torch) disagreed.
# --------------------------------------------------------------------------


class Const:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Const and other.v == self.v

    def __hash__(self):
        return hash(self.v)


class Empty:
    """A custom node that has no children."""


_REGISTERED = []


def _register():
    if not _REGISTERED:
        cpytree.register_constant(Const)
        cpytree.register_pytree_node(Empty, lambda e: ([], "ctx"), lambda v, c: Empty())
        _REGISTERED.append(True)


@pytest.fixture
def engine_c():
    if not support.engine_active():
        pytest.skip("the C++ engine is not active")
    _register()
    return cpytree._C


@pytest.mark.parametrize("make", [lambda: Const(3), lambda: Empty()], ids=["constant", "childless"])
def test_tree_flatten_spec_childless_custom_node(engine_c, make):
    # torch.fx: flat, real_spec = tree_flatten(x); a childless custom node's
    # real spec is TreeSpec(<type>, <context>, []), not a leaf. The engine
    # took any one-node traversal for a leaf and raised "Real spec * of
    # object ... is different from expected spec".
    tree = make()
    spec = cpytree.tree_structure(tree)
    assert engine_c.tree_flatten_spec(tree, spec) == []
    assert engine_c.tree_flatten_spec([tree, 1], cpytree.tree_structure([tree, 1])) == [1]


@pytest.mark.parametrize(
    "first, second",
    [(0.0, -0.0), (-0.0, 0.0), (complex(0.0, 0.0), complex(0.0, -0.0)), ((1, 0.0), (1, -0.0))],
    ids=["zero-negzero", "negzero-zero", "complex", "tuple"],
)
def test_interning_keeps_signed_zero_keys_apart(impl, first, second):
    # 0.0 == -0.0 and both are floats, but they are different keys to give
    # back: interning merged {0.0: x} and {-0.0: x} into one spec, so the
    # second tree unflattened (and dumped) with the first tree's key.
    import math

    def sign(k):
        k = k[1] if isinstance(k, tuple) else k
        k = k.imag if isinstance(k, complex) else k
        return math.copysign(1.0, k)

    _a_leaves, a_spec = impl.tree_flatten({first: 1})
    b_leaves, b_spec = impl.tree_flatten({second: 1})
    (back,) = impl.tree_unflatten(b_leaves, b_spec).keys()
    assert sign(back) == sign(second)
    (ctx,) = b_spec.context
    assert sign(ctx) == sign(second)
    assert a_spec == b_spec  # torch's == still calls them equal
    if not isinstance(first, complex):  # complex keys do not serialize (as in torch)
        assert impl.treespec_dumps(b_spec) != impl.treespec_dumps(a_spec)
