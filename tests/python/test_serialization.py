"""treespec_dumps / treespec_loads / treespec_pprint (cpytree._serialization).

* Byte identity: for every node kind, both implementations (the C++ engine's
  `cpytree` and `cpytree._reference`) write exactly the string torch 2.13
  writes for the same tree, raise torch's exception type where torch refuses,
  and load torch's strings back to an equal spec of their own TreeSpec class.
* Hostile input: malformed strings raise a clear error and `treespec_loads`
  never imports a module, never runs a module `__getattr__`, and never takes
  a default_factory or enum from anywhere its documented rule does not allow.

Types used here are registered both in cpytree and (when torch is installed)
in torch.utils._pytree at import of this module.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import importlib
import json
import sys
import types
from collections import OrderedDict, defaultdict, deque
from typing import Any, NamedTuple

import pytest
from hypothesis import given, strategies as st

import cpytree
import cpytree._reference as ref
from support import builtin_container_strategies

try:
    import torch.utils._pytree as torch_pytree
except ImportError:  # pragma: no cover - torch is optional
    torch_pytree = None

needs_torch = pytest.mark.skipif(torch_pytree is None, reason="torch is not importable")

pytestmark = pytest.mark.torch
IMPLS = pytest.mark.parametrize("impl", [cpytree, ref], ids=["cpytree", "reference"])


# --------------------------------------------------------------------------
# Types registered in both registries
# --------------------------------------------------------------------------


class Point(NamedTuple):
    x: Any
    y: Any


class Unnamed(NamedTuple):
    a: Any


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Holder:
    class Inner(enum.Enum):
        A = "a"


class Node:
    """A custom node whose context is plain JSON data (no hooks)."""

    def __init__(self, tag: str, children: list[Any]) -> None:
        self.tag, self.children = tag, children

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and (self.tag, self.children) == (other.tag, other.children)

    def __repr__(self) -> str:
        return f"Node({self.tag!r}, {self.children!r})"


HOOK_CALLS: list[str] = []


class Hooked:
    """A custom node with to/from_dumpable_context hooks (a frozenset context)."""

    def __init__(self, names: frozenset[str], values: list[Any]) -> None:
        self.names, self.values = names, values

    def __repr__(self) -> str:
        return f"Hooked({sorted(self.names)}, {self.values!r})"


def _hooked_to(context: frozenset[str]) -> list[str]:
    HOOK_CALLS.append("to")
    return sorted(context)


def _hooked_from(dumpable: list[str]) -> frozenset[str]:
    HOOK_CALLS.append("from")
    return frozenset(dumpable)


@dataclasses.dataclass
class Meta:
    version: int
    label: str


class DataclassContext:
    """A custom node whose to_dumpable_context returns a dataclass (torch asdict()s it)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Anonymous:
    """Registered without a serialized_type_name."""

    def __init__(self, value: Any) -> None:
        self.value = value


class OpaqueContext:
    """Registered with a name, but its context is not JSON."""

    def __init__(self, value: Any) -> None:
        self.value = value


class EnumContext:
    """A custom node whose plain-JSON context holds enum members."""

    def __init__(self, color: Color, level: Level, value: Any) -> None:
        self.color, self.level, self.value = color, level, value

    def __repr__(self) -> str:
        return f"EnumContext({self.color!r}, {self.level!r}, {self.value!r})"


@dataclasses.dataclass
class DC:
    a: Any
    b: Any


class Bag(list):
    """A class used as defaultdict default_factory (found through sys.modules)."""


def _make_local_factory() -> type:
    class LocalFactory(list):  # qualname has <locals>: only the registry finds it
        pass

    return LocalFactory


LocalFactory = _make_local_factory()


