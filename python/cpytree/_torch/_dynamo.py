"""What Dynamo needs to know about the functions install() puts into torch.

Dynamo traces a pytree call inside a compiled function by inlining the
Python source of `torch.utils._pytree`. cpytree's functions are C, which
Dynamo cannot inline: left alone, each call would be a graph break. For every
function install() swaps, `DynamoHooks.substitute` registers torch's own
Python original as its stand-in (`torch._dynamo.decorators.substitute_in_graph`,
the mechanism torch uses for optree), so a compiled function traces exactly
the code it traced before install(): same graph, same guards, same breaks.
Eager calls, and torch's compile-time machinery running outside the traced
code (AOTAutograd, FakeTensor, FX, export), run the C functions.

When the engine's specs can stand in for torch's (see `_spec_interop.py`), a
cpytree TreeSpec may also reach traced code, e.g. as the `_in_spec` of an
exported module. `add_spec_handlers` makes Dynamo see such a spec as the equal
torch TreeSpec, guarded by identity (engine specs are interned and immutable).

torch has no API to unregister either; `remove_all` deletes exactly the
entries that were added from Dynamo's tables (torch 2.13 layout; a missing
table is skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _tables() -> dict[str, Any]:
    """Dynamo's registries of substituted functions."""
    from torch._dynamo import trace_rules
    from torch._dynamo.variables import PolyfilledFunctionVariable
    from torch._dynamo.variables.builder import VariableBuilder

    return {
        "id_dispatch": VariableBuilder._id_dispatch(),
        "polyfilled_ids": trace_rules._polyfilled_function_ids,
        "rule_map": trace_rules.get_torch_obj_rule_map(),
        "handlers": PolyfilledFunctionVariable._get_polyfill_handlers(),
    }


def available() -> bool:
    """Whether this torch has the substitution API install() relies on."""
    try:
        from torch._dynamo.decorators import substitute_in_graph  # noqa: F401

        _tables()
    except (ImportError, AttributeError):  # pragma: no cover - other torch versions
        return False
    return True


class DynamoHooks:
    """The substitutions and spec handlers install() added to Dynamo."""

    def __init__(self) -> None:
        # (fast function, the wrapper substitute_in_graph made for it)
        self._substituted: list[tuple[Callable[..., Any], Callable[..., Any]]] = []
        # (table, key) pairs added by add_spec_handlers
        self._type_entries: list[tuple[dict[Any, Any], Any]] = []

    def substitute(self, fast: Callable[..., Any], original: Callable[..., Any]) -> None:
        """Make Dynamo trace `original` (Python) wherever it meets `fast` (C).

        Raises TypeError when the signatures differ (install() then leaves
        that function unswapped), ValueError when `fast` already has a rule.
        """
        from torch._dynamo.decorators import substitute_in_graph

        wrapped = substitute_in_graph(fast, can_constant_fold_through=False)(original)
        self._substituted.append((fast, wrapped))

    def substituted(self) -> list[Callable[..., Any]]:
        return [fast for fast, _ in self._substituted]

    def add_spec_handlers(self, spec_type: type, to_torch: Callable[[Any], Any]) -> None:
        """Make Dynamo treat instances of `spec_type` as the torch spec `to_torch(spec)`."""
        from torch._dynamo.guards import GuardBuilder
        from torch._dynamo.source import GlobalSource
        from torch._dynamo.variables.builder import SourcelessBuilder, VariableBuilder

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

        tables: list[tuple[dict[Any, Any], Any]] = [
            (VariableBuilder._type_dispatch_impl(trace_numpy), wrap_sourced)
            for trace_numpy in (False, True)
        ]
        # torch assigns `_type_handlers` after the class body, where mypy does not see it.
        tables.append((SourcelessBuilder._type_handlers, wrap_sourceless))  # type: ignore[attr-defined]
        for table, handler in tables:
            if spec_type not in table:
                table[spec_type] = handler
                self._type_entries.append((table, spec_type))

    def remove_all(self) -> None:
        """Delete every entry this object added to Dynamo's tables."""
        if self._substituted:
            tables = _tables()
            for fast, wrapped in self._substituted:
                for fn in (fast, wrapped):
                    tables["id_dispatch"].pop(id(fn), None)
                    tables["rule_map"].pop(fn, None)
                    tables["handlers"].pop(fn, None)
                    if id(fn) in tables["polyfilled_ids"]():
                        tables["polyfilled_ids"].remove(id(fn))
            self._substituted.clear()
        for table, key in self._type_entries:
            table.pop(key, None)
        self._type_entries.clear()
