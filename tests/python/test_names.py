"""The one table of names (cpytree._names) against what the package, the
reference, the engine and the stub `_C.pyi` actually hold.

The recipe that adds a public name (docs/recipe_public_name.md) ends here:
a name missing from the table, the static declarations, the engine or the
stub fails one of these tests."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import cpytree
from cpytree import _names

PACKAGE = Path(cpytree.__file__).resolve().parent
STUB = PACKAGE / "_C.pyi"
# Module attributes of the extension that are not API: CPython's, and the
# atexit drain of CPython < 3.11 (src/module.cc).
_NOT_API = {"_exit_drain"}

needs_engine = pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active")


def _homes() -> list[tuple[str, str]]:
    """(name, home) for every name of the table."""
    pairs = [(name, module) for module, names in _names.SHARED.items() for name in names]
    pairs += [(name, module) for module, names in _names.LAZY.items() for name in names]
    pairs += [(name, "engine") for name in _names.ENGINE]
    pairs += [(name, "package") for name in _names.PACKAGE]
    return pairs


def test_every_name_has_one_home() -> None:
    names = [name for name, _ in _homes()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_public_names_have_a_home() -> None:
    homed = {name for name, _ in _homes()}
    assert sorted(set(_names.PUBLIC) - homed) == []
    assert len(set(_names.PUBLIC)) == len(_names.PUBLIC)


def test_all_is_the_table() -> None:
    assert cpytree.__all__ == list(_names.PUBLIC)
    assert cpytree._reference.__all__ == list(_names.PUBLIC)


def test_package_binds_each_name_from_its_home() -> None:
    reference = cpytree._reference
    for name, home in _homes():
        value = getattr(cpytree, name)
        if home in _names.SHARED or (home in _names.LAZY and home != "_serialization"):
            module = importlib.import_module(f"cpytree.{home}")
            assert value is getattr(module, name), name
        elif home == "engine":
            expected = (
                getattr(cpytree._C, _names.ENGINE[name])
                if cpytree.ENGINE == "cpp"
                else getattr(reference, name)
            )
            assert value is expected, name


def test_reference_namespace_is_the_table() -> None:
    # Every name but the package's own (install(), ENGINE, ...) is the
    # reference's too, as in torch's single module.
    reference = cpytree._reference
    own = {"ENGINE", "install", "is_installed", "status", "uninstall"}
    missing = [name for name, _ in _homes() if name not in own and not hasattr(reference, name)]
    assert missing == []
    for module, names in (*_names.SHARED.items(), *_names.LAZY.items()):
        if module in ("_reference", "_serialization"):
            continue
        source = importlib.import_module(f"cpytree.{module}")
        for name in names:
            assert getattr(reference, name) is getattr(source, name), name


def _static_names() -> dict[str, set[str]]:
    """Names cpytree/__init__.py declares for type checkers: home -> names.

    Imports `from .module import name as name` (any depth of if/else), and
    the names it defines itself (def, class, assignment), as "package".
    """
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    found: dict[str, set[str]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for alias in node.names:
                    if alias.asname == alias.name:
                        found.setdefault(node.module, set()).add(alias.name)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault("package", set()).add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.setdefault("package", set()).add(target.id)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)

    visit(tree.body)
    return found


def test_static_declarations_follow_the_table() -> None:
    static = _static_names()
    for module, names in _names.SHARED.items():
        assert sorted(set(names) - static.get(module, set())) == [], module
    for module, names in _names.LAZY.items():
        declared = static.get(module, set()) | static.get("package", set())
        assert sorted(set(names) - declared) == [], module
    assert sorted(set(_names.ENGINE) - static.get("_C", set())) == []
    own = static.get("package", set()) | static.get("_torch", set())  # install() & co.
    assert sorted(set(_names.PACKAGE) - own) == []
    # Nothing imported by name that the table does not know.
    homed = {name for name, _ in _homes()}
    for module in ("_nodes", "_registry", "_keys", "_serialization", "_C"):
        assert sorted(static.get(module, set()) - homed) == [], module


# ---------------------------------------------------------------------------
# The stub `_C.pyi` against the runtime extension
# ---------------------------------------------------------------------------


def _stub() -> tuple[dict[str, ast.AST], dict[str, ast.AST]]:
    """(module-level names, TreeSpec's members) of _C.pyi."""
    tree = ast.parse(STUB.read_text())
    top: dict[str, ast.AST] = {}
    spec: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top[node.name] = node
            if isinstance(node, ast.ClassDef) and node.name == "TreeSpec":
                for member in node.body:
                    if isinstance(member, ast.FunctionDef):
                        spec[member.name] = member
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top[node.target.id] = node
    return top, spec


def _runtime_names(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not (n.startswith("__") and n.endswith("__"))}


@needs_engine
def test_stub_names_are_the_extensions() -> None:
    top, _ = _stub()
    runtime = _runtime_names(cpytree._C) - _NOT_API
    assert sorted(runtime - set(top)) == [], "in _C, missing from _C.pyi"
    assert sorted(set(top) - runtime) == [], "in _C.pyi, missing from _C"
    assert sorted(set(_names.ENGINE.values()) - set(top)) == []


@needs_engine
def test_stub_treespec_members_are_the_extensions() -> None:
    _, spec = _stub()
    runtime = _runtime_names(cpytree._C.TreeSpec)
    assert sorted(runtime - set(spec)) == [], "in _C.TreeSpec, missing from _C.pyi"
    # The stub's dunders too (__repr__, __reduce__, __copy__, ...).
    assert [name for name in spec if not hasattr(cpytree._C.TreeSpec, name)] == []


def _stub_parameters(node: ast.FunctionDef) -> list[tuple[str, str]]:
    a = node.args
    out = [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs]
    out += [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
    if a.vararg is not None:
        out.append((a.vararg.arg, "VAR_POSITIONAL"))
    out += [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs]
    if a.kwarg is not None:
        out.append((a.kwarg.arg, "VAR_KEYWORD"))
    return out


@needs_engine
def test_stub_signatures_match_where_introspectable() -> None:
    top, _ = _stub()
    checked = 0
    for name, node in sorted(top.items()):
        if not isinstance(node, ast.FunctionDef):
            continue
        try:
            signature = inspect.signature(getattr(cpytree._C, name))
        except (TypeError, ValueError):  # no __text_signature__
            continue
        runtime = [(p.name, p.kind.name) for p in signature.parameters.values()]
        stub = _stub_parameters(node)
        assert [n for n, _ in stub] == [n for n, _ in runtime], name
        for (_, stub_kind), (_, kind) in zip(stub, runtime, strict=True):
            # The stub may be stricter (keystr/key_get refuse keywords although
            # their text signature does not say so), never looser.
            if kind == "POSITIONAL_ONLY":
                assert stub_kind == kind, name
            elif stub_kind != kind:
                assert (stub_kind, kind) == ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"), name
        checked += 1
    assert checked >= len(_names.ENGINE) - 1  # all but TreeSpec, a class


def test_reference_only_mode_binds_the_reference() -> None:
    # No extension at all (it failed to import): every engine name is the
    # reference's namesake, and the key/serialization names their modules'.
    code = textwrap.dedent(
        """
        import json, sys, warnings
        sys.modules["cpytree._C"] = None
        warnings.simplefilter("ignore")
        import cpytree
        from cpytree import _names, _reference, _keys, _serialization
        wrong = [n for n in _names.ENGINE if getattr(cpytree, n) is not getattr(_reference, n)]
        wrong += [n for n in ("key_get", "keystr") if getattr(cpytree, n) is not getattr(_keys, n)]
        wrong += [n for n in ("treespec_dumps",)
                  if cpytree.treespec_dumps is not _serialization.treespec_dumps]
        print(json.dumps({"engine": cpytree.ENGINE, "c": cpytree._C is None, "wrong": wrong,
                          "leaf": cpytree.LeafSpec is _reference.LeafSpec,
                          "loads": cpytree.treespec_dumps(cpytree.treespec_loads(
                              cpytree.treespec_dumps(cpytree.tree_structure([1, {"a": 2}]))))}))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res == {
        "engine": "python",
        "c": True,
        "wrong": [],
        "leaf": True,
        "loads": '[1, {"type": "builtins.list", "context": "null", "children_spec": '
        '[{"type": null, "context": null, "children_spec": []}, {"type": "builtins.dict", '
        '"context": "[\\"a\\"]", "children_spec": [{"type": null, "context": null, '
        '"children_spec": []}]}]}]',
    }


def test_live_names_follow_their_home_when_it_rebinds(monkeypatch) -> None:
    """`_names.LIVE`: the package and the reference read the registry's lock
    where it lives, so once the registries join (the home swaps in torch's
    lock) they hand out the lock that registrations take, not a stale copy."""
    import threading

    from cpytree import _registry

    assert {"_NODE_REGISTRY_LOCK"} == _names.LIVE
    assert "_NODE_REGISTRY_LOCK" in dir(cpytree)
    joined = threading.RLock()
    monkeypatch.setattr(_registry, "_NODE_REGISTRY_LOCK", joined)
    assert cpytree._NODE_REGISTRY_LOCK is joined
    assert cpytree._reference._NODE_REGISTRY_LOCK is joined
