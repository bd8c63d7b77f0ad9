"""cpytree: a C++ pytree engine with the API of ``torch.utils._pytree``.

Use it as a drop-in::

    import cpytree as pytree

    leaves, spec = pytree.tree_flatten({"a": [1, 2], "b": (3, None)})
    pytree.tree_unflatten(leaves, spec)

The hot functions (``tree_flatten``, ``tree_leaves``, ``tree_structure``,
``tree_unflatten``, ``tree_map``, ``tree_map_``, ``tree_is_leaf``) are C
functions of the extension ``cpytree._C`` bound here directly. When the
extension cannot be imported, the pure-Python reference implementation
(``cpytree._reference``, same semantics) is used instead, with a warning.

Every name of torch's module is here (``__all__`` and the module-level names
libraries import). The registry, key entries and serialization are shared
with the reference; ``treespec_loads``, ``treespec_tuple``/``treespec_dict``
and ``LeafSpec()`` give this module's TreeSpec (the C++ one when active).
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from . import _engine, _names, _registry
from ._derived import bind, map_only as map_only

# Every name's home is in the one table, cpytree._names; the imports below
# and the TYPE_CHECKING block are what type checkers see of it, and
# tests/python/test_names.py checks them against the table. Shared with the
# reference (`_names.SHARED`): the registry and node types; key entries and
# serialization are loaded on first use (`_names.LAZY`).
from ._nodes import (
    BUILTIN_TYPES as BUILTIN_TYPES,
    STANDARD_DICT_TYPES as STANDARD_DICT_TYPES,
    Py_TPFLAGS_BASETYPE as Py_TPFLAGS_BASETYPE,
    _defaultdict_deserialize as _defaultdict_deserialize,
    _defaultdict_flatten as _defaultdict_flatten,
    _defaultdict_flatten_with_keys as _defaultdict_flatten_with_keys,
    _defaultdict_serialize as _defaultdict_serialize,
    _defaultdict_unflatten as _defaultdict_unflatten,
    _deque_flatten as _deque_flatten,
    _deque_flatten_with_keys as _deque_flatten_with_keys,
    _deque_unflatten as _deque_unflatten,
    _dict_flatten as _dict_flatten,
    _dict_flatten_with_keys as _dict_flatten_with_keys,
    _dict_unflatten as _dict_unflatten,
    _get_node_type as _get_node_type,
    _is_namedtuple_instance as _is_namedtuple_instance,
    _list_flatten as _list_flatten,
    _list_flatten_with_keys as _list_flatten_with_keys,
    _list_unflatten as _list_unflatten,
    _namedtuple_deserialize as _namedtuple_deserialize,
    _namedtuple_flatten as _namedtuple_flatten,
    _namedtuple_flatten_with_keys as _namedtuple_flatten_with_keys,
    _namedtuple_serialize as _namedtuple_serialize,
    _namedtuple_unflatten as _namedtuple_unflatten,
    _odict_flatten as _odict_flatten,
    _odict_unflatten as _odict_unflatten,
    _ordereddict_flatten as _ordereddict_flatten,
    _ordereddict_flatten_with_keys as _ordereddict_flatten_with_keys,
    _ordereddict_unflatten as _ordereddict_unflatten,
    _register_namedtuple as _register_namedtuple,
    _tuple_flatten as _tuple_flatten,
    _tuple_flatten_with_keys as _tuple_flatten_with_keys,
    _tuple_unflatten as _tuple_unflatten,
    is_namedtuple as is_namedtuple,
    is_namedtuple_class as is_namedtuple_class,
    is_namedtuple_instance as is_namedtuple_instance,
    is_structseq as is_structseq,
    is_structseq_class as is_structseq_class,
    is_structseq_instance as is_structseq_instance,
    structseq as structseq,
)
from ._registry import (
    _REGISTRATION_HOOKS as _REGISTRATION_HOOKS,
    CONSTANT_NODES as CONSTANT_NODES,
    NO_SERIALIZED_TYPE_NAME_FOUND as NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE as SERIALIZED_TYPE_TO_PYTHON_TYPE,
    SUPPORTED_NODES as SUPPORTED_NODES,
    SUPPORTED_SERIALIZED_TYPES as SUPPORTED_SERIALIZED_TYPES,
    ConstantNode as ConstantNode,
    Context as Context,
    DumpableContext as DumpableContext,
    FlattenFn as FlattenFn,
    FlattenFunc as FlattenFunc,
    FlattenWithKeysFn as FlattenWithKeysFn,
    FlattenWithKeysFunc as FlattenWithKeysFunc,
    FromDumpableContextFn as FromDumpableContextFn,
    MaybeFromStrFunc as MaybeFromStrFunc,
    NodeDef as NodeDef,
    PyTree as PyTree,
    ToDumpableContextFn as ToDumpableContextFn,
    ToStrFunc as ToStrFunc,
    TypeAny as TypeAny,
    UnflattenFn as UnflattenFn,
    UnflattenFunc as UnflattenFunc,
    _deregister_pytree_node as _deregister_pytree_node,
    _private_register_pytree_node as _private_register_pytree_node,
    _register_pytree_node as _register_pytree_node,
    _SerializeNodeDef as _SerializeNodeDef,
    is_constant_class as is_constant_class,
    register_constant as register_constant,
    register_dataclass as register_dataclass,
    register_pytree_node as register_pytree_node,
)

# As torch's `__all__` (`from cpytree import *` gives what torch's module gives),
# plus the key entry classes.
__all__ = list(_names.PUBLIC)

# `_names.LAZY` is loaded on first use, so `import cpytree` does not pay for
# it; so is `__version__`, written once in include/cpytree/version.h and
# carried by the package's metadata (pyproject.toml reads the header).
_LAZY_LOCK = threading.Lock()
__version__: str
if TYPE_CHECKING:
    from . import _reference as _reference, _serialization as _serialization
    from ._keys import (
        GetAttrKey as GetAttrKey,
        KeyEntry as KeyEntry,
        KeyPath as KeyPath,
        MappingKey as MappingKey,
        SequenceKey as SequenceKey,
    )
    from ._reference import (
        _generate_key_paths as _generate_key_paths,
        _is_constant_holder as _is_constant_holder,
        _retrieve_constant as _retrieve_constant,
    )
    from ._registry import _NODE_REGISTRY_LOCK as _NODE_REGISTRY_LOCK  # `_names.LIVE`
    from ._serialization import (
        DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL as DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL,
        EnumEncoder as EnumEncoder,
        _asterisk as _asterisk,
        _treespec_to_json as _treespec_to_json,
        _TreeSpecSchema as _TreeSpecSchema,
        enum_object_hook as enum_object_hook,
        pytree_to_str as pytree_to_str,
        treespec_dumps as treespec_dumps,  # the engine's when active
        treespec_pprint as treespec_pprint,
    )

    def treespec_loads(serialized: str) -> TreeSpec: ...
    def str_to_pytree(json: str) -> TreeSpec: ...  # noqa: A002 (torch's parameter name)

else:  # a module __getattr__ would make every name valid to mypy

    def __getattr__(name: str) -> Any:
        if name == "__version__":
            global __version__
            __version__ = _version()
            return __version__
        if name in _names.LIVE:  # never bound here: read where it lives
            return getattr(_registry, name)
        home = _names.LAZY_HOME.get(name)
        if home == "_serialization":
            return _load_serialization()[name]
        if home is not None or name == "_reference":
            import importlib

            module = importlib.import_module(f"{__name__}.{home or name}")
            if home is None:
                return module
            value = getattr(module, name)
            globals()[name] = value
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_names.LAZY_HOME, *_names.LIVE})


def _load_serialization() -> dict[str, Any]:
    """Binds this module's serialization names (once) and returns the globals."""
    g = globals()
    with _LAZY_LOCK:
        if "treespec_loads" not in g:
            from . import _serialization

            for name in set(_names.LAZY["_serialization"]) - {"treespec_loads", "str_to_pytree"}:
                g[name] = getattr(_serialization, name)
            # treespec_loads is cached as torch's is; its __wrapped__ is the
            # uncached function (the engine's when active, which hands what
            # it does not take natively to the reference).
            g["treespec_loads"], g["str_to_pytree"] = _serialization.bind_loads(
                TreeSpec, _LEAF_SPEC, __name__, _C.treespec_loads if _C is not None else None
            )
            if _C is not None:  # the engine's dumps/loads need no import from now on
                _engine.set_serialization(_serialization.engine_state(_reference_loads))
    return g


