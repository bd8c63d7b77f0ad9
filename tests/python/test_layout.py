"""The package's layout: no import cycle among the modules of python/cpytree.

Read with ast from the files (nothing is imported): every `import`/`from ...
import` of a cpytree module at import time (module level, including inside
`if`/`try`, but not inside functions or `if TYPE_CHECKING:`) is an edge.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "cpytree"


def _module_name(path: Path) -> str:
    parts = ["cpytree", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_time_nodes(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import: module level, into if/try/with, not into defs."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += _import_time_nodes(node.orelse)
            continue
        found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            found += _import_time_nodes(getattr(node, field, []))
    return found


def _imports(path: Path, modules: set[str]) -> set[str]:
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in _import_time_nodes(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            edges.add(base)
            edges.update(f"{base}.{alias.name}" for alias in node.names)
    # Importing a submodule runs its packages' __init__ first; this module's own
    # packages are already being imported when it runs, so they are no edge.
    with_parents = set()
    for edge in edges & modules:
        parts = edge.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    ancestors = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    return (with_parents & modules) - ancestors - {name}


def import_graph() -> dict[str, set[str]]:
    """Module -> the cpytree modules it imports at import time."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    return {_module_name(path): _imports(path, modules) for path in paths}


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph[start])
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    return seen


def test_no_import_cycle() -> None:
    graph = import_graph()
    cycles = {
        module: sorted(dep for dep in deps if module in _reaches(graph, dep))
        for module, deps in graph.items()
    }
    assert {module: deps for module, deps in cycles.items() if deps} == {}
