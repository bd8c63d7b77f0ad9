"""The docs name only what exists: every file path, `path:symbol` and
`path:line` in README.md, CONTRIBUTING.md and docs/*.md.

A reference is a path ending in a known source suffix, optionally followed
by `:Symbol` (a word of that file: a function, class, variable or make
target; for a dotted `Class.method`, its last part) or `:N` / `:N-M` (lines
the file has). A path with a folder resolves against the repository root,
the document's own folder (links) or a source root (python/cpytree, src,
include/cpytree, ...); a bare file name with a `:symbol` (`walk.cc:Visit`)
against the repository's files of that name (one of them must have the
symbol). A bare name alone (`__init__.py`, torch's `test_pytree.py`, a
user's `train.py`) is not checked. Left out: torch's and CPython's own trees
(`torch/...`, `test/...`, `PC/...`), the machine's `../shared/` folder, build
outputs (`build/...`, `/tmp`), and
the lines of dated records that say what a file was called "at the time".
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SUFFIXES = "pyi|py|cc|h|sh|mk|md|txt|toml|cmake|lock|json|yml"
REF = re.compile(
    r"(?<![\w/.$~-])((?:\.\./)?(?:[\w.-]+/)*[\w-]+\.(?:" + SUFFIXES + r"))\b"
    r"(?::([A-Za-z_]\w*(?:\.\w+)*|\d+(?:-\d+)?))?"
)
EXTERNAL = (
    "torch/", "test/", "functorch/", "PC/", "tmp/", "build/", "Lib/", "Include/",
    "../shared/",  # the machine's shared folder beside the checkout, not the repository
)  # fmt: skip
SOURCE_ROOTS = (
    "",
    "python/",
    "python/cpytree/",
    "python/cpytree/harness/",
    "python/cpytree/_torch/",
    "src/",
    "include/",
    "include/cpytree/",
    "tests/",
    "tests/python/",
)


def documents(root: Path) -> list[Path]:
    return [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]


def repository_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return out.split()


def resolve(root: Path, doc: Path, path: str, names: dict[str, list[str]]) -> list[Path]:
    """The files `path` may name (a bare name: every file of that name)."""
    if "/" not in path:
        return [root / f for f in names.get(path, [])]
    for base in (doc.parent, *(root / r for r in SOURCE_ROOTS)):
        if (base / path).exists():
            return [base / path]
    return []


def broken_references(root: Path, docs: list[Path], files: list[str]) -> list[str]:
    """One line per reference that names nothing: doc:line: what."""
    names: dict[str, list[str]] = {}
    for f in files:
        names.setdefault(f.rsplit("/", 1)[-1], []).append(f)
    found = []
    for doc in docs:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if "at the time" in line:
                continue
            for m in REF.finditer(line):
                path, suffix = m.group(1), m.group(2)
                if path.startswith(EXTERNAL):
                    continue
                if "/" not in path and suffix is None:
                    continue  # a bare name: ours (__init__.py), torch's or a user's (train.py)
                where = f"{doc.relative_to(root)}:{number}"
                targets = resolve(root, doc, path, names)
                if not targets:
                    found.append(f"{where}: {path}: no such file")
                    continue
                if suffix is None:
                    continue
                texts = [t.read_text(errors="replace") for t in targets if t.is_file()]
                if suffix[0].isdigit():
                    last = int(suffix.split("-")[-1])
                    if all(last > len(text.splitlines()) for text in texts):
                        found.append(f"{where}: {path}:{suffix}: past the file's end")
                elif not any(
                    re.search(rf"\b{re.escape(suffix.split('.')[-1])}\b", text) for text in texts
                ):
                    found.append(f"{where}: {path}:{suffix}: no such name in the file")
    return found


def test_every_reference_of_the_docs_exists() -> None:
    assert broken_references(ROOT, documents(ROOT), repository_files(ROOT)) == []


def test_a_planted_break_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "walk.cc").write_text("bool Visit() { return true; }\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_walk.py").write_text("def test_visit(): ...\n")
    (tmp_path / "README.md").write_text(
        "See `src/walk.cc:Visit`, `walk.cc:Visit`, src/walk.cc:1 and `test_walk.py`.\n"
        "Run `train.py`; torch's `torch/utils/_pytree.py:tree_map` is not ours.\n"
    )
    (tmp_path / "CONTRIBUTING.md").write_text(
        "Broken: `src/walk.cc:Leave`, `src/gone.cc`, `src/walk.cc:7`, `gone.py:f`,\n"
        "`Class.method` in `walk.cc:Walker.Leave`;\n"
        "`scripts/old.sh` (at the time): a dated record, left alone.\n"
    )
    (tmp_path / "docs" / "a.md").write_text("[the walk](../src/walk.cc) and `src/walk.cc:2-9`\n")
    files = ["src/walk.cc", "tests/test_walk.py", "README.md", "CONTRIBUTING.md", "docs/a.md"]
    assert broken_references(tmp_path, documents(tmp_path), files) == [
        "CONTRIBUTING.md:1: src/walk.cc:Leave: no such name in the file",
        "CONTRIBUTING.md:1: src/gone.cc: no such file",
        "CONTRIBUTING.md:1: src/walk.cc:7: past the file's end",
        "CONTRIBUTING.md:1: gone.py: no such file",
        "CONTRIBUTING.md:2: walk.cc:Walker.Leave: no such name in the file",
        "docs/a.md:1: src/walk.cc:2-9: past the file's end",
    ]
