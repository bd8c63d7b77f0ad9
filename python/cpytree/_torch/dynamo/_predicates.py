"""`tree_all` / `tree_any` (and their `_only` forms) answered leaf by leaf.

Part of the ``trackers`` layer: imported by `_trackers` on the first such
call, after `_inventory.missing("trackers")` found every name used here.
"""

from __future__ import annotations

from typing import Any

from torch._dynamo.variables import BuiltinVariable, ConstantVariable, UserFunctionVariable

from ._walk import Subtree, Walk, guard_registry, truth

__all__ = ["all_any"]

# (tree_all or tree_any, the _only form) of each function answered here.
_ALL_ANY = {
    "tree_all": (True, False),
    "tree_any": (False, False),
    "tree_all_only": (True, True),
    "tree_any_only": (False, True),
}


def all_any(fn_vt: Any, tx: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`tree_all` / `tree_any` (and `_only`) answered leaf by leaf, or None.

    torch computes `all(map(pred, tree_iter(tree, is_leaf)))` (the `_only`
    forms skip leaves failing `isinstance(leaf, type_or_types)`), lazily:
    the walk stops at the first leaf that decides. Here the same walk
    (`Walk.iter`, tree_iter's order, is_leaf consulted at each node it
    reaches) feeds the user's `pred`, traced on each leaf as torch traces it,
    and stops at the same leaf, so nodes after it are neither realized nor
    guarded, as in torch. The `isinstance` test is Dynamo's own builtin. A
    result that is not a constant is tested as Dynamo traces `if result:`
    (guarded when symbolic, a graph break on a tensor, as in torch). A
    subtree the walk cannot answer is handed to torch's function (its
    is_leaf then consulted a second time on that subtree's root). The
    guards are those of the flatten path for the nodes reached.
    """
    want_all, only = _ALL_ANY[name]
    positional = list(args)
    types_vt = None
    if only:
        if not positional:
            return None
        types_vt = positional.pop(0)
    params = ("pred", "tree", "is_leaf")
    if len(positional) > len(params):
        return None
    bound = dict(zip(params, positional, strict=False))
    for key, value in kwargs.items():
        if key not in params or key in bound:
            return None
        bound[key] = value
    if "pred" not in bound or "tree" not in bound:
        return None
    pred, tree, is_leaf = bound["pred"], bound["tree"], bound.get("is_leaf")
    if is_leaf is not None and is_leaf.is_constant_none():
        is_leaf = None
    guard_registry()
    walk = Walk(tx, is_leaf, with_paths=False)
    for item in walk.iter(tree):
        if type(item) is Subtree:
            sub_args = [pred, item.vt] if types_vt is None else [types_vt, pred, item.vt]
            sub_kwargs = {} if is_leaf is None else {"is_leaf": is_leaf}
            result = UserFunctionVariable.call_function(fn_vt, tx, sub_args, sub_kwargs)
        else:
            if types_vt is not None:
                matched = BuiltinVariable(isinstance).call_function(tx, [item, types_vt], {})
                if not truth(tx, matched):
                    continue
            result = pred.call_function(tx, [item], {})
        if truth(tx, result) is not want_all:  # all: a false one; any: a true one
            return ConstantVariable.create(not want_all)
    return ConstantVariable.create(want_all)
