"""Which torch versions install() was tested with, and what it does on others.

`make test-torch-versions` runs the torch-facing suites (install(), compile,
export, the spec interop) against each version in `TESTED`, each in its own
venv. On a torch whose major.minor is not among them, install() warns once
and proceeds: every step it takes checks what it touches (a function torch
lacks is skipped, specs that cannot pose as torch's leave the spec-returning
functions alone) and any failure midway undoes every step already taken, so
the worst case on an unknown torch is a warning and torch left as it was, never
a torch half patched. Refusing outright would turn every torch release into a
cpytree release for no safety gained.
"""

from __future__ import annotations

import warnings

__all__ = ["TESTED", "check_torch_version", "is_tested"]

# The torch releases the suites ran against (the minor versions are supported;
# their other patch releases change no pytree code).
TESTED: tuple[str, ...] = ("2.13.0", "2.14.1")

_warned: set[str] = set()


def _minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version that starts "MAJOR.MINOR", as re.match(r"(\\d+)\\.(\\d+)").

    Without `re`: compiling that pattern was a sizeable part of install().
    """
    major, dot, rest = version.partition(".")
    end = 0
    while end < len(rest) and rest[end].isdecimal():  # isdecimal(): the class of \d
        end += 1
    if not dot or not major.isdecimal() or end == 0:
        return None
    return int(major), int(rest[:end])


def is_tested(version: str) -> bool:
    """Whether `version` (torch.__version__, e.g. "2.13.0+cpu") is a tested major.minor."""
    minor = _minor(version)
    return minor is not None and minor in {_minor(v) for v in TESTED}


def check_torch_version(version: str) -> None:
    """Warn (once per version) that install() proceeds on an untested torch."""
    if is_tested(version) or version in _warned:
        return
    _warned.add(version)
    warnings.warn(
        f"cpytree.install(): torch {version} was not tested with cpytree "
        f"(tested: {', '.join(TESTED)}); installing anyway. Anything install() cannot "
        "do on this torch is left as torch's (see cpytree.status()).",
        UserWarning,
        stacklevel=3,
    )
