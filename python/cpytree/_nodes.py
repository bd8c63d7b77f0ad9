"""The builtin pytree node types, and how node types are recognised.

* namedtuple and PyStructSequence detection (`is_namedtuple*`,
  `is_structseq*`) and `_get_node_type`, the registry key of a value (its
  type, or `collections.namedtuple` for every namedtuple);
* the flatten/unflatten functions of tuple, list, dict, namedtuple,
  OrderedDict, defaultdict and deque, and their `flatten_with_keys_fn`,
  registered at import as torch registers them;
* the (de)serialization hooks of namedtuple and defaultdict contexts.

One deliberate difference from torch: `_defaultdict_deserialize` never
imports a module nor calls anything to find a `default_factory`; see
`_resolve_default_factory` for the rule. `_namedtuple_deserialize` only gives
back namedtuple classes.

Example:
    >>> Point = namedtuple("Point", "x y")
    >>> _get_node_type(Point(1, 2)) is namedtuple
    True
    >>> is_structseq_instance(time.gmtime(0))
    True
"""

import collections
import inspect
import sys
import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, NoReturn, TypeVar, cast

from ._registry import (
    NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE,
    SUPPORTED_NODES,
    SUPPORTED_SERIALIZED_TYPES,
    Context,
    DumpableContext,
    _store_node,
)

if TYPE_CHECKING:
    from ._keys import KeyEntry

_T_co = TypeVar("_T_co", covariant=True)


# --------------------------------------------------------------------------
# namedtuple and PyStructSequence detection
# --------------------------------------------------------------------------


def is_namedtuple(obj: object | type) -> bool:
    """Whether `obj` is a namedtuple class or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_class(cls: type) -> bool:
    """Whether `cls` is a tuple subclass with str `_fields`, `_make` and `_asdict`."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return False
    fields = getattr(cls, "_fields", None)
    return (
        isinstance(fields, tuple)
        and all(type(field) is str for field in fields)
        and callable(getattr(cls, "_make", None))
        and callable(getattr(cls, "_asdict", None))
    )


def is_namedtuple_instance(obj: object) -> bool:
    """Whether `obj` is a namedtuple instance."""
    return is_namedtuple_class(type(obj))


class structseq(tuple[_T_co, ...]):  # noqa: N801 (torch's name)
    """A generic type stub for CPython's `PyStructSequence` type (as torch has it)."""

    __slots__: ClassVar[tuple[()]] = ()

    n_fields: Final[int]  # type: ignore[misc]
    n_sequence_fields: Final[int]  # type: ignore[misc]
    n_unnamed_fields: Final[int]  # type: ignore[misc]

    def __init_subclass__(cls) -> NoReturn:
        """Prohibit subclassing."""
        raise TypeError("type 'structseq' is not an acceptable base type")

    def __new__(cls, sequence: Iterable[_T_co], dict: dict[str, Any] = ...) -> "structseq[_T_co]":  # noqa: A002
        raise NotImplementedError


Py_TPFLAGS_BASETYPE: int = 1 << 10  # CPython: the type may be subclassed


def is_structseq(obj: object | type) -> bool:
    """Whether `obj` is a PyStructSequence class or instance."""
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: type) -> bool:
    """Whether `cls` is a PyStructSequence type such as `os.stat_result`."""
    return (
        isinstance(cls, type)
        and cls.__bases__ == (tuple,)
        and isinstance(getattr(cls, "n_fields", None), int)
        and isinstance(getattr(cls, "n_sequence_fields", None), int)
        and isinstance(getattr(cls, "n_unnamed_fields", None), int)
        and not cls.__flags__ & Py_TPFLAGS_BASETYPE
    )


def is_structseq_instance(obj: object) -> bool:
    """Whether `obj` is a PyStructSequence instance."""
    return is_structseq_class(type(obj))


def _is_namedtuple_instance(tree: Any) -> bool:
    """Deprecated (FutureWarning): `is_namedtuple_instance`, as torch keeps it."""
    warnings.warn(
        "cpytree._is_namedtuple_instance is private and will be removed in a future release. "
        "Please use cpytree.is_namedtuple_instance instead.",
        FutureWarning,
        stacklevel=2,
    )
    return is_namedtuple_instance(tree)