def _register(mod: Any) -> None:
    mod._register_namedtuple(Point, serialized_type_name="tests.serialization.Point")
    mod.register_pytree_node(
        Node,
        lambda n: (n.children, {"tag": n.tag, "n": len(n.children)}),
        lambda values, ctx: Node(ctx["tag"], list(values)),
        serialized_type_name="tests.serialization.Node",
    )
    mod.register_pytree_node(
        Hooked,
        lambda h: (h.values, h.names),
        lambda values, ctx: Hooked(ctx, list(values)),
        serialized_type_name="tests.serialization.Hooked",
        to_dumpable_context=_hooked_to,
        from_dumpable_context=_hooked_from,
    )
    mod.register_pytree_node(
        DataclassContext,
        lambda d: ([d.value], None),
        lambda values, ctx: DataclassContext(*values),
        serialized_type_name="tests.serialization.DataclassContext",
        to_dumpable_context=lambda ctx: Meta(1, "x"),
        from_dumpable_context=lambda d: None,
    )
    mod.register_pytree_node(
        Anonymous, lambda a: ([a.value], None), lambda values, ctx: Anonymous(*values)
    )
    mod.register_pytree_node(
        OpaqueContext,
        lambda o: ([o.value], object.__new__(OpaqueContext)),
        lambda values, ctx: OpaqueContext(*values),
        serialized_type_name="tests.serialization.OpaqueContext",
    )
    mod.register_pytree_node(
        EnumContext,
        lambda e: ([e.value], [e.color, e.level, {"nested": Holder.Inner.A}]),
        lambda values, ctx: EnumContext(ctx[0], ctx[1], *values),
        serialized_type_name="tests.serialization.EnumContext",
    )
    mod.register_dataclass(DC, serialized_type_name="tests.serialization.DC")
    mod.register_pytree_node(
        LocalFactory, lambda x: (list(x), None), lambda values, ctx: LocalFactory(values)
    )


_register(cpytree)
if torch_pytree is not None:
    _register(torch_pytree)


# --------------------------------------------------------------------------
# Byte identity with torch
# --------------------------------------------------------------------------

L = 0  # a leaf

ROUND_TRIP_CASES: dict[str, Any] = {
    "leaf": L,
    "none": None,
    "empty_list": [],
    "empty_tuple": (),
    "empty_dict": {},
    "list": [L, L, L],
    "tuple": (L, (L, L)),
    "dict": {"a": L, "b": [L, None]},
    "dict_key_types": {1: L, "s": L, 2.5: L, None: L, False: L},
    "dict_unicode_keys": {"ключ": L, 'é\n"q"': L, "\u2603": L},
    "nested": {"x": [(L, {"y": (L,)}), []], "z": ({},)},
    "ordereddict": OrderedDict([("b", L), ("a", [L])]),
    "defaultdict_list": defaultdict(list, {"k": L, 3: [L]}),
    "defaultdict_int": defaultdict(int, {"k": L}),
    "defaultdict_ordereddict": defaultdict(OrderedDict, {"k": L}),
    "defaultdict_counter": defaultdict(collections.Counter, {"k": L}),
    "defaultdict_module_class": defaultdict(Bag, {"k": L}),
    "defaultdict_registered_local_class": defaultdict(LocalFactory, {"k": L}),
    "deque": deque([L, L]),
    "deque_maxlen": deque([L, [L]], maxlen=3),
    "namedtuple": Point(L, [L, Point(L, L)]),
    "enum_keys": {Color.RED: L, Color.GREEN: [L]},
    "intenum_keys": {Level.LOW: L},
    "nested_enum_key": {Holder.Inner.A: L},
    "custom_json_context": Node("t", [L, Node("u", [])]),
    "custom_hooks": Hooked(frozenset({"b", "a"}), [L, L]),
    "custom_enum_context": EnumContext(Color.GREEN, Level.HIGH, [L]),
    "dataclass": DC(a=[L], b=None),
}

# Trees that dump the same bytes but do not come back equal (torch behaves the same).
DUMP_ONLY_CASES: dict[str, Any] = {
    "custom_dataclass_context": DataclassContext(L),
}

# torch.utils._pytree imports the module and getattr()s the qualname, which
# fails for a class defined in a function; cpytree finds it in the registry.
TORCH_CANNOT_LOAD = {"defaultdict_registered_local_class"}

REFUSED_CASES: dict[str, tuple[Any, type[BaseException]]] = {
    "unregistered_namedtuple": (Unnamed(L), NotImplementedError),
    "custom_without_name": (Anonymous(L), NotImplementedError),
    "custom_context_not_json": (OpaqueContext(L), TypeError),
    "tuple_dict_keys": ({(1, 2): L}, TypeError),
}


