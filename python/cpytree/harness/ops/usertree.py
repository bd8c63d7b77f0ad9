"""`--tree module:callable`: the user's own pytree as a workload.

`module` is a dotted module name importable from the current directory, or a
path to a `.py` file; `callable` a (dotted) attribute of it, called with no
arguments. If it returns a `torch.nn.Module`, the workload is the module's
`state_dict()`. The callable is called twice (tree and twin, for the ops that
take two trees of one structure); if it hands back the same object both
times, the twin is a `copy.deepcopy` of it.

Usage:

    w = load_workload("mypkg.models:make_batch")
    tree = w.build()
"""

from __future__ import annotations

import copy
import importlib
import sys
from typing import Any

from ..usercode import load_callable
from .workloads import Workload, count_nodes

__all__ = ["load_workload"]


def _as_tree(obj: Any) -> tuple[Any, str]:
    nn = sys.modules.get("torch.nn")
    if nn is not None and isinstance(obj, nn.Module):
        return obj.state_dict(), f"state_dict() of {type(obj).__name__}"
    return obj, type(obj).__name__


def _num_nodes(tree: Any) -> int:
    """num_nodes of the tree's spec (cpytree's, else torch's, else a count of
    the containers the harness knows)."""
    for name in ("cpytree", "torch.utils._pytree"):
        try:
            mod = importlib.import_module(name)
            return int(mod.tree_structure(tree).num_nodes)
        except Exception:  # noqa: BLE001, S112 - try the next
            continue
    return count_nodes(tree)


def _builtin_only(tree: Any) -> bool:
    """Only list/tuple/dict containers (the floor instrument can run it)."""
    try:
        import cpytree

        is_leaf = cpytree.tree_is_leaf
    except Exception:  # noqa: BLE001
        return False
    stack = [tree]
    while stack:
        node = stack.pop()
        t = type(node)
        if t is list or t is tuple:
            stack.extend(node)
        elif t is dict:
            stack.extend(node.values())
        elif not is_leaf(node):
            return False
    return True


def load_workload(target: str) -> Workload:
    """The workload of `--tree target`; raises ImportError/AttributeError/
    TypeError/ValueError with the reason when it cannot be loaded."""
    fn = load_callable(target)
    first, what = _as_tree(fn())
    pending = [first]

    def build() -> Any:
        if pending:
            return pending.pop()
        obj, _ = _as_tree(fn())
        # The twin must be another object than the tree.
        return copy.deepcopy(obj) if obj is first else obj

    custom = not _builtin_only(first)
    return Workload(
        name=target.rpartition(":")[2],
        build=build,
        builtin_only=not custom,
        nodes=_num_nodes(first),
        description=f"--tree {target}: {what}",
    )
