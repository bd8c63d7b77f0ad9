"""Dynamo sees torch's Python original wherever it meets one of cpytree's C functions.

Imported only once `torch._dynamo` is loaded and `_inventory.missing()` found
every name of the ``substitute`` and ``spec`` layers (they are imported at
module level here).

Each function install() swapped in (a Python function with torch's
signature, `_signature.py`) and the engine's C function it calls get two
entries each: one in
`VariableBuilder._id_dispatch()` (the function reached through a source: a
module attribute, a global) and one in `trace_rules.get_torch_obj_rule_map()`
(reached without one). Both build the tracker Dynamo would have built for
torch's original: with a source, a `UserFunctionVariable` of it or, for the
functions `_trackers` answers, a `PytreeFunctionVariable`; without one,
torch's own rule (a `UserFunctionVariable`). Dynamo's own code building a
tracker of one directly meets `_apply_choke_point`. Every fast path keyed on
the original then applies, the traced bytecodes are the original's, and the
guards are the ones the original gets: one identity guard on the object
found at the call site, guards on the original's defaults through a global
installed for it. torch's own originals of the `_trackers` functions that
install() leaves in place (the with-path functions) get a rule-map entry
naming the tracker class (Dynamo's own wrapping, guards included, is kept).

The one place Dynamo reads `torch.utils._pytree.tree_map` itself
(`UserFunctionVariable._lookup_tree_map_function`, which rewrites
`tree_map_only` into `tree_map`) is taught the same mapping.

An engine TreeSpec reaching traced code (the `_in_spec` of an exported
module) is seen as the equal torch TreeSpec, guarded by identity (engine
specs are interned and immutable).

Shared state: `_ORIGINALS` maps id(C function) to what Dynamo
must build for it. Only `DynamoHooks` writes it, under its lock; Dynamo
reads it while compiling, after it was filled.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from torch._dynamo import trace_rules
from torch._dynamo.guards import GuardBuilder
from torch._dynamo.source import GlobalSource
from torch._dynamo.variables.builder import SourcelessBuilder, VariableBuilder
from torch._dynamo.variables.functions import UserFunctionVariable

__all__ = ["Tables", "apply_functions", "apply_spec_type", "clear"]


class Tables(Protocol):
    """Where the entries go, so that they can all be taken out again."""

    def add(self, table: dict[Any, Any], key: Any, value: Any) -> None: ...

    def patch(self, owner: Any, name: str, value: Any) -> None: ...


# id(C function) -> (that function, torch's original, tracker class)
_ORIGINALS: dict[int, tuple[Any, Any, Any]] = {}


def _sourced(builder: Any, value: Any) -> Any:
    """id_dispatch entry: what VariableBuilder builds for a C function."""
    _, original, variable_class = _ORIGINALS[id(value)]
    # The guard torch puts on its original at the call site (CLOSURE_MATCH
    # degrades to an identity match for a C function).
    builder.install_guards(GuardBuilder.CLOSURE_MATCH)
    # The original gets a source of its own, a global of the compiled frame,
    # because guards Dynamo derives from it (its __defaults__) must read it.
    name = builder.tx.output.install_global_by_id("__cpytree_original", original)
    return variable_class(original, source=GlobalSource(name))


class SourcelessOriginal(UserFunctionVariable):
    """trace_rules entry: a sourceless C function becomes its original's tracker.

    Never instantiated itself (`__new__` returns the original's tracker). A
    UserFunctionVariable subclass because Dynamo's `trace_rules.check` asks
    whether a rule inlines (`torch.compile(tp.tree_structure)` checks the
    function it is given): it does, as torch's original.
    """

    def __new__(cls, value: Any, **kwargs: Any) -> Any:
        # Without a source, Dynamo's own code built it (SourcelessBuilder:
        # nonstrict_trace's tree_unflatten): torch's original traced, as
        # torch traces it (the node names of its graphs are torch's).
        _, original, _ = _ORIGINALS[id(value)]
        return UserFunctionVariable(original, **kwargs)

    @staticmethod
    def create_with_source(value: Any, source: Any) -> Any:
        _, original, variable_class = _ORIGINALS[id(value)]
        return variable_class.create_with_source(original, source)


def apply_functions(
    tables: Tables,
    functions: dict[int, tuple[Callable[..., Any], Callable[..., Any]]],
    fast_class: type | None,
    fast_names: frozenset[str],
) -> None:
    """Entries for every (C function, original) of `functions`.

    `fast_class` (None: the trackers layer is off) answers the originals
    named in `fast_names`; torch's originals of those names that are not
    swapped get entries too.
    """
    import torch.utils._pytree as tp

    def variable_class(original: Any) -> Any:
        if (
            fast_class is not None
            and original.__name__ in fast_names
            and original.__module__ in (tp.__name__, "torch.fx._pytree")
        ):
            return fast_class
        return UserFunctionVariable

    id_dispatch = VariableBuilder._id_dispatch()
    rule_map = trace_rules.get_torch_obj_rule_map()
    for fast, original in functions.values():
        _ORIGINALS[id(fast)] = (fast, original, variable_class(original))
        tables.add(id_dispatch, id(fast), _sourced)
        tables.add(rule_map, fast, SourcelessOriginal)
    if fast_class is not None:
        # torch's own function, left in place by install(): Dynamo's rule for
        # it becomes the tracker class (a UserFunctionVariable, which
        # builds it with the guards torch's own wrapping installs).
        swapped = {id(original) for _, original in functions.values()}
        for name in sorted(fast_names):
            own = vars(tp).get(name)
            if callable(own) and id(own) not in swapped and id(own) not in functions:
                tables.add(rule_map, own, fast_class)
    _apply_choke_point(tables)

    lookup = getattr(UserFunctionVariable, "_lookup_tree_map_function", None)
    if lookup is not None:
        originals = {id(fast): original for fast, original in functions.values()}

        def lookup_tree_map_function(self: Any) -> Any:
            # Reads the module attribute, which is cpytree's C tree_map now.
            module = sys.modules.get(getattr(self.fn, "__module__", None) or "")
            found = originals.get(id(getattr(module, "tree_map", None)))
            return found if found is not None else lookup(self)

        tables.patch(UserFunctionVariable, "_lookup_tree_map_function", lookup_tree_map_function)


def _apply_choke_point(tables: Tables) -> None:
    """Dynamo's own code handing a C function to its tracer gets torch's original.

    torch's higher-order operators (cond, while_loop, scan, map,
    flex_attention, invoke_subgraph), nonstrict_trace and leaf functions
    build `UserFunctionVariable(pytree.tree_flatten)` themselves
    (`_make_inlined`), reading the module attribute install() swapped, so
    neither table above is consulted. Every such route ends in
    `UserFunctionVariable.__init__` (subclasses included), which is where a
    swapped function becomes torch's original: a site of a newer torch is
    covered without being listed.

    The original is then traced exactly as torch traces it, not answered by
    the trackers: graph nodes are named after the local variables of the
    code Dynamo traced (a map body's input is `child`, from torch's
    tree_flatten), and torch's own tests compare graphs by their code, names
    included (test_higher_order_ops: answering there renamed five graphs'
    nodes). Inside the operators cpytree is therefore neutral (same
    bytecodes, same graphs); the user code around them keeps the fast paths.
    """
    init = UserFunctionVariable.__init__

    def __init__(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
        entry = _ORIGINALS.get(id(fn))
        if entry is not None and entry[0] is fn:
            fn = entry[1]
        init(self, fn, *args, **kwargs)

    tables.patch(UserFunctionVariable, "__init__", __init__)


def apply_spec_type(tables: Tables, spec_type: type, to_torch: Callable[[Any], Any]) -> None:
    """Entries that make Dynamo see an instance of `spec_type` as `to_torch(spec)`."""

    def wrap_sourced(builder: Any, value: Any) -> Any:
        # Identity pins the structure. The torch spec gets a source of its
        # own (a global of the compiled frame): the guards Dynamo derives
        # from what the traced code reads must be evaluated on the torch
        # spec, not on the engine spec the original source leads to.
        builder.install_guards(GuardBuilder.ID_MATCH)
        torch_spec = to_torch(value)
        name = builder.tx.output.install_global_by_id("__cpytree_torch_spec", torch_spec)
        return VariableBuilder(builder.tx, GlobalSource(name))(torch_spec)

    def wrap_sourceless(tx: Any, value: Any) -> Any:
        return SourcelessBuilder.create(tx, to_torch(value))

    for trace_numpy in (False, True):
        tables.add(VariableBuilder._type_dispatch_impl(trace_numpy), spec_type, wrap_sourced)
    # torch assigns `_type_handlers` after the class body, where mypy does not see it.
    handlers = SourcelessBuilder._type_handlers  # type: ignore[attr-defined]
    tables.add(handlers, spec_type, wrap_sourceless)


def clear() -> None:
    """Forget every mapping (after the entries were taken out of Dynamo's tables)."""
    _ORIGINALS.clear()