def _version() -> str:
    """The installed distribution's version, else the one in the shipped header."""
    import importlib.metadata
    import os
    import re

    try:
        return importlib.metadata.version("cpytree")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
        header = os.path.join(os.path.dirname(__file__), "include", "cpytree", "version.h")
        try:
            with open(header) as f:
                parts = re.findall(r"^#define CPYTREE_VERSION_\w+ (\d+)$", f.read(), re.M)
        except OSError:
            parts = []
        return ".".join(parts) if len(parts) == 3 else "0+unknown"


# The engine (or None: the reference-only mode), owned by cpytree._engine.
_C = _engine.C

#: "cpp" when the C++ engine is active, "python" for the reference fallback.
ENGINE = "cpp" if _C is not None else "python"

# `_names.ENGINE`: the engine's functions, else the reference's (one branch).
if _C is not None:
    from ._C import (
        TreeSpec as TreeSpec,
        arg_tree_leaves as arg_tree_leaves,
        key_get as key_get,
        keystr as keystr,
        tree_flatten as tree_flatten,
        tree_flatten_with_path as tree_flatten_with_path,
        tree_is_leaf as tree_is_leaf,
        tree_iter as tree_iter,  # lazy, in C: nodes are visited as leaves are consumed
        tree_leaves as tree_leaves,
        tree_leaves_with_path as tree_leaves_with_path,
        tree_map as tree_map,
        tree_map_ as tree_map_,
        tree_map_only as tree_map_only,  # the type filter checked in C
        tree_map_only_ as tree_map_only_,
        tree_map_with_path as tree_map_with_path,
        tree_structure as tree_structure,
        tree_unflatten as tree_unflatten,
        # the engine's dumps/loads (src/spec_model/serialize.h) hand what they do not
        # take natively to the reference (bound on first use: _load_serialization)
        treespec_dumps as treespec_dumps,
    )

    _LEAF_SPEC = _C._LEAF_SPEC

    class _LeafSpecMeta(type):
        """Makes `isinstance(spec, LeafSpec)` mean "a TreeSpec that is a leaf"."""

        def __instancecheck__(cls, instance: Any) -> bool:
            return isinstance(instance, TreeSpec) and instance.is_leaf()

    class LeafSpec(metaclass=_LeafSpecMeta):
        """Deprecated, as in torch: `LeafSpec()` is the leaf spec (FutureWarning).

        The engine has one spec class, so this is no subclass of TreeSpec:
        `LeafSpec()` returns the interned leaf spec `treespec_leaf()`, and
        `isinstance(spec, LeafSpec)` is `isinstance(spec, TreeSpec) and spec.is_leaf()`.
        """

        __slots__ = ()

        def __new__(cls) -> TreeSpec:  # type: ignore[misc]
            warnings.warn(
                "`isinstance(treespec, LeafSpec)` is deprecated, "
                "use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.",
                FutureWarning,
                stacklevel=2,
            )
            return _LEAF_SPEC

        def __init_subclass__(cls, **kwargs: Any) -> None:
            raise TypeError("cpytree.LeafSpec cannot be subclassed")

