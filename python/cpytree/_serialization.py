"""TreeSpec serialization: protocol-1 JSON, byte-identical to `torch.utils._pytree`'s.

`treespec_dumps(spec)` writes the same string `torch.utils._pytree` writes for
the same structure, so specs saved by either library load in the other (and
in the C++ header library, include/cpytree/json.h). The format is
`[protocol, node]` where each node is
`{"type": <serialized type name or null>, "context": <...>, "children_spec": [...]}`;
a leaf is `{"type": null, "context": null, "children_spec": []}`. A node type
serializes only if it was registered with a `serialized_type_name`. Its
context is written by the type's `to_dumpable_context` hook when it has one,
else as the *string* `json.dumps(context, cls=EnumEncoder)`.

Everything here reads specs through the public spec API only (`type`,
`context`, `children()`, `is_leaf()`, `num_leaves`, `unflatten`), so one
implementation serves the C++ `cpytree.TreeSpec` and the reference TreeSpec.
Loading builds specs with the constructor `TreeSpec(type, context, children)`
of the implementation a `treespec_loads` is bound to (`bind_loads`).

`treespec_loads` takes untrusted input and, unlike torch's, never imports a
module and never calls anything that nobody registered:

* a node type resolves only through the registry (`SERIALIZED_TYPE_TO_PYTHON_TYPE`);
  unknown names raise NotImplementedError, as torch's do. The placeholder
  name `NO_SERIALIZED_TYPE_NAME_FOUND` never resolves (dumps never writes it);
* the only code it calls is the `from_dumpable_context` hook of a registered
  type (user code registered for exactly this purpose), and for the builtin
  hooks: a namedtuple name resolves only to a registered namedtuple class,
  and a defaultdict's `default_factory` only as `_nodes._resolve_default_factory`
  allows (allowlist, registry, or a class of an already-imported module);
* an enum in a JSON context (`{"__enum__": ..., "fqn": "mod:Qual", "name": ...}`,
  what `EnumEncoder` writes) resolves only in a module already in
  `sys.modules`, by static attribute lookup, to a member of an Enum class;
* builtin node contexts are checked against the node's children (keys of a
  dict, fields of a namedtuple, ...), so a malformed spec fails here and not
  later in unflatten.

Malformed input raises json.JSONDecodeError (bad JSON), ValueError (bad
shape, unknown protocol, a name that does not resolve), TypeError (a context
that is no JSON string, as torch), NotImplementedError (unregistered type,
as torch) or AssertionError (a malformed defaultdict context, as torch).
JSON nested beyond the recursion limit raises RecursionError from the JSON
parser, as torch's does; building the spec itself is iterative.

Example:
    >>> spec = cpytree.tree_structure([1, (2, 3)])
    >>> text = cpytree.treespec_dumps(spec)
    >>> text[:47]
    '[1, {"type": "builtins.list", "context": "null"'
    >>> cpytree.treespec_loads(text) is spec  # specs are interned
    True
    >>> cpytree.treespec_pprint(spec)
    '[*, (*, *)]'
"""

import dataclasses
import functools
import inspect
import json
import warnings
from collections import defaultdict, deque, namedtuple
from collections.abc import Callable, Hashable
from enum import Enum
from typing import Any, NamedTuple, cast

from . import _releases
from ._nodes import (
    BUILTIN_TYPES,
    _defaultdict_serialize,
    _lookup_imported,
    _namedtuple_deserialize,
    _namedtuple_serialize,
    _short_repr,
    is_namedtuple_class,
)
from ._registry import (
    NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE,
    SPEC_TYPES as _SPEC_TYPES,
    SUPPORTED_SERIALIZED_TYPES,
    DumpableContext,
    register_spec_type as _register_spec_type,
)

__all__ = [
    "DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL", "EnumEncoder", "bind_loads", "enum_object_hook",
    "pytree_to_str", "treespec_dumps", "treespec_pprint",
]  # fmt: skip

DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1


class EnumEncoder(json.JSONEncoder):
    """JSON encoder writing an Enum member as
    `{"__enum__": true, "fqn": "mod:Qual", "name": ...}`."""

    def default(self, obj: object) -> str | dict[str, Any]:
        if isinstance(obj, Enum):
            return {
                "__enum__": True,
                "fqn": f"{obj.__class__.__module__}:{obj.__class__.__qualname__}",
                "name": obj.name,
            }
        return cast(str, super().default(obj))


