"""What the loaded torch lets the fast paths use: Dynamo's names and the paths on.

The bottom of the ``trackers`` layer (every other module of it imports this
one, this one none of them). Imported only once `torch._dynamo` is loaded.

* Dynamo's names, looked up tolerantly (`torch_name`): one torch moved
  stands in as a class nothing is an instance of (`moved`), read only by
  paths that are off.
* The fast paths on (`configure`, `on`): the ones whose torch names
  `_inventory.paths_off()` found all present; a path off traces torch's code.

Shared state: `_ON`, written by `configure` (DynamoHooks, under its lock,
before Dynamo compiles with the trackers), read while compiling.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..._torch_link._inventory import FUNCTION_PATHS, PATHS


def torch_name(module: str, name: str) -> Any:
    """`module.name`, or a stand-in class if torch moved it (its fast paths are off)."""
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return type(f"<moved {module}.{name}>", (), {"_cpytree_moved": True})
    return found


def moved(obj: Any) -> bool:
    """Whether `obj` is a stand-in of `torch_name` (a name this torch lacks)."""
    return getattr(obj, "_cpytree_moved", False) is True


_V = "torch._dynamo.variables"
Unsupported = torch_name("torch._dynamo.exc", "Unsupported")
GuardBuilder = torch_name("torch._dynamo.guards", "GuardBuilder")
install_guard = torch_name("torch._dynamo.guards", "install_guard")
AttrSource = torch_name("torch._dynamo.source", "AttrSource")
GlobalSource = torch_name("torch._dynamo.source", "GlobalSource")
ImportSource = torch_name("torch._dynamo.source", "ImportSource")  # 2.11+
TorchSource = torch_name("torch._dynamo.source", "TorchSource")  # 2.10
BuiltinVariable = torch_name(_V, "BuiltinVariable")
ConstantVariable = torch_name(_V, "ConstantVariable")
ConstDictVariable = torch_name(_V, "ConstDictVariable")
DefaultDictVariable = torch_name(_V, "DefaultDictVariable")
ListVariable = torch_name(_V, "ListVariable")
NamedTupleVariable = torch_name(_V, "NamedTupleVariable")
TupleVariable = torch_name(_V, "TupleVariable")
if TYPE_CHECKING:  # base classes of the trackers
    from torch._dynamo.variables import (
        UserDefinedObjectVariable,
        UserFunctionVariable,
        VariableTracker,
    )
else:
    UserDefinedObjectVariable = torch_name(_V, "UserDefinedObjectVariable")
    UserFunctionVariable = torch_name(_V, "UserFunctionVariable")
    VariableTracker = torch_name(_V, "VariableTracker")
ValueMutationNew = torch_name("torch._dynamo.variables.base", "ValueMutationNew")
VariableBuilder = torch_name("torch._dynamo.variables.builder", "VariableBuilder")
get_pytree_SUPPORTED_NODES_source = torch_name("torch._dynamo.variables.functions",
                                               "get_pytree_SUPPORTED_NODES_source")  # fmt: skip
LazyVariableTracker = torch_name("torch._dynamo.variables.lazy", "LazyVariableTracker")

__all__ = [
    "FAST_FUNCTIONS",
    "AttrSource",
    "BuiltinVariable",
    "ConstDictVariable",
    "ConstantVariable",
    "DefaultDictVariable",
    "GlobalSource",
    "GuardBuilder",
    "ImportSource",
    "LazyVariableTracker",
    "ListVariable",
    "NamedTupleVariable",
    "TorchSource",
    "TupleVariable",
    "Unsupported",
    "UserDefinedObjectVariable",
    "UserFunctionVariable",
    "ValueMutationNew",
    "VariableBuilder",
    "VariableTracker",
    "configure",
    "enabled_functions",
    "get_pytree_SUPPORTED_NODES_source",
    "install_guard",
    "moved",
    "on",
    "torch_name",
]

# torch.utils._pytree functions answered by the trackers (tree_flatten_spec: torch.fx._pytree's).
FAST_FUNCTIONS = frozenset(FUNCTION_PATHS)

# The fast paths on (`configure`): the ones whose torch names are all present.
_ON: frozenset[str] = frozenset(PATHS)


def configure(paths_on: frozenset[str]) -> None:
    """Run only the fast paths `paths_on` (the others trace torch's code)."""
    global _ON
    _ON = frozenset(paths_on)


def on(*paths: str) -> bool:
    """Whether every fast path named is on."""
    return _ON.issuperset(paths)


def enabled_functions() -> list[str]:
    """The functions of FAST_FUNCTIONS whose fast paths are all on."""
    return sorted(name for name, paths in FUNCTION_PATHS.items() if _ON.issuperset(paths))
