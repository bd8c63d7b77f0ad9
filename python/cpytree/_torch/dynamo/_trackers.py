"""Pytree calls on builtin containers answered at Dynamo's VariableTracker level.

Imported only once `torch._dynamo` is loaded, after `_inventory.paths_off()`
told which fast paths the loaded torch can run (`_fence.configure()`): a
name torch moved turns off the paths that need it, the others stay on.
Dynamo's names are looked up tolerantly (`_fence`): one torch moved stands
in as a class nothing is an instance of, read only by paths that are off.

The ``trackers`` layer, one module per concern, each importing only those
listed before it (no import circle, `tests/python/test_layout.py`):
* `_fence`: Dynamo's names (tolerant lookups) and the fast paths on.
* `_walk`: one walk of a tree of trackers (tree_flatten's reads, `is_leaf`,
  the registry guard) and `flatten_up_to`'s read against a spec.
* `_build`: new trackers from a spec and leaves (unflatten), key paths.
* `_spec_methods`: the constant spec a fast path returns, and its methods.
* `_tree_map`, `_predicates` (tree_all/tree_any), `_fx_spec` (torch.fx's
  tree_flatten_spec): one function family each.
* this module: `PytreeFunctionVariable`, the tracker Dynamo builds for
  torch's functions, which dispatches each call to the above.

With install() active, Dynamo meets torch's `tree_flatten`, `tree_leaves`,
`tree_structure`, `tree_unflatten`, `tree_flatten_with_path`,
`tree_leaves_with_path`, `tree_map`, `tree_all`, `tree_any`,
`tree_all_only`, `tree_any_only` and torch.fx's `tree_flatten_spec` (and
`unflatten`, `flatten_up_to`, `is_leaf`, `children`, `child` on the specs
they return) as `PytreeFunctionVariable`s instead of tracing torch's Python
traversal bytecode by bytecode. The answer is computed from the trackers:
the leaves are the trackers themselves, the spec is a constant torch
TreeSpec, key paths are tuples of constant key entries, and unflatten builds
new container trackers. Lists, tuples, dicts and namedtuples are read
directly; any other registered node (OrderedDict, defaultdict, deque,
dataclasses, custom nodes) by tracing only its registered flatten function,
and rebuilt by tracing only its unflatten function. Anything else (a
non-constant context or dict key, an `is_leaf` whose answer is not a
constant, leaves that are not a list) falls back to tracing torch's
original, unchanged.

Paths and the guards that make them sound. A tree's spec is a function of
the type of every node, the length of every sequence, the keys (and their
order) of every mapping, each registered node's context, and whether each
leaf's type is a registered node.
* Lists, tuples and namedtuples that came from a source carry the guards
  Dynamo's builder installed when it wrapped them: TYPE_MATCH and
  SEQUENCE_LENGTH (a list of another length, or a tuple in its place,
  fails the guard and recompiles). Trackers built during tracing have no
  source and need none: their structure is fixed by the traced code.
* Dicts from a source get DICT_KEYS_MATCH and a key-order guard, the ones
  Dynamo installs when traced code iterates them (as torch's dict_flatten
  does); their type is pinned by the TYPE_MATCH of their own wrapping.
* Registered nodes: the node's type by the tracker's TYPE_MATCH; its
  children and context by whatever tracing its flatten function installs
  (OrderedDict and defaultdict keys, a dataclass's fields being None or not,
  a custom node's attributes): exactly what tracing torch's traversal
  installs, since it traces the same function on the same tracker. The
  function itself is the registry's entry at compile time; the registry
  guard below sees a type registered or removed, not a type's functions
  replaced under the same registration (torch's traced code reads
  them through its own guarded lookup).
* Every node's type is checked by the trackers' own type guards (TENSOR_MATCH,
  CONSTANT_MATCH, TYPE_MATCH), and a leaf's being a leaf by a DICT_KEYS_MATCH
  on `torch.utils._pytree.SUPPORTED_NODES` (tracing torch's code installs it
  too): registering a type after compiling recompiles.
* `is_leaf=` (every function here): the predicate is called on each node,
  before the node's type is looked at, exactly as torch's traversal calls
  it (`tree_flatten_with_path` twice per node, in two walks, as torch's
  tree_flatten then key-path walk do); Dynamo traces that call as user code
  and the guards it installs are the ones tracing torch's traversal gets.
  A result that is not a constant is tested as Dynamo traces `if result:`
  (a guard on a symbolic value, a graph break on a tensor, as in torch).
* With-path functions: the key entries (SequenceKey(i), MappingKey(k),
  GetAttrKey(field)) are constants derived from the same structure the
  guards above pin, so no guard of their own is needed (torch 2.10-2.11,
  whose Dynamo has no constant of a key class: new objects of the class,
  reached through a global as torch's traced walk reaches it, `_build`).
* tree_all / tree_any (and `_only`): the walk is lazy and stops at the
  deciding leaf as torch's does; the guards are the flatten path's for the
  nodes reached (`_predicates`).
* Spec methods and `tree_flatten_spec`: a constant spec needs no guard; a
  torch spec reached through a source gets an ID_MATCH (`_fx_spec`);
  the tree is read with Dynamo's own subscripts and type guards, and
  torch.fx's registry is guarded (`_fx_spec`, `_walk.up_to`).
* tree_map (one tree or several): only a subtree rooted at a registered
  node other than list, tuple, dict and namedtuple is answered here
  (torch's `call_tree_map` answers the builtin levels and falls back to
  this tracker there), with the guards of the flatten path above and, for
  each further tree, those of `flatten_up_to` (`_walk.up_to`); `f` is traced on
  each leaf as torch traces it.
* The spec returned is a constant (specs are immutable), made of torch's own
  TreeSpec nodes, equal to what torch's tree_structure returns for the tree.
Every guard installed here is one that tracing torch's original also
installs on the same source, except the identity guard on a registered
unflatten function reached through a global of the frame (torch reaches it
through its registry instead); tracing installs more (a TYPE_MATCH per leaf,
guards on each registry lookup), and the suite checks the totals.
"""