def enum_object_hook(obj: dict[str, Any]) -> Enum | dict[str, Any]:
    """`json.loads` object hook: the Enum member an `EnumEncoder` object names.

    Unlike torch's, it never imports: the enum class is looked up statically
    in a module already in `sys.modules` and must be an Enum subclass; the
    member is read from the class's member map. ValueError otherwise.
    """
    if "__enum__" not in obj:
        return obj
    fqn, name = obj.get("fqn"), obj.get("name")
    if type(fqn) is not str or type(name) is not str:
        raise ValueError(f"Malformed enum in treespec context: {_short_repr(obj)}")
    module_name, _, qualname = fqn.partition(":")
    enum_cls = _lookup_imported(module_name, qualname, "enum class")
    if not (isinstance(enum_cls, type) and issubclass(enum_cls, Enum)):
        raise ValueError(f"Can't resolve enum {_short_repr(fqn)}: not an Enum class.")
    members = inspect.getattr_static(enum_cls, "_member_map_", None)
    member = members.get(name) if type(members) is dict else None
    if not isinstance(member, enum_cls):
        raise ValueError(f"Can't resolve enum {_short_repr(fqn)}: no member {_short_repr(name)}.")
    return member


# --------------------------------------------------------------------------
# Which objects are specs
# --------------------------------------------------------------------------

# The TreeSpec classes whose instances treespec_dumps and treespec_pprint
# accept: the reference's and the C++ engine's add themselves when they bind
# loads, install() adds torch's: cpytree._registry holds the list (imported
# above as _SPEC_TYPES, _register_spec_type), so install() need not load this
# module. Appended to only.


def _check_spec(treespec: Any) -> None:
    if not isinstance(treespec, tuple(_SPEC_TYPES)):
        raise TypeError(
            f"Expected `treespec` to be an instance of "
            f"PyTreeSpec but got item of type {type(treespec)}."
        )


# --------------------------------------------------------------------------
# Dumping
# --------------------------------------------------------------------------


@dataclasses.dataclass
class _TreeSpecSchema:
    """One node of the JSON form: type name (None for a leaf), context, children."""

    type: str | None
    context: DumpableContext
    children_spec: list["_TreeSpecSchema"]


class _ProtocolFn(NamedTuple):
    treespec_to_json: Callable[[Any], DumpableContext]
    json_to_treespec: Callable[..., Any]


def _serialize_node_def(node_type: Any) -> Any:
    """The serialization registration of `node_type`, or torch's NotImplementedError."""
    if node_type not in SUPPORTED_SERIALIZED_TYPES:
        raise NotImplementedError(f"Serializing {node_type} in pytree is not registered.")
    serialize_node_def = SUPPORTED_SERIALIZED_TYPES[node_type]
    if serialize_node_def.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            f"No registered serialization name for {node_type} found. "
            "Please update your _register_pytree_node call with a `serialized_type_name` kwarg."
        )
    return serialize_node_def


def _context_json(context: Any) -> str:
    """The JSON text of a context without a to_dumpable_context hook (torch's TypeError)."""
    try:
        return json.dumps(context, cls=EnumEncoder)
    except TypeError as e:
        raise TypeError(
            "Unable to serialize context. "
            "Please make the context json dump-able, or register a "
            "custom serializer using _register_pytree_node."
        ) from e


@dataclasses.dataclass
class _DumpableBox:
    value: DumpableContext


def _dumpable_json(value: DumpableContext) -> str:
    """The JSON text torch writes for a to_dumpable_context result inside the
    spec (dataclasses.asdict turns dataclasses in it into dicts)."""
    return json.dumps(dataclasses.asdict(_DumpableBox(value))["value"], cls=EnumEncoder)


def _treespec_to_json(treespec: Any) -> _TreeSpecSchema:
    """The schema of `treespec`, as torch builds it (same checks, same errors)."""
    if treespec.is_leaf():
        return _TreeSpecSchema(None, None, [])
    serialize_node_def = _serialize_node_def(treespec.type)
    if serialize_node_def.to_dumpable_context is None:
        serialized_context = _context_json(treespec.context)
    else:
        serialized_context = serialize_node_def.to_dumpable_context(treespec.context)
    child_schemas = [_treespec_to_json(child) for child in treespec.children()]
    name = serialize_node_def.serialized_type_name
    return _TreeSpecSchema(name, serialized_context, child_schemas)


_SUPPORTED_PROTOCOLS: dict[int, _ProtocolFn] = {}


def treespec_dumps(treespec: Any, protocol: int | None = None) -> str:
    """The JSON text of `treespec` (protocol 1: the same bytes torch writes)."""
    _check_spec(treespec)
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(
            f"Unknown protocol {protocol}. "
            f"Available protocols: {list(_SUPPORTED_PROTOCOLS.keys())}",
        )
    json_spec = _SUPPORTED_PROTOCOLS[protocol].treespec_to_json(treespec)
    # asdict as torch: it also turns dataclasses inside custom contexts into dicts.
    return json.dumps((protocol, dataclasses.asdict(json_spec)), cls=EnumEncoder)


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

