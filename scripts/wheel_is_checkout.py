"""Exit 0 if a wheel's files other than the extension are this checkout's.

`python scripts/wheel_is_checkout.py WHEEL` (from the repository's root):
every file of the wheel's packages (python/<path>; cpytree/include/* is
include/*) is byte-identical to the checkout's, and every file of the
checkout's packages is in the wheel. The compiled extension (_C*.so) and the
.dist-info are not compared. Prints the first differences on stderr and
exits 1 otherwise. `scripts/wheel.sh --arch aarch64` reuses an x86_64 wheel's Python part only
when this holds (a wheel left in dist/ by another checkout is rebuilt).
"""

from __future__ import annotations

import pathlib
import sys
import zipfile


def _source(name: str) -> pathlib.Path:
    if name.startswith("cpytree/include/"):
        return pathlib.Path("include", name.removeprefix("cpytree/include/"))
    return pathlib.Path("python", name)


def _checkout_files() -> set[str]:
    names = set()
    for pkg in ("cpytree", "_cpytree_autoload"):
        for p in pathlib.Path("python", pkg).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith("_C."):
                names.add(p.relative_to("python").as_posix())
    for p in pathlib.Path("include").rglob("*"):
        if p.is_file():
            names.add("cpytree/include/" + p.relative_to("include").as_posix())
    return names


def main(wheel: str) -> int:
    with zipfile.ZipFile(wheel) as z:
        files = {
            n: z.read(n)
            for n in z.namelist()
            if not n.endswith("/")
            and ".dist-info/" not in n
            and not pathlib.PurePosixPath(n).name.startswith("_C.")
        }
    differ = sorted(
        n
        for n, data in files.items()
        if not _source(n).is_file() or _source(n).read_bytes() != data
    )
    missing = sorted(_checkout_files() - files.keys())
    for n in differ[:5]:
        print(f"wheel_is_checkout: {n} differs from the checkout's", file=sys.stderr)
    for n in missing[:5]:
        print(f"wheel_is_checkout: {n} is not in the wheel", file=sys.stderr)
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
