"""Child-process driver for hostile inputs (run by support.run_isolated).

    python _hostile.py <impl module> <scenario>

Runs every operation of the scenario and prints one JSON line before and one
after each, so a crash (a segfault from C-stack overflow or a use-after-free)
is pinned on the operation that was running. Records the exception type and
message, or the checked outcome of an operation that succeeded.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback
from collections import OrderedDict, deque

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

DEPTH = 100_000  # trees this deep must raise RecursionError
SPEC_DEPTH = 5_000  # specs built level by level with TreeSpec(...)


def emit(**rec) -> None:
    print(json.dumps(rec), flush=True)


class Node:
    """A registered custom node (registered under a name unique to this file)."""

    def __init__(self, a, b):
        self.a = a
        self.b = b


class OwnList:
    """A registered node whose flatten returns its own internal list, live."""

    def __init__(self, items):
        self.items = items


def register(pt) -> None:
    pt.register_pytree_node(Node, lambda n: ([n.a, n.b], None), lambda v, c: Node(*v))
    pt.register_pytree_node(OwnList, lambda o: (o.items, None), lambda v, c: OwnList(list(v)))


# --------------------------------------------------------------------------
# Deep and cyclic inputs. Each "shape" says how one level wraps its child, and
# how a spec level is made with the TreeSpec constructor.

SHAPES = {
    "list": (lambda c: [c], lambda pt, leaf, s: pt.TreeSpec(list, None, [s])),
    "tuple": (lambda c: (c,), lambda pt, leaf, s: pt.TreeSpec(tuple, None, [s])),
    "dict": (lambda c: {"k": c}, lambda pt, leaf, s: pt.TreeSpec(dict, ["k"], [s])),
    "ordereddict": (
        lambda c: OrderedDict(k=c),
        lambda pt, leaf, s: pt.TreeSpec(OrderedDict, ["k"], [s]),
    ),
    "deque": (lambda c: deque([c]), lambda pt, leaf, s: pt.TreeSpec(deque, None, [s])),
    "custom": (lambda c: Node(0, c), lambda pt, leaf, s: pt.TreeSpec(Node, None, [leaf, s])),
}
MIXED = ["list", "dict", "tuple", "custom", "deque", "ordereddict"]


def kind_at(shape: str, level: int) -> str:
    """The node kind ``level`` steps below the root."""
    return MIXED[level % len(MIXED)] if shape == "mixed" else shape


def deep_tree(shape: str, depth: int = DEPTH):
    t = 0
    for i in range(depth):  # bottom-up: the last level made is the root
        t = SHAPES[kind_at(shape, depth - 1 - i)][0](t)
    return t


def deep_spec(pt, shape: str, depth: int = SPEC_DEPTH):
    leaf = pt.tree_structure(0)
    s = leaf
    for i in range(depth):
        s = SHAPES[kind_at(shape, depth - 1 - i)][1](pt, leaf, s)
    return s


def cyclic_tree(shape: str):
    if shape == "list":
        t = [0]
        t.append(t)
    elif shape == "dict":
        t = {"k": 0}
        t["self"] = t
    elif shape == "ordereddict":
        t = OrderedDict(k=0)
        t["self"] = t
    elif shape == "deque":
        t = deque([0])
        t.append(t)
    elif shape == "custom":
        t = Node(0, None)
        t.b = t
    elif shape == "mixed":
        inner = {"k": None}
        t = [0, (Node(1, deque([inner])),)]
        inner["k"] = t
    else:
        raise ValueError(shape)
    return t


def tree_ops(pt, make):
    """name -> thunk, each running one operation on a fresh hostile tree."""
    ident = lambda x: x  # noqa: E731
    return {
        "tree_flatten": lambda: pt.tree_flatten(make()),
        "tree_leaves": lambda: pt.tree_leaves(make()),
        "tree_structure": lambda: pt.tree_structure(make()),
        "tree_iter": lambda: list(pt.tree_iter(make())),
        "tree_flatten_is_leaf": lambda: pt.tree_flatten(make(), is_leaf=lambda x: False),
        "tree_map": lambda: pt.tree_map(ident, make()),
        "tree_map_nary": lambda: pt.tree_map(lambda a, b: a, make(), make()),
        "tree_map_": lambda: pt.tree_map_(ident, make()),
        "tree_map_only": lambda: pt.tree_map_only(int, ident, make()),
        "tree_map_only_": lambda: pt.tree_map_only_(int, ident, make()),
        "tree_all": lambda: pt.tree_all(lambda x: True, make()),
        "tree_any": lambda: pt.tree_any(lambda x: False, make()),
        "tree_all_only": lambda: pt.tree_all_only(int, lambda x: True, make()),
        "tree_any_only": lambda: pt.tree_any_only(int, lambda x: False, make()),
    }


PREFIX = ""  # "<scenario>|" when one child runs several scenarios


def run_op(name, thunk, check=None) -> None:
    name = PREFIX + name
    emit(event="start", op=name)
    rec = {"event": "done", "op": name, "exc": None, "msg": None, "ok": None}
    try:
        out = thunk()
    except BaseException as exc:  # noqa: BLE001 - recorded for the parent
        rec["exc"] = type(exc).__name__
        rec["msg"] = str(exc)[:300]
        out = None
    else:
        if check is not None:
            try:
                rec["ok"] = check(out)
            except BaseException:  # noqa: BLE001
                rec["ok"] = "check raised: " + traceback.format_exc()[-500:]
    del out
    gc.collect()
    emit(**rec)


def scenario_deep(pt, shape: str) -> None:
    tree = deep_tree(shape)  # no op mutates it: build it once
    for name, thunk in tree_ops(pt, lambda: tree).items():
        run_op(name, thunk)
    spec_ops(pt, shape, tree)


def scenario_cyclic(pt, shape: str) -> None:
    for name, thunk in tree_ops(pt, lambda: cyclic_tree(shape)).items():
        run_op(name, thunk)


def chain_depth(tree, shape: str, limit: int) -> int:
    """How many levels from the root ``tree`` follows the chain of ``shape``."""
    d = 0
    while d < limit:
        kind = kind_at(shape, d)
        if kind == "list" and type(tree) is list and len(tree) == 1:  # noqa: SIM114 - one per shape
            tree = tree[0]
        elif kind == "tuple" and type(tree) is tuple and len(tree) == 1:
            tree = tree[0]
        elif kind == "dict" and type(tree) is dict and list(tree) == ["k"]:  # noqa: SIM114
            tree = tree["k"]
        elif kind == "ordereddict" and type(tree) is OrderedDict and list(tree) == ["k"]:
            tree = tree["k"]
        elif kind == "deque" and type(tree) is deque and len(tree) == 1:
            tree = tree[0]
        elif kind == "custom" and type(tree) is Node and tree.a == 0:
            tree = tree.b
        else:
            return d
        d += 1
    return d


def spec_ops(pt, shape: str, tree) -> None:
    """Ops on a SPEC_DEPTH-deep spec: RecursionError, or a correct result."""
    customs = sum(1 for d in range(SPEC_DEPTH) if kind_at(shape, d) == "custom")
    leaf_count = 1 + customs
    holder = {}

    def build():
        holder["spec"] = deep_spec(pt, shape)
        return holder["spec"]

    run_op("TreeSpec_build_deep", build, lambda s: s.num_nodes == 1 + SPEC_DEPTH + customs)
    spec = holder.pop("spec", None)
    if spec is None:
        return
    run_op(
        "unflatten",
        lambda: spec.unflatten([0] * leaf_count),
        lambda out: chain_depth(out, shape, SPEC_DEPTH + 1) == SPEC_DEPTH,
    )
    run_op(
        "tree_unflatten",
        lambda: pt.tree_unflatten([0] * leaf_count, spec),
        lambda out: chain_depth(out, shape, SPEC_DEPTH + 1) == SPEC_DEPTH,
    )
    if shape == "list":
        expected_repr = "TreeSpec(list, None, [" * SPEC_DEPTH + "*" + "])" * SPEC_DEPTH
        run_op("repr", lambda: repr(spec), lambda r: r == expected_repr)
    else:
        run_op("repr", lambda: repr(spec), lambda r: r.startswith("TreeSpec("))
    other = deep_spec(pt, shape)
    run_op("eq", lambda: spec == other, lambda r: r is True)
    run_op("hash", lambda: (hash(spec), hash(other)), lambda h: h[0] == h[1])
    # The spec covers the top SPEC_DEPTH levels of the 100,000-deep tree; its
    # bottom leaf takes the rest.
    run_op(
        "flatten_up_to_deep_tree",
        lambda: spec.flatten_up_to(tree),
        lambda out: (
            len(out) == leaf_count and all(x == 0 for x in out[:-1]) and type(out[-1]) is not int
        ),
    )
    if shape == "list":
        cyc = []
        cyc.append(cyc)
        run_op(
            "flatten_up_to_cyclic",
            lambda: spec.flatten_up_to(cyc),
            lambda out: len(out) == 1 and out[0] is cyc,
        )


# --------------------------------------------------------------------------
# Mutation of the tree from user code while it is being traversed.


class Item:
    """A leaf whose only reference is usually the container being flattened."""

    __slots__ = ("payload", "tag")

    def __init__(self, tag):
        self.tag = tag
        self.payload = [tag] * 8


def _valid(pt, leaves, spec):
    if type(leaves) is not list:
        return f"leaves is {type(leaves)}"
    for x in leaves:
        if type(x) is Item:
            if not (isinstance(x.tag, str) and x.payload == [x.tag] * 8):
                return "corrupt Item"
        elif type(x) not in (int, list, str):
            return f"unexpected leaf type {type(x)}"
    if spec.num_leaves != len(leaves):
        return f"spec has {spec.num_leaves} leaves, got {len(leaves)}"
    pt.tree_unflatten(leaves, spec)  # must work
    return True


def _churn():
    # Reuse freed memory so that stale pointers read garbage.
    junk = [bytearray(64) for _ in range(2000)] + [[None] * 8 for _ in range(2000)]
    del junk


def mutation_cases(pt):
    def list_tree():
        return [[Item(f"{i}.{j}") for j in range(3)] for i in range(40)]

    def clear_list(op):
        tree = list_tree()
        first = tree[0]

        def is_leaf(x):
            if x is first:
                tree.clear()
                _churn()
            return False

        return op(tree, is_leaf)

    def extend_list(op):
        tree = list_tree()
        first = tree[0]
        done = []

        def is_leaf(x):
            if x is first and not done:
                done.append(1)
                tree.extend([Item("new") for _ in range(100)])
            return False

        return op(tree, is_leaf)

    def shrink_inner(op):
        tree = list_tree()
        inner = tree[5]

        def is_leaf(x):
            if x is inner[0]:
                del inner[1:]
                tree[6:] = []
                _churn()
            return False

        return op(tree, is_leaf)

    def clear_dict(op):
        tree = {f"k{i}": [Item(f"d{i}"), Item(f"e{i}")] for i in range(40)}
        first = tree["k0"]

        def is_leaf(x):
            if x is first:
                tree.clear()
                _churn()
                for i in range(50):
                    tree[f"n{i}"] = Item(f"n{i}")
            return False

        return op(tree, is_leaf)

    def clear_own_list(op):
        # A custom node whose flatten hands out its live internal list.
        node = OwnList([[Item(f"o{i}")] for i in range(40)])
        first = node.items[0]

        def is_leaf(x):
            if x is first:
                node.items.clear()
                _churn()
            return False

        return op([node, Item("tail")], is_leaf)

    def flatten_op(tree, is_leaf):
        leaves, spec = pt.tree_flatten(tree, is_leaf=is_leaf)
        return _valid(pt, leaves, spec)

    def leaves_op(tree, is_leaf):
        leaves = pt.tree_leaves(tree, is_leaf=is_leaf)
        return type(leaves) is list and all(type(x) in (Item, list) for x in leaves)

    def map_op(tree, is_leaf):
        out = pt.tree_map(lambda x: x, tree, is_leaf=is_leaf)
        leaves, spec = pt.tree_flatten(out)
        return _valid(pt, leaves, spec)

    def structure_op(tree, is_leaf):
        spec = pt.tree_structure(tree, is_leaf=is_leaf)
        return spec.num_leaves >= 0 and spec.num_nodes >= 1

    cases = {}
    for mname, mut in [
        ("clear_list", clear_list),
        ("extend_list", extend_list),
        ("shrink_inner", shrink_inner),
        ("clear_dict", clear_dict),
        ("clear_own_list", clear_own_list),
    ]:
        for oname, op in [
            ("flatten", flatten_op),
            ("leaves", leaves_op),
            ("map", map_op),
            ("structure", structure_op),
        ]:
            cases[f"{mname}/{oname}"] = lambda mut=mut, op=op: mut(op)

    # The mapping function mutates the tree being mapped.
    def map_func_clears(op_nary: bool):
        tree = list_tree()
        rest = [[Item("r") for _ in range(3)] for _ in range(40)]
        calls = []

        def f(*args):
            if not calls:
                tree.clear()
                if op_nary:
                    rest.clear()
                _churn()
            calls.append(1)
            return args[0]

        if op_nary:
            try:
                out = pt.tree_map(f, tree, rest)
            except ValueError:
                return True  # a structure mismatch is a fine answer here
        else:
            out = pt.tree_map(f, tree)
        leaves, spec = pt.tree_flatten(out)
        return _valid(pt, leaves, spec)

    cases["map_func_clears/map"] = lambda: map_func_clears(False)
    cases["map_func_clears/map_nary"] = lambda: map_func_clears(True)
    return cases


def scenario_mutation(pt) -> None:
    for name, thunk in mutation_cases(pt).items():
        run_op(name, lambda thunk=thunk: thunk(), lambda r: r)


# --------------------------------------------------------------------------
# Hostile treespec_loads texts: every input some simdjson version reads
# differently from Python's json.loads (which torch's treespec_loads calls),
# and the other edges of JSON where parsers disagree. The engine must give
# the reference's outcome on each, whichever simdjson the build found
# (tests/python/test_serialization_engine.py), and torch's where torch and the
# reference agree (LOADS_STRICTER_THAN_TORCH lists where they do not).

_LEAF = '{"type": null, "context": null, "children_spec": []}'


def _doc(node: str) -> str:
    return "[1, " + node + "]"


def _dict(context_json: str, children: int = 1) -> str:
    """A dict node whose context (JSON text in a JSON string) is given raw."""
    children_json = ", ".join([_LEAF] * children)
    return _doc(
        f'{{"type": "builtins.dict", "context": {json.dumps(context_json)}, '
        f'"children_spec": [{children_json}]}}'
    )


class Box:
    """A custom node with a JSON context and no hooks (loads scenario)."""

    def __init__(self, meta, children):
        self.meta, self.children = meta, children


def register_loads(pt) -> None:
    pt.register_pytree_node(
        Box,
        lambda b: (b.children, b.meta),
        lambda values, meta: Box(meta, list(values)),
        serialized_type_name="tests.hostile.Box",
    )


def _box(context_json: str) -> str:
    return _doc(
        f'{{"type": "tests.hostile.Box", "context": {json.dumps(context_json)}, '
        '"children_spec": []}'
    )


LOADS_TEXTS = {
    # A leading UTF-8 byte-order mark: json.loads raises "Unexpected UTF-8
    # BOM" for a str; simdjson >= 3.6 skips it (the document and contexts).
    "bom": "\ufeff" + _doc(_LEAF),
    "bom_in_dict_context": _dict('\ufeff["a"]'),
    "bom_in_custom_context": _box('\ufeff{"a": 1}'),
    "bom_raw_in_dict_context": _doc(
        '{"type": "builtins.dict", "context": "\ufeff[\\"a\\"]", "children_spec": [' + _LEAF + "]}"
    ),
    "bom_after_space": " \ufeff" + _doc(_LEAF),
    "bom_inside": "[1, \ufeff" + _LEAF + "]",
    "bom_in_string": _dict('["\ufeffa"]'),
    # bytes: json.loads decodes them itself, a BOM included (utf-8-sig).
    "bytes": _doc(_LEAF).encode(),
    "bytes_bom": ("\ufeff" + _doc(_LEAF)).encode(),
    # Integers past 64 bits: simdjson 3.x rejects them, 4.5+ can keep them
    # as BIGINT; json.loads makes ints of any size up to its digit limit.
    "uint64_max_key": _dict("[18446744073709551615]"),
    "bigint_key": _dict("[18446744073709551616]"),
    "negative_bigint_key": _dict("[-9223372036854775809]"),
    "int64_min_key": _dict("[-9223372036854775808]"),
    "bigint_protocol": "[18446744073709551617, " + _LEAF + "]",
    "bigint_in_custom_context": _box('{"n": 123456789012345678901234567890}'),
    "int_past_digit_limit_key": _dict("[" + "1" * 5000 + "]"),
    # Numbers out of double range, signed zeros, exponents.
    "huge_float_key": _dict("[1e400]"),
    "huge_negative_float_key": _dict("[-1e400]"),
    "tiny_float_key": _dict("[1e-400]"),
    "minus_zero_key": _dict("[-0]"),
    "minus_zero_float_key": _dict("[-0.0]"),
    "exponent_int_key": _dict("[1E2]"),
    "long_mantissa_key": _dict("[3.14159265358979323846264338327950288419716939937510]"),
    "leading_zero_key": _dict("[01]"),
    "plus_sign_key": _dict("[+1]"),
    "bare_dot_key": _dict("[1.]"),
    "deque_maxlen_float": _doc(
        '{"type": "collections.deque", "context": "3.0", "children_spec": []}'
    ),
    "deque_maxlen_bigint": _doc(
        '{"type": "collections.deque", "context": "18446744073709551616", "children_spec": []}'
    ),
    # NaN and Infinity: json.loads takes exactly these three spellings;
    # simdjson rejects them, or (SIMDJSON_ENABLE_NAN_INF) takes others too.
    "nan_key": _dict("[NaN]"),
    "infinity_key": _dict("[Infinity]"),
    "negative_infinity_key": _dict("[-Infinity]"),
    "lowercase_nan_key": _dict("[nan]"),
    "negative_nan_key": _dict("[-NaN]"),
    "inf_key": _dict("[inf]"),
    "nan_protocol": "[NaN, " + _LEAF + "]",
    # Content after the document.
    "trailing_whitespace": _doc(_LEAF) + " \t\r\n",
    "trailing_garbage": _doc(_LEAF) + " x",
    "trailing_nul": _doc(_LEAF) + "\x00",
    "trailing_document": _doc(_LEAF) + _doc(_LEAF),
    "trailing_in_context": _dict('["a"] x'),
    "form_feed_whitespace": "\x0c" + _doc(_LEAF),
    "nbsp_whitespace": "\xa0" + _doc(_LEAF),
    # Strings: surrogates (escaped and raw), control characters, escapes.
    "lone_high_surrogate_escape": _dict('["\\ud800"]'),
    "lone_low_surrogate_escape": _dict('["\\udc00"]'),
    "reversed_surrogates_escape": _dict('["\\udc00\\ud800"]'),
    "surrogate_pair_escape": _dict('["\\ud83d\\ude00"]'),
    "raw_lone_surrogate": _dict('["\ud800"]'),
    "raw_lone_surrogate_in_document": _doc(
        '{"type": "builtins.list", "context": "null", "children_spec": [], "x": "\ud800"}'
    ),
    "nul_escape_key": _dict('["\\u0000"]'),
    "raw_control_character_key": _dict('["\x01"]'),
    "raw_control_character_in_document": _doc(
        '{"type": "builtins.list", "context": "null", "children_spec": ["\x01"]}'
    ),
    "raw_del_key": _dict('["\x7f"]'),
    "bad_escape_key": _dict('["\\x41"]'),
    "short_unicode_escape_key": _dict('["\\u12"]'),
    "solidus_escape_key": _dict('["\\/"]'),
    "non_bmp_key": _dict('["\U0001f600"]'),
    # Duplicate object keys: json.loads keeps the last value.
    "duplicate_node_fields": _doc(
        '{"type": "builtins.list", "type": "builtins.tuple", "context": "null", '
        '"children_spec": [], "extra": 1}'
    ),
    "duplicate_keys_in_custom_context": _box('{"a": 1, "a": 2}'),
    "duplicate_dict_keys": _dict('["a", "a"]', children=2),
    # Structure and literals.
    "empty": "",
    "whitespace_only": "  ",
    "truncated": _doc(_LEAF)[:-3],
    "single_quotes": "[1, {'type': null}]",
    "trailing_comma": "[1, " + _LEAF + ",]",
    "capitalised_null": _doc('{"type": Null, "context": null, "children_spec": []}'),
    "context_with_spaces": _doc(
        '{"type": "builtins.list", "context": " null ", "children_spec": []}'
    ),
    "protocol_true": "[true, " + _LEAF + "]",
    "protocol_float": "[1.0, " + _LEAF + "]",
    "deep_arrays": "[" * 5000 + "]" * 5000,
    "deep_context": _box("[" * 5000 + "]" * 5000),
}

# Texts on which cpytree's reference is stricter than torch 2.13 on purpose
# (torch builds a deque spec with maxlen 3.0, which cannot unflatten):
# outcomes compared with the reference only.
LOADS_STRICTER_THAN_TORCH = {"deque_maxlen_float"}


def scenario_loads(pt) -> None:
    """treespec_loads (uncached) on every LOADS_TEXTS entry: the exception, or
    the spec's treespec_dumps text."""
    register_loads(pt)
    loads = getattr(pt.treespec_loads, "__wrapped__", pt.treespec_loads)
    for name, text in LOADS_TEXTS.items():
        run_op("loads/" + name, lambda text=text: loads(text), pt.treespec_dumps)


