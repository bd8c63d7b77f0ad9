"""scripts/source_lint.py (run by `make lint`) finds what it is there to find."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("source_lint", ROOT / "scripts" / "source_lint.py")
assert _spec is not None and _spec.loader is not None
source_lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(source_lint)

GUARD_H = """\
#define GUARDED(fn) (&Guarded<fn>::Call)
#define FASTCALL_KW(fn) \\
  reinterpret_cast<PyCFunction>(&Guarded<fn>::Call)
"""

MODULE_CC = """\
#include "guard.h"
PyObject* IterNext(PyObject* self) { return Guarded<IterNextImpl>::Call(self); }
static PyMethodDef kMethods[] = {
    {"good", GUARDED(Good), METH_O, nullptr},
    {"fast", FASTCALL_KW(Fast), METH_FASTCALL, nullptr},
    {"bad", Bad, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
void Init() {
  Type.tp_iternext = IterNext;
  Type.tp_iter = PyObject_SelfIter;
  Type.tp_dealloc = Dealloc;
  Type.tp_hash = SpecHash;
  Type.tp_methods = kMethods;
}
int Walk(PyObject* o) {
  if (Py_EnterRecursiveCall(" in walk")) return -1;
  return 0;
}
"""


def test_finds_unguarded_entries_slots_unpaired_calls_and_repeated_macros(tmp_path, capsys):
    (tmp_path / "guard.h").write_text(GUARD_H)
    (tmp_path / "module.cc").write_text(MODULE_CC)
    assert source_lint.main(str(tmp_path)) == 1
    found = capsys.readouterr().out.splitlines()
    assert found == [
        f"{tmp_path}/module.cc:6: entry 'bad' calls Bad unguarded",
        f"{tmp_path}/module.cc:13: slot tp_hash is SpecHash, unguarded",
        f"{tmp_path}/module.cc:16: 1 Py_EnterRecursiveCall but 0 Py_LeaveRecursiveCall in this function",
    ]
    (tmp_path / "again.cc").write_text("#define GUARDED(fn) (&Guarded<fn>::Call)\n")
    assert source_lint.main(str(tmp_path)) == 1
    found = capsys.readouterr().out.splitlines()
    assert (
        f"{tmp_path}/guard.h:1: guard macro GUARDED defined again (first at {tmp_path}/again.cc:1)"
        in found
    )


def test_finds_a_public_header_the_clang_tidy_unit_misses(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "include" / "cpytree").mkdir(parents=True)
    for name in ("spec.h", "tree.h"):
        (tmp_path / "include" / "cpytree" / name).write_text("")
    tu = tmp_path / "every.cc"
    tu.write_text('#include "cpytree/spec.h"\n')
    assert source_lint.main(str(tmp_path / "src"), "--headers-tu", str(tu)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tu}: does not include cpytree/tree.h (every public header goes through clang-tidy here)"
    ]
    tu.write_text('#include "cpytree/spec.h"\n#include "cpytree/tree.h"\n')
    assert source_lint.main(str(tmp_path / "src"), "--headers-tu", str(tu)) == 0


def _plant_floors(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "traversals").mkdir(parents=True)
    (src / "common.h").write_text("")
    (src / "registry.h").write_text('#include "common.h"\n')
    (src / "traversals" / "flatten.h").write_text('#include "registry.h"\n')
    monkeypatch.setattr(source_lint, "FLOOR_ROOT", src)
    monkeypatch.setattr(source_lint, "FLOORS", {"common": 0, "registry": 1, "traversals": 2})
    return src


def test_the_floors_hold_in_a_clean_tree(tmp_path, monkeypatch, capsys):
    src = _plant_floors(tmp_path, monkeypatch)
    assert source_lint.main(str(src)) == 0
    assert capsys.readouterr().out.splitlines() == [f"source lint: {src}/ clean"]


def test_finds_a_lower_floor_including_a_higher_one(tmp_path, monkeypatch, capsys):
    src = _plant_floors(tmp_path, monkeypatch)
    (src / "registry.cc").write_text('#include "registry.h"\n\n#include "traversals/flatten.h"\n')
    assert source_lint.main(str(src)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{src}/registry.cc:3: includes traversals/flatten.h (floor 2) from floor 1: "
        "a lower floor never includes a higher one",
        f"{src}: modules include each other: registry -> traversals/flatten -> registry",
    ]


def test_finds_a_circle_on_one_floor_and_a_file_without_a_floor(tmp_path, monkeypatch, capsys):
    src = _plant_floors(tmp_path, monkeypatch)
    (src / "ft.h").write_text('#include "common.h"\n')
    (src / "common.cc").write_text('#include "common.h"\n#include "ft.h"\n')
    monkeypatch.setitem(source_lint.FLOORS, "ft", 0)
    (src / "stray.h").write_text("")
    assert source_lint.main(str(src)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{src}/stray.h: has no floor (add it to FLOORS in scripts/source_lint.py)",
        f"{src}: modules include each other: common -> ft -> common",
    ]


def test_the_repository_floor_table_covers_src():
    src = ROOT / "src"
    files = sorted(p for p in src.rglob("*") if p.suffix in (".cc", ".h"))
    assert files
    assert [
        p for p in files if source_lint.floor_of(p.relative_to(src), source_lint.FLOORS) is None
    ] == []


def test_finds_the_free_threaded_switch_spelt_twice(tmp_path, capsys):
    (tmp_path / "ft.h").write_text(
        "#ifdef Py_GIL_DISABLED\n#define CPYTREE_FREE_THREADED 1\n#endif\n"
    )
    (tmp_path / "reg.cc").write_text("int a;\n#ifdef Py_GIL_DISABLED\nint b;\n#endif\n")
    assert source_lint.main(str(tmp_path)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}/reg.cc:2: Py_GIL_DISABLED outside base/ft.h: test CPYTREE_FREE_THREADED"
    ]
    (tmp_path / "reg.cc").write_text("int a;\n#if CPYTREE_FREE_THREADED\nint b;\n#endif\n")
    assert source_lint.main(str(tmp_path)) == 0
