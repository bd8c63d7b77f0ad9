"""The C++ engine's treespec_dumps / treespec_loads (src/spec_model/serialize.cc,
src/spec_model/deserialize.cc) against torch 2.13 and the pure-Python reference.

* dumps: byte-identical to torch and to the reference on generated trees of
  every builtin kind, with keys and contexts of every JSON scalar type
  (int/float/bool/None keys, non-ASCII and control characters, floats json
  writes specially) and custom nodes with and without hooks;
* loads (uncached, `treespec_loads.__wrapped__`): the spec the reference
  loads, on torch's strings and on mutated (hostile) strings, where both
  raise the same exception type and message;
* loads of every text of `_hostile.LOADS_TEXTS` (the inputs on which some
  simdjson version and Python's json.loads disagree: a UTF-8 BOM, integers
  past 64 bits, NaN spellings, trailing content, surrogates, duplicate keys),
  run in child processes: the engine's outcome is the reference's, and the
  reference's is torch's except where it is stricter on purpose;
* the public `treespec_loads` stays an lru_cache over the engine function.
"""

from __future__ import annotations

import collections
import json
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import _hostile
import cpytree
import cpytree._reference as ref
import support
from support import builtin_container_strategies

try:
    import torch.utils._pytree as torch_pytree
except ImportError:  # pragma: no cover - torch is optional
    torch_pytree = None

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active"),
]
needs_torch = pytest.mark.skipif(torch_pytree is None, reason="torch is not importable")

engine_loads = cpytree.treespec_loads.__wrapped__


class Pair(NamedTuple):
    a: Any
    b: Any


class Box:
    """A custom node with a plain JSON context (a dict with scalar values)."""

    def __init__(self, meta: Any, children: list[Any]) -> None:
        self.meta, self.children = meta, children


class Hooked:
    """A custom node with to/from_dumpable_context hooks."""

    def __init__(self, tag: Any, children: list[Any]) -> None:
        self.tag, self.children = tag, children


def _register(mod: Any) -> None:
    mod._register_namedtuple(Pair, serialized_type_name="tests.serialization_engine.Pair")
    mod.register_pytree_node(
        Box,
        lambda b: (b.children, b.meta),
        lambda values, meta: Box(meta, list(values)),
        serialized_type_name="tests.serialization_engine.Box",
    )
    mod.register_pytree_node(
        Hooked,
        lambda h: (h.children, h.tag),
        lambda values, tag: Hooked(tag, list(values)),
        serialized_type_name="tests.serialization_engine.Hooked",
        to_dumpable_context=lambda tag: {"tag": tag, "v": [1, 2.5, None]},
        from_dumpable_context=lambda d: d["tag"],
    )


_register(cpytree)
_hostile.register_loads(cpytree)
if torch_pytree is not None:
    _register(torch_pytree)
    _hostile.register_loads(torch_pytree)

_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=5) | st.sampled_from(
    ["", "é", "\u2603", "\U0001f600", "\x00\x1f\x7f", '"\\/', "ключ"]
)
_floats = st.floats(allow_nan=False) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e-5, 1.5, 1e300, float("inf"), float("-inf")]
)
_keys = st.one_of(_text, st.integers(-(2**70), 2**70), _floats, st.booleans(), st.none())
_scalars = st.one_of(_text, st.integers(-(2**70), 2**70), _floats, st.booleans(), st.none())
_json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)


def _containers(children: Any) -> Any:
    return st.one_of(
        *builtin_container_strategies(children, _keys, st.one_of(st.none(), st.integers(0, 4))),
        st.tuples(children, children).map(lambda xy: Pair(*xy)),
        st.tuples(_json_values, st.lists(children, max_size=2)).map(lambda p: Box(*p)),
        st.tuples(_text, st.lists(children, max_size=2)).map(lambda p: Hooked(*p)),
    )


_trees = st.recursive(st.one_of(st.none(), st.integers()), _containers, max_leaves=10)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return ("exc", type(e), str(e))


def _same(a: Any, b: Any) -> bool:
    """Equal outcomes: specs (of either class) that dump to the same text, or
    the same exception type and message."""
    if a[0] == "ok" and b[0] == "ok":
        return bool(_outcome(ref.treespec_dumps, a[1]) == _outcome(ref.treespec_dumps, b[1]))
    return bool(a == b)


@given(tree=_trees)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_dumps_matches_reference_and_torch(tree: Any) -> None:
    spec = cpytree.tree_structure(tree)
    ours = _outcome(cpytree.treespec_dumps, spec)
    assert ours == _outcome(ref.treespec_dumps, ref.tree_structure(tree))
    if torch_pytree is not None:
        theirs = _outcome(torch_pytree.treespec_dumps, torch_pytree.tree_structure(tree))
        assert ours[:2] == theirs[:2]
        if ours[0] == "ok":
            assert ours == theirs
    if ours[0] == "ok":
        text = ours[1]
        assert _same(_outcome(engine_loads, text), _outcome(ref.treespec_loads, text))
        assert cpytree.treespec_dumps(engine_loads(text)) == text