else:
    from ._keys import key_get as key_get, keystr as keystr  # loads the key classes
    from ._reference import (
        LeafSpec as LeafSpec,
        TreeSpec as TreeSpec,
        arg_tree_leaves as arg_tree_leaves,
        tree_flatten as tree_flatten,
        tree_flatten_with_path as tree_flatten_with_path,
        tree_is_leaf as tree_is_leaf,
        tree_iter as tree_iter,
        tree_leaves as tree_leaves,
        tree_leaves_with_path as tree_leaves_with_path,
        tree_map as tree_map,
        tree_map_ as tree_map_,
        tree_map_only as tree_map_only,
        tree_map_only_ as tree_map_only_,
        tree_map_with_path as tree_map_with_path,
        tree_structure as tree_structure,
        tree_unflatten as tree_unflatten,
        treespec_leaf as _reference_leaf,
    )
    from ._serialization import treespec_dumps as treespec_dumps

    _LEAF_SPEC = _reference_leaf()

PyTreeSpec = TreeSpec


def _reference_loads(serialized: str) -> TreeSpec:
    """The pure-Python treespec_loads, uncached, building this module's specs."""
    # No import statement here, even of a loaded module (loads imports
    # nothing): _serialization is this package's attribute once loaded, and
    # this runs only after _load_serialization.
    return cast(TreeSpec, _serialization._loads_uncached(serialized, TreeSpec, _LEAF_SPEC))


