"""What Dynamo needs to know about the functions install() puts into torch.

Dynamo traces a pytree call inside a compiled function by inlining the
Python source of `torch.utils._pytree`, and it has fast paths keyed on
torch's own functions: `tree_map` (and `tree_map_only`, rewritten into it) is
run at the VariableTracker level (`call_tree_map`) instead of being traced;
`tree_is_leaf` and `_get_node_type` are answered without tracing.
cpytree's functions are C, which Dynamo can neither inline nor recognise.

`DynamoHooks` makes Dynamo see each C function install() swapped in as the
torch original it replaced, exactly as it would have seen it: a
`UserFunctionVariable` of the original. Every fast path keyed on that
function then applies, the traced bytecodes are the original's, and the
guards are the ones the original gets (one identity guard on the object
found at the call site, guards on the original's defaults through a global
Dynamo installs for it). Eager calls, and torch's compile-time machinery
running outside traced code (AOTAutograd, FakeTensor, FX, export), run the
C functions. The one place Dynamo reads `torch.utils._pytree.tree_map`
itself (`UserFunctionVariable._lookup_tree_map_function`, which rewrites
`tree_map_only` into `tree_map`) is taught the same mapping.

When the engine's specs can stand in for torch's (see `_spec_interop.py`), a
cpytree TreeSpec may also reach traced code, e.g. as the `_in_spec` of an
exported module; `add_spec_type` makes Dynamo see such a spec as the equal
torch TreeSpec, guarded by identity (engine specs are interned and immutable).

Lazy: nothing here imports `torch._dynamo`. `activate()` applies the hooks at
once when Dynamo is already imported, and otherwise when it is first imported
(an import watcher on `sys.meta_path` that runs them right after
`torch._dynamo` finishes executing). torch has no API to unregister;
`remove_all` deletes exactly the entries that were added (or drops the
watcher if Dynamo never came).
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ._import_watch import ImportWatcher, is_loaded

_DYNAMO = "torch._dynamo"


class DynamoHooks:
    """The Dynamo entries install() adds, applied now or when Dynamo is imported.

    Thread safety: install()/uninstall() hold their own lock around every
    call; `_lock` also covers the watcher's callback, which runs in whatever
    thread imports torch._dynamo first.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # id(fast) -> (fast, torch's original): what Dynamo should see instead of fast
        self._functions: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}
        self._spec_type: tuple[type, Callable[[Any], Any]] | None = None
        self._watcher: ImportWatcher | None = None
        self._applied = False
        self._on_failure: Callable[[BaseException], None] | None = None
        # (table, key) pairs added to Dynamo's tables, and (object, attribute,
        # previous value) of the methods patched, for remove_all
        self._entries: list[tuple[dict[Any, Any], Any]] = []
        self._patched: list[tuple[Any, str, Any]] = []

    def substitute(self, fast: Callable[..., Any], original: Callable[..., Any]) -> None:
        """Make Dynamo see torch's Python `original` wherever it meets the C `fast`."""
        self._functions[id(fast)] = (fast, original)

    def add_spec_type(self, spec_type: type, to_torch: Callable[[Any], Any]) -> None:
        """Make Dynamo treat instances of `spec_type` as the torch spec `to_torch(spec)`."""
        self._spec_type = (spec_type, to_torch)

    def activate(self, on_failure: Callable[[BaseException], None]) -> None:
        """Apply the entries now if Dynamo is loaded, else when it is first imported.

        `on_failure(error)` runs if applying them later fails (install() then
        undoes itself: a swapped function Dynamo cannot see through would be
        a graph break). A failure now raises.
        """
        with self._lock:
            if is_loaded(_DYNAMO):
                self._apply()
                return
            self._on_failure = on_failure
            self._watcher = ImportWatcher(_DYNAMO, self._apply_late)
            self._watcher.start()

    def _apply_late(self) -> None:
        with self._lock:
            self._drop_watcher()
            try:
                self._apply()
            except Exception as error:  # noqa: BLE001 - reported, and install() undone
                self._remove_entries()
                if self._on_failure is not None:
                    self._on_failure(error)

    def _drop_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def _apply(self) -> None:
        if self._applied:
            return
        self._applied = True
        if self._functions:
            self._apply_functions()
        if self._spec_type is not None:
            self._apply_spec_type(*self._spec_type)

    def _add(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if key in table:
            raise ValueError(f"Dynamo already has a rule for {key!r}")
        table[key] = value
        self._entries.append((table, key))

    def _apply_functions(self) -> None:
        import torch.utils._pytree as tp
        from torch._dynamo import trace_rules
        from torch._dynamo.guards import GuardBuilder
        from torch._dynamo.source import GlobalSource
        from torch._dynamo.variables.builder import VariableBuilder
        from torch._dynamo.variables.functions import UserFunctionVariable

        from ._dynamo_pytree import FAST_FUNCTIONS, make_function_variable

        functions = self._functions
        fast_variable = make_function_variable(tp)

        def variable_class(original: Any) -> Any:
            """UserFunctionVariable, or the class that answers builtin trees directly."""
            if original.__name__ in FAST_FUNCTIONS and original.__module__ == tp.__name__:
                return fast_variable
            return UserFunctionVariable

        def sourced(builder: Any, value: Any) -> Any:
            # The guard torch puts on its original at the call site (CLOSURE_MATCH
            # degrades to an identity match for a C function); the original gets a
            # source of its own, a global of the compiled frame, because guards
            # Dynamo derives from it (its __defaults__) must read the original.
            original = functions[id(value)][1]
            builder.install_guards(GuardBuilder.CLOSURE_MATCH)
            name = builder.tx.output.install_global_by_id("__cpytree_original", original)
            return variable_class(original)(original, source=GlobalSource(name))

        class SourcelessOriginal:
            """trace_rules entry: a sourceless C function becomes its original."""

            def __new__(cls, value: Any, **kwargs: Any) -> Any:
                original = functions[id(value)][1]
                return variable_class(original)(original, **kwargs)

            @staticmethod
            def create_with_source(value: Any, source: Any) -> Any:
                original = functions[id(value)][1]
                return variable_class(original).create_with_source(original, source)

        id_dispatch = VariableBuilder._id_dispatch()
        rule_map = trace_rules.get_torch_obj_rule_map()
        for fast, _ in functions.values():
            self._add(id_dispatch, id(fast), sourced)
            self._add(rule_map, fast, SourcelessOriginal)

        lookup = getattr(UserFunctionVariable, "_lookup_tree_map_function", None)
        if lookup is not None:
            originals = {id(fast): original for fast, original in functions.values()}

            def lookup_tree_map_function(self: Any) -> Any:
                # Reads the module attribute, which is cpytree's C tree_map now.
                module = sys.modules.get(getattr(self.fn, "__module__", None) or "")
                found = originals.get(id(getattr(module, "tree_map", None)))
                return found if found is not None else lookup(self)

            self._patch(UserFunctionVariable, "_lookup_tree_map_function", lookup_tree_map_function)

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._patched.append((owner, name, vars(owner).get(name)))
        setattr(owner, name, value)

    def _apply_spec_type(self, spec_type: type, to_torch: Callable[[Any], Any]) -> None:
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

        for trace_numpy in (False, True):
            self._add(VariableBuilder._type_dispatch_impl(trace_numpy), spec_type, wrap_sourced)
        # torch assigns `_type_handlers` after the class body, where mypy does not see it.
        handlers = SourcelessBuilder._type_handlers  # type: ignore[attr-defined]
        self._add(handlers, spec_type, wrap_sourceless)

    def _remove_entries(self) -> None:
        for table, key in reversed(self._entries):
            table.pop(key, None)
        self._entries.clear()
        for owner, name, previous in reversed(self._patched):
            if previous is None:
                delattr(owner, name)
            else:
                setattr(owner, name, previous)
        self._patched.clear()

    def remove_all(self) -> None:
        """Delete every entry this object added to Dynamo (or stop waiting for Dynamo)."""
        with self._lock:
            self._drop_watcher()
            self._remove_entries()
            self._functions.clear()
            self._spec_type = None
            self._applied = False


def warn_failed(error: BaseException) -> None:
    """What a user sees when Dynamo's import could not take the hooks."""
    warnings.warn(
        f"cpytree.install(): torch._dynamo could not be told about cpytree's functions "
        f"({type(error).__name__}: {error}); install() was undone, torch is as shipped.",
        RuntimeWarning,
        stacklevel=2,
    )