from __future__ import annotations

from typing import Any

from ..._torch_link._inventory import FUNCTION_PATHS
from ._build import unflatten, with_paths
from ._fence import ListVariable, TupleVariable, UserFunctionVariable, ValueMutationNew, on
from ._spec_methods import SpecVariable, constant_spec
from ._tree_map import tree_map
from ._walk import flatten

__all__ = ["PytreeFunctionVariable"]

_WITH_PATH = frozenset({"tree_flatten_with_path", "tree_leaves_with_path"})


class PytreeFunctionVariable(UserFunctionVariable):
    """torch's original function, answered directly when the tree allows it.

    Instantiated as UserFunctionVariable: `PytreeFunctionVariable(original, source=...)`.
    """

    def call_function(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        result = self._fast(tx, args, kwargs)
        if result is not None:
            return result
        return super().call_function(tx, args, kwargs)

    def _fast(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        name = getattr(self.fn, "__name__", "")
        if not on(*FUNCTION_PATHS.get(name, ("?",))):
            return None
        if "all_any" in FUNCTION_PATHS[name]:  # tree_all, tree_any and their _only forms
            from ._predicates import all_any

            return all_any(self, tx, name, args, kwargs)
        if name == "tree_flatten_spec":
            from ._fx_spec import flatten_spec

            return flatten_spec(self, tx, args, kwargs)
        if name == "tree_map":
            return tree_map(tx, args, kwargs)
        if name == "tree_unflatten":
            if len(args) != 2 or kwargs:
                return None
            spec = constant_spec(args[1])
            return None if spec is None else unflatten(tx, args[0], spec)
        walk = flatten(tx, args, kwargs, name in _WITH_PATH, name == "tree_flatten_with_path")
        if walk is None:
            return None
        if name == "tree_leaves":
            return ListVariable(walk.leaves, mutation_type=ValueMutationNew())
        if name == "tree_leaves_with_path":
            return with_paths(tx, walk)
        spec_vt = SpecVariable(walk.tree_spec)
        if name == "tree_structure":
            return spec_vt
        if name == "tree_flatten_with_path":
            return TupleVariable([with_paths(tx, walk), spec_vt])
        leaves_vt = ListVariable(walk.leaves, mutation_type=ValueMutationNew())
        return TupleVariable([leaves_vt, spec_vt])