def _torch_dumps(tree: Any) -> str:
    return torch_pytree.treespec_dumps(torch_pytree.tree_structure(tree))


def _spec_class(impl: Any) -> type:
    return impl.TreeSpec


@needs_torch
@IMPLS
@pytest.mark.parametrize("case", list(ROUND_TRIP_CASES) + list(DUMP_ONLY_CASES))
def test_dumps_is_byte_identical_to_torch(impl: Any, case: str) -> None:
    tree = {**ROUND_TRIP_CASES, **DUMP_ONLY_CASES}[case]
    expected = _torch_dumps(tree)
    spec = impl.tree_structure(tree)
    assert impl.treespec_dumps(spec) == expected
    assert impl.treespec_dumps(spec, protocol=1) == expected
    assert impl.treespec_dumps(spec, 1) == expected


@IMPLS
@pytest.mark.parametrize("case", list(ROUND_TRIP_CASES))
def test_loads_round_trips(impl: Any, case: str) -> None:
    tree = ROUND_TRIP_CASES[case]
    spec = impl.tree_structure(tree)
    text = impl.treespec_dumps(spec)
    loaded = impl.treespec_loads(text)
    assert isinstance(loaded, _spec_class(impl))
    if case != "custom_hooks":  # frozenset context: equal, but the node is rebuilt
        assert loaded == spec
    assert impl.treespec_dumps(loaded) == text
    leaves = impl.tree_leaves(tree)
    assert impl.tree_unflatten(leaves, loaded).__class__ is tree.__class__


@needs_torch
@IMPLS
@pytest.mark.parametrize("case", list(ROUND_TRIP_CASES))
def test_loads_reads_torch_strings(impl: Any, case: str) -> None:
    tree = ROUND_TRIP_CASES[case]
    text = _torch_dumps(tree)
    loaded = impl.treespec_loads(text)
    assert isinstance(loaded, _spec_class(impl))
    if case in TORCH_CANNOT_LOAD:
        return
    theirs = torch_pytree.treespec_loads(text)
    assert impl.treespec_pprint(loaded) == torch_pytree.treespec_pprint(theirs)
    assert impl.treespec_dumps(loaded) == torch_pytree.treespec_dumps(theirs)


@IMPLS
@pytest.mark.parametrize("case", list(REFUSED_CASES))
def test_dumps_refuses_what_torch_refuses(impl: Any, case: str) -> None:
    tree, error = REFUSED_CASES[case]
    if case == "tuple_dict_keys":  # json writes tuple keys as lists: dumps works, loads fails
        text = impl.treespec_dumps(impl.tree_structure(tree))
        if torch_pytree is not None:
            assert text == _torch_dumps(tree)
        with pytest.raises(ValueError, match="can't have the context"):
            impl.treespec_loads(text)
        return
    with pytest.raises(error) as ours:
        impl.treespec_dumps(impl.tree_structure(tree))
    if torch_pytree is not None:
        with pytest.raises(error) as theirs:
            _torch_dumps(tree)
        # The installed release's text (2.14 fixed "serializated_type_name":
        # cpytree._releases.DIFFERENCES["serialized_spelling"]).
        assert str(ours.value) == str(theirs.value)


def test_hooks_are_called_in_both_directions() -> None:
    HOOK_CALLS.clear()
    spec = cpytree.tree_structure(Hooked(frozenset({"q"}), [L]))
    text = cpytree.treespec_dumps(spec)
    assert '"context": ["q"]' in text
    cpytree.treespec_loads(text.replace('"q"', '"q2"'))  # a fresh string: not cached
    assert HOOK_CALLS == ["to", "from"]


@IMPLS
def test_protocol_errors(impl: Any) -> None:
    spec = impl.tree_structure([L])
    with pytest.raises(ValueError, match=r"Unknown protocol 2\. Available protocols: \[1\]"):
        impl.treespec_dumps(spec, protocol=2)
    text = impl.treespec_dumps(spec)
    for bad in ("2", '"1"', "[1]", "null"):
        with pytest.raises(ValueError, match="Unknown protocol"):
            impl.treespec_loads("[" + bad + text[2:])
    if torch_pytree is not None:
        with pytest.raises(ValueError) as theirs:
            torch_pytree.treespec_dumps(torch_pytree.tree_structure([L]), protocol=2)
        with pytest.raises(ValueError) as ours:
            impl.treespec_dumps(spec, protocol=2)
        assert str(ours.value) == str(theirs.value)


