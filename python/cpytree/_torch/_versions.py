"""The torch releases install() was tested on, for status().

`make test-torch-range` runs the torch-facing suites (`pytest -m torch`:
install(), compile, export, the spec interop, the differential tests against
torch's own functions) against every release of `cpytree._releases.SUPPORTED`,
each in its own venv; `TESTED` lists those they passed on. What differs
between releases, and how cpytree gives each its semantics, is the table
`cpytree._releases.DIFFERENCES`.

On a release outside `TESTED`, install() proceeds without a warning: every
step it takes checks what it touches (`cpytree._torch_link._inventory`; a function torch
lacks is skipped, specs that cannot pose as torch's leave the spec-returning
functions alone) and any failure midway undoes every step already taken, so
the only warnings are those of something actually off (a fast path switched
off, and why). status() says whether the release was tested (`is_tested`).
"""

from __future__ import annotations

from .._releases import SUPPORTED

__all__ = ["TESTED", "check_torch_version", "is_tested"]

# The torch releases the `-m torch` suites passed on (their other patch
# releases of the same minor change no pytree code): the supported releases,
# as a release is supported only once they pass on it (cpytree._releases).
# Measured 2026-11-27/28: 2.12.1, 2.13.0, 2.14.1 and 2.15.0; 2.10.0 and 2.11.0
# once tree_flatten_spec's fast path realized the tree as their Dynamo does
# (graph inputs in torch's order) and the suite test allowed torch's own
# break on 2.11.
TESTED: tuple[str, ...] = SUPPORTED


def is_tested(version: str) -> bool:
    """Whether `version` (torch.__version__, e.g. "2.13.0+cpu") is a tested major.minor."""
    from .._releases import minor_of

    minor = minor_of(version)
    return minor is not None and minor in {minor_of(v) for v in TESTED}


def check_torch_version(version: str) -> tuple[int, int]:
    """The supported (major, minor) whose semantics cpytree gives on torch `version`.

    install() calls it first; it never warns (see the module docstring).
    """
    from .. import _releases

    return _releases.release_of(version)
