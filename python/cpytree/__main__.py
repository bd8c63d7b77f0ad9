"""`python -m cpytree`: version, active engine, and whether install() is in effect.

    $ python -m cpytree
    cpytree 0.1.0
    engine: cpp (the C++ extension cpytree._C)
    torch: 2.13.0 (not imported)
    install(): not in effect (set CPYTREE_INSTALL=1 to install at import)

torch is not imported unless CPYTREE_INSTALL asks for install() (its version
comes from the package metadata), so the command stays fast.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys


def _torch_line() -> str:
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "torch: not installed"
    loaded = "imported" if "torch" in sys.modules else "not imported"
    return f"torch: {version} ({loaded})"


def _install_lines(cpytree: object) -> list[str]:
    from cpytree import _torch

    state = _torch.status()
    if not state["installed"]:
        hint = (
            ""
            if os.environ.get("CPYTREE_INSTALL")
            else " (set CPYTREE_INSTALL=1 to install at import)"
        )
        return [f"install(): not in effect{hint}"]
    rebound = state["rebound_imports"]
    lines = [f"install(): in effect, {state['mode']} mode, {rebound} import-time bindings rebound"]
    lines += [f"  swapped  {name}" for name in state["swapped"]]
    lines += [f"  kept     {name}: {why}" for name, why in state["skipped"].items()]
    return lines


# --- autoload (the autoload branch's block, issue 30) ---------------------------
def _autoload_line() -> str:
    """Whether `import torch` runs install() (the torch.backends entry point), and why."""
    from cpytree._torch._autoload import describe

    return describe()


# --- end of the autoload block ---------------------------------------------------


def main() -> int:
    import cpytree

    engine = {
        "cpp": "cpp (the C++ extension cpytree._C)",
        "python": "python (pure-Python fallback: the C++ extension did not load)",
    }[cpytree.ENGINE]
    lines = [f"cpytree {cpytree.__version__}", f"engine: {engine}", _torch_line()]
    lines += _install_lines(cpytree)
    lines.append(_autoload_line())
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