@IMPLS
def test_dumps_and_pprint_reject_non_specs(impl: Any) -> None:
    for function in (impl.treespec_dumps, impl.treespec_pprint):
        with pytest.raises(TypeError, match="Expected `treespec` to be an instance of PyTreeSpec"):
            function([1, 2])


def test_dumps_accepts_either_implementations_spec() -> None:
    tree = {"a": [L, Point(L, L)]}
    text = ref.treespec_dumps(ref.tree_structure(tree))
    assert cpytree.treespec_dumps(ref.tree_structure(tree)) == text
    assert ref.treespec_dumps(cpytree.tree_structure(tree)) == text


@IMPLS
def test_pprint(impl: Any) -> None:
    spec = impl.tree_structure({"a": [L, (L,)], "b": Point(L, None), "c": deque([L], maxlen=2)})
    assert impl.treespec_pprint(spec) == (
        "{'a': [*, (*,)], 'b': Point(x=*, y=*), 'c': deque([*], maxlen=2)}"
    )
    assert impl.treespec_pprint(impl.tree_structure(L)) == "*"


@IMPLS
def test_deprecated_string_functions(impl: Any) -> None:
    spec = impl.tree_structure([L, {"k": L}])
    with pytest.warns(FutureWarning, match="`pytree_to_str` is deprecated"):
        text = impl.pytree_to_str(spec)
    assert text == impl.treespec_dumps(spec)
    with pytest.warns(FutureWarning, match="`str_to_pytree` is deprecated"):
        assert impl.str_to_pytree(text) == spec


def test_loads_is_cached_like_torch() -> None:
    text = cpytree.treespec_dumps(cpytree.tree_structure({"cached": [L]}))
    assert cpytree.treespec_loads(text) is cpytree.treespec_loads(text)
    assert ref.treespec_loads(text) is ref.treespec_loads(text)


def test_loads_builds_engine_specs() -> None:
    text = ref.treespec_dumps(ref.tree_structure({"a": (L, [L])}))
    assert type(cpytree.treespec_loads(text)) is cpytree.TreeSpec
    assert type(ref.treespec_loads(text)) is ref.TreeSpec
    assert cpytree.treespec_loads(text) == cpytree.tree_structure({"a": (L, [L])})


def test_enum_encoder_matches_torch() -> None:
    value = {"c": Color.RED, "nested": [Holder.Inner.A], "int": Level.LOW}
    ours = json.dumps(value, cls=cpytree.EnumEncoder)
    if torch_pytree is not None:
        assert ours == json.dumps(value, cls=torch_pytree.EnumEncoder)
    assert json.loads(ours, object_hook=cpytree.enum_object_hook) == value
    assert cpytree.DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL == 1


# A strategy of trees of builtin nodes with JSON-able keys.
_keys = st.one_of(st.text(max_size=4), st.integers(-5, 5), st.booleans(), st.none())


def _containers(children: Any) -> Any:
    return st.one_of(
        *builtin_container_strategies(children, _keys, st.one_of(st.none(), st.integers(3, 4))),
        st.tuples(children, children).map(lambda xy: Point(*xy)),
    )


_trees = st.recursive(st.one_of(st.none(), st.integers()), _containers, max_leaves=12)


@needs_torch
@given(tree=_trees)
def test_generated_trees_dump_like_torch(tree: Any) -> None:
    expected = _torch_dumps(tree)
    for impl in (cpytree, ref):
        spec = impl.tree_structure(tree)
        assert impl.treespec_dumps(spec) == expected
        assert impl.treespec_loads(expected) == spec


# --------------------------------------------------------------------------
# Hostile input
# --------------------------------------------------------------------------

LEAF_JSON = {"type": None, "context": None, "children_spec": []}


def _node(type_name: Any, context: Any, children: list[Any] | None = None) -> dict[str, Any]:
    return {"type": type_name, "context": context, "children_spec": children or []}


