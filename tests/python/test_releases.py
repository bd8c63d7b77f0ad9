"""cpytree._releases: each supported torch release's semantics, without torch.

The texts here are copied from each release's torch/utils/_pytree.py; the
same behaviours against the installed torch's own functions are in
tests/python/test_torch_releases.py.
"""

from __future__ import annotations

import collections
import copy
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import cpytree
import cpytree._reference as ref
from cpytree import _releases

IMPLS = pytest.mark.parametrize("impl", [cpytree, ref], ids=["cpytree", "reference"])
RELEASES = pytest.mark.parametrize("release", _releases.SUPPORTED)

Unnamed = collections.namedtuple("Unnamed", "a b")
Nameless = collections.namedtuple("Nameless", "a b")  # registered without a serialized name


def _nameless_flatten(t: Any) -> tuple[list[Any], Any]:
    return list(t), None


def _nameless_unflatten(values: Any, _: Any) -> Any:
    return Nameless(*values)


cpytree._private_register_pytree_node(Nameless, _nameless_flatten, _nameless_unflatten)


def _minor(release: str) -> tuple[int, int]:
    major, minor, _ = release.split(".")
    return int(major), int(minor)


def _error(fn: Any, *args: Any) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn(*args)
    return info.value


def _spelling(release: str) -> str:
    return "serialized" if _minor(release) >= (2, 14) else "serializated"


def test_the_table() -> None:
    minors = [_minor(r) for r in _releases.SUPPORTED]
    assert minors == sorted(set(minors)) and _releases.SUPPORTED[-1] == _releases.NEWEST
    for name, difference in _releases.DIFFERENCES.items():
        # a change between two supported releases, first seen in one of them
        assert minors[0] < difference.since <= minors[-1], name
        assert difference.since in minors, name
        assert difference.what and difference.how, name


@pytest.mark.parametrize(
    ("version", "release"),
    [("2.13.0+cpu", (2, 13)), ("2.14.0+cu126", (2, 14)), ("2.15.0", (2, 15)),
     ("2.9.1", (2, 10)), ("1.13.1", (2, 10)), ("2.16.0.dev20270101", (2, 15)),
     ("3.0.0", (2, 15)), ("nightly", (2, 15))],
)  # fmt: skip
def test_release_of(version: str, release: tuple[int, int]) -> None:
    assert _releases.release_of(version) == release