def _get_node_type(tree: Any) -> Any:
    """The registry key of `tree`: its type, or `namedtuple` for any namedtuple."""
    node_type = type(tree)
    if node_type is not tuple and issubclass(node_type, tuple) and is_namedtuple_class(node_type):
        return namedtuple
    return node_type


# --------------------------------------------------------------------------
# Builtin node types: flatten, unflatten and flatten_with_keys of each
# --------------------------------------------------------------------------

# Key entries are made by importing cpytree._keys at the call: `import cpytree`
# leaves it unloaded (the engine makes its own keys; see src/ground/key_entries.cc).
KeyedChildren = list[tuple["KeyEntry", Any]]


def _sequence_keyed(values: Sequence[Any]) -> KeyedChildren:
    from ._keys import SequenceKey

    return [(SequenceKey(i), v) for i, v in enumerate(values)]


def _mapping_keyed(keys: list[Any], values: list[Any]) -> KeyedChildren:
    from ._keys import MappingKey

    return [(MappingKey(k), v) for k, v in zip(keys, values, strict=True)]


def _tuple_flatten(d: tuple[Any, ...]) -> tuple[list[Any], Context]:
    return list(d), None


def _tuple_unflatten(values: Iterable[Any], context: Context) -> tuple[Any, ...]:
    return tuple(values)


def _tuple_flatten_with_keys(d: tuple[Any, ...]) -> tuple[KeyedChildren, None]:
    return _sequence_keyed(d), None


def _list_flatten(d: list[Any]) -> tuple[list[Any], Context]:
    return d, None


def _list_unflatten(values: Iterable[Any], context: Context) -> list[Any]:
    return list(values)


def _list_flatten_with_keys(d: list[Any]) -> tuple[KeyedChildren, None]:
    return _sequence_keyed(d), None


def _dict_flatten(d: dict[Any, Any]) -> tuple[list[Any], Context]:
    return list(d.values()), list(d.keys())


def _dict_unflatten(values: Iterable[Any], context: Context) -> dict[Any, Any]:
    return dict(zip(context, values, strict=True))


def _dict_flatten_with_keys(d: dict[Any, Any]) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), keys


def _namedtuple_flatten(d: Any) -> tuple[list[Any], Context]:
    return list(d), type(d)


def _namedtuple_unflatten(values: Iterable[Any], context: Context) -> Any:
    return context(*values)


def _namedtuple_flatten_with_keys(d: Any) -> tuple[KeyedChildren, type]:
    from ._keys import GetAttrKey

    cls = type(d)
    keyed: KeyedChildren = [(GetAttrKey(field), v) for field, v in zip(cls._fields, d, strict=True)]
    return keyed, cls


def _namedtuple_serialize(context: Context) -> DumpableContext:
    if context not in SUPPORTED_SERIALIZED_TYPES:
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we "
            f"didn't register a {_serialized()}_type_name. Please register using "
            "`_register_namedtuple`."
        )
    name = SUPPORTED_SERIALIZED_TYPES[context].serialized_type_name
    if name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we "
            f"couldn't find a {_serialized()}_type_name. Please register using "
            "`_register_namedtuple`."
        )
    return name


def _serialized() -> str:
    """How the active torch release spells "serialized" in the three messages
    of the namedtuple hooks (`_releases.DIFFERENCES["serialized_spelling"]`)."""
    # No import statement: loading a spec imports nothing (cpytree._serialization,
    # loaded before any of these hooks runs, imported _releases).
    releases = sys.modules.get(f"{__package__}._releases")
    if releases is None:  # a hook called directly
        from . import _releases

        releases = _releases
    return "serialized" if releases.has("serialized_spelling") else "serializated"


def _namedtuple_deserialize(dumpable_context: DumpableContext) -> Context:
    """The namedtuple class registered under the name `dumpable_context`.

    Only a name a namedtuple class was registered under resolves (torch would
    also hand back any other registered type, e.g. `dict` for "builtins.dict").
    """
    cls = None
    if type(dumpable_context) is str and dumpable_context != NO_SERIALIZED_TYPE_NAME_FOUND:
        cls = SERIALIZED_TYPE_TO_PYTHON_TYPE.get(dumpable_context)
    if cls is None or not is_namedtuple_class(cls):
        shown = dumpable_context if type(dumpable_context) is str else _short_repr(dumpable_context)
        raise NotImplementedError(
            f"Can't deserialize TreeSpec of namedtuple class {shown} "
            f"because we couldn't find a {_serialized()} name."
        )
    return cls


