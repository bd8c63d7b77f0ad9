"""Every private torch name cpytree reads, writes or patches: one checked list.

`INVENTORY` is the one list of them. Each row names the part of cpytree
that needs it (`layer`) and, for the Dynamo fast paths, which of them
(`paths`):

* ``registry``: the link between torch's registry and cpytree's
  (`_sync.RegistrySync.attach()`, at `import torch.utils._pytree` in any
  process that imported cpytree). Checked before anything is wrapped: on a
  torch that moved one, cpytree does not follow torch's registry (one
  warning) and install() refuses.
* ``install``: what install() itself reads or swaps (`__init__.py`). The
  swap targets are optional (a missing one is kept as torch's, with its
  reason in status()); a missing required one: install() refuses, one
  warning, torch untouched.
* ``interop``: what the engine's TreeSpec needs to pose as torch's
  (`_spec_interop.py`). Missing: install() runs in spec-free mode, saying why.
* ``watch``: modules cpytree waits for (`_import_watch.py`): never imported
  by cpytree, listed for completeness; a renamed one is simply never seen.
* ``substitute``: make Dynamo see torch's Python original wherever it meets
  one of cpytree's C functions (`dynamo/_substitute.py`). Without these,
  compiled code would meet a C function Dynamo cannot trace: install() is
  undone (one warning).
* ``spec``: make Dynamo see an engine TreeSpec as the equal torch TreeSpec
  (`dynamo/_substitute.py`); as ``substitute``.
* ``trackers``: answer pytree calls at the VariableTracker level instead of
  tracing torch's bodies (`dynamo/_trackers.py` and the modules under it:
  `_fence`, `_walk`, `_build`, `_spec_methods`, `_tree_map`, `_predicates`,
  `_fx_spec`).
  Purely an optimisation, fenced per fast path (`PATHS`): a moved name turns
  off only the paths listed in its row (`paths_off()`), with one warning
  naming them; every other path stays on.

The checks (`missing(layer)`, `paths_off()`) run against the torch that is
loaded, before any code using the names runs: a torch that moved one is
detected at attach()/install() or when install()'s Dynamo part is applied,
never inside a user's compile or `import torch`.

`VERSIONS` names the differences between torch releases that cpytree
branches on; each is an `optional` row of `INVENTORY` (looked up, used when
present; rows of one `group` stand in for each other and one of them is
required).

Kinds of check: ``attr`` is a dotted attribute path from the module
(`getattr` at each step); ``field`` is an instance attribute of a class (the
last name must be assigned in some `__init__` of the class's MRO, or be
annotated on one of its classes), since a class cannot be asked for the
attributes its instances will have.

Loaded by the registry link when torch's pytree module is (so, at
`import cpytree` when torch is loaded): `Name` is a plain class, so the
module compiles nothing at import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["FUNCTION_PATHS", "INVENTORY", "LAYERS", "PATHS", "VERSIONS", "Name", "missing",
           "paths_off"]  # fmt: skip

LAYERS = ("registry", "install", "interop", "watch", "substitute", "spec", "trackers")

# The Dynamo fast paths (the ``trackers`` layer), each with what it answers.
# Every other path builds on "walk": it off, all are off.
PATHS: dict[str, str] = {
    "walk": "tree_leaves and the walk under every fast path (lists, tuples, leaves)",
    "dict": "dict nodes in a walk",
    "namedtuple": "namedtuple nodes in a walk",
    "registered": "registered nodes in a walk (OrderedDict, defaultdict, deque, dataclasses, "
    "custom)",
    "spec_object": "the spec tree_flatten/tree_structure return, and its methods",
    "unflatten": "tree_unflatten and spec.unflatten",
    "key_paths": "tree_flatten_with_path, tree_leaves_with_path",
    "tree_map": "tree_map over registered nodes, spec.flatten_up_to",
    "all_any": "tree_all, tree_any (and _only)",
    "flatten_spec": "torch.fx's tree_flatten_spec",
}

# Paths that need another path on. A constant spec of "spec_object" that
# reaches torch's own traced spec code (tree_unflatten / spec.unflatten,
# flatten_up_to, torch.fx's tree_flatten_spec, their paths off) makes Dynamo
# fail on a namedtuple node (KeyError(namedtuple) from SUPPORTED_NODES, or a
# guard failing on the frame that made it; measured on torch 2.13): no
# constant specs unless every path that reads them is on.
_REQUIRES: dict[str, tuple[str, ...]] = {"spec_object": ("flatten_spec", "unflatten", "tree_map")}

# The fast paths each answered function needs (all of them on, or torch's is traced).
FUNCTION_PATHS: dict[str, tuple[str, ...]] = {
    "tree_leaves": ("walk",),
    "tree_flatten": ("walk", "spec_object"),
    "tree_structure": ("walk", "spec_object"),
    "tree_unflatten": ("walk", "unflatten"),
    "tree_flatten_with_path": ("walk", "key_paths", "spec_object"),
    "tree_leaves_with_path": ("walk", "key_paths"),
    "tree_map": ("walk", "tree_map", "unflatten"),
    "tree_all": ("walk", "all_any"),
    "tree_any": ("walk", "all_any"),
    "tree_all_only": ("walk", "all_any"),
    "tree_any_only": ("walk", "all_any"),
    "tree_flatten_spec": ("walk", "flatten_spec"),
}


class Name:
    """One private torch name cpytree depends on (a plain class: nothing compiled)."""

    __slots__ = ("group", "kind", "layer", "module", "optional", "path", "paths", "use")

    def __init__(
        self,
        module: str,  # the torch module holding it
        path: str,  # dotted attribute path inside the module ("" for the module itself)
        use: str,  # read | call | subclass | write (a table gets entries) | patch (replaced)
        layer: str,  # which of LAYERS needs it
        *,
        paths: str = "",  # (trackers) the PATHS needing it, space-separated
        kind: str = "attr",  # attr | field (see the module docstring)
        optional: bool = False,  # used when present (see VERSIONS)
        group: str = "",  # rows sharing a group stand in for each other
    ) -> None:
        self.module = module
        self.path = path
        self.use = use
        self.layer = layer
        self.paths = tuple(paths.split())
        self.kind = kind
        self.optional = optional
        self.group = group

    def __str__(self) -> str:
        return f"{self.module}.{self.path}" if self.path else self.module

    def __repr__(self) -> str:
        return f"Name({str(self)!r}, {self.layer!r})"


_B = "torch._dynamo.variables.builder"
_F = "torch._dynamo.variables.functions"
_V = "torch._dynamo.variables"
_TP = "torch.utils._pytree"
_G = "torch._dynamo.guards"
_O = "torch._dynamo.output_graph"
_L = "torch._dynamo.variables.lazy"
_CG = "torch._dynamo.codegen"
_FX = "torch.fx._pytree"
_S = "torch._dynamo.source"


def _T(module: str, path: str, use: str, paths: str, **kwargs: Any) -> Name:
    """A row of the ``trackers`` layer, needed by the fast paths `paths`."""
    return Name(module, path, use, "trackers", paths=paths, **kwargs)


# The rows of the layers checked before Dynamo is imported (the registry link
# at `import cpytree`, install()), built at import; the Dynamo layers' rows
# (two thirds of them) are built on first use (`INVENTORY`, `missing()` of a
# Dynamo layer: DynamoHooks once torch._dynamo is imported), so neither
# `import cpytree` nor install() pays for them.
_EARLY_LAYERS = frozenset({"registry", "install", "interop", "watch"})

# fmt: off
_EARLY: tuple[Name, ...] = (
    # --- registry: the link that follows torch's registry (_sync.py, _follow.py)
    Name(_TP, "_private_register_pytree_node", "patch", "registry"),
    Name(_TP, "_deregister_pytree_node", "patch", "registry"),
    Name(_TP, "register_constant", "patch", "registry"),
    Name(_TP, "_NODE_REGISTRY_LOCK", "read", "registry"),
    Name(_TP, "SUPPORTED_NODES", "read", "registry"),
    Name(_TP, "SUPPORTED_SERIALIZED_TYPES", "read", "registry"),
    Name(_TP, "SERIALIZED_TYPE_TO_PYTHON_TYPE", "write", "registry"),
    Name(_TP, "CONSTANT_NODES", "read", "registry"),
    Name(_TP, "BUILTIN_TYPES", "read", "registry"),
    Name(_TP, "NO_SERIALIZED_TYPE_NAME_FOUND", "read", "registry"),
    Name(_TP, "NodeDef.flatten_fn", "read", "registry"),
    Name(_TP, "NodeDef.unflatten_fn", "read", "registry"),
    Name(_TP, "NodeDef.flatten_with_keys_fn", "read", "registry"),
    Name(_TP, "_SerializeNodeDef.serialized_type_name", "read", "registry"),
    Name(_TP, "_SerializeNodeDef.to_dumpable_context", "read", "registry"),
    Name(_TP, "_SerializeNodeDef.from_dumpable_context", "read", "registry"),
    Name(_TP, "ConstantNode", "read", "registry"),  # _follow.py: constants hash by value
    # --- install: install()'s own reads (__init__.py); the swap targets are optional
    Name(_TP, "SequenceKey", "read", "install"),
    Name(_TP, "MappingKey", "read", "install"),
    Name(_TP, "GetAttrKey", "read", "install"),
    Name(_TP, "_dict_flatten", "read", "install", optional=True),  # known flattens
    Name(_TP, "_list_flatten", "read", "install", optional=True),
    Name("torch.fx.immutable_collections", "_immutable_dict_flatten", "read", "install",
         optional=True),
    Name("torch.fx.immutable_collections", "_immutable_list_flatten", "read", "install",
         optional=True),
    Name(_FX, "SUPPORTED_NODES", "read", "install"),
    *(Name(_TP, name, "patch", "install", optional=True) for name in (
        "tree_leaves", "tree_iter", "arg_tree_leaves", "tree_map", "tree_map_", "tree_map_only",
        "tree_map_only_", "tree_flatten", "tree_structure", "tree_unflatten",
        "tree_flatten_with_path", "tree_leaves_with_path")),
    Name(_FX, "tree_flatten_spec", "patch", "install", optional=True),
    # --- interop: the engine's TreeSpec posing as torch's (_spec_interop.py)
    Name(_TP, "TreeSpec", "read", "interop"),
    Name(_TP, "LeafSpec", "read", "interop"),
    Name(_TP, "treespec_leaf", "call", "interop"),
    Name(_TP, "ConstantNode", "read", "interop"),
    Name(_TP, "_LEAF_SPEC", "read", "interop"),
    Name(_TP, "TreeSpec._context", "read", "interop", kind="field"),
    Name(_TP, "TreeSpec._children", "read", "interop", kind="field"),
    # --- watch: modules waited for (_import_watch.py via _follow.py and dynamo/_hooks.py)
    Name(_TP, "", "read", "watch"),
    Name("torch._dynamo", "", "read", "watch"),
)


def _dynamo_rows() -> tuple[Name, ...]:
    """The rows of the Dynamo layers (``substitute``, ``spec``, ``trackers``), in order."""
    return (
    # --- substitute: C function -> torch's original, as Dynamo sees it
    Name("torch._dynamo.trace_rules", "get_torch_obj_rule_map", "write", "substitute"),
    Name(_B, "VariableBuilder._id_dispatch", "write", "substitute"),
    Name(_B, "VariableBuilder.install_guards", "call", "substitute"),
    Name(_B, "VariableBuilder.tx", "read", "substitute", kind="field"),
    Name("torch._dynamo.symbolic_convert", "InstructionTranslatorBase.output", "read",
         "substitute", kind="field"),
    Name(_O, "OutputGraph.install_global_by_id", "call", "substitute"),
    Name(_G, "GuardBuilder.CLOSURE_MATCH", "read", "substitute"),
    Name(_S, "GlobalSource", "call", "substitute"),
    Name(_F, "UserFunctionVariable", "subclass", "substitute"),
    Name(_F, "UserFunctionVariable.create_with_source", "call", "substitute"),
    Name(_F, "UserFunctionVariable._lookup_tree_map_function", "patch", "substitute",
         optional=True),
    # the choke point: a UserFunctionVariable built on a C function (`_make_inlined`)
    Name(_F, "UserFunctionVariable.__init__", "patch", "substitute"),
    # --- spec: an engine TreeSpec reaching traced code is torch's TreeSpec
    Name(_B, "VariableBuilder._type_dispatch_impl", "write", "spec"),
    Name(_B, "SourcelessBuilder._type_handlers", "write", "spec"),
    Name(_B, "SourcelessBuilder.create", "call", "spec"),
    Name(_G, "GuardBuilder.ID_MATCH", "read", "spec"),
    # --- trackers: pytree calls answered from VariableTrackers
    _T(_G, "install_guard", "call", "walk"),
    _T(_G, "GuardBuilder.DICT_KEYS_MATCH", "read", "walk"),
    _T(_F, "get_pytree_SUPPORTED_NODES_source", "call", "walk"),
    _T(_V, "VariableTracker.build", "call", "walk"),
    _T(_V, "VariableTracker.realize", "call", "walk"),
    _T(_V, "VariableTracker.python_type", "call", "walk"),
    _T(_V, "VariableTracker.is_python_constant", "call", "walk"),
    _T(_V, "VariableTracker.as_python_constant", "call", "walk"),
    _T(_V, "VariableTracker.is_constant_none", "call", "walk"),
    _T(_V, "VariableTracker.call_function", "call", "walk"),
    _T(_V, "ConstantVariable.create", "call", "all_any spec_object unflatten"),
    _T(_V, "ConstantVariable.is_literal", "call", "unflatten key_paths"),
    _T(_V, "ListVariable", "call", "walk"),
    _T(_V, "ListVariable.items", "read", "walk", kind="field"),
    _T(_V, "TupleVariable", "call", "walk"),
    _T(_V, "NamedTupleVariable", "read", "namedtuple"),
    _T(_V, "NamedTupleVariable.tuple_cls", "read", "namedtuple", kind="field"),
    # a property over the wrapped TupleVariable (2.13/2.14), an instance field (2.15)
    _T(_V, "NamedTupleVariable.items", "read", "namedtuple", optional=True, group="nt-items"),
    _T(_V, "NamedTupleVariable.items", "read", "namedtuple", kind="field", optional=True,
         group="nt-items"),
    _T(_V, "ConstDictVariable", "call", "dict"),
    _T(_V, "ConstDictVariable.items", "read", "dict", kind="field"),
    _T(_V, "ConstDictVariable.install_dict_keys_match_guard", "call", "dict"),
    # a dict key's tracker: a module of its own (2.12+), nested in ConstDictVariable (2.10-2.11)
    _T("torch._dynamo.variables.hashable", "HashableTracker.vt", "read", "dict", kind="field",
       optional=True, group="hashable-vt"),
    _T("torch._dynamo.variables.dicts", "ConstDictVariable._HashableTracker.vt", "read", "dict",
       kind="field", optional=True, group="hashable-vt"),
    # a defaultdict tracker's factory, read where its traced getattr is not answered (2.10)
    _T(_V, "DefaultDictVariable.default_factory", "read", "dict", kind="field", optional=True),
    # whether torch's own tree_map rebuilds a defaultdict as a dict (2.15: one reconstruct)
    _T(_V, "DefaultDictVariable.reconstruct", "read", "tree_map", optional=True),
    _T(_V, "ConstDictVariable.reconstruct", "read", "tree_map", optional=True),
    _T(_V, "UserDefinedObjectVariable", "subclass", "spec_object flatten_spec"),
    _T(_V, "UserDefinedObjectVariable.var_getattr", "patch", "spec_object", optional=True,
         group="getattr"),
    _T(_V, "UserDefinedObjectVariable.call_method", "call", "spec_object"),
    # overridden: the spec is a constant, as torch's frozen-dataclass tracker of it is
    _T(_V, "UserDefinedObjectVariable.as_python_constant", "patch", "spec_object"),
    _T(_V, "UserDefinedObjectVariable.is_python_constant", "patch", "spec_object"),
    _T(_V, "UserDefinedObjectVariable.tp_getattro_impl", "patch", "spec_object", optional=True,
         group="getattr"),
    _T(_V, "UserFunctionVariable.call_function", "patch", "walk"),
    _T("torch._dynamo.variables.base", "ValueMutationNew", "call", "walk"),
    _T(_L, "LazyVariableTracker.is_realized", "call", "tree_map"),
    _T(_L, "LazyVariableTracker.peek_type", "call", "tree_map"),
    _T(_O, "OutputGraph.guard_on_key_order", "write", "dict flatten_spec",
         kind="field"),
    _T(_CG, "PyCodegen.append_output", "call", "spec_object"),
    _T(_CG, "PyCodegen.create_load_global", "call", "spec_object"),
    _T(_TP, "SUPPORTED_NODES", "read", "walk"),
    _T(_TP, "TreeSpec", "call", "walk"),
    _T(_TP, "treespec_leaf", "call", "walk"),
    _T(_TP, "is_namedtuple_class", "call", "walk"),
    _T(_TP, "SequenceKey", "call", "key_paths"),
    _T(_TP, "MappingKey", "call", "key_paths"),
    _T(_TP, "GetAttrKey", "call", "key_paths"),
    _T(_TP, "NodeDef.flatten_fn", "read", "registered"),
    _T(_TP, "NodeDef.unflatten_fn", "read", "registered"),
    _T(_TP, "NodeDef.flatten_with_keys_fn", "read", "key_paths"),
    # key entries derived from the context for these (matched by name)
    _T(_TP, "_dict_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "_ordereddict_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "_defaultdict_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "_deque_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "_list_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "_tuple_flatten_with_keys", "read", "key_paths"),
    _T(_TP, "register_dataclass", "read", "key_paths"),  # its _flatten_fn_with_keys
    _T(_S, "GlobalSource", "call", "registered key_paths"),  # key classes on 2.10-2.11
    _T(_B, "VariableBuilder", "call", "registered key_paths"),
    _T(_O, "OutputGraph.install_global_by_id", "call", "registered spec_object key_paths"),
    _T("torch._guards", "Source.make_guard", "call", "walk"),
    _T(_V, "VariableTracker.source", "read", "dict flatten_spec", kind="field"),
    _T(_V, "UserDefinedObjectVariable.value", "read", "spec_object flatten_spec unflatten",
       kind="field"),
    # tree_all / tree_any (isinstance of the _only forms), tree_flatten_spec's reads
    _T(_V, "BuiltinVariable", "call", "all_any flatten_spec tree_map"),
    _T("torch._dynamo.exc", "Unsupported", "read", "flatten_spec"),
    _T(_V, "VariableTracker.unpack_var_sequence", "call", "flatten_spec"),
    _T(_S, "AttrSource", "call", "flatten_spec"),
    # the source of `torch` (torch.fx's registry is reached through it)
    _T(_S, "ImportSource", "call", "flatten_spec", optional=True, group="torch-source"),
    _T(_S, "TorchSource", "call", "flatten_spec", optional=True, group="torch-source"),
    _T(_FX, "SUPPORTED_NODES", "read", "flatten_spec"),
    _T(_FX, "_dict_flatten_spec", "read", "flatten_spec"),
    _T(_FX, "_list_flatten_spec", "read", "flatten_spec"),
    _T(_FX, "_tuple_flatten_spec", "read", "flatten_spec"),
    _T(_FX, "_namedtuple_flatten_spec", "read", "flatten_spec"),
    # whether inlining a call realizes its first argument (2.10-2.11: torch.fx's walk
    # realizes every node, and the fast path does too)
    _T("torch._dynamo.symbolic_convert", "InliningInstructionTranslator.build_inline_tracer",
       "read", "flatten_spec", optional=True),
    # its checks are reproduced by _up_to
    _T(_TP, "TreeSpec.flatten_up_to", "call", "tree_map spec_object"),
    _T(_TP, "TreeSpec.children", "call", "unflatten tree_map flatten_spec spec_object"),
    _T(_TP, "TreeSpec.child", "call", "spec_object"),
    _T(_TP, "TreeSpec.is_leaf", "call", "unflatten tree_map flatten_spec spec_object"),
    _T(_TP, "TreeSpec.type", "read", "unflatten tree_map flatten_spec", kind="field"),
    _T(_TP, "TreeSpec.num_children", "read", "tree_map flatten_spec spec_object", kind="field"),
    _T(_TP, "TreeSpec.context", "read", "unflatten tree_map flatten_spec"),
    _T(_G, "GuardBuilder.ID_MATCH", "read", "flatten_spec"),  # _known_spec
    )
# fmt: on


# INVENTORY: every row, the early layers' first (built on first use: `_load`).
if TYPE_CHECKING:
    INVENTORY: tuple[Name, ...]
else:  # a module __getattr__ would make every name valid to mypy

    def __getattr__(name: str) -> Any:
        if name == "INVENTORY":
            return _load()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load() -> tuple[Name, ...]:
    """INVENTORY, built once (a race builds it twice; the first one stored stays)."""
    inventory: tuple[Name, ...] = globals().setdefault("INVENTORY", _EARLY + _dynamo_rows())
    return inventory


# The differences between torch releases cpytree branches on: (name, its
# state in each of RELEASES, what cpytree does). Each is an optional row.
# RELEASES: the major.minor of each supported release, written out (this
# module loads at `import cpytree`; cpytree._releases need not):
# tests/python/test_releases.py checks it against cpytree._releases and that
# every row has a column per release.
RELEASES = ("2.10", "2.11", "2.12", "2.13", "2.14", "2.15")
_HT = "torch._dynamo.variables"
VERSIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (f"{_V}.UserDefinedObjectVariable.var_getattr",
     ("present", "present", "present", "present", "absent", "absent"),
     "attribute reads of a spec made by a fast path go through it (spec.unflatten)"),
    (f"{_V}.UserDefinedObjectVariable.tp_getattro_impl",
     ("absent", "absent", "absent", "absent", "present", "present"),
     "attribute reads of a spec made by a fast path go through it (spec.unflatten)"),
    (f"{_F}.UserFunctionVariable._lookup_tree_map_function",
     ("present", "present", "present", "present", "present", "present"),
     "patched: tree_map_only is rewritten into torch's tree_map, not the C one"),
    (f"{_V}.NamedTupleVariable.items",
     ("instance field", "class property", "class property", "class property", "class property",
      "instance field"),
     "read either way: the items of the namedtuple's tracker (2.15: it is a TupleVariable)"),
    (f"{_HT}.hashable.HashableTracker.vt",
     ("absent", "absent", "present", "present", "present", "present"),
     "a dict key's tracker: `key.vt` read either way (2.10-2.11: in dicts.py)"),
    (f"{_HT}.dicts.ConstDictVariable._HashableTracker.vt",
     ("present", "present", "absent", "absent", "absent", "absent"),
     "a dict key's tracker: `key.vt` read either way (2.12+: in hashable.py)"),
    (f"{_V}.DefaultDictVariable.default_factory",
     ("present", "present", "present", "present", "present", "present"),
     "a defaultdict's factory: read from the field on 2.10, whose tracker answers no traced "
     "getattr of it (2.11+: the getattr returns this field)"),
    (f"{_V}.DefaultDictVariable.reconstruct",
     ("present", "present", "present", "present", "present", "present"),
     "its own on 2.10-2.14 (torch's tree_map over a defaultdict is right: left to torch); "
     "2.15 inherits ConstDictVariable's (torch's is a plain dict: cpytree answers it)"),
    ("torch._dynamo.symbolic_convert.InliningInstructionTranslator.build_inline_tracer",
     ("present", "present", "present", "present", "present", "present"),
     "2.10-2.11 realize the first argument of every inlined call (no `peek_type` in its "
     "code): tree_flatten_spec's fast path realizes each node as tracing torch.fx's "
     "recursion does, so the graph's inputs come in torch's order; 2.12+ leave it lazy"),
    (f"{_S}.ImportSource",
     ("absent", "present", "present", "present", "present", "present"),
     "the source of `torch` for the guard on torch.fx's registry"),
    (f"{_S}.TorchSource",
     ("present", "absent", "absent", "absent", "absent", "absent"),
     "the source of `torch` for the guard on torch.fx's registry (2.10)"),
)  # fmt: skip

# How a module is found (a test swaps it to show the check a drifted torch).
import_module: Callable[[str], ModuleType] = importlib.import_module

_ABSENT = object()


def _has_field(cls: Any, field: str) -> bool:
    for klass in getattr(cls, "__mro__", ()):
        if field in getattr(klass, "__annotations__", {}):
            return True
        init = vars(klass).get("__init__")
        code = getattr(init, "__code__", None)
        if code is not None and field in code.co_names:
            return True
    return False


def present(name: Name, modules: dict[str, Any] | None = None) -> bool:
    """Whether the loaded torch has `name` (its module is imported to look).

    `modules` (module name -> module, or None when it cannot be imported)
    caches the imports across the rows of one check: most rows share a module.
    """
    if modules is None:
        modules = {}
    obj: Any = modules.get(name.module, _ABSENT)
    if obj is _ABSENT:
        try:
            obj = import_module(name.module)
        except ImportError:
            obj = None
        modules[name.module] = obj
    if obj is None:
        return False
    parts = name.path.split(".") if name.path else []
    field = ""
    if name.kind == "field":
        parts, field = parts[:-1], parts[-1]
    for part in parts:
        obj = getattr(obj, part, _ABSENT)
        if obj is _ABSENT:
            return False
    return name.kind != "field" or _has_field(obj, field)


_present = present  # the name tests used


def lookup(module: str, path: str) -> Any:
    """The object at `module`.`path`, or None (for the optional names of VERSIONS)."""
    obj: Any = import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _gone(rows: list[Name]) -> list[Name]:
    """The required rows absent, and every row of a group none of whose rows is present."""
    modules: dict[str, Any] = {}
    gone = [n for n in rows if not n.optional and not present(n, modules)]
    for group in sorted({n.group for n in rows if n.group}):
        members = [n for n in rows if n.group == group]
        if not any(present(n, modules) for n in members):
            gone.extend(members)
    return gone


def missing(layer: str) -> list[Name]:
    """The required names of `layer` the loaded torch lacks (empty: the layer can apply).

    A group is missing (all its rows listed) when none of its rows is present.
    """
    rows = globals().get("INVENTORY")
    if rows is None:  # not built yet: the early layers need only their own rows
        rows = _EARLY if layer in _EARLY_LAYERS else _load()
    return _gone([n for n in rows if n.layer == layer])


def paths_off() -> dict[str, list[Name]]:
    """The fast paths the loaded torch cannot run: path -> the names it lacks.

    A moved name turns off the paths of its row, and those that need them
    (`_REQUIRES`); "walk" off turns off all.
    """
    off: dict[str, list[Name]] = {}
    for name in missing("trackers"):
        for path in name.paths:
            off.setdefault(path, []).append(name)
    for path, needs in _REQUIRES.items():
        for need in needs:
            if need in off and path not in off:
                off[path] = off[need]
    if "walk" in off:
        for path in PATHS:
            off.setdefault(path, off["walk"])
    return off
