"""The torch releases cpytree follows, and every pytree difference between them.

cpytree gives the semantics of one torch release at a time (messages
included): the release of the torch imported in the process (the one
install() patches, whose registry cpytree follows), or, with no torch
imported, the newest supported release. `DIFFERENCES` is the one table of
what changed between the supported releases in `torch/utils/_pytree.py`
and `torch/fx/_pytree.py` (read from each release's wheel: `diff -u` of
consecutive releases; 2.12.1 and 2.13.0 are byte-identical), and says how
cpytree gives each release its behaviour. Code that differs by release asks
`has(name)` on its cold path (an error message, pickling), never per node.

Example:
    >>> has("serialized_spelling")   # no torch imported: 2.15.0's behaviour
    True
    >>> with emulating("2.13.0"):    # tests: another release's behaviour
    ...     has("serialized_spelling")
    False

`cpytree._torch._versions` names the releases the suites passed on (TESTED).
"""

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from typing import NamedTuple
else:  # compiles no code at import (see cpytree._namedtuple)
    from ._namedtuple import NamedTuple

__all__ = [
    "CI_RELEASES", "DEV_RELEASE", "DIFFERENCES", "NEWEST", "SUPPORTED", "active", "emulating",
    "has", "minor_of", "release_of",
]  # fmt: skip

# The one list of torch releases (CONTRIBUTING.md, "Support a new torch
# release"). Every torch release of the last year, oldest first (one patch
# release per minor: the others change no pytree code); a release joins once
# the torch-facing suites pass on it, so this is also what was tested
# (cpytree._torch._versions.TESTED). The copies the shell side cannot import
# (make/release.mk, scripts/test_python.sh, .ci/run, the requirements files,
# README) are checked against these by tests/python/test_releases.py.
SUPPORTED: tuple[str, ...] = ("2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0")
NEWEST: str = SUPPORTED[-1]
# The CPU build on this project's machines: the dev venv's torch
# (requirements-dev.txt) and the x86_64 wheel tests' default.
DEV_RELEASE: str = "2.13.0"
# What CI runs `pytest -m torch` on: the dev release and the two newest.
CI_RELEASES: tuple[str, ...] = (DEV_RELEASE, *SUPPORTED[-2:])


class Difference(NamedTuple):
    """One change of torch's pytree between two supported releases."""

    since: tuple[int, int]  # the first (major, minor) with the new behaviour
    what: str  # what torch changed
    how: str  # how cpytree gives each release its behaviour

    def _new(_cls: Any, since: Any, what: Any, how: Any) -> Any:
        return tuple.__new__(_cls, (since, what, how))


