"""install()'s scan of torch modules' import-time bindings in the engine:
`_C._find_bound_in_modules` (filter and scan in one call) gives what the
Python filter `_patch._torch_modules` followed by a Python scan by identity
gives."""

from __future__ import annotations

import types

import pytest

import cpytree
from cpytree._torch import _patch

pytestmark = pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active")


def target() -> None: ...


def other() -> None: ...


class Holder:
    """A non-module in sys.modules with a __dict__ (read through getattr)."""

    def __init__(self) -> None:
        self.tree_map = target


class NoDict:
    __slots__ = ()


class BadDict:
    @property
    def __dict__(self) -> dict:  # type: ignore[override]
        raise RuntimeError("boom")


class Module(types.ModuleType):
    """A ModuleType subclass (torch has some in sys.modules)."""


def _module(name: str, **values: object) -> types.ModuleType:
    m = types.ModuleType(name)
    vars(m).update(values)
    return m


def _modules() -> dict[str, object]:
    sub = Module("torch.sub")
    sub.f = target
    return {
        "torch": _module("torch", tree_map=target, x=1),
        "torchvision": _module("torchvision", tree_map=target),  # not a torch module
        "functorch": _module("functorch", tree_map=target),  # only "functorch." modules
        "torch.a": _module("torch.a", g=other, h=target, k=target),
        "os": _module("os", tree_map=target),
        "functorch.b": _module("functorch.b", tree_map=other),
        "torch.holder": Holder(),
        "torch.none": None,
        "torch.nodict": NoDict(),
        "torch.sub": sub,
        "torch/": _module("torch/", tree_map=target),
    }


def _python(modules: dict[str, object], objects: tuple[object, ...]) -> list[tuple[str, str]]:
    saved = _patch.sys.modules
    try:  # _torch_modules reads sys.modules: give it these
        _patch.sys = types.SimpleNamespace(modules=modules)  # type: ignore[assignment]
        names, namespaces = _patch._torch_modules(skip=())
    finally:
        _patch.sys = __import__("sys")
        assert _patch.sys.modules is saved
    wanted = {id(o) for o in objects}
    return [
        (names[i], key)
        for i, ns in enumerate(namespaces)
        for key, value in ns.items()
        if id(value) in wanted
    ]


def test_same_bindings_as_the_python_filter_and_scan() -> None:
    modules = _modules()
    objects = (target, other)
    got = cpytree._C._find_bound_in_modules(modules, objects, _patch.TORCH_NAMES,
                                            _patch.TORCH_PREFIXES)  # fmt: skip
    assert got == _python(modules, objects)
    assert got == [("torch", "tree_map"), ("torch.a", "g"), ("torch.a", "h"), ("torch.a", "k"),
                   ("functorch.b", "tree_map"), ("torch.holder", "tree_map"), ("torch.sub", "f")]  # fmt: skip


def test_only_the_named_and_prefixed_str_names() -> None:
    modules: dict[object, object] = {1: _module("x", f=target), "torch": _module("t", f=target)}
    find = cpytree._C._find_bound_in_modules
    assert find(modules, (target,), ("torch",), ()) == [("torch", "f")]
    assert find(modules, (target,), (), ("tor",)) == [("torch", "f")]
    assert find(modules, (target,), (), ()) == []
    with pytest.raises(TypeError, match="names and prefixes are str"):
        find(modules, (target,), (b"torch",), ())


def test_a_dict_that_raises_propagates() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        cpytree._C._find_bound_in_modules({"torch.bad": BadDict()}, (target,), (), ("torch.",))


@pytest.mark.torch
def test_install_finds_the_bindings_the_python_scan_finds() -> None:
    torch = pytest.importorskip("torch")  # noqa: F841
    import sys

    import torch.utils._pytree as tp

    originals = {id(f): f for f in (tp.tree_map, tp.tree_flatten, tp.tree_leaves)}
    skip = ("torch.utils._pytree",)
    via_engine = _patch.find_bindings(originals, skip)
    modules = sys.modules.copy()
    for name in skip:
        modules.pop(name)
    assert via_engine == _python(modules, tuple(originals.values()))
    assert len(via_engine) > 10