def _engine_serialization_state() -> tuple[Any, ...]:
    """What the engine's dumps/loads need; it calls this on its first use."""
    _load_serialization()
    return _serialization.engine_state(_reference_loads)


if _C is not None:  # the registry mirror and the engine's loaders (cpytree._engine)
    _engine.connect(frozenset({tuple, list, dict, *BUILTIN_TYPES}), _engine_serialization_state)
else:
    _load_serialization()


def treespec_leaf() -> TreeSpec:
    """The spec of a single leaf."""
    return _LEAF_SPEC


# The derived helpers (tree_all, treespec_tuple, ...) are defined once, in
# cpytree._derived; here they are bound to this module's TreeSpec and
# traversals (the engine's when active), in the reference to its.
_derived = bind(__name__, TreeSpec, tree_iter, tree_map, tree_map_, tree_structure, tree_unflatten)
tree_all = _derived.tree_all
tree_any = _derived.tree_any
tree_all_only = _derived.tree_all_only
tree_any_only = _derived.tree_any_only
treespec_tuple = _derived.treespec_tuple
treespec_dict = _derived.treespec_dict
_broadcast_to_and_flatten = _derived.broadcast_to_and_flatten


def _is_pytreespec_instance(obj: Any) -> bool:
    return isinstance(obj, TreeSpec)


def _is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Deprecated (FutureWarning): `tree_is_leaf`, as torch keeps it."""
    warnings.warn(
        "cpytree._is_leaf is private and will be removed in a future release. "
        "Please use cpytree.tree_is_leaf instead.",
        FutureWarning,
        stacklevel=2,
    )
    return tree_is_leaf(tree, is_leaf=is_leaf)


# torch integration. Below this face, `_torch_link`: torch's registrations
# count here too from now on, without install(). Above it, `_torch`, loaded by
# the first install() / status(), which is handed this module: install() and
# uninstall() swap torch's pytree functions for this module's. `import torch`
# installs (the entry point `_cpytree_autoload` imports this module and hands it
# to _torch/_autoload.py); CPYTREE_INSTALL=1 also installs at `import cpytree`.
from ._torch_link import (  # noqa: E402
    follow_torch_registry as _follow_torch_registry,
    install_at_import as _install_at_import,
)


def install(*, rebind_imports: bool = True) -> None:
    """Make torch's pytree functions cpytree's C++ ones (docs/torch_install.md).

    Idempotent: a second call while installed does nothing. With the
    pure-Python fallback engine there is nothing to gain, so install() warns
    and leaves torch alone. Raises ImportError when torch is not installed.
    """
    # `from ._torch import ...`, not `from . import _torch`: the latter asks this
    # module's __getattr__ for `_torch` first (a miss, then the import).
    from ._torch import install as install_torch

    install_torch(sys.modules[__name__], rebind_imports=rebind_imports)


def uninstall() -> None:
    """Undo install() exactly (a no-op when not installed)."""
    torch_room = sys.modules.get(f"{__name__}._torch")  # not loaded: never installed
    if torch_room is not None:
        torch_room.uninstall()


def is_installed() -> bool:
    """Whether install() is in effect."""
    torch_room = sys.modules.get(f"{__name__}._torch")
    return torch_room is not None and bool(torch_room.is_installed())


def status() -> dict[str, Any]:
    """What cpytree does to the loaded torch (never imports torch; docs/torch_install.md)."""
    from ._torch import status as torch_status

    return torch_status()


_follow_torch_registry(frozenset(BUILTIN_TYPES))
_install_at_import(install)