def _mutations(text: str) -> Any:
    """Strategies of strings near `text`: cut, byte edits, token swaps."""
    n = len(text)
    tokens = [
        '"null"',
        "null",
        '"builtins.list"',
        '"builtins.dict"',
        "[]",
        "{}",
        "-0",
        "1.0",
        "true",
        "NaN",
        '"\\ud800"',
        '"x"',
        "1e999",
        "18446744073709551616",
        ",",
    ]
    return st.one_of(
        st.integers(0, n).map(lambda i: text[:i]),
        st.tuples(st.integers(0, max(n - 1, 0)), st.sampled_from(tokens)).map(
            lambda p: text[: p[0]] + p[1] + text[p[0] + 1 :]
        ),
        st.tuples(st.integers(0, n), st.sampled_from(tokens)).map(
            lambda p: text[: p[0]] + p[1] + text[p[0] :]
        ),
        st.sampled_from(tokens).map(lambda t: text.replace('"null"', t, 1)),
        st.sampled_from(tokens).map(lambda t: text.replace("[1, ", "[" + t + ", ", 1)),
    )


@given(data=st.data(), tree=_trees)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_hostile_loads_match_reference(data: Any, tree: Any) -> None:
    try:
        text = ref.treespec_dumps(ref.tree_structure(tree))
    except Exception:  # noqa: BLE001 - a tree torch cannot dump
        return
    bad = data.draw(_mutations(text))
    ours = _outcome(engine_loads, bad)
    assert _same(ours, _outcome(ref.treespec_loads.__wrapped__, bad)), bad


HOSTILE_TEXTS = [
    "[1, {}]",
    '[true, {"type": null, "context": null, "children_spec": []}]',
    '[1.0, {"type": null, "context": null, "children_spec": []}]',
    '[1, {"type": "builtins.dict", "context": "[-0]", "children_spec": '
    '[{"type": null, "context": null, "children_spec": []}]}]',
    '[1, {"type": "builtins.dict", "context": "[NaN]", "children_spec": '
    '[{"type": null, "context": null, "children_spec": []}]}]',
    '[1, {"type": "builtins.dict", "context": "[18446744073709551616]", "children_spec": '
    '[{"type": null, "context": null, "children_spec": []}]}]',
    '[1, {"type": "builtins.list", "context": " null ", "children_spec": []}]',
    '[1, {"type": "builtins.list", "type": "builtins.tuple", "context": "null", '
    '"children_spec": [], "extra": 1}]',
    '[1, {"type": "collections.deque", "context": "3.0", "children_spec": []}]',
    '[1, {"type": "collections.deque", "context": "true", "children_spec": []}]',
    '[1, {"type": "tests.serialization_engine.Box", "context": "{\\"a\\": 1, \\"a\\": 2}", '
    '"children_spec": []}]',
    '[1, {"type": "builtins.dict", "context": "[\\"\\u0000\\"]", "children_spec": '
    '[{"type": null, "context": null, "children_spec": []}]}]',
    '\ufeff[1, {"type": null, "context": null, "children_spec": []}]',
    '[1, {"type": null, "context": null, "children_spec": []}] ',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": ["\x01"]}]',
]


@pytest.mark.parametrize(
    "text",
    HOSTILE_TEXTS + list(_hostile.LOADS_TEXTS.values()),
    ids=[f"text{i}" for i in range(len(HOSTILE_TEXTS))] + list(_hostile.LOADS_TEXTS),
)
def test_listed_hostile_loads_match_reference(text: str) -> None:
    ours = _outcome(engine_loads, text)
    assert _same(ours, _outcome(ref.treespec_loads.__wrapped__, text))