def _text(node: Any, protocol: Any = 1) -> str:
    return json.dumps([protocol, node])


def _loads_guarded(impl: Any, text: Any) -> Any:
    """`impl.treespec_loads(text)`, failing the test if it imports anything."""
    loads = impl.treespec_loads  # the name may load cpytree's own module on first use
    before = set(sys.modules)
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def no_import(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"treespec_loads imported {args[0]!r}")

    def import_hook(name: str, *args: Any, **kwargs: Any) -> Any:
        # CPython 3.12+'s C JSON scanner fetches JSONDecodeError on every
        # decode error with PyImport_ImportModule("json.decoder")
        # (Modules/_json.c, raise_errmsg), which calls builtins.__import__: a
        # lookup of a module already loaded, not an import. Only that passes.
        if name == "json.decoder" and name in sys.modules:
            return real_import(name, *args, **kwargs)
        return no_import(name, *args, **kwargs)

    builtins.__import__ = import_hook  # type: ignore[assignment]
    importlib.import_module = no_import  # type: ignore[assignment]
    try:
        return loads(text)
    finally:
        builtins.__import__, importlib.import_module = real_import, real_import_module
        assert set(sys.modules) == before


def _defaultdict_node(module: Any, name: Any, keys: Any = ("k",)) -> dict[str, Any]:
    context = {
        "default_factory_module": module,
        "default_factory_name": name,
        "dict_context": list(keys) if isinstance(keys, tuple) else keys,
    }
    return _node(
        "collections.defaultdict",
        context,
        [LEAF_JSON] * (len(keys) if isinstance(keys, tuple) else 1),
    )


def _enum_dict_node(fqn: Any, name: Any) -> dict[str, Any]:
    keys = [{"__enum__": True, "fqn": fqn, "name": name}]
    return _node("builtins.dict", json.dumps(keys), [LEAF_JSON])


@pytest.fixture
def trap_module():
    """A module in sys.modules whose `__getattr__` records every call."""
    module = types.ModuleType("cpytree_test_trap")
    calls: list[str] = []

    def __getattr__(name: str) -> Any:  # noqa: N807
        calls.append(name)
        return list

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.system = sys.modules["os"].system  # a function: never a default_factory
    sys.modules[module.__name__] = module
    yield module, calls
    del sys.modules[module.__name__]