_NODE_KEYS = ("type", "context", "children_spec")


def _decode_node(json_schema: Any) -> tuple[Any, Any, list[Any]] | None:
    """`(type, context, child schemas)` of one JSON node, or None for a leaf.

    Calls the registered `from_dumpable_context` hook of the node's type, or
    parses its context string with the safe `enum_object_hook`.
    """
    if type(json_schema) is not dict or any(key not in json_schema for key in _NODE_KEYS):
        raise ValueError(
            "Malformed serialized treespec: expected an object with keys "
            f"'type', 'context' and 'children_spec', got {_short_repr(json_schema)}"
        )
    type_name = json_schema["type"]
    dumpable_context = json_schema["context"]
    children = json_schema["children_spec"]
    if type(children) is not list:
        raise ValueError(
            f"Malformed serialized treespec: 'children_spec' must be a list, "
            f"got {_short_repr(children)}"
        )
    if type_name is None and dumpable_context is None and not children:
        return None
    typ = None
    if type(type_name) is str and type_name != NO_SERIALIZED_TYPE_NAME_FOUND:
        typ = SERIALIZED_TYPE_TO_PYTHON_TYPE.get(type_name)
    serialize_node_def = SUPPORTED_SERIALIZED_TYPES.get(typ) if typ is not None else None
    if serialize_node_def is None:
        raise NotImplementedError(_unregistered_message(type_name))
    if serialize_node_def.from_dumpable_context is None:
        if type(dumpable_context) is not str:
            raise TypeError(
                "Unable to deserialize context. "
                "Please make the context json load-able, or register a "
                "custom serializer using _register_pytree_node.",
            )
        context = json.loads(dumpable_context, object_hook=enum_object_hook)
    else:
        context = serialize_node_def.from_dumpable_context(dumpable_context)
    if typ in BUILTIN_TYPES:
        _check_builtin_context(typ, context, len(children))
    return typ, context, children


def _unregistered_message(type_name: Any) -> str:
    """The active torch release's text for a serialized type nobody registered
    (`_releases.DIFFERENCES["loads_unregistered_message"]`)."""
    is_str = type(type_name) is str
    shown = type_name if is_str else _short_repr(type_name)
    if not _releases.has("loads_unregistered_message"):
        return f"Deserializing {shown} in pytree is not registered."
    return (
        f"Deserializing {shown} in pytree failed because the "
        "serialized type is not registered in this process. If this type is "
        "defined in another package, import that package before loading this "
        "artifact so its pytree registrations run. If you control the type, "
        "register it with "
        "`torch.utils._pytree.register_pytree_node(..., "
        "serialized_type_name=...)` or "
        "`torch.export.register_dataclass(..., serialized_type_name=...)` "
        "before deserializing. The `serialized_type_name` must match "
        f"{repr(type_name) if is_str else shown}."
    )


def _is_key_list(keys: Any, count: int) -> bool:
    return (
        type(keys) is list and len(keys) == count and all(isinstance(key, Hashable) for key in keys)
    )


def _check_builtin_context(typ: Any, context: Any, num_children: int) -> None:
    """ValueError unless `context` is what a builtin node with `num_children` children has."""
    name = getattr(typ, "__name__", "?")
    if typ is tuple or typ is list:
        valid = context is None
    elif typ is deque:
        valid = context is None or (type(context) is int and context >= 0)
    elif typ is namedtuple:
        valid = is_namedtuple_class(context) and len(context._fields) == num_children
    elif typ is defaultdict:
        valid = type(context) is list and len(context) == 2
        valid = valid and _is_key_list(context[1], num_children)
    else:  # dict, OrderedDict
        valid = _is_key_list(context, num_children)
    if not valid:
        raise ValueError(
            f"Malformed serialized treespec: a {name} node with {num_children} children "
            f"can't have the context {_short_repr(context)}"
        )


def _json_to_treespec(json_schema: Any, treespec_type: Any, leaf_spec: Any) -> Any:
    """The spec `json_schema` describes, built with `treespec_type(type, context, children)`.

    Iterative: contexts are decoded in pre-order (the order torch calls
    `from_dumpable_context` in), specs built in post-order.
    """
    root: list[Any] = []
    # Frames: [type, context, iterator over child schemas, built children].
    stack: list[list[Any]] = [[None, None, iter([json_schema]), root]]
    while stack:
        frame = stack[-1]
        child_schema = next(frame[2], _DONE)
        if child_schema is _DONE:
            stack.pop()
            if stack:  # the bottom frame only collects the root
                stack[-1][3].append(treespec_type(frame[0], frame[1], frame[3]))
            continue
        decoded = _decode_node(child_schema)
        if decoded is None:
            frame[3].append(leaf_spec)
        else:
            typ, context, children = decoded
            stack.append([typ, context, iter(children), []])
    return root[0]


