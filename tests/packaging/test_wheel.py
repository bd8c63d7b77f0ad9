"""The installed wheel carries what it needs: run in a fresh venv holding it.

`scripts/test_python.sh` (behind `make test-pythons`) installs a repaired
wheel from dist/ into a new venv and runs this file there before the whole
Python suite. It checks that

* `cpytree` is imported from that venv (not the checkout) with its C++ engine;
* the extension needs (DT_NEEDED) and resolves (ldd) glibc's libraries and
  libgcc_s.so.1 only: no grafted library, no libstdc++ (libc++, libc++abi,
  abseil and simdjson are linked in statically);
* every versioned symbol it imports is GLIBC_2.28 or older (manylinux_2_28)
  or one of libgcc_s's unwinder symbols at GCC_4.2.0 or older (every libgcc_s
  since GCC 4.2 has them), and it exports one dynamic symbol, PyInit__C; the
  same for the extension of
  every wheel in CPYTREE_DIST (the aarch64 wheels included: readelf reads any
  ELF);
* `auditwheel show` finds the wheel manylinux-consistent at 2.28 or older with
  no external library left to graft, and the wheel is tagged manylinux_2_28
  (when CPYTREE_WHEEL and CPYTREE_AUDITWHEEL say which wheel and which
  auditwheel);
* the extension is stripped of debug information, the headers ship, and the
  version everywhere is the one in include/cpytree/version.h.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What the extension may leave to the system: glibc's libraries and the
# unwinder. The C++ runtime (libc++, libc++abi), abseil and simdjson are linked
# in (scripts/native_deps.sh), so nothing can clash with another copy in the
# process (torch, jaxlib). The unwinder is the one runtime part that must be
# shared: glibc's pthread_exit/pthread_cancel unwind through the system's
# libgcc_s.so.1 and call the module's personality routine, which must read
# that unwind with the same library (a module with its own static unwinder
# crashed there: cmake/zig-toolchain.cmake). manylinux allows libgcc_s.so.1.
SYSTEM_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "linux-vdso.so.1",
    "libgcc_s.so.1",
}  # fmt: skip
# The newest libgcc_s symbol version the extension may import: _Unwind_* are
# GCC_3.0 (GCC_3.3, GCC_4.2.0 for a few) on x86_64 and aarch64.
GCC_MAX = (4, 2, 0)
# manylinux_2_28: glibc 2.28 (RHEL 8, Debian 10, Ubuntu 20.04) and newer.
GLIBC_MAX = (2, 28)

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


def _allowed_needs() -> set[str]:
    """Libraries the extension may need: glibc's and libgcc_s."""
    return SYSTEM_LIBS


