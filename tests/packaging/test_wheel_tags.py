"""Every wheel in CPYTREE_DIST is what its name says, read out of the wheel.

`make wheels` builds wheels that run here only under emulation: the aarch64
ones (cross-built with zig; 3.11, 3.13-3.15, run under qemu by `make
test-aarch64`). `make wheels-unrun` builds, into build/unrun-dist/, those that
never run here and are not shipped: the aarch64 cp310/cp312 (built against
their headers) and the free-threaded cp314t/cp315t (built against Debian
sid's 3.14/3.15 headers with Py_GIL_DISABLED=1: no 3.14t/3.15t interpreter
here). This file checks what can be checked without running them:

* the file name's tags, the WHEEL file's `Tag:` lines, the extension's file
  name (`_C.cpython-3XY[t]-<arch>-linux-gnu.so`) and its ELF machine agree;
* a free-threaded wheel's extension was compiled for the free-threaded ABI:
  it imports the reference-count functions only that ABI's Py_DECREF calls
  (`_Py_MergeZeroLocalRefcount`, `_Py_DecRefShared`), the critical-section
  and PyMutex functions src/base/ft.h uses, and `PyUnstable_Module_SetGIL` (the
  module declares it runs without the GIL); a GIL wheel imports none of them
  and frees through `_Py_Dealloc`;
* no extension imports the x87 control-word functions (3.10's pymath.h
  declares them when pyconfig.h says HAVE_GCC_ASM_FOR_X87: the aarch64 cp310
  wheel is compiled against the x86_64 pyconfig.h, scripts/wheel.sh --arch aarch64).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="ELF checks: Linux only"
)

WHEEL_NAME = re.compile(
    r"cpytree-(?P<version>[^-]+)-(?P<py>cp3\d+)-(?P<abi>cp3\d+t?)-(?P<plats>[\w.]+)\.whl"
)
ELF_MACHINE = {"x86_64": "Advanced Micro Devices X86-64", "aarch64": "AArch64"}
# Imported only by an extension compiled with Py_GIL_DISABLED (3.13t and later):
# Py_DECREF's two slow paths (refcount.h), the critical sections and PyMutex
# of src/base/ft.h, and the module's "runs without the GIL" declaration.
FREE_THREADED_ONLY = {
    "_Py_MergeZeroLocalRefcount", "_Py_DecRefShared", "PyCriticalSection_Begin",
    "PyCriticalSection_End", "PyUnstable_Module_SetGIL",
}  # fmt: skip
# The GIL build's Py_DECREF frees through this; the free-threaded one never
# calls it from an extension (_Py_MergeZeroLocalRefcount frees).
GIL_ONLY = {"_Py_Dealloc"}


def _wheels() -> list[Path]:
    dist = os.environ.get("CPYTREE_DIST")
    if not dist:
        pytest.skip("CPYTREE_DIST not set")
    wheels = sorted(Path(dist).glob("cpytree-*manylinux*.whl"))
    assert wheels, f"no wheels in {dist}"
    return wheels


def _extension(wheel: Path, tmp_path: Path) -> tuple[str, Path, list[str]]:
    """The extension's name in the wheel, a copy of it, and the WHEEL Tag lines."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if re.fullmatch(r"cpytree/_C\.[^/]*\.so", n)]
        assert len(names) == 1, (wheel.name, names)
        info = [n for n in zf.namelist() if re.fullmatch(r"cpytree-[^/]*\.dist-info/WHEEL", n)]
        assert len(info) == 1, (wheel.name, info)
        tags = re.findall(r"^Tag: (\S+)$", zf.read(info[0]).decode(), re.M)
        target = tmp_path / f"{wheel.stem}.so"
        target.write_bytes(zf.read(names[0]))
    return names[0].split("/")[-1], target, tags


def _imports(lib: Path) -> set[str]:
    """The undefined dynamic symbols, without their version suffixes."""
    out = subprocess.run(
        ["readelf", "-W", "--dyn-syms", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[6] == "UND" and fields[7]:
            names.add(fields[7].split("@")[0])
    return names


def test_tags_suffix_and_machine_agree(tmp_path: Path) -> None:
    for wheel in _wheels():
        m = WHEEL_NAME.fullmatch(wheel.name)
        assert m, wheel.name
        py, abi, plats = m["py"], m["abi"], m["plats"].split(".")
        arch = {re.sub(r"^manylinux_\d+_\d+_", "", p) for p in plats}
        assert len(arch) == 1 and arch <= set(ELF_MACHINE), (wheel.name, arch)
        (machine,) = arch
        assert abi in (py, py + "t"), wheel.name
        name, so, tags = _extension(wheel, tmp_path)
        assert sorted(tags) == sorted(f"{py}-{abi}-{p}" for p in plats), (wheel.name, tags)
        assert name == f"_C.cpython-{abi[2:]}-{machine}-linux-gnu.so", (wheel.name, name)
        header = subprocess.run(
            ["readelf", "-h", str(so)], capture_output=True, text=True, check=True
        ).stdout
        assert re.search(rf"Machine:\s+{re.escape(ELF_MACHINE[machine])}$", header, re.M), (
            wheel.name,
            header,
        )


def test_free_threaded_abi_symbols(tmp_path: Path) -> None:
    seen = set()
    for wheel in _wheels():
        m = WHEEL_NAME.fullmatch(wheel.name)
        assert m, wheel.name
        _, so, _ = _extension(wheel, tmp_path)
        imports = _imports(so)
        assert "PyInit__C" not in imports and "PyObject_GetAttr" in imports, wheel.name
        assert not {n for n in imports if "387" in n}, (wheel.name, sorted(imports))
        if m["abi"].endswith("t"):
            seen.add("t")
            assert imports >= FREE_THREADED_ONLY, (wheel.name, FREE_THREADED_ONLY - imports)
            assert {"PyMutex_Lock", "_PyMutex_LockSlow"} & imports, wheel.name
            assert not GIL_ONLY & imports, (wheel.name, GIL_ONLY & imports)
        else:
            seen.add("gil")
            assert not FREE_THREADED_ONLY & imports, (wheel.name, FREE_THREADED_ONLY & imports)
            assert imports >= GIL_ONLY, wheel.name
    assert seen, "no wheels read"
