"""Attribute replacements that can be undone exactly.

`Patches` records every module attribute that `cpytree.install()` sets, with
the value it replaced, and undoes them in reverse order. `rebind_imports`
finds the torch modules that bound a function by name at import
(`from torch.utils._pytree import tree_map`) and patches those bindings too.

Example:
    >>> patches = Patches()
    >>> patches.set(module, "tree_map", fast_tree_map)
    >>> patches.undo()          # module.tree_map is the original again
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from .. import _engine

_MISSING = object()
# The torch modules (see `_torch_modules`): this name, and the names starting with these.
TORCH_NAMES = ("torch",)
TORCH_PREFIXES = ("torch.", "functorch.")


class Patches:
    """An undo log of module attribute replacements (not thread-safe: callers lock)."""

    def __init__(self) -> None:
        # (module, name, previous value or _MISSING, value set), in the order made.
        self._records: list[tuple[ModuleType, str, Any, Any]] = []

    def __len__(self) -> int:
        return len(self._records)

    def set(self, module: ModuleType, name: str, value: Any) -> None:
        """Set `module.name = value`, remembering what was there."""
        previous = vars(module).get(name, _MISSING)
        setattr(module, name, value)
        self._records.append((module, name, previous, value))

    def undo(self) -> list[str]:
        """Restore every patched attribute, newest first.

        An attribute someone else replaced after we patched it is left alone
        (restoring it would undo their change); its `module.name` is returned.
        """
        skipped = []
        while self._records:
            module, name, previous, value = self._records.pop()
            if vars(module).get(name, _MISSING) is not value:
                skipped.append(f"{module.__name__}.{name}")
            elif previous is _MISSING:
                delattr(module, name)
            else:
                setattr(module, name, previous)
        return skipped


def _torch_modules(skip: Iterable[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Names and namespaces of every loaded torch module not in `skip`.

    The Python form of the filter the engine runs in `_find_bound_in_modules`
    (the oracle of tests/python/test_find_bound.py).

    The torch modules: `torch` and every name starting with "torch." or
    "functorch." (those whose import-time bindings install() rebinds).

    About 1,100 modules after `import torch`: one comprehension over a copy
    of sys.modules, its test two string comparisons a name (`"torch." <= name
    < "torch/"` is `name.startswith("torch.")`: "/" follows "." in code-point
    order), costs 1.5M instructions where a loop with `startswith` and two
    appends a module cost 2.6M.
    """
    modules = sys.modules.copy()  # a copy: getattr() below may run code that imports
    for name in skip:
        modules.pop(name, None)
    names = [
        name
        for name in modules
        if "torch." <= name < "torch/" or name == "torch" or "functorch." <= name < "functorch/"
    ]
    namespaces: list[Any] = [getattr(modules[name], "__dict__", None) for name in names]
    if set(map(type, namespaces)) != {dict}:  # rare: an object without a plain __dict__
        kept = [pair for pair in zip(names, namespaces, strict=True) if isinstance(pair[1], dict)]
        names, namespaces = [pair[0] for pair in kept], [pair[1] for pair in kept]
    return names, namespaces


def find_bindings(replacements: Mapping[int, Any], skip: Iterable[str]) -> list[tuple[str, str]]:
    """(module name, attribute) of torch module attributes bound to a value in `replacements`.

    `replacements` maps id(value) -> value; a binding matches when it *is* one
    of the values. The engine compares every value of every namespace by
    identity in one call (about 30,000 values after `import torch`: 3M
    instructions, where an id() per value and a set test took 15M), the module
    filter too (1.7M in Python): `_C._find_bound_in_modules`.
    """
    assert _engine.C is not None  # install() and uninstall() run only with the engine
    modules = sys.modules.copy()  # a copy: reading a non-module's __dict__ may import
    for name in skip:
        modules.pop(name, None)
    bound: list[tuple[str, str]] = _engine.C._find_bound_in_modules(
        modules, tuple(replacements.values()), TORCH_NAMES, TORCH_PREFIXES
    )
    return bound


def rebind_imports(
    patches: Patches, originals_to_new: Mapping[int, tuple[Any, Any]], skip: Iterable[str]
) -> int:
    """Patch torch modules' import-time bindings of originals to their replacements.

    `originals_to_new` maps id(original) -> (original, replacement). Returns
    the number of bindings patched.
    """
    originals = {key: pair[0] for key, pair in originals_to_new.items()}
    count = 0
    for module_name, attr in find_bindings(originals, skip):
        module = sys.modules[module_name]
        value = vars(module)[attr]
        patches.set(module, attr, originals_to_new[id(value)][1])
        count += 1
    return count