def _register_namedtuple(cls: type[Any], *, serialized_type_name: str) -> None:
    """Register namedtuple class `cls` under a name, so its specs can be serialized."""
    _store_node(cls, _namedtuple_flatten, _namedtuple_unflatten, _namedtuple_flatten_with_keys,
                serialized_type_name, _namedtuple_serialize, _namedtuple_deserialize)  # fmt: skip


def _ordereddict_flatten(d: "OrderedDict[Any, Any]") -> tuple[list[Any], Context]:
    return list(d.values()), list(d.keys())


def _ordereddict_unflatten(values: Iterable[Any], context: Context) -> "OrderedDict[Any, Any]":
    return OrderedDict(zip(context, values, strict=True))


def _ordereddict_flatten_with_keys(
    d: "OrderedDict[Any, Any]",
) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), keys


_odict_flatten, _odict_unflatten = _ordereddict_flatten, _ordereddict_unflatten  # torch's aliases


def _defaultdict_flatten(d: "defaultdict[Any, Any]") -> tuple[list[Any], Context]:
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_unflatten(values: Iterable[Any], context: Context) -> "defaultdict[Any, Any]":
    default_factory, keys = context
    return defaultdict(default_factory, _dict_unflatten(values, keys))


def _defaultdict_flatten_with_keys(
    d: "defaultdict[Any, Any]",
) -> tuple[KeyedChildren, list[Any]]:
    keys = list(d.keys())
    return _mapping_keyed(keys, list(d.values())), [d.default_factory, keys]


def _defaultdict_serialize(context: Context) -> DumpableContext:
    default_factory, keys = context
    return {
        "default_factory_module": default_factory.__module__,
        "default_factory_name": default_factory.__qualname__,
        "dict_context": keys,
    }


def _defaultdict_deserialize(dumpable_context: DumpableContext) -> Context:
    """`[default_factory, keys]` from the JSON form `_defaultdict_serialize` writes.

    The checks torch makes raise AssertionError as torch's do; a factory that
    does not resolve raises ValueError (see `_resolve_default_factory`).
    """
    if not isinstance(dumpable_context, dict):
        raise AssertionError("dumpable_context must be a dict")  # noqa: TRY004 (as torch)
    expected_keys = {"default_factory_module", "default_factory_name", "dict_context"}
    if set(dumpable_context) != expected_keys:
        raise AssertionError(
            f"dumpable_context keys must be {expected_keys}, got {set(dumpable_context)}"
        )
    module_name = dumpable_context["default_factory_module"]
    factory_name = dumpable_context["default_factory_name"]
    if not isinstance(module_name, str):
        raise AssertionError("default_factory_module must be a string")  # noqa: TRY004 (as torch)
    if not isinstance(factory_name, str):
        raise AssertionError("default_factory_name must be a string")  # noqa: TRY004 (as torch)
    keys = dumpable_context["dict_context"]
    if type(keys) is not list:
        raise ValueError(
            f"defaultdict context: dict_context must be a list of keys, got {_short_repr(keys)}"
        )
    return [_resolve_default_factory(module_name, factory_name), keys]


# Factories resolved by name without looking anywhere else.
_SAFE_DEFAULT_FACTORIES: dict[tuple[str, str], type] = {
    (cls.__module__, cls.__qualname__): cls
    for cls in (
        bool, bytearray, bytes, complex, dict, float, frozenset, int, list, object, set, str,
        tuple, OrderedDict, collections.Counter, defaultdict, deque,
    )
}  # fmt: skip


