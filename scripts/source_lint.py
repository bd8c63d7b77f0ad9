#!/usr/bin/env python3
"""House rules of the extension's sources that no general linter checks (`make lint`).

1. Every entry point is guarded: each function a PyMethodDef / PyGetSetDef
   table or a `tp_*` slot hands to CPython goes through `Guarded<fn>::Call`
   (directly, or through a guard macro: a macro whose definition uses
   `Guarded<`), which turns a C++ exception into a Python one (src/base/common.h:
   none may unwind into CPython's C frames). Slots that only release
   memory (`tp_dealloc`, `tp_traverse`, `tp_clear`) and CPython's own
   functions (`PyObject_SelfIter`) need none.
2. `Py_EnterRecursiveCall` and `Py_LeaveRecursiveCall` come in pairs: as
   many of each in every function body that uses them.
3. Guard macros are defined once (one header), not once per file.
4. The floors (FLOORS below, drawn in docs/architecture.md): every file of
   src/ has a floor, a file includes nothing on a higher floor, and no two
   modules (a module: `x.h` with `x.cc`) include each other, directly or
   round a longer circle. Checked when the root is this repository's src/
   (FLOOR_ROOT), so the other rules can run on any tree.
5. With `--headers-tu FILE`: FILE, the one translation unit clang-tidy reads
   the header library through, includes every public header (each
   include/cpytree/*.h beside src/), so a new header cannot escape the lint.
6. One spelling of the free-threaded switch: CPython's `Py_GIL_DISABLED` is
   read in src/base/ft.h alone, which defines CPYTREE_FREE_THREADED (0 or 1)
   from it; every other file tests CPYTREE_FREE_THREADED.

    python3 scripts/source_lint.py [src] [--headers-tu tests/cpp/every_public_header.cc]

Prints one line per finding (file:line: message) and exits 1 if any.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The engine's floors, lowest first: a folder of src/ (every file under it)
# or a module at src/'s top (a stem), and the floor it stands on. A file may
# include its own floor and those below, never one above.
FLOORS: dict[str, int] = {
    "base": 0,  # CPython helpers with no pytree knowledge, the fenced OrderedDict layout
    "ground": 1,  # registry, children, the traversal arena, spec objects, intern table, keys
    "spec_model": 2,  # the spec model: what a TreeSpec is, compares as, (de)serializes to
    "traversals": 3,  # flatten, unflatten, map, iter, the spec walks
    "treespec": 4,  # the Python faces at src/'s top: the TreeSpec type ...
    "module": 4,  # ... and the module (method table, init)
}
FLOOR_ROOT = Path(__file__).resolve().parents[1] / "src"
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)

UNGUARDED_SLOTS = {"tp_dealloc", "tp_free", "tp_traverse", "tp_clear", "tp_new", "tp_alloc"}
TABLE_SLOTS = {"tp_methods", "tp_getset", "tp_members", "tp_base", "tp_as_number"}
TABLE_START = re.compile(r"\b(PyMethodDef|PyGetSetDef)\s+\w+\s*\[\s*\]\s*=\s*\{")
ENTRY = re.compile(r'^\s*\{\s*"(?P<name>[^"]+)"\s*,\s*(?P<fn>[^,]+)')
SLOT = re.compile(r"\.(?P<slot>tp_\w+)\s*=\s*(?P<value>[^;]+);")
DEFINE = re.compile(r"^\s*#\s*define\s+(?P<name>\w+)\(")
FUNCTION_START = re.compile(r"^\S.*\)\s*(const\s*)?\{\s*$")


def guard_macros(lines: list[str]) -> list[tuple[str, int]]:
    """(name, line) of each macro defined in `lines` whose body uses `Guarded<`."""
    found = []
    for number, line in enumerate(lines, 1):
        if m := DEFINE.match(line):
            body, i = line, number
            while body.rstrip().endswith("\\") and i < len(lines):
                body += lines[i]
                i += 1
            if "Guarded<" in body:
                found.append((m["name"], number))
    return found


GUARDS: tuple[str, ...] = ("Guarded<",)


def check_tables(path: Path, lines: list[str]) -> list[str]:
    """Rule 1 for the method and getset tables of one file."""
    findings = []
    in_table = False
    for number, line in enumerate(lines, 1):
        if TABLE_START.search(line):
            in_table = True
            continue
        if in_table and line.strip().startswith("};"):
            in_table = False
            continue
        if not in_table:
            continue
        match = ENTRY.match(line)
        if match and not any(g in match["fn"] for g in GUARDS):
            fn = match["fn"].strip()
            if fn != "nullptr":
                findings.append(f"{path}:{number}: entry {match['name']!r} calls {fn} unguarded")
    return findings


def check_slots(path: Path, text: str) -> list[str]:
    """Rule 1 for `Type.tp_slot = fn;` assignments."""
    findings = []
    for match in SLOT.finditer(text):
        slot, value = match["slot"], match["value"].strip()
        if slot in UNGUARDED_SLOTS or slot in TABLE_SLOTS:
            continue  # a slot that cannot raise, or a table checked entry by entry
        if (
            not re.match(r"^&?[A-Za-z_][\w:<>]*$", value)
            or re.match(r"^Py[A-Z][a-z]*_", value)
            or re.match(r"^(Py_)?[A-Z][A-Z0-9_]*$", value)
        ):
            continue  # data (flags, sizes, names, a macro constant), or CPython's own function
        if not any(g in value for g in GUARDS) and not _guarded_wrapper(text, value):
            number = text.count("\n", 0, match.start()) + 1
            findings.append(f"{path}:{number}: slot {slot} is {value}, unguarded")
    return findings


def _guarded_wrapper(text: str, name: str) -> bool:
    """Whether `name` is a one-line function that returns `Guarded<...>::Call(...)`."""
    pattern = rf"\b{re.escape(name.lstrip('&'))}\([^)]*\)\s*\{{\s*return\s+Guarded<"
    return re.search(pattern, text) is not None


def check_recursion_pairs(path: Path, lines: list[str]) -> list[str]:
    """Rule 2: per top-level function body, Enter and Leave counts match."""
    findings = []
    start, enters, leaves = 0, 0, 0
    for number, line in enumerate(lines, 1):
        if FUNCTION_START.match(line):
            start, enters, leaves = number, 0, 0
        enters += line.count("Py_EnterRecursiveCall(")
        leaves += line.count("Py_LeaveRecursiveCall(")
        if line.startswith("}") and (enters or leaves):
            if enters != leaves:
                findings.append(
                    f"{path}:{start}: {enters} Py_EnterRecursiveCall but {leaves} "
                    "Py_LeaveRecursiveCall in this function"
                )
            enters = leaves = 0
    return findings


def floor_of(rel: Path, floors: dict[str, int]) -> int | None:
    """The floor of a file (path relative to the root): its folder's, else its stem's."""
    for folder in rel.parents:
        if folder.as_posix() in floors:
            return floors[folder.as_posix()]
    return floors.get(rel.with_suffix("").as_posix())


def check_floors(root: Path, texts: dict[Path, str], floors: dict[str, int]) -> list[str]:
    """Rule 4: no file without a floor, no include going up, no circle of modules."""
    findings = []
    graph: dict[str, set[str]] = {}
    for path, text in texts.items():
        rel = path.relative_to(root)
        floor = floor_of(rel, floors)
        if floor is None:
            findings.append(f"{path}: has no floor (add it to FLOORS in scripts/source_lint.py)")
            continue
        module = rel.with_suffix("").as_posix()
        for match in INCLUDE.finditer(text):
            target = next(
                (c for c in (path.parent / match[1], root / match[1]) if c.resolve() in texts),
                None,
            )
            if target is None:
                continue  # not one of ours (abseil, the header library)
            target_rel = target.resolve().relative_to(root)
            target_module = target_rel.with_suffix("").as_posix()
            if target_module != module:
                graph.setdefault(module, set()).add(target_module)
            target_floor = floor_of(target_rel, floors)
            if target_floor is not None and target_floor > floor:
                number = text.count("\n", 0, match.start()) + 1
                findings.append(
                    f"{path}:{number}: includes {match[1]} (floor {target_floor}) "
                    f"from floor {floor}: a lower floor never includes a higher one"
                )
    findings += [f"{root}: modules include each other: {' -> '.join(c)}" for c in circles(graph)]
    return findings


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (first module repeated at the end) per strongly connected group."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in sorted(groups):
        members = set(group)
        path = [group[0]]
        while True:  # follow edges inside the group until one closes the circle
            nxt = sorted(w for w in graph[path[-1]] if w in members)
            closing = [w for w in nxt if w in path]
            if closing:
                path = [*path[path.index(closing[0]) :], closing[0]]
                break
            path.append(nxt[0])
        found.append(path)
    return found


def check_headers_tu(include: Path, tu: Path) -> list[str]:
    """Rule 4: every public header of `include` is included by `tu`."""
    included = set(re.findall(r'^#include "([^"]+)"', tu.read_text(encoding="utf-8"), re.M))
    return [
        f"{tu}: does not include {header} (every public header goes through clang-tidy here)"
        for header in sorted(f"cpytree/{p.name}" for p in (include / "cpytree").glob("*.h"))
        if header not in included
    ]


FT_SWITCH_HOME = "ft.h"  # src/base/ft.h


def check_ft_switch(path: Path, lines: list[str]) -> list[str]:
    """Rule 6: Py_GIL_DISABLED outside src/base/ft.h."""
    if path.name == FT_SWITCH_HOME:
        return []
    return [
        f"{path}:{n}: Py_GIL_DISABLED outside base/ft.h: test CPYTREE_FREE_THREADED"
        for n, line in enumerate(lines, 1)
        if "Py_GIL_DISABLED" in line
    ]


def main(root: str = "src", *options: str) -> int:
    global GUARDS
    findings: list[str] = []
    if options:
        if len(options) != 2 or options[0] != "--headers-tu":
            raise SystemExit(f"usage: source_lint.py [src] [--headers-tu FILE], got {options}")
        findings += check_headers_tu(Path(root).resolve().parent / "include", Path(options[1]))
    macros: dict[str, list[str]] = {}
    paths = sorted(p for p in Path(root).rglob("*.*") if p.suffix in (".cc", ".h"))
    texts = {p: p.read_text(encoding="utf-8") for p in paths}
    if Path(root).resolve() == FLOOR_ROOT.resolve():
        resolved = {p.resolve(): t for p, t in texts.items()}
        findings += [
            f.replace(str(FLOOR_ROOT.resolve()), root.rstrip("/"))
            for f in check_floors(FLOOR_ROOT.resolve(), resolved, FLOORS)
        ]
    for path, text in texts.items():
        for name, number in guard_macros(text.splitlines()):
            macros.setdefault(name, []).append(f"{path}:{number}")
    GUARDS = ("Guarded<", *(f"{name}(" for name in macros))
    for path, text in texts.items():
        lines = text.splitlines()
        findings += check_ft_switch(path, lines)
        if path.suffix == ".cc":
            findings += check_tables(path, lines)
            findings += check_slots(path, text)
            findings += check_recursion_pairs(path, lines)
    for name, places in sorted(macros.items()):
        if len(places) > 1:
            findings.append(f"{places[1]}: guard macro {name} defined again (first at {places[0]})")
    files = {place.rsplit(":", 1)[0] for places in macros.values() for place in places}
    if len(files) > 1:
        findings.append(
            f"guard macros defined in {len(files)} files ({', '.join(sorted(files))}): one header"
        )
    print("\n".join(findings) if findings else f"source lint: {root}/ clean")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
