"""The one place the package hands things to the C++ engine (`cpytree._C`).

`C` is the extension module, or None in the reference-only mode (the
extension could not be imported: `cpytree` then runs on `cpytree._reference`,
with a warning). Every `_C._set_*` / `_register_node` call lives here, each
called from one place; the rest of the package (`cpytree/__init__.py`,
`cpytree._torch`) calls these functions, and `_torch` takes the engine from
here (`C`), never by importing `cpytree`.

The engine never imports the package: `connect()` hands it, once at `import
cpytree`, two loaders it calls on first use (src/ground/key_entries.cc: the key classes
of `cpytree._keys`; src/spec_model/serialize.cc: the serialization state), so
`import cpytree` leaves both modules unloaded.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ._registry import _REGISTRATION_HOOKS, SUPPORTED_NODES, ConstantNode, NodeDef

try:
    # Spelt absolute: `from . import _C` reads to tools as an import of the
    # package's face (cpytree/__init__.py), which this module sits below.
    import cpytree._C as _C  # typed by _C.pyi
except ImportError as _error:  # pragma: no cover - exercised by the fallback test
    # mypy checks the engine's branches (C typed by _C.pyi), not the fallback's.
    _C = None  # type: ignore[assignment]
    warnings.warn(
        f"cpytree: the C++ engine could not be imported ({_error}); "
        "using the pure-Python reference implementation.",
        RuntimeWarning,
        stacklevel=3,
    )
C = _C


def _load_keys() -> tuple[type, type, type]:
    """The engine's first with-path call: cpytree's own key classes."""
    from . import _keys

    return _keys.SequenceKey, _keys.MappingKey, _keys.GetAttrKey


def connect(builtin_node_types: frozenset[type], serialization_state: Callable[[], Any]) -> None:
    """At `import cpytree` with the engine: mirror the registry, hand over the loaders."""
    c = C
    assert c is not None, "the C++ engine is not active"
    set_constant_types()

    def mirror_registration(cls: type, node_def: NodeDef | None) -> None:
        """Keeps the engine's registry equal to SUPPORTED_NODES."""
        if cls in builtin_node_types:  # handled natively by the engine
            return
        if node_def is None:
            c._unregister_node(cls)
        else:
            c._register_node(
                cls, node_def.flatten_fn, node_def.unflatten_fn, node_def.flatten_with_keys_fn
            )

    for cls, node_def in list(SUPPORTED_NODES.items()):
        mirror_registration(cls, node_def)
    _REGISTRATION_HOOKS.append(mirror_registration)
    c._set_loaders(_load_keys, serialization_state)


def set_serialization(state: tuple[Any, ...]) -> None:
    """The serialization state for the engine's dumps/loads (once loaded)."""
    assert C is not None, "the C++ engine is not active"
    C._set_serialization(state)


def set_constant_types(torch_constant_node: type | None = None) -> None:
    """hash(spec) follows torch: a constant's context hashes by its value.

    cpytree's ConstantNode from `import cpytree`; torch's too once its registry
    is followed (`_torch_link/_follow.py`).
    """
    if C is not None:
        extra = () if torch_constant_node is None else (torch_constant_node,)
        C._set_constant_types((ConstantNode, *extra))


def set_known_flattens(dict_like: tuple[Any, ...], list_like: tuple[Any, ...]) -> None:
    """torch's flatten functions whose results the engine computes itself (install())."""
    assert C is not None, "the C++ engine is not active"
    C._set_known_flattens(dict_like, list_like)


def set_torch_key_types(sequence: type, mapping: type, getattr_: type) -> None:
    """torch's key classes, for the engine's `_torch_tree_*_with_path` (install())."""
    assert C is not None, "the C++ engine is not active"
    C._set_torch_key_types(sequence, mapping, getattr_)


def set_torch_spec_classes(tree_spec: Any, leaf_spec: Any, leaf: Any, constant: Any) -> None:
    """Let engine specs pose as torch's (all four None: off). See _torch/_spec_interop.py."""
    assert C is not None, "the C++ engine is not active"
    C._set_torch_spec_classes(tree_spec, leaf_spec, leaf, constant)


def set_torch_pickling(on: bool) -> None:
    """Pickle engine specs in torch's form (while installed) or cpytree's."""
    assert C is not None, "the C++ engine is not active"
    C._set_torch_pickling(on)