# fmt: off
DIFFERENCES: dict[str, Difference] = {
    # ---- 2.11
    "leaf_assert_messages": Difference(
        (2, 11),
        "TreeSpec(None, context, children) with a context or children raises "
        "AssertionError('leaf node should not have a context' / '... children'); "
        "2.10 ran a bare `assert` (AssertionError with no text)",
        "the reference TreeSpec gives each release's text; the engine's TreeSpec "
        "gives 2.11+'s text on every release",
    ),
    "slots_classes": Difference(
        (2, 11),
        "SequenceKey, MappingKey, GetAttrKey, ConstantNode, TreeSpec and LeafSpec "
        "are slots dataclasses (no __dict__, no weakref); ConstantNode is Generic[T]",
        "installed, paths and constants are torch's own classes; cpytree's own "
        "classes have 2.11+'s layout on every release",
    ),
    # ---- 2.12
    "fn_type_names": Difference(
        (2, 12),
        "the type aliases FlattenFn, UnflattenFn, FlattenWithKeysFn (FlattenFunc & "
        "co. kept as deprecated aliases) and torch.fx._pytree's FlattenFnSpec / "
        "FlattenFnExactMatchSpec appear; __all__ lists FlattenFn/UnflattenFn where "
        "2.10-2.11 listed FlattenFunc/UnflattenFunc",
        "cpytree has both spellings on every release, and its __all__ lists both "
        "(a star import gives what each release's gives)",
    ),
    "pprint_placeholder_str": Difference(
        (2, 12),
        "treespec_pprint fills the leaves with one str subclass printing as * "
        "(`_asterisk`); 2.10-2.11 filled them with `_DummyLeaf()` objects",
        "cpytree.treespec_pprint fills with each release's placeholder",
    ),
    "register_opaque_enum_warns": Difference(
        (2, 12),
        "registering an Enum registered as an opaque type logs a deprecation "
        "warning instead of raising ValueError (non-Enum opaque types still raise)",
        "torch's own check: torch's registration function runs it (the "
        "registries are joined while installed); cpytree alone has no opaque types",
    ),
    # ---- 2.14
    "register_custom_class_check": Difference(
        (2, 14),
        "the refusal above tests torch._library.opaque_object.is_custom_class "
        "(was is_opaque_type)",
        "torch's own check, as above",
    ),
    "serialized_spelling": Difference(
        (2, 14),
        "the three namedtuple (de)serialization NotImplementedErrors spell "
        "'serialized_type_name' / 'serialized name' where 2.10-2.13 wrote "
        "'serializated'",
        "cpytree's namedtuple hooks give each release's text",
    ),
    "leafspec_reduce": Difference(
        (2, 14),
        "LeafSpec.__reduce__ is (treespec_leaf, ()): copy and pickle give back "
        "the one leaf spec, without a warning; before, a new LeafSpec and a "
        "FutureWarning from LeafSpec's deprecation",
        "the reference LeafSpec pickles as each release does; installed, the engine's "
        "specs pickle their leaves as the release's LeafSpec does (treespec_leaf() or "
        "LeafSpec()); copy/deepcopy of the engine's interned leaf give it back on every "
        "release",
    ),
    # ---- 2.15
    "loads_unregistered_message": Difference(
        (2, 15),
        "treespec_loads of an unregistered serialized type: NotImplementedError("
        "'Deserializing {name} in pytree failed because the serialized type is not "
        "registered in this process. ...'); before, '... in pytree is not registered.'",
        "cpytree.treespec_loads gives each release's text",
    ),
    "deregister_optree": Difference(
        (2, 15),
        "_deregister_pytree_node also unregisters the type from optree's 'torch' "
        "namespace (or drops its pending torch.utils._cxx_pytree registration)",
        "torch's own function does it: while installed, a deregistration through "
        "cpytree reaches torch's; cpytree never registers with optree itself",
    ),
}
# fmt: on


def minor_of(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version that starts "MAJOR.MINOR", or None.

    As `re.match(r"(\\d+)\\.(\\d+)")` would read it.
    Without `re`: compiling that pattern was a sizeable part of install().
    """
    major, dot, rest = version.partition(".")
    end = 0
    while end < len(rest) and rest[end].isdecimal():  # isdecimal(): the class of \d
        end += 1
    if not dot or not major.isdecimal() or end == 0:
        return None
    return int(major), int(rest[:end])


_SINCE: dict[str, tuple[int, int]] = {name: d.since for name, d in DIFFERENCES.items()}
_OLDEST = cast("tuple[int, int]", minor_of(SUPPORTED[0]))
_NEWEST = cast("tuple[int, int]", minor_of(NEWEST))

# Pushed and popped by emulating() (tests); empty: follow the torch imported.
_emulated: list[tuple[int, int]] = []


def release_of(version: str) -> tuple[int, int]:
    """The supported (major, minor) whose semantics cpytree gives for torch `version`.

    Releases older than the oldest supported get its semantics, newer ones
    (and versions that do not parse) the newest's.
    """
    minor = minor_of(version)
    if minor is None:
        return _NEWEST
    return min(max(minor, _OLDEST), _NEWEST)


def active() -> tuple[int, int]:
    """The (major, minor) whose semantics cpytree gives now."""
    if _emulated:
        return _emulated[-1]
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    if isinstance(version, str):  # torch.__version__ is a str subclass (TorchVersion)
        return release_of(version)
    return _NEWEST


def has(name: str) -> bool:
    """Whether the active release has the behaviour `DIFFERENCES[name]` introduced."""
    return active() >= _SINCE[name]


@contextlib.contextmanager
def emulating(version: str) -> Iterator[None]:
    """Give release `version`'s semantics inside the block (for tests)."""
    _emulated.append(release_of(version))
    try:
        yield
    finally:
        _emulated.pop()
