"""What every torch study compares, and whether it can run here.

Each study (`compile_bench`, `dynamo_study`, `runtime_bench`) measures the
same work in two modes, in fresh processes: "torch" (torch as shipped) and
"cpytree" (after `cpytree.install()`). Needs no torch to import.

    check_available()            # raises Unavailable without torch or install()
    for mode in MODES: ...
"""

from __future__ import annotations

import importlib.util

__all__ = ["MODES", "Unavailable", "check_available"]

MODES = ("torch", "cpytree")


class Unavailable(RuntimeError):
    """The torch studies cannot run here (no torch, or no cpytree.install())."""


def check_available() -> None:
    """Raise Unavailable when the torch studies cannot run here."""
    if importlib.util.find_spec("torch") is None:
        raise Unavailable("torch is not installed (pip install torch==2.13.0)")
    import cpytree

    if not hasattr(cpytree, "install"):
        raise Unavailable("this cpytree has no install() (torch integration)")
