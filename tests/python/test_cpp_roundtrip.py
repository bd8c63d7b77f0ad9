"""C++ -> Python: specs written by the header-only C++ library load in torch.

``write_cpp_specs`` (tests/cpp/write_cpp_specs.cc, run by ``make test-cpp``)
dumps specs built in C++ with ``cpytree::Dumps`` into ``build/cpp/cpp_specs.json``.
Here torch's own ``treespec_loads`` reads each one, and ``treespec_dumps`` must
give back the same bytes, ``repr`` the text C++'s ``TreeSpec::ToString()``
printed, and the counts must agree. (The other direction, Python -> C++, is
tests/cpp/cross_language_test.cc over tests/cpp/fixtures/specs.json.)

Needs torch (skipped without it) and the C++ output: set ``CPYTREE_CPP_SPECS``
to the file, or build it with ``make test-cpp``; when only the writer binary
exists it is run into a temporary file.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess

import pytest

pytree = pytest.importorskip("torch.utils._pytree", reason="torch is not installed")

pytestmark = pytest.mark.torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_SPECS = ROOT / "build" / "cpp" / "cpp_specs.json"
WRITER = ROOT / "build" / "cpp" / "tests" / "cpp" / "write_cpp_specs"

# The types the C++ side refers to by serialized name.
Point = collections.namedtuple("Point", ["x", "y"])
Point.__module__ = "cpytree_test"


class Pair:
    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag


def _specs_file(tmp_path_factory) -> pathlib.Path:
    env = os.environ.get("CPYTREE_CPP_SPECS")
    if env:
        return pathlib.Path(env)
    if DEFAULT_SPECS.exists():
        return DEFAULT_SPECS
    if WRITER.exists():
        out = tmp_path_factory.mktemp("cpp") / "cpp_specs.json"
        subprocess.run([str(WRITER), str(out)], check=True, capture_output=True)
        return out
    pytest.skip(f"no C++ specs: {DEFAULT_SPECS} is missing; run `make test-cpp` first")


@pytest.fixture(scope="module")
def cpp_specs(tmp_path_factory):
    path = _specs_file(tmp_path_factory)
    pytree._register_namedtuple(Point, serialized_type_name="cpytree_test.Point")
    pytree.register_pytree_node(
        Pair,
        lambda p: ([p.a, p.b], p.tag),
        lambda xs, tag: Pair(xs[0], xs[1], tag),
        serialized_type_name="cpytree_test.Pair",
    )
    pytree.treespec_loads.cache_clear()
    try:
        yield json.loads(path.read_text())
    finally:
        pytree._deregister_pytree_node(Point)
        pytree._deregister_pytree_node(Pair)
        pytree.treespec_loads.cache_clear()


def test_file_has_specs(cpp_specs):
    names = {s["name"] for s in cpp_specs}
    assert {"leaf", "flatten_std_map", "flatten_tree_every_kind"} <= names


def test_torch_loads_and_dumps_cpp_bytes(cpp_specs):
    for s in cpp_specs:
        spec = pytree.treespec_loads(s["dumps"])
        assert pytree.treespec_dumps(spec) == s["dumps"], s["name"]
        assert spec.num_leaves == s["num_leaves"], s["name"]
        assert spec.num_nodes == s["num_nodes"], s["name"]


def test_cpp_repr_is_torch_repr(cpp_specs):
    for s in cpp_specs:
        assert repr(pytree.treespec_loads(s["dumps"])) == s["repr"], s["name"]


def test_cpp_flatten_matches_torch_flatten(cpp_specs):
    by_name = {s["name"]: s for s in cpp_specs}
    # The C++ values behind these specs, written the Python way.
    params = {"b": [3.0], "w": [1.0, 2.0]}  # std::map iterates keys sorted
    assert (
        pytree.treespec_dumps(pytree.tree_structure(params)) == by_name["flatten_std_map"]["dumps"]
    )
    by_id = {1: None, 3: 1.0}  # std::unordered_map: keys sorted; nullopt is a None leaf
    assert (
        pytree.treespec_dumps(pytree.tree_structure(by_id))
        == by_name["flatten_unordered_map_optional"]["dumps"]
    )
    nested = ((1, 2), [[3], []])
    assert (
        pytree.treespec_dumps(pytree.tree_structure(nested))
        == by_name["flatten_nested_std"]["dumps"]
    )