HOSTILE: dict[str, tuple[str, type[BaseException], str]] = {
    "not_json": ("[1, {", json.JSONDecodeError, ""),
    "empty": ("", json.JSONDecodeError, ""),
    "top_not_array": ('{"type": null}', ValueError, "expected a JSON array"),
    "top_wrong_length": ("[1]", ValueError, "expected a JSON array"),
    "top_three_items": (_text(LEAF_JSON)[:-1] + ", 3]", ValueError, "expected a JSON array"),
    "protocol_string": (_text(LEAF_JSON, "1"), ValueError, "Unknown protocol"),
    "protocol_list": (_text(LEAF_JSON, [1]), ValueError, "Unknown protocol"),
    "protocol_2": (_text(LEAF_JSON, 2), ValueError, "Unknown protocol"),
    "node_not_object": (_text([None, None, []]), ValueError, "expected an object"),
    "node_missing_key": (_text({"type": None, "context": None}), ValueError, "expected an object"),
    "children_not_list": (_text(_node("builtins.list", "null", "ab")), ValueError, "must be a list"),  # type: ignore[arg-type]
    "children_string_leaf": (_text({"type": None, "context": None, "children_spec": ""}), ValueError, "must be a list"),
    "unknown_type": (_text(_node("os.system", "null")), NotImplementedError, "Deserializing os.system"),
    "type_not_string": (_text(_node(["builtins.list"], "null")), NotImplementedError, "not registered"),
    "type_none_with_context": (_text(_node(None, "null")), NotImplementedError, "Deserializing None"),
    "placeholder_type_name": (_text(_node("NO_SERIALIZED_TYPE_NAME_FOUND", "null", [LEAF_JSON])), NotImplementedError, "not registered"),
    "context_not_string": (_text(_node("builtins.list", None, [LEAF_JSON])), TypeError, "Unable to deserialize context"),
    "context_bad_json": (_text(_node("builtins.list", "nul", [LEAF_JSON])), json.JSONDecodeError, ""),
    "list_with_context": (_text(_node("builtins.list", '"x"', [LEAF_JSON])), ValueError, "can't have the context"),
    "dict_too_few_keys": (_text(_node("builtins.dict", '["a"]', [LEAF_JSON, LEAF_JSON])), ValueError, "can't have the context"),
    "dict_context_not_list": (_text(_node("builtins.dict", '"ab"', [LEAF_JSON, LEAF_JSON])), ValueError, "can't have the context"),
    "dict_unhashable_key": (_text(_node("builtins.dict", "[[1]]", [LEAF_JSON])), ValueError, "can't have the context"),
    "ordereddict_keys_object": (_text(_node("collections.OrderedDict", '{"a": 1}', [LEAF_JSON])), ValueError, "can't have the context"),
    "deque_negative_maxlen": (_text(_node("collections.deque", "-1", [LEAF_JSON])), ValueError, "can't have the context"),
    "deque_string_maxlen": (_text(_node("collections.deque", '"3"', [LEAF_JSON])), ValueError, "can't have the context"),
    "namedtuple_wrong_arity": (_text(_node("collections.namedtuple", "tests.serialization.Point", [LEAF_JSON])), ValueError, "can't have the context"),
    "namedtuple_names_dict": (_text(_node("collections.namedtuple", "builtins.dict", [LEAF_JSON])), NotImplementedError, "namedtuple class"),
    "namedtuple_names_factory": (_text(_node("collections.namedtuple", "collections.namedtuple", [LEAF_JSON])), NotImplementedError, "namedtuple class"),
    "namedtuple_unknown_name": (_text(_node("collections.namedtuple", "x.Y", [LEAF_JSON])), NotImplementedError, "namedtuple class"),
    "namedtuple_name_not_string": (_text(_node("collections.namedtuple", ["x"], [LEAF_JSON])), NotImplementedError, "namedtuple class"),
    "namedtuple_placeholder": (_text(_node("collections.namedtuple", "NO_SERIALIZED_TYPE_NAME_FOUND", [LEAF_JSON])), NotImplementedError, "namedtuple class"),
    "defaultdict_context_not_dict": (_text(_node("collections.defaultdict", "[]", [])), AssertionError, "must be a dict"),
    "defaultdict_extra_key": (_text(_node("collections.defaultdict", {**_defaultdict_node("builtins", "list")["context"], "x": 1}, [LEAF_JSON])), AssertionError, "keys must be"),
    "defaultdict_module_not_string": (_text(_defaultdict_node(1, "list")), AssertionError, "must be a string"),
    "defaultdict_keys_not_list": (_text(_defaultdict_node("builtins", "list", "k")), ValueError, "dict_context must be a list"),
    "defaultdict_module_not_imported": (_text(_defaultdict_node("antigravity", "geohash")), ValueError, "module is not imported"),
    "defaultdict_dotted_module_not_imported": (_text(_defaultdict_node("xml.dom.minidom_nope", "Document")), ValueError, "module is not imported"),
    "defaultdict_builtin_function": (_text(_defaultdict_node("builtins", "eval")), ValueError, "not a class"),
    "defaultdict_os_abort": (_text(_defaultdict_node("os", "abort")), ValueError, "not a class"),
    "defaultdict_os_system": (_text(_defaultdict_node("posix", "system")), ValueError, "not a class"),
    "defaultdict_python_function": (_text(_defaultdict_node("json", "dumps")), ValueError, "not a class"),
    "defaultdict_instance": (_text(_defaultdict_node("sys", "modules")), ValueError, "not a class"),
    "defaultdict_missing_attr": (_text(_defaultdict_node("builtins", "nope")), ValueError, "no such class"),
    "defaultdict_empty_name": (_text(_defaultdict_node("builtins", "")), ValueError, "no such class"),
    "defaultdict_locals": (_text(_defaultdict_node(__name__, "f.<locals>.C")), ValueError, "no such class"),
    "defaultdict_through_function": (_text(_defaultdict_node("json", "dumps.__class__")), ValueError, "no such class"),
    "defaultdict_key_count": (_text(_node("collections.defaultdict", _defaultdict_node("builtins", "list", ("a", "b"))["context"], [LEAF_JSON])), ValueError, "can't have the context"),
    "enum_module_not_imported": (_text(_enum_dict_node("antigravity:Color", "RED")), ValueError, "module is not imported"),
    "enum_not_enum_class": (_text(_enum_dict_node("builtins:dict", "fromkeys")), ValueError, "not an Enum class"),
    "enum_function": (_text(_enum_dict_node("os:system", "x")), ValueError, "not an Enum class"),
    "enum_missing_member": (_text(_enum_dict_node(f"{__name__}:Color", "BLUE")), ValueError, "no member"),
    "enum_member_is_method": (_text(_enum_dict_node(f"{__name__}:Color", "mro")), ValueError, "no member"),
    "enum_fqn_without_colon": (_text(_enum_dict_node(f"{__name__}", "RED")), ValueError, "no such class"),
    "enum_fqn_not_string": (_text(_enum_dict_node(["m"], "RED")), ValueError, "Malformed enum"),
    "enum_name_not_string": (_text(_enum_dict_node(f"{__name__}:Color", 1)), ValueError, "Malformed enum"),
}  # fmt: skip


