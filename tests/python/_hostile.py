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
    for sc in scenarios:
        PREFIX = f"{sc}|" if len(scenarios) > 1 else ""
        kind, _, shape = sc.partition(":")
        if kind == "deep":
            scenario_deep(pt, shape)
        elif kind == "cyclic":
            scenario_cyclic(pt, shape)
        elif kind == "mutation":
            scenario_mutation(pt)
        else:
            raise SystemExit(f"unknown scenario {sc}")
    emit(event="end")


if __name__ == "__main__":
    main()
