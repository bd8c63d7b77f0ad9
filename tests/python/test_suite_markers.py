"""Every test that faces torch carries the ``torch`` marker (the torch-version run is ``-m torch``).

``scripts/test_python.sh --torch`` runs ``pytest -m torch tests/python`` against
each torch release, so a torch-facing test without the marker would silently
leave that run. This reads the sources of tests/python/test_*.py and finds
each use of torch: an import of torch or transformers, an
``importorskip``/``find_spec``/``import_module`` of one, a call of
``torch_pytree()`` (trees.py's helper, which imports torch), ``import`` of a
helper module here that imports torch at its top, and code in a string that
imports torch (run in a child process). Each use must be covered:

* anywhere, by a module-level ``pytestmark`` that includes ``pytest.mark.torch``;
* inside a ``test_*`` function, by ``@pytest.mark.torch`` on it, or by its
  taking the ``torch_pytree`` fixture (conftest.py marks those tests);
* inside a module-level helper function or constant, when every ``test_*``
  function that names the helper is covered (and at least one does).

Anything else (a use in module-level code, a helper no test names) needs the
module's ``pytestmark``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Collection
from pathlib import Path

HERE = Path(__file__).resolve().parent
TORCH_TOP = {"torch", "transformers"}
IMPORTERS = {"importorskip", "find_spec", "import_module"}
IMPORT_IN_STRING = re.compile(r"^\s*(?:import|from)\s+(?:torch|transformers)\b", re.MULTILINE)
MARK = "pytest.mark.torch"


def _is_torch_name(name: str | None) -> bool:
    return name is not None and name.split(".")[0] in TORCH_TOP


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _torch_uses(node: ast.AST, helpers: Collection[str]) -> list[ast.AST]:
    """The nodes under `node` that import torch (`helpers`: local modules that do)."""
    uses: list[ast.AST] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            if any(_is_torch_name(a.name) or a.name in helpers for a in n.names):
                uses.append(n)
        elif isinstance(n, ast.ImportFrom):
            if n.level == 0 and (_is_torch_name(n.module) or n.module in helpers):
                uses.append(n)
        elif isinstance(n, ast.Call):
            name = _callee(n)
            first = n.args[0] if n.args else None
            if name == "torch_pytree" or (
                name in IMPORTERS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and _is_torch_name(first.value)
            ):
                uses.append(n)
        elif (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and IMPORT_IN_STRING.search(n.value)
        ):
            uses.append(n)
    return uses


def _has_mark(exprs: list[ast.expr]) -> bool:
    return any(ast.unparse(e) == MARK for e in exprs)


def _module_marked(tree: ast.Module) -> bool:
    for stmt in tree.body:
        targets = getattr(stmt, "targets", None) or [getattr(stmt, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            value = stmt.value  # type: ignore[attr-defined]
            elts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            if _has_mark(elts):
                return True
    return False


def _test_covered(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    return _has_mark(fn.decorator_list) or "torch_pytree" in params


def _defined_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            return targets[0].id
    return None


def uncovered(source: str, helpers: Collection[str] = ()) -> list[str]:
    """'line N: why' for each torch use in a test module's `source` the marker misses."""
    tree = ast.parse(source)
    if _module_marked(tree):
        return []
    tests = [
        s
        for s in tree.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith("test_")
    ]
    problems = []
    for stmt in tree.body:
        uses = _torch_uses(stmt, helpers)
        if not uses:
            continue
        line = uses[0].lineno  # type: ignore[attr-defined]
        if stmt in tests:
            if not _test_covered(stmt):  # type: ignore[arg-type]
                problems.append(f"line {line}: {stmt.name} lacks @{MARK}")  # type: ignore[attr-defined]
            continue
        name = _defined_name(stmt)
        callers = [
            t
            for t in tests
            if name and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t))
        ]
        if not callers:
            problems.append(f"line {line}: module-level use of torch, no `pytestmark = {MARK}`")
        for t in callers:
            if not _test_covered(t):
                problems.append(f"line {line}: {t.name} uses {name} but lacks @{MARK}")
    return problems


def _helpers_importing_torch() -> set[str]:
    """Helper modules of this folder (not test_*) that import torch when imported."""
    names = set()
    for path in HERE.glob("*.py"):
        if path.name.startswith("test_") or path.name == "conftest.py":
            continue
        tree = ast.parse(path.read_text())
        top = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom, ast.Try))]
        if any(_torch_uses(s, ()) for s in top):
            names.add(path.stem)
    return names


def test_every_torch_facing_test_is_marked() -> None:
    helpers = _helpers_importing_torch()
    assert helpers == {"thirdparty_models"}  # a new one: check it is meant to import torch
    problems = [
        f"{path.name} {p}"
        for path in sorted(HERE.glob("test_*.py"))
        if path.name != Path(__file__).name  # its strings below are sample sources
        for p in uncovered(path.read_text(), helpers)
    ]
    assert problems == [], "torch-facing tests outside `-m torch`:\n" + "\n".join(problems)


def test_the_check_finds_unmarked_uses() -> None:
    def check(src: str) -> list[str]:
        return uncovered(textwrap.dedent(src), {"thirdparty_models"})

    assert check("import torch\n") == [
        "line 1: module-level use of torch, no `pytestmark = pytest.mark.torch`"
    ]
    assert check("import torch\npytestmark = [pytest.mark.torch, pytest.mark.slow]\n") == []
    assert check("tp = pytest.importorskip('torch.utils._pytree')\n") != []
    assert check("import thirdparty_models as m\n") != []
    assert check("import transformers\n") != []
    assert check("from torch.utils import _pytree\n") != []
    assert check("import torchvision_like\nimport cpytree\n") == []
    # Inside a test: its own marker, or the torch_pytree fixture.
    body = "def test_a():\n    import torch.fx\n"
    assert check(body) == ["line 2: test_a lacks @pytest.mark.torch"]
    assert check("@pytest.mark.torch\n" + body) == []
    assert check("def test_a(impl, torch_pytree):\n    trees.torch_pytree()\n") == []
    find_spec = "@pytest.mark.skipif(importlib.util.find_spec('torch') is None, reason='')\n"
    assert check(find_spec + "def test_b():\n    pass\n") != []
    assert check("@pytest.mark.torch\n" + find_spec + "def test_b():\n    pass\n") == []
    # Code run in a child process, in a string.
    assert check('def test_c():\n    run("import torch\\nprint(1)")\n') != []
    # Helpers and constants: covered through the tests that name them.
    helper = "def _setup(name):\n    if name == 'torch':\n        trees.torch_pytree()\n"
    assert check(helper) != []  # named by no test
    assert check(helper + "def test_d():\n    _setup('torch')\n") == [
        "line 3: test_d uses _setup but lacks @pytest.mark.torch"
    ]
    assert check(helper + "def test_d(torch_pytree):\n    _setup('torch')\n") == []
    model = 'MODEL = """\nimport torch\n"""\n'
    assert check(model + "def test_e():\n    write(MODEL)\n") != []
    assert check(model + "@pytest.mark.torch\ndef test_e():\n    write(MODEL)\n") == []
    assert check("IMPLS = [torch_pytree()]\n@pytest.mark.torch\ndef test_f():\n    pass\n") != []