def _resolve_default_factory(module_name: str, qualname: str) -> type:
    """The class that `module_name` and `qualname` name, found without running code.

    Deserializing a spec must not run code that nobody registered, so unlike
    torch (which imports `module_name` and takes any attribute) this:

    1. takes a builtin container or scalar type from a fixed allowlist
       (list, dict, set, frozenset, tuple, int, float, complex, bool, str,
       bytes, bytearray, object, OrderedDict, Counter, defaultdict, deque);
    2. else takes a type registered as a pytree node (`SUPPORTED_NODES`) whose
       `__module__` and `__qualname__` are the two names;
    3. else looks the dotted `qualname` up in the module `module_name` only if
       it is already in `sys.modules`, one attribute at a time with
       `inspect.getattr_static` (no import, no `__getattr__`, no descriptor
       runs), and accepts the result only if it is a class.

    Anything else (a module not yet imported, a function, a builtin function
    such as `os.abort`, an instance) raises ValueError: a function as
    `default_factory` would be called on every missing key of the
    unflattened defaultdict.
    """
    cls = _SAFE_DEFAULT_FACTORIES.get((module_name, qualname))
    if cls is not None:
        return cls
    for registered in list(SUPPORTED_NODES):
        if (
            isinstance(registered, type)
            and registered.__module__ == module_name
            and registered.__qualname__ == qualname
        ):
            return registered
    found = _lookup_imported(module_name, qualname, "default_factory")
    if not isinstance(found, type):
        raise ValueError(
            f"defaultdict default_factory {module_name}.{qualname} is not a class; "
            "treespec_loads only accepts classes as default_factory."
        )
    return found


def _lookup_imported(module_name: str, qualname: str, what: str) -> Any:
    """The object at dotted `qualname` in the already-imported module `module_name`.

    Never imports and never runs code: module and class dictionaries are read
    with `inspect.getattr_static`. Every step but the last must be a class.
    ValueError when anything is missing.
    """
    module = sys.modules.get(module_name)
    if not isinstance(module, types.ModuleType):
        raise ValueError(
            f"Can't resolve {what} {_short_repr(module_name)}:{_short_repr(qualname)}: "
            "module is not imported (treespec_loads never imports modules; import it first)."
        )
    found: Any = module
    parts = qualname.split(".")
    for index, part in enumerate(parts):
        if index > 0 and not isinstance(found, type):
            found = _MISSING
            break
        found = inspect.getattr_static(found, part, _MISSING)
        if found is _MISSING:
            break
    if found is _MISSING or not qualname:
        raise ValueError(
            f"Can't resolve {what} {_short_repr(module_name)}:{_short_repr(qualname)}: "
            "no such class."
        )
    return found


_MISSING: Any = object()


def _short_repr(value: Any, limit: int = 80) -> str:
    """`repr(value)` of a decoded JSON value, cut to `limit` characters for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _deque_flatten(d: "deque[Any]") -> tuple[list[Any], Context]:
    return list(d), d.maxlen


def _deque_unflatten(values: Iterable[Any], context: Context) -> "deque[Any]":
    return deque(values, maxlen=context)


def _deque_flatten_with_keys(d: "deque[Any]") -> tuple[KeyedChildren, int | None]:
    return _sequence_keyed(d), d.maxlen


def _register_builtin_nodes() -> None:
    """Register the node types every pytree knows (run once, at import)."""
    _store_node(tuple, _tuple_flatten, _tuple_unflatten, _tuple_flatten_with_keys, "builtins.tuple")
    _store_node(list, _list_flatten, _list_unflatten, _list_flatten_with_keys, "builtins.list")
    _store_node(dict, _dict_flatten, _dict_unflatten, _dict_flatten_with_keys, "builtins.dict")
    _store_node(
        cast(type, namedtuple),
        _namedtuple_flatten,
        _namedtuple_unflatten,
        _namedtuple_flatten_with_keys,
        "collections.namedtuple",
        _namedtuple_serialize,
        _namedtuple_deserialize,
    )
    _store_node(
        OrderedDict,
        _ordereddict_flatten,
        _ordereddict_unflatten,
        _ordereddict_flatten_with_keys,
        "collections.OrderedDict",
    )
    _store_node(
        defaultdict,
        _defaultdict_flatten,
        _defaultdict_unflatten,
        _defaultdict_flatten_with_keys,
        "collections.defaultdict",
        _defaultdict_serialize,
        _defaultdict_deserialize,
    )
    _store_node(
        deque, _deque_flatten, _deque_unflatten, _deque_flatten_with_keys, "collections.deque"
    )


_register_builtin_nodes()

STANDARD_DICT_TYPES: frozenset[type] = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES: frozenset[Any] = frozenset(
    {tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque}
)
