"""`tree_map` over a registered node torch's `call_tree_map` hands back to the trackers.

Part of the ``trackers`` layer (the "tree_map" fast path): the subtree is
walked as tree_flatten's fast path walks it (`_walk`), each further tree
read as `flatten_up_to` reads it (`_walk.up_to`), and the result built as
tree_unflatten's fast path builds it (`_build`).
"""

from __future__ import annotations

import collections
from typing import Any

import torch.utils._pytree as tp

from ._build import build, buildable
from ._fence import (
    ConstDictVariable,
    DefaultDictVariable,
    LazyVariableTracker,
    ListVariable,
    TupleVariable,
)
from ._walk import Fallback, flatten, up_to

__all__ = ["tree_map"]


# torch 2.15's call_tree_map answers a defaultdict (a ConstDictVariable) with
# a clone its DefaultDictVariable does not rebuild itself: ConstDictVariable's
# reconstruct makes it a plain dict (torch's result is wrong). 2.10-2.14's
# DefaultDictVariable has its own reconstruct: torch's answer is right there
# and cheaper, and those trees are left to it (VERSIONS).
_TORCH_MAPS_DEFAULTDICT_TO_DICT = getattr(DefaultDictVariable, "reconstruct", None) is getattr(
    ConstDictVariable, "reconstruct", 0
)


def _is_registered_node(vt: Any) -> bool:
    """Whether `vt` is a registered node torch's `call_tree_map` does not answer itself.

    Those are all but lists, tuples, namedtuples and what Dynamo tracks as a
    ConstDictVariable (dicts; on torch 2.14 OrderedDicts too). Realizes `vt`
    only when it is such a node (torch's call_tree_map realizes it too).
    """
    if isinstance(vt, LazyVariableTracker) and not vt.is_realized():
        python_type = vt.peek_type()
    else:
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            return False
    if python_type in (list, tuple, dict) or tp.is_namedtuple_class(python_type):
        return False
    if python_type not in tp.SUPPORTED_NODES:
        return False
    if python_type is collections.defaultdict and _TORCH_MAPS_DEFAULTDICT_TO_DICT:
        return True  # see _holds_defaultdict
    return not isinstance(vt.realize(), ConstDictVariable)


def _holds_defaultdict(vt: Any) -> bool:
    """Whether torch's `call_tree_map` would reach a defaultdict under `vt`.

    On torch 2.15 Dynamo tracks a defaultdict as a ConstDictVariable subclass
    and its `call_tree_map` answers it by cloning the tracker untracked by
    side effects, so the result is rebuilt as a plain dict (torch alone, a
    wrong result). Such a tree is answered here instead, where the
    defaultdict is rebuilt by tracing its registered unflatten function.
    Descends only where torch's `call_tree_map` does (lists, tuples, dicts).
    """
    if isinstance(vt, LazyVariableTracker) and not vt.is_realized():
        python_type = vt.peek_type()
        if python_type is collections.defaultdict:
            return True
        if python_type not in (list, tuple, dict, collections.OrderedDict):
            return False  # torch's call_tree_map realizes it anyway; not needed here
        vt = vt.realize()
    try:
        python_type = vt.python_type()
    except NotImplementedError:
        return False
    if python_type is collections.defaultdict:
        return True
    if type(vt) in (ListVariable, TupleVariable):
        return any(_holds_defaultdict(item) for item in vt.items)
    if isinstance(vt, ConstDictVariable) and python_type in (dict, collections.OrderedDict):
        return any(_holds_defaultdict(value) for value in vt.items.values())
    return False


def tree_map(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`tree_map(f, tree)` whose root is a registered node, or None.

    torch answers lists, tuples, dicts and namedtuples at the tracker level
    (`call_tree_map`) and, at any other registered node, falls back to
    tracing its whole tree_map on that subtree, through this same tracker:
    that subtree is answered here instead. It is walked as tree_flatten's
    fast path walks it (the node's flatten function traced, same guards),
    `f` is called on each leaf in order (traced as torch traces it), and the
    result is built as tree_unflatten's fast path builds it. The order in
    which the graph meets its inputs is torch's.
    """
    if len(args) < 2 or kwargs.keys() - {"is_leaf"}:
        return None
    map_fn, tree, *rests = args
    if not _is_registered_node(tree) and not (
        _TORCH_MAPS_DEFAULTDICT_TO_DICT and _holds_defaultdict(tree)
    ):
        return None  # torch's call_tree_map
    walk = flatten(tx, [tree], kwargs, with_paths=False)
    if walk is None or not buildable(walk.tree_spec):
        return None
    columns = [walk.leaves]
    for rest in rests:  # torch's treespec.flatten_up_to(rest), at the tracker level
        subtrees: list[Any] = []
        try:
            up_to(tx, walk.tree_spec, rest, subtrees)
        except Fallback:
            return None  # torch's code raises its error
        columns.append(subtrees)
    results = [map_fn.call_function(tx, list(row), {}) for row in zip(*columns, strict=True)]
    return build(tx, walk.tree_spec, results, [0])