@IMPLS
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_input_raises_clear_error(impl: Any, case: str) -> None:
    text, error, match = HOSTILE[case]
    with pytest.raises(error, match=match or None):
        _loads_guarded(impl, text)


@IMPLS
@pytest.mark.parametrize("value", [None, 1, ["[1, null]"], {"a": 1}])
def test_loads_of_non_strings(impl: Any, value: Any) -> None:
    with pytest.raises(TypeError):
        _loads_guarded(impl, value)


@IMPLS
def test_defaultdict_factory_never_uses_module_getattr(impl: Any, trap_module: Any) -> None:
    module, calls = trap_module
    for name in ("anything", "system", "Nested.Class"):
        with pytest.raises(ValueError):
            _loads_guarded(impl, _text(_defaultdict_node(module.__name__, name)))
    with pytest.raises(ValueError):
        _loads_guarded(impl, _text(_enum_dict_node(f"{module.__name__}:Color", "RED")))
    assert calls == []


@IMPLS
def test_defaultdict_factories_that_resolve(impl: Any) -> None:
    cases = {
        ("builtins", "set"): set,
        ("collections", "Counter"): collections.Counter,
        (__name__, "Bag"): Bag,  # a class of an imported module
        (__name__, "_make_local_factory.<locals>.LocalFactory"): LocalFactory,  # registered
        (__name__, "Holder.Inner"): Holder.Inner,  # a nested class
    }
    for (module, name), expected in cases.items():
        spec = _loads_guarded(impl, _text(_defaultdict_node(module, name)))
        assert spec.context[0] is expected
        assert impl.tree_unflatten([L], spec).default_factory is expected


@IMPLS
def test_enum_in_context_resolves_without_import(impl: Any) -> None:
    spec = _loads_guarded(impl, _text(_enum_dict_node(f"{__name__}:Holder.Inner", "A")))
    assert spec.context == [Holder.Inner.A]
    assert spec.context[0] is Holder.Inner.A


@IMPLS
def test_deep_input_raises_recursion_error_not_crash(impl: Any) -> None:
    depth = 100_000
    text = "[1, " + '{"type": "builtins.list", "context": "null", "children_spec": [' * depth
    text += json.dumps(LEAF_JSON) + "]}" * depth + "]"
    with pytest.raises(RecursionError):
        impl.treespec_loads(text)


@IMPLS
def test_moderately_deep_spec_loads(impl: Any) -> None:
    tree: Any = L
    for _ in range(150):
        tree = [tree]
    spec = impl.tree_structure(tree)
    assert impl.treespec_loads(impl.treespec_dumps(spec)) == spec


@IMPLS
def test_long_hostile_names_are_cut_in_messages(impl: Any) -> None:
    with pytest.raises(ValueError) as info:
        _loads_guarded(impl, _text(_defaultdict_node("m" * 10_000, "x")))
    assert len(str(info.value)) < 400
