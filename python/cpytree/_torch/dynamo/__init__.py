"""What Dynamo needs to know about the functions install() puts into torch.

Every piece of cpytree that touches torch._dynamo lives in this package, and
every private torch name it reads, writes or patches is listed in
`cpytree._torch_link._inventory.INVENTORY` (differences between torch releases in
its `VERSIONS`), checked before the code using it is imported; each fast
path of `_trackers` is fenced on its own (`_inventory.PATHS`).

Dynamo traces a pytree call inside a compiled function by inlining the
Python source of `torch.utils._pytree`, and it has fast paths keyed on
torch's own functions: `tree_map` (and `tree_map_only`, rewritten into it)
and `tree_map_with_path` run at the VariableTracker level (`call_tree_map`);
`tree_is_leaf` and `_get_node_type` are answered without tracing. cpytree's
functions are C, which Dynamo can neither inline nor recognise.

* `_hooks.DynamoHooks`: the lifecycle (applied at once or when Dynamo is
  first imported, each layer checked against the inventory, taken out
  exactly by uninstall()).
* `_substitute`: Dynamo sees torch's original wherever it meets a C function
  install() swapped in (same bytecodes, same guards), and an engine TreeSpec
  as the equal torch TreeSpec.
* `_trackers`: tree_flatten, tree_leaves, tree_structure, tree_unflatten,
  the with-path flatten functions, tree_all/tree_any (and `_only`),
  torch.fx's tree_flatten_spec, tree_map over registered nodes (one tree
  or several) and the methods of the specs they return, answered from the
  trackers instead of tracing torch's Python. Under it, one module per
  concern: `_fence` (Dynamo's names, the fast paths on), `_walk` (the walk
  of a tree of trackers), `_build` (unflatten, key paths), `_spec_methods`
  (the constant spec and its methods), `_tree_map`, `_predicates`
  (tree_all/tree_any), `_fx_spec` (tree_flatten_spec).
"""

from typing import TYPE_CHECKING, Any

from ._hooks import DynamoDrift, DynamoHooks, warn_failed

# The inventory loads on first use (DynamoHooks applies it once Dynamo is
# imported): install() before Dynamo does not pay for building it.
if TYPE_CHECKING:
    from ..._torch_link._inventory import INVENTORY, VERSIONS
else:  # a module __getattr__ would make every name valid to mypy

    def __getattr__(name: str) -> Any:
        if name in ("INVENTORY", "VERSIONS"):
            from ..._torch_link import _inventory

            return getattr(_inventory, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["INVENTORY", "VERSIONS", "DynamoDrift", "DynamoHooks", "warn_failed"]
