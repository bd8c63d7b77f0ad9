"""`typing.NamedTuple` classes built without compiling code at import.

`typing.NamedTuple` (through `collections.namedtuple`) compiles a `__new__`
from a source string for every class, each time the defining module is
imported: the registry's NamedTuples cost `import cpytree` about 0.8M
instructions each. Here the class body writes that `__new__` itself, as a
method `_new` (compiled once into the .pyc like any function; typing would
refuse a `__new__`, so mypy sees `_new` as a method the class does not keep);
the rest is what `collections.namedtuple` and `typing.NamedTuple` build,
without `eval` (tests/python/test_import_cost.py compares the classes with
typing's own)::

    if TYPE_CHECKING:
        from typing import NamedTuple
    else:
        from ._namedtuple import NamedTuple

    class Pair(NamedTuple):
        first: int
        second: int

        def _new(_cls: Any, first: Any, second: Any) -> Any:  # becomes __new__
            return tuple.__new__(_cls, (first, second))

The `_new` parameters must be the annotated fields, in order (checked).
Fields with defaults are not supported.
"""

from __future__ import annotations

import collections
import sys
import typing
from typing import Any

# What collections.namedtuple makes its field properties with (C, or its
# pure-Python stand-in on interpreters without _collections).
_tuplegetter: Any = vars(collections)["_tuplegetter"]

__all__ = ["NamedTuple"]

# typing.NamedTuple's rules for the class body.
_PROHIBITED = frozenset({"__init__", "__slots__", "__getnewargs__", "_fields",
                         "_field_defaults", "_make", "_replace", "_asdict", "_source"})  # fmt: skip
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "_new"})
# collections.namedtuple's _replace raises TypeError for an unknown field
# since 3.13, ValueError before.
_REPLACE_ERROR = TypeError if sys.version_info >= (3, 13) else ValueError


def _build(typename: str, ns: dict[str, Any]) -> type:
    types: dict[str, Any] = dict(ns.get("__annotations__", {}))
    field_names = tuple(map(sys.intern, types))
    new: Any = ns.get("_new")
    code = getattr(new, "__code__", None)
    if code is None or code.co_varnames[1 : code.co_argcount] != field_names:
        raise TypeError(f"{typename}: _new(_cls, {', '.join(field_names)}) must be defined")
    if any(name in ns for name in field_names) or new.__defaults__:
        raise TypeError(f"{typename}: fields with defaults are not supported")
    num_fields = len(field_names)
    arg_list = ", ".join(field_names) + ("," if num_fields == 1 else "")
    repr_fmt = "(" + ", ".join(f"{name}=%r" for name in field_names) + ")"
    tuple_new = tuple.__new__

    new.__name__ = "__new__"
    new.__doc__ = f"Create new instance of {typename}({arg_list})"
    new.__annotations__ = types

    def make(cls: type, iterable: Any) -> Any:
        result: tuple[Any, ...] = tuple_new(cls, iterable)
        if len(result) != num_fields:
            raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
        return result

    make.__name__ = "_make"
    make.__doc__ = f"Make a new {typename} object from a sequence or iterable"

    def _replace(self: Any, /, **kwds: Any) -> Any:
        result = self._make(map(kwds.pop, field_names, self))
        if kwds:
            raise _REPLACE_ERROR(f"Got unexpected field names: {list(kwds)!r}")
        return result

    _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"

    def __repr__(self: Any) -> str:
        "Return a nicely formatted representation string"
        return str(self.__class__.__name__ + repr_fmt % self)

    def _asdict(self: Any) -> dict[str, Any]:
        "Return a new dict which maps field names to their values."
        return dict(zip(self._fields, self, strict=False))

    def __getnewargs__(self: Any) -> tuple[Any, ...]:
        "Return self as a plain tuple.  Used by copy and pickle."
        return tuple(self)

    for method in (new, make, _replace, __repr__, _asdict, __getnewargs__):
        method.__qualname__ = f"{typename}.{method.__name__}"

    namespace: dict[str, Any] = {
        "__doc__": f"{typename}({arg_list})",
        "__slots__": (),
        "_fields": field_names,
        "_field_defaults": {},
        "__new__": new,
        "_make": classmethod(make),
        "_replace": _replace,
        "__repr__": __repr__,
        "_asdict": _asdict,
        "__getnewargs__": __getnewargs__,
        "__match_args__": field_names,
    }
    if sys.version_info >= (3, 13):
        namespace["__replace__"] = _replace  # copy.replace(), as collections' own
    for index, name in enumerate(field_names):
        namespace[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    result = type(typename, (tuple,), namespace)
    result.__module__ = ns["__module__"]
    result.__annotations__ = types
    if sys.version_info >= (3, 12):
        # typing's class statement keeps the base it was given (PEP 560's
        # __orig_bases__), which 3.12+ copy onto the class.
        result.__orig_bases__ = (typing.NamedTuple,)  # type: ignore[attr-defined]
    for key, value in ns.items():  # the docstring, __qualname__, methods
        if key in _PROHIBITED:
            raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
        if key not in _SPECIAL and key not in field_names:
            setattr(result, key, value)
    return result


class _NamedTupleMeta(type):
    def __new__(mcls, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
        if not bases:  # NamedTuple itself
            return super().__new__(mcls, typename, bases, ns)
        if bases != (FastNamedTuple,):
            raise TypeError("can only inherit from a NamedTuple type alone")
        return _build(typename, ns)


class FastNamedTuple(metaclass=_NamedTupleMeta):
    """Base of a class statement: `class Point(NamedTuple)` makes a tuple subclass."""


# CPython 3.14 evaluates class annotations lazily (`__annotate__`, PEP 649):
# the class body gives no `__annotations__` to read the fields from, and
# typing's 3.14 classes carry the annotate functions. Not mirrored yet: there
# the registry's NamedTuples are typing's own (and compile their __new__).
NamedTuple: Any = typing.NamedTuple if sys.version_info >= (3, 14) else FastNamedTuple
