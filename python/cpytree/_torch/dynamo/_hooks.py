"""`DynamoHooks`: the Dynamo part of install(), applied now or when Dynamo is imported.

Lazy: nothing here imports `torch._dynamo`. `activate()` applies the hooks at
once when Dynamo is already imported, and otherwise when it is first imported
(an import watcher on `sys.meta_path` that runs them right after
`torch._dynamo` finishes executing). torch has no API to unregister;
`remove_all` deletes exactly the entries that were added (or drops the
watcher if Dynamo never came).

Before a layer's code is imported, `_inventory.missing(layer)` checks every
private name it uses against the loaded torch:

* ``trackers`` lacking a name: only the fast paths that name's row lists are
  left out (`_inventory.paths_off()`), with one warning naming them and what
  moved; every other fast path stays on. A function whose paths are off
  traces torch's own pytree function, exactly as without install().
* ``substitute`` or ``spec`` lacking a name: Dynamo cannot be told what the C
  functions stand for, and compiled code meeting one would break the graph;
  `DynamoDrift` is raised, which install() turns into undoing itself (with
  one warning when Dynamo came after install()).
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._torch_link._follow import is_loaded
from ..._torch_link._import_watch import ImportWatcher

# The inventory loads when the hooks are applied (Dynamo imported), not at
# install(): building its table was a fifth of install()'s cost.
if TYPE_CHECKING:
    from ..._torch_link import _inventory

__all__ = ["DynamoDrift", "DynamoHooks", "warn_failed"]

_DYNAMO = "torch._dynamo"


class DynamoDrift(RuntimeError):
    """The loaded torch lacks private names a required layer of the adapter uses."""

    def __init__(self, names: list[_inventory.Name]) -> None:
        self.names = names
        super().__init__("torch has moved " + ", ".join(map(str, names)))


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
        # layer -> "on", or why it is off; empty until applied
        self._layers: dict[str, str] = {}
        # fast path -> "on", or why it is off; empty until applied
        self._paths: dict[str, str] = {}
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

    def layers(self) -> dict[str, str]:
        """Each layer applied to Dynamo: "on", or why it is off (empty: not yet applied)."""
        return dict(self._layers)

    def fast_paths(self) -> dict[str, str]:
        """Each Dynamo fast path: "on", or why it is off (empty: not yet applied)."""
        return dict(self._paths)

    def activate(self, on_failure: Callable[[BaseException], None]) -> None:
        """Apply the entries now if Dynamo is loaded, else when it is first imported.

        `on_failure(error)` runs if applying them later fails (install() then
        undoes itself: a swapped function Dynamo cannot see through would be
        a graph break). A failure now raises.
        """
        with self._lock:
            if is_loaded(_DYNAMO):
                try:
                    self._apply()
                except BaseException:
                    self._remove_entries()
                    raise
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
        required = ["substitute"] if self._functions else []
        required += ["spec"] if self._spec_type is not None else []
        from ..._torch_link import _inventory

        moved = [name for layer in required for name in _inventory.missing(layer)]
        if moved:
            raise DynamoDrift(moved)
        fast_class: type | None = None
        fast_names: frozenset[str] = frozenset()
        off = _inventory.paths_off()
        for path in _inventory.PATHS:
            names = off.get(path)
            self._paths[path] = "on" if names is None else _moved_text(names)
        if len(off) == len(_inventory.PATHS):
            self._layers["trackers"] = _moved_text(off["walk"])
        else:
            from . import _fence, _trackers

            on = frozenset(path for path in _inventory.PATHS if path not in off)
            _fence.configure(on)
            fast_class = _trackers.PytreeFunctionVariable
            fast_names = frozenset(_fence.enabled_functions())
            self._layers["trackers"] = (
                "on"
                if not off
                else "partly on: " + ", ".join(f"{path} {self._paths[path]}" for path in off)
            )
        if off:
            _warn_paths_off(off)
        from . import _substitute

        if self._functions:
            _substitute.apply_functions(self, self._functions, fast_class, fast_names)
            self._layers["substitute"] = "on"
        if self._spec_type is not None:
            _substitute.apply_spec_type(self, *self._spec_type)
            self._layers["spec"] = "on"

    def add(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        """Add `key` to one of Dynamo's tables (refused if torch has a rule for it)."""
        if key in table:
            raise ValueError(f"Dynamo already has a rule for {key!r}")
        table[key] = value
        self._entries.append((table, key))

    def patch(self, owner: Any, name: str, value: Any) -> None:
        """Replace attribute `name` of a Dynamo class (put back by remove_all)."""
        self._patched.append((owner, name, vars(owner).get(name)))
        setattr(owner, name, value)

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
        self._layers.clear()
        self._paths.clear()
        if _substitute_loaded():
            from . import _substitute

            _substitute.clear()

    def remove_all(self) -> None:
        """Delete every entry this object added to Dynamo (or stop waiting for Dynamo)."""
        with self._lock:
            self._drop_watcher()
            self._remove_entries()
            self._functions.clear()
            self._spec_type = None
            self._applied = False


def _substitute_loaded() -> bool:
    return f"{__package__}._substitute" in sys.modules


def _moved_text(names: list[_inventory.Name]) -> str:
    return "off: torch moved " + ", ".join(dict.fromkeys(map(str, names)))


def _warn_paths_off(off: dict[str, list[_inventory.Name]]) -> None:
    moved = dict.fromkeys(str(name) for names in off.values() for name in names)
    warnings.warn(
        "cpytree.install(): torch has moved names cpytree's Dynamo fast paths use ("
        + ", ".join(moved)
        + "); these fast paths are off: "
        + ", ".join(off)
        + ". Compiled code traces torch's own pytree functions there, as without "
        "install(); the other fast paths and the C engine stay on (see cpytree.status()).",
        RuntimeWarning,
        stacklevel=2,
    )


def warn_failed(error: BaseException) -> None:
    """What a user sees when Dynamo's import could not take the hooks."""
    warnings.warn(
        f"cpytree.install(): torch._dynamo could not be told about cpytree's functions "
        f"({type(error).__name__}: {error}); install() was undone, torch is as shipped.",
        RuntimeWarning,
        stacklevel=2,
    )
