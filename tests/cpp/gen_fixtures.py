"""Writes tests/cpp/fixtures/specs.json: specs dumped by torch's treespec_dumps.

The C++ tests (cross_language_test.cc) load every spec with cpytree::Loads and
check that cpytree::Dumps gives the same bytes back, that the counts agree and
that TreeSpec::ToString() is Python's repr of the *loaded* spec (what
`treespec_loads(dumps)` prints; e.g. tuple dict keys come back as lists).

Regenerate (and commit the result) after changing the cases:

    .venv/bin/python tests/cpp/gen_fixtures.py
"""

from __future__ import annotations

import collections
import enum
import json
import pathlib

import torch.utils._pytree as pytree

OUT = pathlib.Path(__file__).resolve().parent / "fixtures" / "specs.json"

# A namedtuple whose repr (<class 'fixtures.Point'>) matches its serialized name.
Point = collections.namedtuple("Point", ["x", "y"])
Point.__module__ = "fixtures"
pytree._register_namedtuple(Point, serialized_type_name="fixtures.Point")


class Color(enum.Enum):  # dict keys that are enums: EnumEncoder writes an object
    RED = 1


class Pair:
    """A custom node whose context is serialized with json.dumps (the default)."""

    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag


pytree.register_pytree_node(
    Pair,
    lambda p: ([p.a, p.b], p.tag),
    lambda xs, tag: Pair(xs[0], xs[1], tag),
    serialized_type_name="fixtures.Pair",
)


class Box:
    """A custom node with to_dumpable_context: the context is a JSON object, not a string."""

    def __init__(self, items, meta):
        self.items, self.meta = items, meta


pytree.register_pytree_node(
    Box,
    lambda b: (list(b.items), b.meta),
    lambda xs, meta: Box(xs, meta),
    serialized_type_name="fixtures.nested.Box",
    to_dumpable_context=lambda meta: meta,
    from_dumpable_context=lambda d: d,
)


def resnet_like():
    """A dict of ~160 modules, each with a few dict/list children (~1700 nodes)."""
    tree = {}
    for stage, blocks in enumerate([3, 4, 6, 3]):
        for block in range(blocks):
            for conv in range(3):
                name = f"layer{stage + 1}.{block}.conv{conv + 1}"
                tree[name] = {"weight": 0, "bias": None}
                tree[name.replace("conv", "bn")] = {
                    "weight": 0,
                    "bias": 0,
                    "running": [0, 0],
                    "num_batches_tracked": 0,
                }
            if block == 0:
                tree[f"layer{stage + 1}.0.downsample"] = (
                    {"weight": 0},
                    {"weight": 0, "bias": 0, "running": [0, 0]},
                )
    tree["fc"] = {"weight": 0, "bias": 0}
    return tree


def deep(n):
    t = 0
    for i in range(n):
        t = [t] if i % 2 else (t,)
    return t


def cases():
    od = collections.OrderedDict
    dd = collections.defaultdict
    dq = collections.deque
    return {
        "leaf": 1,
        "none_leaf": None,
        "empty_tuple": (),
        "empty_list": [],
        "empty_dict": {},
        "tuple_of_leaves": (1, 2, 3),
        "single_tuple": (1,),
        "nested": ((1, [2, 3]), {"a": 4, "b": (5,)}, [[], [6]]),
        "str_keys": {
            "a": 1,
            "b c": 2,
            "": 3,
            "it's": 4,
            'say "hi"': 5,
            "both '\"": 6,
            "back\\slash": 7,
            "tab\tnl\ncr\r": 8,
            "ctl\x01\x1f\x7f": 9,
        },
        "unicode_keys": {
            "é": 1,
            "ß": 2,
            "日本": 3,
            "😀": 4,
            "\u2028": 5,
            "\xa0": 6,
            "\u00ad": 7,
            "\U000e0001": 8,
            "\ufeff": 9,
            "\u0378": 10,
        },
        "int_keys": {
            0: 1,
            -1: 2,
            7: 3,
            2**63 - 1: 4,
            -(2**63): 5,
            2**64: 6,
            10**30: 7,
            -(10**25): 8,
        },
        "float_keys": {
            1.5: 1,
            0.1: 2,
            1e16: 3,
            1e15: 4,
            1e-5: 5,
            1e-4: 6,
            -0.0: 7,
            1e300: 8,
            5e-324: 9,
            1.7976931348623157e308: 10,
            123456789.125: 11,
            2.0**70: 12,
        },
        "other_keys": {True: 1, None: 2, (1, "a"): 3},
        "enum_keys": {Color.RED: 1},
        "namedtuple": Point(1, (2, 3)),
        "ordered_dict": od([("z", 1), ("a", [2])]),
        "empty_ordered_dict": od(),
        "defaultdict_list": dd(list, {"k": 1, 2: (3,)}),
        "defaultdict_int": dd(int),
        "deque_maxlen": dq([1, 2], maxlen=3),
        "deque_unbounded": dq([1, [2]]),
        "deque_empty": dq(),
        "deque_zero": dq([], maxlen=0),
        "custom_json_context": Pair(1, [2, 3], ["tag", 1, None]),
        "custom_str_context": Pair(1, 2, "plain"),
        "custom_none_context": Pair(1, 2, None),
        "custom_dict_context": Pair(1, 2, {"k": [1.5, "é"]}),
        "custom_dumpable_context": Box([1, (2, 3)], {"name": "box", "n": 2, "f": 0.5}),
        "everything": {
            "t": (1, Point(2, 3)),
            "l": [od(a=1), dd(list, b=2), dq([3], maxlen=5)],
            "c": Pair({"x": 1}, [2], "tag"),
            4: Box([None], {"k": []}),
        },
        "resnet50_like": resnet_like(),
        "deep_100": deep(100),
    }


def main():
    out = []
    for name, tree in cases().items():
        spec = pytree.tree_structure(tree)
        dumps = pytree.treespec_dumps(spec)
        loaded = pytree.treespec_loads(dumps)
        assert pytree.treespec_dumps(loaded) == dumps, name
        out.append(
            {
                "name": name,
                "dumps": dumps,
                "repr": repr(loaded),
                # Enum members print their value, which the JSON does not hold.
                "repr_exact": name != "enum_keys",
                "num_leaves": spec.num_leaves,
                "num_nodes": spec.num_nodes,
                "num_children": spec.num_children,
            }
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT} ({len(out)} specs)")


if __name__ == "__main__":
    main()
