"""Every private torch name the Dynamo adapter reads, writes or patches.

`INVENTORY` is the one list of them, grouped by the layer that needs them:

* ``substitute``: make Dynamo see torch's Python original wherever it meets
  one of cpytree's C functions (`_substitute.py`). Without these, compiled
  code would meet a C function Dynamo cannot trace.
* ``spec``: make Dynamo see an engine TreeSpec as the equal torch TreeSpec
  (`_substitute.py`).
* ``trackers``: answer pytree calls at the VariableTracker level instead of
  tracing torch's bodies (`_trackers.py`, `_predicates.py`). Purely an
  optimisation.

`missing(layer)` checks a layer's names against the torch that is loaded,
before any of that layer's code is imported: a torch that moved one is
detected when install()'s Dynamo part is applied, never inside a user's
compile. `DynamoHooks` (`_hooks.py`) then leaves that layer out and warns
once, naming what moved.

`VERSIONS` names the differences between the torch releases cpytree was
tested with that the adapter branches on; each is an `optional` row of
`INVENTORY` (looked up, used when present; rows of one `group` stand in for
each other and one of them is required).

Kinds of check: ``attr`` is a dotted attribute path from the module
(`getattr` at each step); ``field`` is an instance attribute of a class (the
last name must be assigned in some `__init__` of the class's MRO, or be
annotated on one of its classes), since a class cannot be asked for the
attributes its instances will have.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["INVENTORY", "LAYERS", "VERSIONS", "Name", "missing"]

LAYERS = ("substitute", "spec", "trackers")


@dataclasses.dataclass(frozen=True)
class Name:
    """One private torch name the adapter depends on."""

    module: str  # the torch module holding it
    path: str  # dotted attribute path inside the module
    use: str  # read | call | subclass | write (a table gets entries) | patch (replaced)
    layer: str  # which of LAYERS needs it
    kind: str = "attr"  # attr | field (see the module docstring)
    optional: bool = False  # present in some tested versions only (see VERSIONS)
    # rows sharing a group stand in for each other: the check needs one of them
    group: str = ""

    def __str__(self) -> str:
        return f"{self.module}.{self.path}"


_B = "torch._dynamo.variables.builder"
_F = "torch._dynamo.variables.functions"
_V = "torch._dynamo.variables"
_TP = "torch.utils._pytree"

# fmt: off
INVENTORY: tuple[Name, ...] = (
    # --- substitute: C function -> torch's original, as Dynamo sees it
    Name("torch._dynamo.trace_rules", "get_torch_obj_rule_map", "write", "substitute"),
    Name(_B, "VariableBuilder._id_dispatch", "write", "substitute"),
    Name(_B, "VariableBuilder.install_guards", "call", "substitute"),
    Name(_B, "VariableBuilder.tx", "read", "substitute", kind="field"),
    Name("torch._dynamo.symbolic_convert", "InstructionTranslatorBase.output", "read",
         "substitute", kind="field"),
    Name("torch._dynamo.output_graph", "OutputGraph.install_global_by_id", "call", "substitute"),
    Name("torch._dynamo.guards", "GuardBuilder.CLOSURE_MATCH", "read", "substitute"),
    Name("torch._dynamo.source", "GlobalSource", "call", "substitute"),
    Name(_F, "UserFunctionVariable", "subclass", "substitute"),
    Name(_F, "UserFunctionVariable.create_with_source", "call", "substitute"),
    Name(_F, "UserFunctionVariable._lookup_tree_map_function", "patch", "substitute",
         optional=True),
    # --- spec: an engine TreeSpec reaching traced code is torch's TreeSpec
    Name(_B, "VariableBuilder._type_dispatch_impl", "write", "spec"),
    Name(_B, "SourcelessBuilder._type_handlers", "write", "spec"),
    Name(_B, "SourcelessBuilder.create", "call", "spec"),
    Name("torch._dynamo.guards", "GuardBuilder.ID_MATCH", "read", "spec"),
    # --- trackers: pytree calls answered from VariableTrackers
    Name("torch._dynamo.guards", "install_guard", "call", "trackers"),
    Name("torch._dynamo.guards", "GuardBuilder.DICT_KEYS_MATCH", "read", "trackers"),
    Name(_F, "get_pytree_SUPPORTED_NODES_source", "call", "trackers"),
    Name(_V, "VariableTracker.build", "call", "trackers"),
    Name(_V, "VariableTracker.realize", "call", "trackers"),
    Name(_V, "VariableTracker.python_type", "call", "trackers"),
    Name(_V, "VariableTracker.is_python_constant", "call", "trackers"),
    Name(_V, "VariableTracker.as_python_constant", "call", "trackers"),
    Name(_V, "VariableTracker.is_constant_none", "call", "trackers"),
    Name(_V, "VariableTracker.call_function", "call", "trackers"),
    Name(_V, "ConstantVariable.create", "call", "trackers"),
    Name(_V, "ConstantVariable.is_literal", "call", "trackers"),
    Name(_V, "ListVariable", "call", "trackers"),
    Name(_V, "ListVariable.items", "read", "trackers", kind="field"),
    Name(_V, "TupleVariable", "call", "trackers"),
    Name(_V, "NamedTupleVariable", "read", "trackers"),
    Name(_V, "NamedTupleVariable.tuple_cls", "read", "trackers", kind="field"),
    # a property over the wrapped TupleVariable (2.13/2.14), an instance field (2.15)
    Name(_V, "NamedTupleVariable.items", "read", "trackers", optional=True, group="nt-items"),
    Name(_V, "NamedTupleVariable.items", "read", "trackers", kind="field", optional=True,
         group="nt-items"),
    Name(_V, "ConstDictVariable", "call", "trackers"),
    Name(_V, "ConstDictVariable.items", "read", "trackers", kind="field"),
    Name(_V, "ConstDictVariable.install_dict_keys_match_guard", "call", "trackers"),
    Name("torch._dynamo.variables.hashable", "HashableTracker.vt", "read", "trackers",
         kind="field"),
    Name(_V, "UserDefinedObjectVariable", "subclass", "trackers"),
    Name(_V, "UserDefinedObjectVariable.var_getattr", "patch", "trackers", optional=True,
         group="getattr"),
    Name(_V, "UserDefinedObjectVariable.call_method", "call", "trackers"),
    Name(_V, "UserDefinedObjectVariable.tp_getattro_impl", "patch", "trackers", optional=True,
         group="getattr"),
    Name(_V, "UserFunctionVariable.call_function", "patch", "trackers"),
    Name("torch._dynamo.variables.base", "ValueMutationNew", "call", "trackers"),
    Name("torch._dynamo.variables.lazy", "LazyVariableTracker.is_realized", "call", "trackers"),
    Name("torch._dynamo.variables.lazy", "LazyVariableTracker.peek_type", "call", "trackers"),
    Name("torch._dynamo.output_graph", "OutputGraph.guard_on_key_order", "write", "trackers",
         kind="field"),
    Name("torch._dynamo.codegen", "PyCodegen.append_output", "call", "trackers"),
    Name("torch._dynamo.codegen", "PyCodegen.create_load_global", "call", "trackers"),
    Name(_TP, "SUPPORTED_NODES", "read", "trackers"),
    Name(_TP, "TreeSpec", "call", "trackers"),
    Name(_TP, "treespec_leaf", "call", "trackers"),
    Name(_TP, "is_namedtuple_class", "call", "trackers"),
    Name(_TP, "SequenceKey", "call", "trackers"),
    Name(_TP, "MappingKey", "call", "trackers"),
    Name(_TP, "GetAttrKey", "call", "trackers"),
    Name(_TP, "NodeDef.flatten_fn", "read", "trackers"),
    Name(_TP, "NodeDef.unflatten_fn", "read", "trackers"),
    Name(_TP, "NodeDef.flatten_with_keys_fn", "read", "trackers"),
    # key entries derived from the context for these (matched by name)
    Name(_TP, "_dict_flatten_with_keys", "read", "trackers"),
    Name(_TP, "_ordereddict_flatten_with_keys", "read", "trackers"),
    Name(_TP, "_defaultdict_flatten_with_keys", "read", "trackers"),
    Name(_TP, "_deque_flatten_with_keys", "read", "trackers"),
    Name(_TP, "_list_flatten_with_keys", "read", "trackers"),
    Name(_TP, "_tuple_flatten_with_keys", "read", "trackers"),
    Name(_TP, "register_dataclass", "read", "trackers"),  # its _flatten_fn_with_keys
    Name("torch._dynamo.source", "GlobalSource", "call", "trackers"),
    Name(_B, "VariableBuilder", "call", "trackers"),
    Name("torch._dynamo.output_graph", "OutputGraph.install_global_by_id", "call", "trackers"),
    Name("torch._guards", "Source.make_guard", "call", "trackers"),
    Name(_V, "VariableTracker.source", "read", "trackers", kind="field"),
    Name(_V, "UserDefinedObjectVariable.value", "read", "trackers", kind="field"),
    # tree_all / tree_any (isinstance of the _only forms), tree_flatten_spec's reads
    Name(_V, "BuiltinVariable", "call", "trackers"),
    Name("torch._dynamo.exc", "Unsupported", "read", "trackers"),
    Name(_V, "VariableTracker.unpack_var_sequence", "call", "trackers"),
    Name("torch._dynamo.source", "AttrSource", "call", "trackers"),
    Name("torch._dynamo.source", "ImportSource", "call", "trackers"),
    Name("torch.fx._pytree", "SUPPORTED_NODES", "read", "trackers"),
    Name("torch.fx._pytree", "_dict_flatten_spec", "read", "trackers"),
    Name("torch.fx._pytree", "_list_flatten_spec", "read", "trackers"),
    Name("torch.fx._pytree", "_tuple_flatten_spec", "read", "trackers"),
    Name("torch.fx._pytree", "_namedtuple_flatten_spec", "read", "trackers"),
    Name(_TP, "TreeSpec.flatten_up_to", "call", "trackers"),  # checks reproduced by _up_to
    Name(_TP, "TreeSpec.children", "call", "trackers"),
    Name(_TP, "TreeSpec.child", "call", "trackers"),
    Name(_TP, "TreeSpec.is_leaf", "call", "trackers"),
    Name(_TP, "TreeSpec.type", "read", "trackers", kind="field"),
    Name(_TP, "TreeSpec.num_children", "read", "trackers", kind="field"),
    Name(_TP, "TreeSpec.context", "read", "trackers"),
    Name("torch._dynamo.guards", "GuardBuilder.ID_MATCH", "read", "trackers"),  # _known_spec
)
# fmt: on

# The differences between tested torch releases the adapter branches on:
# (name, torch 2.13, torch 2.14, what the adapter does).
VERSIONS: tuple[tuple[str, str, str, str], ...] = (
    (f"{_V}.UserDefinedObjectVariable.var_getattr", "present", "absent",
     "attribute reads of a spec made by a fast path go through it (spec.unflatten)"),
    (f"{_V}.UserDefinedObjectVariable.tp_getattro_impl", "absent", "present",
     "attribute reads of a spec made by a fast path go through it (spec.unflatten)"),
    (f"{_F}.UserFunctionVariable._lookup_tree_map_function", "present", "present",
     "patched: tree_map_only is rewritten into torch's tree_map, not the C one"),
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


def _present(name: Name) -> bool:
    try:
        obj: Any = import_module(name.module)
    except ImportError:
        return False
    parts = name.path.split(".")
    if name.kind == "field":
        parts, field = parts[:-1], parts[-1]
    for part in parts:
        obj = getattr(obj, part, _ABSENT)
        if obj is _ABSENT:
            return False
    return name.kind != "field" or _has_field(obj, field)


def lookup(module: str, path: str) -> Any:
    """The object at `module`.`path`, or None (for the optional names of VERSIONS)."""
    obj: Any = import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def missing(layer: str) -> list[Name]:
    """The required names of `layer` the loaded torch lacks (empty: the layer can apply).

    A group is missing (all its rows listed) when none of its rows is present.
    """
    rows = [n for n in INVENTORY if n.layer == layer]
    gone = [n for n in rows if not n.optional and not _present(n)]
    groups = {n.group for n in rows if n.group}
    for group in sorted(groups):
        members = [n for n in rows if n.group == group]
        if not any(_present(n) for n in members):
            gone.extend(members)
    return gone
