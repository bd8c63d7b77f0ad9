"""`python -m cpytree`: version, engine, install() state, and what runs on this torch.

    $ python -m cpytree
    cpytree 0.1.0
    engine: cpp (the C++ extension cpytree._C)
    torch: 2.15.0 (not imported), tested with cpytree: yes
    install(): not in effect in this process
    autoload: on (install() at `import torch`; CPYTREE_INSTALL unset; ...)
    on torch 2.15.0 (every private name cpytree uses, checked):
      registry link        on
      install()            on
      spec interop         on
      Dynamo substitution  on
      Dynamo fast paths:
        walk               on
        dict               on
        ...

The last section imports torch and torch._dynamo to check the inventory
(`cpytree._torch_link._inventory`) against them: each part and each Dynamo fast
path is "on" or "off" with the names torch moved; while install() is in
effect it shows what install() applied (`cpytree.status()`). `--brief`
skips that section (and never imports torch unless CPYTREE_INSTALL asks).
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Sequence


def _torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_line(version: str | None) -> str:
    if version is None:
        return "torch: not installed"
    from cpytree._torch import _versions

    loaded = "imported" if "torch" in sys.modules else "not imported"
    tested = "yes" if _versions.is_tested(version) else "no"
    return f"torch: {version} ({loaded}), tested with cpytree: {tested}"


def _moved(names: Sequence[object]) -> str:
    return "off: torch moved " + ", ".join(dict.fromkeys(map(str, names))) if names else "on"


def _fence_lines(version: str) -> list[str]:
    """Each part of cpytree's torch integration and each Dynamo fast path: on, or why off."""
    import torch._dynamo  # noqa: F401 - the inventory is checked against it

    from cpytree import status
    from cpytree._torch_link import _inventory

    state = status()
    parts = [
        ("registry link", state["registry"] if state["registry"] != "following" else "on"),
        ("install()", _moved(_inventory.missing("install"))),
        ("spec interop", _moved(_inventory.missing("interop"))),
        ("Dynamo substitution",
         _moved(list(_inventory.missing("substitute")) + list(_inventory.missing("spec")))),
    ]  # fmt: skip
    applied = state.get("fast_paths") or {}
    off = _inventory.paths_off()
    paths = [(path, applied.get(path) or _moved(off.get(path, [])))
             for path in _inventory.PATHS]  # fmt: skip
    lines = [f"on torch {version} (every private name cpytree uses, checked):"]
    lines += [f"  {name:<20} {why}" for name, why in parts]
    lines.append("  Dynamo fast paths:")
    lines += [f"    {name:<18} {why}" for name, why in paths]
    return lines


def _install_lines(cpytree: object) -> list[str]:
    from cpytree import _torch

    state = _torch.status()
    if not state["installed"]:
        # This process has not imported torch: autoload (next line) says
        # whether `import torch` would install.
        return ["install(): not in effect in this process"]
    rebound = state["rebound_imports"]
    lines = [f"install(): in effect, {state['mode']} mode, {rebound} import-time bindings rebound"]
    lines += [f"  swapped  {name}" for name in state["swapped"]]
    lines += [f"  kept     {name}: {why}" for name, why in state["skipped"].items()]
    return lines


# --- autoload (the autoload branch's block, issue 30) ---------------------------
def _autoload_line(engine: str) -> str:
    """Whether `import torch` runs install() (the torch.backends entry point), and why."""
    from cpytree._torch._autoload import describe

    return describe(engine)


# --- end of the autoload block ---------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    import cpytree

    engine = {
        "cpp": "cpp (the C++ extension cpytree._C)",
        "python": "python (pure-Python fallback: the C++ extension did not load)",
    }[cpytree.ENGINE]
    version = _torch_version()
    lines = [f"cpytree {cpytree.__version__}", f"engine: {engine}", _torch_line(version)]
    lines += _install_lines(cpytree)
    lines.append(_autoload_line(cpytree.ENGINE))
    if version is not None and "--brief" not in args:
        lines += _fence_lines(version)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
