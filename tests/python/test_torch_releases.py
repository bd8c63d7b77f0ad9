"""Each difference of cpytree._releases.DIFFERENCES against the installed
torch's own functions: cpytree (engine and reference) gives this release's
behaviour, and the release-specific text is asserted exactly.

`make test-torch-range` runs it on every supported release (each in its own
venv); tests/python/test_releases.py checks every release's texts without
torch.
"""

from __future__ import annotations

import collections
import copy
import pickle
import warnings
from typing import Any

import pytest

import cpytree
import cpytree._reference as ref
from cpytree import _releases

torch = pytest.importorskip("torch")
tp = pytest.importorskip("torch.utils._pytree")
pytestmark = pytest.mark.torch
IMPLS = pytest.mark.parametrize("impl", [cpytree, ref], ids=["cpytree", "reference"])
RELEASE = _releases.release_of(torch.__version__)

Unnamed = collections.namedtuple("Unnamed", "a b")
Nameless = collections.namedtuple("Nameless", "a b")  # registered without a serialized name


class Flags:
    """A node whose unflatten shows what treespec_pprint fills the leaves with."""

    def __init__(self, *values: Any) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"Flags{tuple(isinstance(v, str) for v in self.values)}"


def _flags_flatten(f: Flags) -> tuple[list[Any], None]:
    return list(f.values), None


def _flags_unflatten(values: Any, _: Any) -> Flags:
    return Flags(*values)


def _nameless_flatten(t: Any) -> tuple[list[Any], None]:
    return list(t), None


def _nameless_unflatten(values: Any, _: Any) -> Any:
    return Nameless(*values)


# Each registry its own registration (cpytree's first: following torch's
# registry copies nothing over a type cpytree registered itself).
for _module in (cpytree, tp):
    _module._private_register_pytree_node(Flags, _flags_flatten, _flags_unflatten)
    _module._private_register_pytree_node(Nameless, _nameless_flatten, _nameless_unflatten)


def _error(fn: Any, *args: Any) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn(*args)
    return info.value


def _same_error(ours: BaseException, theirs: BaseException) -> None:
    assert type(ours) is type(theirs)
    assert ours.args == theirs.args


def test_the_active_release_is_this_torch() -> None:
    assert torch.__version__.split("+")[0] in _releases.SUPPORTED
    assert _releases.active() == RELEASE


def _namedtuple_errors(module: Any) -> list[BaseException]:
    leaf = module.treespec_leaf()
    return [
        _error(module.treespec_dumps, module.TreeSpec(collections.namedtuple, Unnamed, [leaf, leaf])),
        _error(module.treespec_dumps, module.TreeSpec(collections.namedtuple, Nameless, [leaf, leaf])),
        _error(module.treespec_loads, '[1, {"type": "collections.namedtuple", "context": "x.Y", '
               '"children_spec": [{"type": null, "context": null, "children_spec": []}]}]'),
    ]  # fmt: skip


@IMPLS
def test_namedtuple_messages(impl: Any) -> None:
    theirs = _namedtuple_errors(tp)
    for ours, their in zip(_namedtuple_errors(impl), theirs, strict=True):
        _same_error(ours, their)
    # DIFFERENCES["serialized_spelling"]
    word = "serialized" if RELEASE >= (2, 14) else "serializated"
    assert f"register a {word}_type_name." in str(theirs[0])
    assert f"find a {word}_type_name." in str(theirs[1])
    assert str(theirs[2]).endswith(f"because we couldn't find a {word} name.")


@IMPLS
def test_loads_of_an_unregistered_type(impl: Any) -> None:
    text = '[1, {"type": "x.Y", "context": "null", "children_spec": []}]'
    ours, theirs = _error(impl.treespec_loads, text), _error(tp.treespec_loads, text)
    _same_error(ours, theirs)
    assert type(theirs) is NotImplementedError
    if RELEASE >= (2, 15):  # DIFFERENCES["loads_unregistered_message"]
        assert str(theirs).startswith(
            "Deserializing x.Y in pytree failed because the serialized type is not registered "
            "in this process. If this type is defined in another package, "
        )
        assert str(theirs).endswith("The `serialized_type_name` must match 'x.Y'.")
    else:
        assert str(theirs) == "Deserializing x.Y in pytree is not registered."