_DONE: Any = object()
_SUPPORTED_PROTOCOLS[1] = _ProtocolFn(_treespec_to_json, _json_to_treespec)


def _loads_uncached(serialized: str, treespec_type: Any, leaf_spec: Any) -> Any:
    """The spec `serialized` describes, built with `treespec_type` (no cache)."""
    decoded = json.loads(serialized)
    if type(decoded) is not list or len(decoded) != 2:
        raise ValueError(
            "Malformed serialized treespec: expected a JSON array [protocol, treespec], "
            f"got {_short_repr(decoded)}"
        )
    protocol, json_schema = decoded
    if not isinstance(protocol, (int, float)) or protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(
            f"Unknown protocol {_short_repr(protocol)}. "
            f"Available protocols: {list(_SUPPORTED_PROTOCOLS.keys())}",
        )
    # `protocol` equals an int key; a float such as 1.0 finds the same entry as int(1.0).
    protocol_fns = _SUPPORTED_PROTOCOLS[int(protocol)]
    return protocol_fns.json_to_treespec(json_schema, treespec_type, leaf_spec)


def bind_loads(
    treespec_type: Any,
    leaf_spec: Any,
    module: str,
    engine_loads: Callable[[str], Any] | None = None,
) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """`(treespec_loads, str_to_pytree)` building specs of `treespec_type`.

    `treespec_loads` is cached on the input string as torch's is
    (`functools.lru_cache`), so equal strings give the same spec object; its
    `__wrapped__` is the uncached function. That is `engine_loads` when given
    (the C++ engine's, which hands what it does not take natively to the
    reference: `reference_loads(engine_loads)`), else the pure-Python loads.
    """
    _register_spec_type(treespec_type)

    def reference_loads(serialized: str) -> Any:
        """The spec that `treespec_dumps` wrote as `serialized` (see `cpytree._serialization`)."""
        return _loads_uncached(serialized, treespec_type, leaf_spec)

    uncached = engine_loads if engine_loads is not None else reference_loads
    treespec_loads = functools.lru_cache(uncached)
    treespec_loads.__doc__ = reference_loads.__doc__

    def str_to_pytree(json: str) -> Any:  # noqa: A002 (torch's parameter name)
        """Deprecated (FutureWarning): `treespec_loads`."""
        warnings.warn(
            "`str_to_pytree` is deprecated. Please use `treespec_loads` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return treespec_loads(json)

    for function, name in ((treespec_loads, "treespec_loads"), (str_to_pytree, "str_to_pytree")):
        function.__module__ = module
        function.__qualname__ = function.__name__ = name
    return treespec_loads, str_to_pytree


def engine_state(reference_loads: Callable[[str], Any]) -> tuple[Any, ...]:
    """What the engine's dumps/loads need (`_C._set_serialization`; src/spec_model/serialize.h)."""
    return (
        SUPPORTED_SERIALIZED_TYPES,
        SERIALIZED_TYPE_TO_PYTHON_TYPE,
        NO_SERIALIZED_TYPE_NAME_FOUND,
        _namedtuple_serialize,
        _namedtuple_deserialize,
        _defaultdict_serialize,
        enum_object_hook,
        treespec_dumps,
        reference_loads,
        _serialize_node_def,
        _context_json,
        _dumpable_json,
    )


# --------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------


class _Asterisk(str):
    """A str that prints as a bare `*`: the placeholder leaf of treespec_pprint."""

    __slots__ = ()

    def __new__(cls) -> "_Asterisk":
        return super().__new__(cls, "*")

    def __repr__(self) -> str:
        return "*"  # no quotes


_asterisk = _Asterisk()


class _DummyLeaf:
    """torch 2.10-2.11's placeholder leaf: a plain object printing as `*`."""

    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: Any) -> str:
    """The repr of the pytree of `treespec` with `*` at every leaf, e.g. `{'a': [*, *]}`.

    The leaves are the active torch release's placeholder
    (`_releases.DIFFERENCES["pprint_placeholder_str"]`): what a custom
    unflatten function receives.
    """
    _check_spec(treespec)
    if _releases.has("pprint_placeholder_str"):
        return repr(treespec.unflatten([_asterisk] * treespec.num_leaves))
    return repr(treespec.unflatten([_DummyLeaf() for _ in range(treespec.num_leaves)]))


def pytree_to_str(treespec: Any) -> str:
    """Deprecated (FutureWarning): `treespec_dumps`."""
    warnings.warn(
        "`pytree_to_str` is deprecated. Please use `treespec_dumps` instead.",
        FutureWarning,
        stacklevel=2,
    )
    return treespec_dumps(treespec)
