"""Key entries and key paths, as `torch.utils._pytree` has them.

A key path names where a value sits inside a pytree: a tuple of key entries,
one per level from the root down. This module holds the key entry classes
`SequenceKey`, `MappingKey`, `GetAttrKey` and the helpers `keystr` and
`key_get`; it imports nothing else of cpytree. The builtin nodes'
`flatten_with_keys_fn` live beside their flatten/unflatten functions in
`_nodes`, `flatten_up_to`'s key-path errors in `_match`, and the with-path
traversals in `_reference`.

Example:
    >>> Point = namedtuple("Point", "x y")
    >>> path = (MappingKey("a"), SequenceKey(0), GetAttrKey("x"))
    >>> keystr(path)
    "['a'][0].x"
    >>> key_get({"a": [Point(x=1, y=2)]}, path)
    1
"""

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["GetAttrKey", "KeyEntry", "KeyPath", "MappingKey", "SequenceKey", "key_get", "keystr"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class KeyEntry(Protocol):
    """What a key entry offers: hashing, equality, text, and lookup in a parent."""

    def __hash__(self) -> int: ...

    def __eq__(self, other: object) -> bool: ...

    def __str__(self) -> str: ...

    def get(self, parent: Any) -> Any: ...


KeyPath = tuple[KeyEntry, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey(Generic[T]):
    """Position `idx` in a sequence; prints as `[idx]`."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Sequence[T]) -> T:
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey(Generic[K, T]):
    """Key `key` of a mapping; prints as `[repr(key)]`."""

    key: K

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Mapping[K, T]) -> T:
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Attribute `name` of an object; prints as `.name`."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


def keystr(kp: KeyPath) -> str:
    """Return the text of a key path: its entries' texts, concatenated."""
    return "".join([str(entry) for entry in kp])


def key_get(obj: Any, kp: KeyPath) -> Any:
    """Return the value found in `obj` by following the key path `kp`."""
    for entry in kp:
        obj = entry.get(obj)
    return obj