def _copies(leaf: Any) -> tuple[list[Any], list[type[Warning]]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = [copy.copy(leaf), copy.deepcopy(leaf), pickle.loads(pickle.dumps(leaf))]
    return made, [w.category for w in caught]


def test_leafspec_copy_and_pickle() -> None:
    # DIFFERENCES["leafspec_reduce"], the reference against torch's LeafSpec
    ours, our_warnings = _copies(ref.treespec_leaf())
    theirs, their_warnings = _copies(tp.treespec_leaf())
    assert our_warnings == their_warnings
    assert [m is ref.treespec_leaf() for m in ours] == [m is tp.treespec_leaf() for m in theirs]
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    if RELEASE >= (2, 14):
        assert their_warnings == [] and all(m is tp.treespec_leaf() for m in theirs)
    else:
        assert their_warnings == [FutureWarning] * 3
        assert not any(m is tp.treespec_leaf() for m in theirs)


def _loaded(spec: Any) -> tuple[list[tuple[str, bool]], list[type[Warning]]]:
    """pickle.loads(pickle.dumps(spec)): each leaf's (class name, is treespec_leaf()), warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = pickle.loads(pickle.dumps(spec))
    leaves = loaded.children() if loaded.num_children else [loaded]
    return [(type(m).__name__, m is tp.treespec_leaf()) for m in leaves], [
        w.category for w in caught
    ]


def test_installed_engine_specs_pickle_their_leaves_as_this_torch() -> None:
    # DIFFERENCES["leafspec_reduce"] for the engine's specs while installed:
    # they pickle in torch's form, a leaf as this release's LeafSpec.__reduce__.
    theirs = [_loaded(tp.treespec_leaf()), _loaded(tp.tree_structure([1, 2]))]
    cpytree.install()
    try:
        engine = [tp.tree_structure(1), tp.tree_structure([1, 2])]
        assert all(type(spec) is not tp.TreeSpec for spec in engine)  # the engine's
        ours = [_loaded(spec) for spec in engine]
    finally:
        cpytree.uninstall()
    assert ours == theirs
    if RELEASE >= (2, 14):
        assert theirs[1] == ([("LeafSpec", True)] * 2, [])
    else:
        # one new LeafSpec (the two leaves are one object in the pickle), one warning
        assert theirs[1] == ([("LeafSpec", False)] * 2, [FutureWarning])


def test_malformed_leaf_spec() -> None:
    # DIFFERENCES["leaf_assert_messages"]
    for args in ((None, 1, []), (None, None, [1])):
        ours, theirs = _error(ref.TreeSpec, *args), _error(tp.TreeSpec, *args)
        _same_error(ours, theirs)
        assert type(theirs) is AssertionError
        assert (theirs.args == ()) is (RELEASE < (2, 11))


@IMPLS
def test_pprint_placeholder(impl: Any) -> None:
    # DIFFERENCES["pprint_placeholder_str"]
    text = impl.treespec_pprint(impl.tree_structure([Flags(1, 2)]))
    assert text == tp.treespec_pprint(tp.tree_structure([Flags(1, 2)]))
    is_str = RELEASE >= (2, 12)
    assert text == f"[Flags({is_str}, {is_str})]"


def test_fn_type_names() -> None:
    # DIFFERENCES["fn_type_names"]: cpytree has both spellings on every release
    has_fn = RELEASE >= (2, 12)
    for name in ("FlattenFn", "UnflattenFn", "FlattenWithKeysFn"):
        assert hasattr(tp, name) is has_fn, name
        assert hasattr(cpytree, name), name
    for name in ("FlattenFunc", "UnflattenFunc", "FlattenWithKeysFunc"):
        assert hasattr(tp, name) and hasattr(cpytree, name), name
    assert ("FlattenFn" in tp.__all__) is has_fn
    assert ("FlattenFunc" in tp.__all__) is not has_fn
