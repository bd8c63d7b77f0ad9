"""examples/aoti end to end: the C++ program's outputs equal Python's.

``make test-aoti`` runs model.py (export + AOT compile, writes
build/aoti/model.pt2 and the outputs Python's compiled model gave,
reference.pt), builds examples/aoti/aoti_main, then this file. Here the C++
program runs the package on the same inputs; it saves its output Tree
flattened again (cpytree's spec JSON and the leaves, via torch::pickle_save).
torch loads both: the spec must be byte-identical to torch's spec of Python's
output, each leaf equal to Python's, and torch's unflatten of the C++ result
equal to Python's output object (namedtuple, dataclass, None included). The
mismatch errors are checked word for word.

Environment: CPYTREE_AOTI_DIR (default build/aoti), CPYTREE_AOTI_MAIN (default
build/aoti/cmake/aoti_main).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.utils._pytree as pytree  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = pathlib.Path(os.environ.get("CPYTREE_AOTI_DIR", ROOT / "build" / "aoti"))
MAIN = pathlib.Path(os.environ.get("CPYTREE_AOTI_MAIN", OUT / "cmake" / "aoti_main"))
sys.path.insert(0, str(ROOT / "examples" / "aoti"))
import model  # noqa: E402  (registers Pair and Scale with torch)

if not (OUT / "model.pt2").exists() or not MAIN.exists():
    pytest.skip("run `make test-aoti` (builds the package and aoti_main)", allow_module_level=True)


def run(*args: str) -> str:
    done = subprocess.run(
        [str(MAIN), str(OUT / "model.pt2"), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_outputs_equal_python(tmp_path: pathlib.Path) -> None:
    out = run(str(tmp_path / "cpp_out.pt"))
    assert out.splitlines() == [
        "input spec:  9 leaves, 8 tensors",
        "outputs:     {'sum': (f32[4], [f32[3, 4], f32[3, 4]]), 'pair': Pair(f32[2, 2], "
        "f32[2, 2]), 'scale': Scale(f32[4], f32[1]), 'none': None}",
        "struct:      pair.left f32[2, 2], none nullopt",
    ]
    spec_text, leaves = torch.load(tmp_path / "cpp_out.pt", weights_only=False)
    ref = torch.load(OUT / "reference.pt")
    assert spec_text == ref["spec"]
    assert len(leaves) == len(ref["leaves"]) == 8
    for got, want in zip(leaves, ref["leaves"]):
        if want is None:
            assert got is None
        else:
            assert torch.equal(got, want)
    # torch rebuilds the C++ result into the objects Python's call returned.
    cpp_result = pytree.tree_unflatten(leaves, pytree.treespec_loads(spec_text))
    python_result = pytree.tree_unflatten(ref["leaves"], pytree.treespec_loads(ref["spec"]))
    assert isinstance(cpp_result["pair"], model.Pair)
    assert isinstance(cpp_result["scale"], model.Scale)
    assert cpp_result["none"] is None
    assert pytree.tree_structure(cpp_result) == pytree.tree_structure(python_result)


def test_mismatch_errors_name_the_key_path() -> None:
    lines = run("--errors").splitlines()
    assert lines[:6] == [
        "tree, a list one too long: the spec has a list node with 2 children, the value has 3 "
        "(at key path tree[0][0]['a'][0])",
        "tree, a list for the namedtuple: the spec has a namedtuple node 'cpytree_aoti.Pair', "
        "the value is a list node (at key path tree[0][1])",
        "struct, a key the spec lacks: the value has the key 'c', which is not among the "
        "spec's keys ['a', 'b'] (at key path tree[0][0])",
        "struct, a tensor where the spec has a list: the value is a leaf, the spec has a list "
        "node (at key path tree[0][0]['a'][1])",
        "outputs into a type with a tuple of 3: the spec node has 2 children, the C++ type "
        "needs 3 (at key path tree['sum'][1])",
        "outputs into a struct, one output short: treespec.unflatten(leaves): `leaves` has "
        "length 7 but the spec refers to a pytree that holds 8 items (TreeSpec(dict, "
        "['sum', 'pair', 'scale', 'none'], [TreeSpec(tuple, None, [*,",
    ]
