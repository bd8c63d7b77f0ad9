"""The installed wheel carries what it needs: run in a fresh venv holding it.

`scripts/test_python.sh` (behind `make test-pythons`) installs a repaired
wheel from dist/ into a new venv and runs this file there before the whole
Python suite. It checks that

* `cpytree` is imported from that venv (not the checkout) with its C++ engine;
* the extension and every library the wheel grafted in name (DT_NEEDED) and
  resolve (ldd) only libraries inside the wheel or the toolchain libraries
  every manylinux platform provides (libc, libm, libstdc++, libgcc_s, ...);
* `auditwheel show` finds the wheel manylinux-consistent with no external
  library left to graft (when CPYTREE_WHEEL and CPYTREE_AUDITWHEEL say which
  wheel and which auditwheel);
* the extension is stripped of debug information, the headers ship, and the
  version everywhere is the one in include/cpytree/version.h.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What a manylinux wheel may leave to the system: glibc's libraries and the
# compiler runtime (a subset of auditwheel's manylinux policy whitelist; no
# X11/GL/glib: cpytree needs none of those).
SYSTEM_LIBS = {
    "libc.so.6", "libm.so.6", "libmvec.so.1", "libdl.so.2", "librt.so.1",
    "libpthread.so.0", "libstdc++.so.6", "libgcc_s.so.1", "libatomic.so.1",
    "ld-linux-x86-64.so.2", "linux-vdso.so.1",
}  # fmt: skip

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="ELF checks: Linux only"
)


def _cpytree():
    import cpytree

    return cpytree


def _extension() -> Path:
    return Path(_cpytree()._C.__file__)


def _grafted() -> list[Path]:
    libs = Path(_cpytree().__file__).parent.parent / "cpytree.libs"
    return sorted(libs.glob("*.so*")) if libs.is_dir() else []


def _needed(lib: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def _header_version() -> str:
    text = (REPO / "include" / "cpytree" / "version.h").read_text()
    parts = re.findall(r"^#define CPYTREE_VERSION_(?:MAJOR|MINOR|PATCH) (\d+)$", text, re.M)
    assert len(parts) == 3, parts
    return ".".join(parts)


def test_imported_from_the_venv_with_the_engine() -> None:
    cpytree = _cpytree()
    package = Path(cpytree.__file__).resolve()
    assert Path(sys.prefix).resolve() in package.parents, package
    assert REPO / "python" not in package.parents, f"imported from the checkout: {package}"
    assert cpytree.ENGINE == "cpp"
    leaves, spec = cpytree.tree_flatten({"a": [1, (2, None)], "b": 3})
    assert leaves == [1, 2, None, 3]
    assert cpytree.tree_unflatten([10, 20, None, 30], spec) == {"a": [10, (20, None)], "b": 30}
    assert cpytree.treespec_loads(cpytree.treespec_dumps(spec)) == spec


def test_needed_libraries_are_in_the_wheel_or_the_system_set() -> None:
    grafted = {p.name for p in _grafted()}
    for lib in [_extension(), *_grafted()]:
        outside = [n for n in _needed(lib) if n not in SYSTEM_LIBS and n not in grafted]
        assert not outside, f"{lib.name} needs {outside} from outside the wheel"
    # Debian's abseil by its own name is gone: only the wheel's hashed copies remain.
    assert not [n for n in _needed(_extension()) if re.fullmatch(r"libabsl_\w+\.so\.\d+", n)]


def test_ldd_resolves_inside_the_wheel() -> None:
    libs_dir = Path(_cpytree().__file__).parent.parent / "cpytree.libs"
    for lib in [_extension(), *_grafted()]:
        out = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, check=True).stdout
        assert "not found" not in out, out
        for line in out.splitlines():
            if "statically linked" in line:  # a grafted library needing nothing
                continue
            name = os.path.basename(line.split()[0])
            path = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
            if name in SYSTEM_LIBS:
                continue
            assert path and Path(path).resolve().parent == libs_dir.resolve(), (
                f"{lib.name}: {line.strip()} resolves outside the wheel"
            )


def test_auditwheel_show() -> None:
    wheel, auditwheel = os.environ.get("CPYTREE_WHEEL"), os.environ.get("CPYTREE_AUDITWHEEL")
    if not wheel or not auditwheel:
        pytest.skip("CPYTREE_WHEEL / CPYTREE_AUDITWHEEL not set")
    out = subprocess.run([auditwheel, "show", wheel], capture_output=True, text=True, check=True)
    text = " ".join(out.stdout.split())
    tag = re.search(
        r'consistent with the following platform tag: "(manylinux_\d+_\d+_x86_64)"', text
    )
    assert tag, text
    assert tag.group(1) in Path(wheel).name
    # Output of a wheel that still needs a library from the system.
    assert "external shared libraries" not in text, text


def test_extension_is_stripped() -> None:
    sections = subprocess.run(
        ["readelf", "-S", "-W", str(_extension())], capture_output=True, text=True, check=True
    ).stdout
    if os.environ.get("CPYTREE_WHEEL_SYMBOLS") == "1":
        assert ".debug_info" in sections
    else:
        assert ".debug_info" not in sections and ".symtab" not in sections


def test_headers_and_version() -> None:
    import importlib.metadata

    cpytree = _cpytree()
    include = Path(cpytree.__file__).parent / "include" / "cpytree"
    assert (include / "cpytree.h").is_file() and (include / "version.h").is_file()
    version = _header_version()
    assert cpytree.__version__ == version
    assert importlib.metadata.version("cpytree") == version
    out = subprocess.run(
        [sys.executable, "-m", "cpytree"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CPYTREE_INSTALL": ""},
    ).stdout
    assert out.splitlines()[0] == f"cpytree {version}"
    assert "engine: cpp" in out