def _loads_records(impl_name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    if torch_pytree is not None:  # cpytree's children give this torch's messages
        import torch

        monkeypatch.setenv("CPYTREE_TEST_RELEASE", torch.__version__)
    res = support.run_isolated(impl_name, "loads")
    proc = res.pop("__process__")
    assert proc["returncode"] == 0, f"{impl_name}: {proc['running']!r}: {proc['stderr']}"
    assert sorted(res) == sorted("loads/" + name for name in _hostile.LOADS_TEXTS)
    return {op[len("loads/") :]: (r["exc"], r["msg"], r["ok"]) for op, r in res.items()}


def test_hostile_loads_table_matches_reference_and_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every text of _hostile.LOADS_TEXTS (BOM, big integers, NaN spellings,
    # trailing content, surrogates, duplicate keys, ...), each implementation
    # in a child process: the engine gives the reference's exception and
    # message, or a spec with the same dumps, whatever simdjson the build
    # found; the reference gives torch's (json.loads decides what is JSON).
    ours = _loads_records("cpytree", monkeypatch)
    assert ours == _loads_records("cpytree._reference", monkeypatch)
    if torch_pytree is None:
        return
    theirs = _loads_records("torch", monkeypatch)
    differ = {name for name in ours if ours[name] != theirs[name]}
    assert differ == _hostile.LOADS_STRICTER_THAN_TORCH, {n: (ours[n], theirs[n]) for n in differ}
    assert ours["bom"][0] == "JSONDecodeError" and "BOM" in ours["bom"][1]


@needs_torch
@given(tree=_trees)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_loads_of_torch_strings_equal_torch_loads(tree: Any) -> None:
    try:
        text = torch_pytree.treespec_dumps(torch_pytree.tree_structure(tree))
    except Exception:  # noqa: BLE001 - a tree torch cannot dump
        return
    theirs = _outcome(torch_pytree.treespec_loads.__wrapped__, text)
    ours = _outcome(engine_loads, text)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert cpytree.treespec_dumps(ours[1]) == torch_pytree.treespec_dumps(theirs[1])


def test_loads_is_an_lru_cache_over_the_engine_function() -> None:
    assert engine_loads is cpytree._C.treespec_loads
    text = cpytree.treespec_dumps(cpytree.tree_structure({"a": [1, (2,)]}))
    assert cpytree.treespec_loads(text) is cpytree.treespec_loads(text)
    assert engine_loads(text) == cpytree.treespec_loads(text)
    assert cpytree.treespec_loads.__name__ == "treespec_loads"


def test_dumps_calls_hooks_once_per_node_in_pre_order() -> None:
    calls: list[str] = []

    class Traced:
        def __init__(self, name: str, children: list[Any]) -> None:
            self.name, self.children = name, children

    cpytree.register_pytree_node(
        Traced,
        lambda t: (t.children, t.name),
        lambda values, name: Traced(name, list(values)),
        serialized_type_name="tests.serialization_engine.Traced",
        to_dumpable_context=lambda name: calls.append("to " + name) or name,
        from_dumpable_context=lambda name: calls.append("from " + name) or name,
    )
    try:
        tree = Traced("root", [Traced("a", [1]), [Traced("b", [])]])
        text = cpytree.treespec_dumps(cpytree.tree_structure(tree))
        engine_loads(text)
        assert calls == ["to root", "to a", "to b", "from root", "from a", "from b"]
    finally:
        cpytree._deregister_pytree_node(Traced)


def test_dumps_falls_back_for_other_spec_classes_and_protocols() -> None:
    tree = {"a": [1, Pair(2, 3)]}
    text = ref.treespec_dumps(ref.tree_structure(tree))
    assert cpytree.treespec_dumps(ref.tree_structure(tree)) == text
    assert cpytree.treespec_dumps(cpytree.tree_structure(tree), protocol=1) == text
    with pytest.raises(ValueError, match="Unknown protocol 2"):
        cpytree.treespec_dumps(cpytree.tree_structure(tree), 2)
    with pytest.raises(TypeError, match="Expected `treespec`"):
        cpytree.treespec_dumps(json.dumps(tree))


_LEAF = '{"type": null, "context": null, "children_spec": []}'


def _dict_text(context: str, children: int, kind: str = "builtins.dict") -> str:
    kids = ", ".join([_LEAF] * children)
    return f'[1, {{"type": "{kind}", "context": {context}, "children_spec": [{kids}]}}]'


# Texts at the edges of the plain reader (src/spec_model/deserialize_plain.cc,
# tried before the DOM): what it takes and what it must leave to the general
# path. Either way the outcome is the reference's.
PLAIN_EDGE_TEXTS = [
    _dict_text('"[\\"a\\", \\"b\\"]"', 2),
    _dict_text('"[\\"a\\", \\"b\\"]"', 2, "collections.OrderedDict"),
    _dict_text('"[\\"a\\",\\"b\\"]"', 2),
    _dict_text('"[ \\"a\\" ,  \\"b\\" ]"', 2),
    _dict_text('"[]"', 0),
    _dict_text('"[\\"\\"]"', 1),
    _dict_text('"[\\"a\\", \\"b\\"]"', 1),  # fewer children than keys
    _dict_text('"[\\"a\\"]"', 2),  # more children than keys
    _dict_text('"[\\"a\\", \\"a\\"]"', 2),  # a repeated key
    _dict_text('"[\\"a\\\\\\"b\\"]"', 1),  # an escaped quote inside a key
    _dict_text('"[\\"\\\\u00e9\\"]"', 1),  # a \\u escape inside a key
    _dict_text('"[\\"\\u00e9\\"]"', 1),  # a non-ASCII key
    _dict_text('"[1, 2]"', 2),  # int keys
    # Keys past 8 bytes (read 8 at a time) with a byte to stop at in each
    # position: an escaped quote, a backslash, non-ASCII, DEL, a control.
    *(
        _dict_text(json.dumps(json.dumps(["abcdefghijklmnop"[:i] + c + "qrstuvwxyz"])), 1)
        for c in ('"', "\\", "\u00e9", "\x7f", "\x01")
        for i in (0, 3, 7, 8, 9, 15, 16)
    ),
    _dict_text(json.dumps(json.dumps(["a" * 8, "b" * 16, "c" * 23])), 3),
    _dict_text('"[\\"a\\"]]"', 1),
    _dict_text('"[\\"a\\"\\n]"', 1),
    _dict_text('"null"', 0),
    _dict_text("null", 0),
    _dict_text('"[\\"a\\"]"', 1, "builtins.list"),
    _dict_text('"null"', 2, "builtins.tuple"),
    _dict_text("null", 2, "builtins.tuple"),
    _dict_text('" null"', 1, "builtins.list"),
    _dict_text('"3"', 1, "collections.deque"),
    _dict_text('"tests.serialization_engine.Pair"', 2, "collections.namedtuple"),
    _dict_text('"null"', 1, "NO_SERIALIZED_TYPE_NAME_FOUND"),
    _dict_text('"null"', 1, "no.such.Type"),
    '[1,{"type":"builtins.list","context":"null","children_spec":[{"type":null,'
    '"context":null,"children_spec":[]},{"type":null,"context":null,"children_spec":[]}]}]',
    '\n[ 1 ,\t{ "type" : "builtins.list" , "context" : "null" , "children_spec" : [ '
    + _LEAF
    + " ,\r\n"
    + _LEAF
    + " ] } ]\n",
    f"[1, {_LEAF}]",
    '[1,{"type":null,"context":null,"children_spec":[]}]',
    '[1, {"type": null, "context": null, "children_spec": [' + _LEAF + "]}]",
    '[1, {"type": null, "context": "null", "children_spec": []}]',
    '[1, {"context": "null", "type": "builtins.list", "children_spec": []}]',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": [], "type": "x"}]',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": [' + _LEAF + ",]}]",
    '[1, {"type": "builtins.list", "context": "null", "children_spec": [,' + _LEAF + "]}]",
    '[1, {"type": "builtins.list", "context": "null", "children_spec": []}] x',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": []}',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": []}, 2]',
    '[10, {"type": "builtins.list", "context": "null", "children_spec": []}]',
    '[1e0, {"type": "builtins.list", "context": "null", "children_spec": []}]',
    '[1, {"type": "builtins.\\u006cist", "context": "null", "children_spec": []}]',
    '[1, {"type": "builtins.list", "context": "null", "children_spec": ['
    + _dict_text('"[\\"k\\"]"', 1)[4:-1]
    + ", "
    + _dict_text('"null"', 2, "builtins.tuple")[4:-1]
    + "]}]",
]


@pytest.mark.parametrize(
    "text", PLAIN_EDGE_TEXTS, ids=[f"plain{i}" for i in range(len(PLAIN_EDGE_TEXTS))]
)
def test_plain_reader_edges_match_reference(text: str) -> None:
    ours = _outcome(engine_loads, text)
    theirs = _outcome(ref.treespec_loads.__wrapped__, text)
    assert _same(ours, theirs), (ours, theirs)
    if ours[0] == "ok":  # the same structure: the interned spec of that tree
        assert ours[1] is cpytree.treespec_loads(ref.treespec_dumps(theirs[1]))


_plain_keys = st.text(alphabet=st.characters(min_codepoint=0x1F, max_codepoint=0x80), max_size=20)
_plain_trees = st.recursive(
    st.none() | st.integers(),
    lambda c: st.one_of(
        st.lists(c, max_size=3),
        st.lists(c, max_size=3).map(tuple),
        st.dictionaries(_plain_keys, c, max_size=3),
        st.dictionaries(_plain_keys, c, max_size=3).map(collections.OrderedDict),
    ),
    max_leaves=12,
)


@given(tree=_plain_trees)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_plain_trees_load_to_their_interned_spec(tree: Any) -> None:
    # Lists, tuples and dicts of keys of printable ASCII (the plain reader's
    # shapes) and of the bytes just outside it, 0x1F and 0x80, and `"` or
    # `\`, which are escaped and left to the DOM.
    spec = cpytree.tree_structure(tree)
    text = cpytree.treespec_dumps(spec)
    assert engine_loads(text) is spec
    assert _same(("ok", engine_loads(text)), ("ok", ref.treespec_loads.__wrapped__(text)))
