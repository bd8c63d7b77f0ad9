"""docs/recipe_node_kind.md lists every place a node kind touches.

The recipe's checklist names places as `path:Symbol`. Two checks keep it
true: every listed symbol is still in its file, and every source file that
handles a builtin kind by name is listed. "Handles a kind by name" is measured
on the newest builtin kind, deque: a C++ file of src/ or include/cpytree/
naming `kDeque` or a `...Deque...` identifier, a Python file of the package
naming `deque` (the harness's workloads aside). A file that starts doing
so without the recipe knowing fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "recipe_node_kind.md"
ENTRY = re.compile(r"`((?:src|include|python)/[\w/.]+\.(?:h|cc|py)):(\w+)`")
CPP_KIND = re.compile(r"\bkDeque\b|\b\w*Deque\w*\b")
PY_KIND = re.compile(r"\bdeque\b")
# Files that name deque for another reason than handling the node kind.
NOT_SITES = {
    "python/cpytree/_reference.py": "deque(..., maxlen=0) consumes tree_map_'s iterator",
    "python/cpytree/_torch/dynamo/_trackers.py": "its docstring lists the kinds the walk reads",
}


def entries(text: str) -> list[tuple[str, str]]:
    return ENTRY.findall(text)


def sites() -> list[str]:
    """The files that handle a node kind by name (see the module docstring)."""
    found = []
    for base in ("src", "include/cpytree"):
        for path in sorted((ROOT / base).rglob("*")):
            if path.suffix in (".h", ".cc") and CPP_KIND.search(path.read_text(encoding="utf-8")):
                found.append(path.relative_to(ROOT).as_posix())
    package = ROOT / "python" / "cpytree"
    for path in sorted(package.rglob("*.py")):
        if "harness" in path.relative_to(package).parts:
            continue
        name = path.relative_to(ROOT).as_posix()
        if name not in NOT_SITES and PY_KIND.search(path.read_text(encoding="utf-8")):
            found.append(name)
    return found


def missing(text: str) -> list[str]:
    """What the checklist `text` lacks or names wrongly: one line per problem."""
    listed = entries(text)
    problems = [
        f"{path}:{symbol} is not in {path}"
        for path, symbol in listed
        if not (ROOT / path).is_file()
        or not re.search(rf"\b{symbol}\b", (ROOT / path).read_text(encoding="utf-8"))
    ]
    files = {path for path, _ in listed}
    problems += [
        f"{site} handles node kinds and is not in the checklist"
        for site in sites()
        if site not in files
    ]
    return problems


def test_the_checklist_names_every_place_a_node_kind_touches() -> None:
    text = RECIPE.read_text(encoding="utf-8")
    assert len(entries(text)) >= 20
    assert missing(text) == []


def test_a_place_left_out_of_the_checklist_is_found() -> None:
    text = RECIPE.read_text(encoding="utf-8")
    path, symbol = entries(text)[0]
    pruned = "\n".join(line for line in text.splitlines() if f"`{path}:" not in line)
    assert f"{path} handles node kinds and is not in the checklist" in missing(pruned)
    renamed = text.replace(f"`{path}:{symbol}`", f"`{path}:{symbol}Gone`")
    assert f"{path}:{symbol}Gone is not in {path}" in missing(renamed)