def main() -> None:
    impl_name, scenario = sys.argv[1], sys.argv[2]
    if impl_name == "torch":
        import torch.utils._pytree as pt
    else:
        pt = importlib.import_module(impl_name)
    import cpytree

    engine = getattr(cpytree, "tree_flatten", None) is not getattr(
        importlib.import_module("cpytree._reference"), "tree_flatten", None
    )
    emit(
        event="header",
        impl=impl_name,
        cpytree_file=cpytree.__file__,
        engine=engine,
        recursionlimit=sys.getrecursionlimit(),
    )
    register(cpytree if impl_name != "torch" else pt)
    global PREFIX
    scenarios = scenario.split(",")
    # The parent's torch release, whose semantics (messages) cpytree gives
    # there: this child imports no torch (cpytree._releases.active()).
    release = os.environ.get("CPYTREE_TEST_RELEASE")
    if release and impl_name != "torch":
        from cpytree import _releases

        _releases.emulating(release).__enter__()
    for sc in scenarios:
        PREFIX = f"{sc}|" if len(scenarios) > 1 else ""
        kind, _, shape = sc.partition(":")
        if kind == "deep":
            scenario_deep(pt, shape)
        elif kind == "cyclic":
            scenario_cyclic(pt, shape)
        elif kind == "mutation":
            scenario_mutation(pt)
        elif kind == "loads":
            scenario_loads(pt)
        else:
            raise SystemExit(f"unknown scenario {sc}")
    emit(event="end")


if __name__ == "__main__":
    main()
