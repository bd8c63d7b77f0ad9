"""What every torch study compares, and whether it can run here.

Each study (`compile_bench`, `dynamo_study`, `runtime_bench`) measures the
same work in two modes, in fresh processes: "torch" (torch as shipped) and
"cpytree" (after `cpytree.install()`). The compile study can also compare
"cpytree-attrs" (`COMPILE_MODES`): install() without rebinding the names torch
modules imported from torch.utils._pytree, and "autoload": what a user gets
with no code change, install() run by cpytree's `torch.backends` entry point
at the child's `import torch` (`child.child_env("autoload")`). Every other
mode's child has the autoload off (CPYTREE_INSTALL=0): "torch" is torch's own
code. Needs no torch to import.

    check_available()            # raises Unavailable without torch or install()
    for mode in MODES: ...
    enter("cpytree-attrs")       # in a measuring child: put the process in a mode
"""

from __future__ import annotations

import importlib.util

__all__ = ["COMPILE_MODES", "MODES", "Unavailable", "check_available", "enter"]

MODES = ("torch", "cpytree")
# Every mode the compile study can run, and what it does.
COMPILE_MODES = {
    "torch": "torch as shipped",
    "cpytree-attrs": "cpytree.install(rebind_imports=False): module attributes only",
    "cpytree": "cpytree.install(): also torch modules' import-time bindings",
    "autoload": "no code change: install() by cpytree's torch.backends entry point at import torch",
}


class Unavailable(RuntimeError):
    """The torch studies cannot run here (no torch, or no cpytree.install())."""


def check_available() -> None:
    """Raise Unavailable when the torch studies cannot run here."""
    if importlib.util.find_spec("torch") is None:
        raise Unavailable("torch is not installed (pip install torch==2.13.0)")
    import cpytree

    if not hasattr(cpytree, "install"):
        raise Unavailable("this cpytree has no install() (torch integration)")


def enter(mode: str) -> None:
    """Put this process in `mode` of COMPILE_MODES (install() or not)."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(COMPILE_MODES)}")
    if mode == "autoload":
        import sys

        loaded = sys.modules.get("cpytree")
        if loaded is None or not loaded.is_installed():
            raise RuntimeError("autoload: `import torch` did not install cpytree in this child")
    elif mode != "torch":
        import cpytree

        cpytree.install(rebind_imports=(mode == "cpytree"))