def _needed(lib: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def _imported_versions(lib: Path) -> set[str]:
    """Every symbol version the library's dynamic symbols import (GLIBC_2.14, ...)."""
    out = subprocess.run(
        ["readelf", "-W", "--dyn-syms", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    versions = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[6] == "UND":
            versions.update(re.findall(r"@+([A-Za-z_]+[0-9][\w.]*)", fields[7]))
    return versions


def _exported(lib: Path) -> list[str]:
    """The dynamic symbols the library defines (nm -D --defined-only)."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def _check_symbols(lib: Path) -> None:
    versions = _imported_versions(lib)
    assert versions, f"{lib.name}: no versioned imports read"  # the parse found something
    assert _exported(lib) == ["PyInit__C"], f"{lib.name} exports {_exported(lib)}"
    too_new = [v for v in versions if v.startswith("GLIBC_") and tuple(
        int(x) for x in v[len("GLIBC_"):].split(".")) > GLIBC_MAX]  # fmt: skip
    assert not too_new, f"{lib.name} imports glibc symbols newer than 2.28: {sorted(too_new)}"
    too_new = [v for v in versions if v.startswith("GCC_") and tuple(
        int(x) for x in v[len("GCC_"):].split(".")) > GCC_MAX]  # fmt: skip
    assert not too_new, f"{lib.name} imports libgcc_s symbols newer than GCC 4.2: {sorted(too_new)}"
    # GLIBCXX_/CXXABI_: libstdc++, never needed (libc++ is linked in).
    foreign = [v for v in versions if not v.startswith(("GLIBC_", "GCC_"))]
    assert not foreign, f"{lib.name} imports symbols of libstdc++: {sorted(foreign)}"


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


def test_needs_glibc_only_and_nothing_grafted() -> None:
    assert _grafted() == [], "auditwheel grafted libraries: a dependency is linked dynamically"
    outside = [n for n in _needed(_extension()) if n not in _allowed_needs()]
    assert not outside, f"{_extension().name} needs {outside} beyond glibc"


def test_versioned_symbols_and_exports() -> None:
    _check_symbols(_extension())


def test_every_wheel_in_dist() -> None:
    """The same checks on the extension of every wheel CPYTREE_DIST holds (all
    Pythons, both architectures), read straight out of the wheel."""
    dist = os.environ.get("CPYTREE_DIST")
    if not dist:
        pytest.skip("CPYTREE_DIST not set")
    wheels = sorted(Path(dist).glob("cpytree-*manylinux*.whl"))
    assert wheels, f"no wheels in {dist}"
    for wheel in wheels:
        assert "manylinux_2_28_" in wheel.name, wheel.name
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"cpytree/_C\.[^/]*\.so", n)]
            assert len(names) == 1, (wheel.name, names)
            assert not [n for n in zf.namelist() if n.startswith("cpytree.libs/")], wheel.name
            target = Path(os.environ.get("TMPDIR", "/tmp")) / f"cpytree-check-{wheel.stem}.so"
            target.write_bytes(zf.read(names[0]))
        try:
            outside = [n for n in _needed(target) if n not in SYSTEM_LIBS]
            assert not outside, f"{wheel.name} needs {outside} beyond glibc"
            _check_symbols(target)
        finally:
            target.unlink()


def test_ldd_resolves_glibc_only() -> None:
    out = subprocess.run(
        ["ldd", str(_extension())], capture_output=True, text=True, check=True
    ).stdout
    assert "not found" not in out, out
    allowed = _allowed_needs()
    for line in out.splitlines():
        name = os.path.basename(line.split()[0])
        assert name in allowed, f"{_extension().name}: {line.strip()} beyond glibc"


def test_auditwheel_show() -> None:
    wheel, auditwheel = os.environ.get("CPYTREE_WHEEL"), os.environ.get("CPYTREE_AUDITWHEEL")
    if not wheel or not auditwheel:
        pytest.skip("CPYTREE_WHEEL / CPYTREE_AUDITWHEEL not set")
    out = subprocess.run([auditwheel, "show", wheel], capture_output=True, text=True, check=True)
    text = " ".join(out.stdout.split())
    tag = re.search(
        r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_(\w+?)"', text
    )
    assert tag, text
    assert (int(tag.group(1)), int(tag.group(2))) <= GLIBC_MAX, text
    assert f"manylinux_2_28_{tag.group(3)}" in Path(wheel).name
    # Output of a wheel that still needs a library from the system (a wheel
    # that needs none may print "The wheel requires no external shared
    # libraries! :)", as the aarch64 one does).
    assert "external shared libraries are required" not in text, text


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


def test_license_shipped() -> None:
    """The wheel's metadata carries the repository's LICENSE, byte for byte,
    and declares the license pyproject.toml names."""
    import importlib.metadata

    dist = importlib.metadata.distribution("cpytree")
    shipped = [f for f in dist.files or [] if f.name == "LICENSE" and ".dist-info" in str(f)]
    assert len(shipped) == 1, dist.files
    repo_license = Path(__file__).resolve().parents[2] / "LICENSE"
    assert shipped[0].read_text() == repo_license.read_text()
    assert "Apache License" in repo_license.read_text()
    assert dist.metadata["License"] == "Apache-2.0"