def test_without_torch_the_newest_release() -> None:
    code = (
        "import sys, cpytree\n"
        "from cpytree import _releases\n"
        "assert 'torch' not in sys.modules\n"
        "print(_releases.active(), _releases.has('loads_unregistered_message'))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert out == "(2, 15) True\n"


def test_emulating_nests_and_restores() -> None:
    outside = _releases.active()
    with _releases.emulating("2.10.0"):
        assert _releases.active() == (2, 10)
        with _releases.emulating("2.14.1"):
            assert _releases.active() == (2, 14)
        assert _releases.active() == (2, 10)
    assert _releases.active() == outside


@RELEASES
@IMPLS
def test_namedtuple_messages(impl: Any, release: str) -> None:
    leaf = impl.treespec_leaf()
    with _releases.emulating(release):
        unregistered = _error(
            impl.treespec_dumps, impl.TreeSpec(collections.namedtuple, Unnamed, [leaf, leaf])
        )
        nameless = _error(
            impl.treespec_dumps, impl.TreeSpec(collections.namedtuple, Nameless, [leaf, leaf])
        )
        unknown = _error(impl.treespec_loads, '[1, {"type": "collections.namedtuple", "context": "x.Y", '
                         '"children_spec": [{"type": null, "context": null, "children_spec": []}]}]')  # fmt: skip
    s = _spelling(release)
    assert type(unregistered) is NotImplementedError
    assert str(unregistered) == (
        f"Can't serialize TreeSpec of namedtuple class {Unnamed} because we "
        f"didn't register a {s}_type_name. Please register using `_register_namedtuple`."
    )
    assert type(nameless) is NotImplementedError
    assert str(nameless) == (
        f"Can't serialize TreeSpec of namedtuple class {Nameless} because we "
        f"couldn't find a {s}_type_name. Please register using `_register_namedtuple`."
    )
    assert type(unknown) is NotImplementedError
    assert str(unknown) == (
        f"Can't deserialize TreeSpec of namedtuple class x.Y because we couldn't find a {s} name."
    )


@RELEASES
@IMPLS
def test_loads_of_an_unregistered_type(impl: Any, release: str) -> None:
    text = '[1, {"type": "x.Y", "context": "null", "children_spec": []}]'
    with _releases.emulating(release):
        error = _error(impl.treespec_loads, text)
    assert type(error) is NotImplementedError
    if _minor(release) < (2, 15):
        assert str(error) == "Deserializing x.Y in pytree is not registered."
        return
    assert str(error) == (
        "Deserializing x.Y in pytree failed because the serialized type is not registered in "
        "this process. If this type is defined in another package, import that package before "
        "loading this artifact so its pytree registrations run. If you control the type, "
        "register it with `torch.utils._pytree.register_pytree_node(..., "
        "serialized_type_name=...)` or `torch.export.register_dataclass(..., "
        "serialized_type_name=...)` before deserializing. The `serialized_type_name` must "
        "match 'x.Y'."
    )


@RELEASES
def test_reference_leafspec_copy_and_pickle(release: str) -> None:
    leaf = ref.treespec_leaf()
    with _releases.emulating(release), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        copies = [copy.copy(leaf), copy.deepcopy(leaf), pickle.loads(pickle.dumps(leaf))]
    for made in copies:
        assert type(made) is ref.LeafSpec and made == leaf
    if _minor(release) >= (2, 14):  # (treespec_leaf, ()): the one leaf spec, no warning
        assert all(made is leaf for made in copies) and caught == []
    else:  # a new LeafSpec each, through the deprecated class: one FutureWarning each
        assert not any(made is leaf for made in copies)
        assert [w.category for w in caught] == [FutureWarning] * 3


@RELEASES
def test_engine_leaf_spec_is_one_object_on_every_release(release: str) -> None:
    # DIFFERENCES["leafspec_reduce"]: the engine's leaf spec is interned
    leaf = cpytree.treespec_leaf()
    with _releases.emulating(release), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert copy.copy(leaf) is leaf and pickle.loads(pickle.dumps(leaf)) is leaf


@RELEASES
def test_malformed_leaf_spec(release: str) -> None:
    with _releases.emulating(release):
        context = _error(ref.TreeSpec, None, 1, [])
        children = _error(ref.TreeSpec, None, None, [ref.treespec_leaf()])
        engine = _error(cpytree.TreeSpec, None, 1, [])
    assert type(context) is type(children) is type(engine) is AssertionError
    if _minor(release) >= (2, 11):
        assert context.args == ("leaf node should not have a context",)
        assert children.args == ("leaf node should not have children",)
    else:  # a bare assert
        assert context.args == children.args == ()
    # the engine's text on every release (DIFFERENCES["leaf_assert_messages"])
    assert engine.args == ("leaf node should not have a context",)


class Flags:
    """A node whose unflatten shows what treespec_pprint fills the leaves with."""

    def __init__(self, *values: Any) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"Flags{tuple(isinstance(v, str) for v in self.values)}"


cpytree.register_pytree_node(Flags, lambda f: (list(f.values), None), lambda v, _: Flags(*v))


@RELEASES
@IMPLS
def test_pprint_placeholder(impl: Any, release: str) -> None:
    spec = impl.tree_structure([Flags(1, 2)])
    with _releases.emulating(release):
        text = impl.treespec_pprint(spec)
    is_str = _minor(release) >= (2, 12)  # `_asterisk`, a str; before, `_DummyLeaf()`
    assert text == f"[Flags({is_str}, {is_str})]"


def test_the_scripts_name_the_supported_releases() -> None:
    """Every copy of the release list the shell side keeps (it cannot import
    cpytree._releases) says what _releases says."""
    root = Path(__file__).resolve().parents[2]
    supported, ci, dev = _releases.SUPPORTED, _releases.CI_RELEASES, _releases.DEV_RELEASE
    # The Makefile and the parts it includes (make/release.mk has the torch lists).
    makefile = "".join(
        p.read_text() for p in [root / "Makefile", *sorted((root / "make").glob("*.mk"))]
    )
    assert f"TORCH_RANGE    ?= {' '.join(supported)}\n" in makefile
    assert f"TORCH_VERSIONS ?= {' '.join(ci)}\n" in makefile
    assert f"releases CI tests: {', '.join(ci[:-1])} and {ci[-1]}\n" in makefile
    assert f"every supported release, {supported[0]}-{supported[-1]}\n" in makefile
    ci_run = (root / ".ci" / "run").read_text()
    assert f'TORCH_VERSIONS="${{CI_TORCH_VERSIONS:-{" ".join(ci)}}}"' in ci_run
    assert f"`pytest -m torch` on torch {', '.join(ci)}\n" in ci_run
    runner = (root / "scripts" / "test_python.sh").read_text()
    assert f"[ $# -gt 0 ] || set -- {' '.join(ci)}\n" in runner
    assert f"TORCH_VERSION=${{TORCH_VERSION:-{dev}}}\n" in runner
    assert f"torch=={dev}\n" in (root / "requirements-dev.txt").read_text()
    assert f"\ntorch=={_releases.NEWEST} " in (root / "requirements-aarch64-torch.txt").read_text()
    readme = " ".join((root / "README.md").read_text().split())
    assert f"every release from {supported[0]} to {supported[-1]}" in readme
    assert f"torch, {supported[-1]}'s." in readme
    assert f"CI runs {', '.join(ci[:-1])} and {ci[-1]})" in readme


def test_the_inventory_has_a_column_per_release() -> None:
    from cpytree._torch import _versions
    from cpytree._torch_link import _inventory

    assert _versions.TESTED == _releases.SUPPORTED
    assert (
        tuple(f"{_minor(r)[0]}.{_minor(r)[1]}" for r in _releases.SUPPORTED) == _inventory.RELEASES
    )
    for name, states, _what in _inventory.VERSIONS:
        assert len(states) == len(_inventory.RELEASES), name
