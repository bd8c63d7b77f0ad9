"""The cpytree profiling harness: PT2-shaped workloads timed across pytree backends.

Run it as `cpytree-harness` or `python -m cpytree.harness` (see `cli.main`).
Importing this package imports no backend; `backends.discover()` does.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv=None):  # type: ignore[no-untyped-def]
    """Entry point; see `cpytree.harness.cli.main`."""
    from .cli import main as _main

    return _main(argv)
