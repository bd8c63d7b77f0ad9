"""The package's layout: no import cycle among the modules of python/cpytree,
and no arrow up to the package's face from what the face itself loads (at
import or at call time, a package it loads with all its modules).

Read with ast from the files (nothing is imported): every `import`/`from ...
import` of a cpytree module is an edge, except under `if TYPE_CHECKING:`.
Two graphs: the imports run at import time (module level, including inside
`if`/`try`, not inside functions), where a cycle breaks importing; and every
import, call-time ones inside function bodies included, where a cycle is two
modules that need each other (a split that did not separate them).
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "cpytree"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _module_name(path: Path, package: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_nodes(body: list[ast.stmt], call_time: bool) -> list[ast.stmt]:
    """The statements of `body` and those nested in it: into if/try/with/loops, into
    function and class bodies only when `call_time`, never into `if TYPE_CHECKING:`."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, _DEFS) and not call_time:
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += _import_nodes(node.orelse, call_time)
            continue
        found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            found += _import_nodes(getattr(node, field, []), call_time)
    return found


def _imports(path: Path, package: Path, modules: set[str], call_time: bool) -> set[str]:
    name = _module_name(path, package)
    parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()  # the modules the statements name
    for node in _import_nodes(ast.parse(path.read_text()).body, call_time):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = parent.rsplit(".", node.level - 1)[0] if node.level > 1 else parent
                base = f"{anchor}.{base}" if base else anchor
            submodules = {f"{base}.{alias.name}" for alias in node.names} & modules
            named.update(submodules)
            if len(submodules) < len(node.names):  # a name of `base` itself
                named.add(base)
    # Importing a submodule runs its packages' __init__ first; this module's own
    # packages are already being imported when it runs, so those are no edge
    # (`from .. import _engine`). A package it names itself is one (`import
    # cpytree`, `from .. import install`): an arrow to that face.
    ancestors = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    edges: set[str] = set()
    for module in named & modules:
        parts = module.split(".")
        edges.add(module)
        edges.update(
            p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p not in ancestors
        )
    return (edges & modules) - {name}


def import_graph(package: Path = PACKAGE, call_time: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (at import time, or at any time)."""
    paths = sorted(package.rglob("*.py"))
    modules = {_module_name(path, package) for path in paths}
    # Extension modules (their stubs: `_C.pyi`) are modules too, not names of a package.
    modules |= {_module_name(path, package) for path in package.rglob("*.pyi")}
    graph = {_module_name(path, package): set[str]() for path in package.rglob("*.pyi")}
    graph.update(
        {_module_name(path, package): _imports(path, package, modules, call_time) for path in paths}
    )
    return graph


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph[start])
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Module -> the modules it imports that import it back (directly or not)."""
    found = {
        module: sorted(dep for dep in deps if module in _reaches(graph, dep))
        for module, deps in graph.items()
    }
    return {module: deps for module, deps in found.items() if deps}


def arrows_up(package: Path = PACKAGE) -> list[str]:
    """The modules below the package's face that import the face back, at
    import or at call time: each an arrow up (what sits below the face takes
    what it needs as arguments, from the face's caller).

    Below the face: what it loads, when imported or later (install() loading
    `_torch`), and every module of a package it loads: a package is one room
    (`_torch._autoload`, which the face never names, is of `_torch`)."""
    face = package.name
    any_time = import_graph(package, call_time=True)
    loaded = _reaches(any_time, face) - {face}
    below = {
        module
        for module in any_time
        if any(module == room or module.startswith(f"{room}.") for room in loaded)
    }
    return sorted(module for module in below if face in any_time[module])


def test_nothing_below_the_face_imports_it() -> None:
    assert arrows_up() == []


def test_an_arrow_up_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import low, side\n")
    (package / "side.py").write_text("from .low import f\n")
    (package / "low" / "__init__.py").write_text("from .. import side\ndef f():\n    import pkg\n")
    (package / "above.py").write_text("import pkg\n")  # not loaded by the face: above it
    assert arrows_up(package) == ["pkg.low"]
    (package / "low" / "__init__.py").write_text("from .. import side\n")
    assert arrows_up(package) == []
    (package / "side.py").write_text("def g():\n    from . import install\n")
    assert arrows_up(package) == ["pkg.side"]
    (package / "side.py").write_text("from .low import f\n")
    # A room the face loads only at call time, whose module the face never
    # names, importing the face: `_torch._autoload` doing `import cpytree`.
    (package / "top").mkdir()
    (package / "top" / "__init__.py").write_text("")
    (package / "top" / "entry.py").write_text("def run():\n    import pkg\n")
    assert arrows_up(package) == []  # pkg.top is above: the face does not load it
    (package / "__init__.py").write_text(
        "from . import low, side\ndef install():\n    from . import top\n"
    )
    assert arrows_up(package) == ["pkg.top.entry"]


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == {}


def test_no_import_cycle_at_call_time() -> None:
    assert cycles(import_graph(call_time=True)) == {}


def test_a_cycle_through_a_function_body_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.sub import c\n"
        "def f():\n"
        "    if True:\n"
        "        from .a import x\n"
    )
    (package / "sub" / "c.py").write_text("from .b import f\n")
    assert cycles(import_graph(package)) == {}
    expected = {"pkg.sub.a": ["pkg.sub.b"], "pkg.sub.b": ["pkg.sub.a"]}
    assert cycles(import_graph(package, call_time=True)) == expected
