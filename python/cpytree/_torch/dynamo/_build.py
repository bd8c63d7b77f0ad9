"""New trackers built by the fast paths: a tree from its spec and leaves, key paths.

`unflatten` answers tree_unflatten (and `spec.unflatten`) and builds the
result of tree_map: lists, tuples and dicts as new trackers, a namedtuple as
user code builds it, any other registered node by tracing only its
registered unflatten function. `with_paths` gives the (key path, leaf)
pairs of the with-path functions, the key entries as constants.
"""

from __future__ import annotations

import collections
from typing import Any

import torch.utils._pytree as tp

from ._fence import (
    ConstantVariable,
    ConstDictVariable,
    GlobalSource,
    ListVariable,
    TupleVariable,
    ValueMutationNew,
    VariableBuilder,
    VariableTracker,
    on,
)
from ._walk import NAMED, Walk, is_torch_fn

__all__ = ["build", "buildable", "sourced_function", "unflatten", "with_paths"]


def build(tx: Any, spec: Any, leaves: list[Any], at: list[int]) -> Any:
    """Trackers for `spec` filled with `leaves` (consumed from at[0])."""
    if spec.is_leaf():
        leaf = leaves[at[0]]
        at[0] += 1
        return leaf
    children = [build(tx, child, leaves, at) for child in spec.children()]
    if spec.type is list:
        return ListVariable(children, mutation_type=ValueMutationNew())
    if spec.type is tuple:
        return TupleVariable(children)
    if spec.type is NAMED:
        # Built as user code builds it (Dynamo traces namedtuple's __new__).
        return VariableTracker.build(tx, spec.context).call_function(tx, children, {})
    if spec.type is dict:
        items = {ConstantVariable.create(k): v for k, v in zip(spec.context, children, strict=True)}
        return ConstDictVariable(items, mutation_type=ValueMutationNew())
    node = tp.SUPPORTED_NODES[spec.type]
    factory, keys = spec.context if spec.type is collections.defaultdict else (None, ())
    if (
        spec.type is collections.defaultdict
        and on("dict")
        and is_torch_fn(node.unflatten_fn, "_defaultdict_unflatten")
        and all(ConstantVariable.is_literal(k) for k in keys)
    ):
        # torch's `defaultdict(factory, dict(zip(keys, values)))`, called as traced code calls it.
        items = {ConstantVariable.create(k): v for k, v in zip(keys, children, strict=True)}
        mapping = ConstDictVariable(items, mutation_type=ValueMutationNew())
        make = sourced_function(tx, collections.defaultdict)  # rebuilt through a source
        return make.call_function(tx, [VariableTracker.build(tx, factory), mapping], {})
    # Registered: its unflatten function traced, as torch's tree_unflatten does.
    args = [ListVariable(children, mutation_type=ValueMutationNew()),
            VariableTracker.build(tx, spec.context)]  # fmt: skip
    return sourced_function(tx, node.unflatten_fn).call_function(tx, args, {})


def sourced_function(tx: Any, fn: Any) -> Any:
    """A tracker for `fn` reached through a global of the frame.

    A source lets Dynamo follow what the function reads (the class a
    dataclass unflatten calls, through its closure) as torch's traced
    registry lookup does; without one it refuses to construct the class.
    """
    name = tx.output.install_global_by_id("__cpytree_node_fn", fn)
    return VariableBuilder(tx, GlobalSource(name))(fn)


def buildable(spec: Any) -> bool:
    """Whether `build` handles every node of `spec`."""
    stack = [spec]
    while stack:
        node = stack.pop()
        if node.is_leaf():
            continue
        if node.type is dict:
            if not on("dict") or not all(ConstantVariable.is_literal(k) for k in node.context):
                return False
        elif node.type not in (list, tuple, NAMED) and (
            not on("registered") or node.type not in tp.SUPPORTED_NODES
        ):
            return False
        stack.extend(node.children())
    return True


def unflatten(tx: Any, leaves_vt: Any, spec: Any) -> Any:
    """Trackers of `tree_unflatten(leaves, spec)`, or None to fall back."""
    leaves_vt = leaves_vt.realize()
    if type(leaves_vt) not in (ListVariable, TupleVariable):
        return None
    if len(leaves_vt.items) != spec.num_leaves or not buildable(spec):
        return None  # torch's code raises the error
    return build(tx, spec, list(leaves_vt.items), [0])


def with_paths(tx: Any, walk: Walk) -> Any:
    """The list of (key path, leaf) pairs, the key entries as constants."""
    pairs: list[Any] = [
        TupleVariable([TupleVariable([_key_entry(tx, k) for k in path]), leaf])
        for path, leaf in zip(walk.paths, walk.leaves, strict=True)
    ]
    return ListVariable(pairs, mutation_type=ValueMutationNew())


# torch's key classes and the field each one's constructor takes.
_KEY_FIELDS = {tp.SequenceKey: "idx", tp.MappingKey: "key", tp.GetAttrKey: "name"}


def _key_entry(tx: Any, key: Any) -> Any:
    """The tracker of one key entry of a key path.

    torch 2.12+ counts its key classes among Dynamo's constants; 2.10 and
    2.11 do not (their sourceless builder cannot wrap one: a graph break), so
    there the entry is built as torch's traced key-path walk builds it, by
    calling its class, reached through a global (a new object Dynamo can
    rebuild; the class's guard is one torch's traced walk installs too).
    """
    field = _KEY_FIELDS.get(type(key))
    if field is None or ConstantVariable.is_literal(key):
        return VariableTracker.build(tx, key)
    value = VariableTracker.build(tx, getattr(key, field))
    return sourced_function(tx, type(key)).call_function(tx, [value], {})
