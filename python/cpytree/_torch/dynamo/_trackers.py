"""Pytree calls on builtin containers answered at Dynamo's VariableTracker level.

Imported only once `torch._dynamo` is loaded, after `_inventory.paths_off()`
told which fast paths the loaded torch can run (`configure()`): a name torch
moved turns off the paths that need it, the others stay on. Module-level
names are looked up tolerantly (`_torch`): one torch moved stands in as a
class nothing is an instance of, read only by paths that are off.

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
  reached through a global as torch's traced walk reaches it, `_key_entry`).
* tree_all / tree_any (and `_only`): the walk is lazy and stops at the
  deciding leaf as torch's does; the guards are the flatten path's for the
  nodes reached (`_all_any`).
* Spec methods and `tree_flatten_spec`: a constant spec needs no guard; a
  torch spec reached through a source gets an ID_MATCH (`_known_spec`);
  the tree is read with Dynamo's own subscripts and type guards, and
  torch.fx's registry is guarded (`_flatten_spec`, `_up_to`).
* tree_map (one tree or several): only a subtree rooted at a registered
  node other than list, tuple, dict and namedtuple is answered here
  (torch's `call_tree_map` answers the builtin levels and falls back to
  this tracker there), with the guards of the flatten path above and, for
  each further tree, those of `flatten_up_to` (`_up_to`); `f` is traced on
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

import collections
import importlib
import operator
from typing import TYPE_CHECKING, Any

import torch.utils._pytree as tp

from .._inventory import FUNCTION_PATHS, PATHS


def _torch(module: str, name: str) -> Any:
    """`module.name`, or a stand-in class if torch moved it (its fast paths are off)."""
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return type(f"<moved {module}.{name}>", (), {"_cpytree_moved": True})
    return found


def _moved(obj: Any) -> bool:
    """Whether `obj` is a stand-in of `_torch` (a name this torch lacks)."""
    return getattr(obj, "_cpytree_moved", False) is True


_V = "torch._dynamo.variables"
Unsupported = _torch("torch._dynamo.exc", "Unsupported")
GuardBuilder = _torch("torch._dynamo.guards", "GuardBuilder")
install_guard = _torch("torch._dynamo.guards", "install_guard")
AttrSource = _torch("torch._dynamo.source", "AttrSource")
GlobalSource = _torch("torch._dynamo.source", "GlobalSource")
ImportSource = _torch("torch._dynamo.source", "ImportSource")  # 2.11+
TorchSource = _torch("torch._dynamo.source", "TorchSource")  # 2.10
BuiltinVariable = _torch(_V, "BuiltinVariable")
ConstantVariable = _torch(_V, "ConstantVariable")
ConstDictVariable = _torch(_V, "ConstDictVariable")
DefaultDictVariable = _torch(_V, "DefaultDictVariable")
ListVariable = _torch(_V, "ListVariable")
NamedTupleVariable = _torch(_V, "NamedTupleVariable")
TupleVariable = _torch(_V, "TupleVariable")
if TYPE_CHECKING:  # base classes of the trackers below
    from torch._dynamo.variables import (
        UserDefinedObjectVariable,
        UserFunctionVariable,
        VariableTracker,
    )
else:
    UserDefinedObjectVariable = _torch(_V, "UserDefinedObjectVariable")
    UserFunctionVariable = _torch(_V, "UserFunctionVariable")
    VariableTracker = _torch(_V, "VariableTracker")
ValueMutationNew = _torch("torch._dynamo.variables.base", "ValueMutationNew")
VariableBuilder = _torch("torch._dynamo.variables.builder", "VariableBuilder")
get_pytree_SUPPORTED_NODES_source = _torch("torch._dynamo.variables.functions",
                                           "get_pytree_SUPPORTED_NODES_source")  # fmt: skip
LazyVariableTracker = _torch("torch._dynamo.variables.lazy", "LazyVariableTracker")

__all__ = ["FAST_FUNCTIONS", "PytreeFunctionVariable", "configure", "enabled_functions"]

# torch.utils._pytree functions answered here (tree_flatten_spec: torch.fx._pytree's).
FAST_FUNCTIONS = frozenset(FUNCTION_PATHS)

# The fast paths on (`configure`): the ones whose torch names are all present.
_ON: frozenset[str] = frozenset(PATHS)


def configure(on: frozenset[str]) -> None:
    """Run only the fast paths `on` (the others trace torch's code)."""
    global _ON
    _ON = frozenset(on)


def enabled_functions() -> list[str]:
    """The functions of FAST_FUNCTIONS whose fast paths are all on."""
    return sorted(name for name, paths in FUNCTION_PATHS.items() if _ON.issuperset(paths))


# (tree_all or tree_any, the _only form) of the predicate functions.
_ALL_ANY = {
    "tree_all": (True, False),
    "tree_any": (False, False),
    "tree_all_only": (True, True),
    "tree_any_only": (False, True),
}
_WITH_PATH = frozenset({"tree_flatten_with_path", "tree_leaves_with_path"})

_LEAF_SPEC = tp.treespec_leaf() if hasattr(tp, "treespec_leaf") else None

# torch 2.15's call_tree_map answers a defaultdict (a ConstDictVariable) with
# a clone its DefaultDictVariable does not rebuild itself: ConstDictVariable's
# reconstruct makes it a plain dict (torch's result is wrong). 2.10-2.14's
# DefaultDictVariable has its own reconstruct: torch's answer is right there
# and cheaper, and those trees are left to it (VERSIONS).
_TORCH_MAPS_DEFAULTDICT_TO_DICT = getattr(DefaultDictVariable, "reconstruct", None) is getattr(
    ConstDictVariable, "reconstruct", 0
)
_NAMED = collections.namedtuple


class _Fallback(Exception):
    """This tree is not answered here: trace torch's code."""


# One node of a walk: (leaf tracker, None, None, [], []) for a leaf, else
# (None, node type, context, child trackers, child key paths).
_Node = tuple[Any, Any, Any, list[Any], list[Any]]


class _Subtree:
    """A subtree `_Walk.iter` could not answer (handed to torch's code)."""

    def __init__(self, vt: Any) -> None:
        self.vt = vt


def _truthy(value: Any) -> bool:
    # Inlined by Dynamo: a symbolic value is guarded, a tensor breaks the
    # graph, exactly as torch's `if is_leaf(node)` / `all(...)` do.
    return True if value else False  # noqa: SIM210 - a jump, not bool(): see above


def _truth(tx: Any, vt: Any) -> bool:
    """Python's truth of a tracker: a constant's directly, else as Dynamo traces `if vt:`."""
    if vt.is_python_constant():
        return bool(vt.as_python_constant())
    decided = VariableTracker.build(tx, _truthy).call_function(tx, [vt], {})
    if not decided.is_python_constant():
        raise _Fallback
    return bool(decided.as_python_constant())


def _guard_registry() -> None:
    # What is a node is what torch's registry holds now: any registration
    # after compiling fails this guard (tracing torch's code installs it too).
    install_guard(get_pytree_SUPPORTED_NODES_source().make_guard(GuardBuilder.DICT_KEYS_MATCH))


def _path_off_for(vt: Any) -> bool:
    """Whether `vt`, not realized yet, is a node kind whose fast path is off.

    Realizing an input here and then falling back would leave its wrapping
    guard (a TYPE_MATCH) created at another point of the trace than the one
    torch's traced code creates for the same input: the same check, counted
    twice (the one extra guard of a dict-path-off trace on torch 2.15). The
    lazy tracker's type is read without realizing it (tree_map's names).
    """
    if "tree_map" not in _ON or not isinstance(vt, LazyVariableTracker) or vt.is_realized():
        return False
    python_type = vt.peek_type()
    if python_type is dict:
        return "dict" not in _ON
    if tp.is_namedtuple_class(python_type):
        return "namedtuple" not in _ON
    if python_type in (list, tuple) or python_type not in tp.SUPPORTED_NODES:
        return False
    return "registered" not in _ON


class _Walk:
    """One traversal of a tree of trackers: its leaves (with key paths) and spec."""

    def __init__(self, tx: Any, is_leaf: Any, with_paths: bool) -> None:
        self.tx = tx
        self.is_leaf = is_leaf  # a tracker, or None
        self.with_paths = with_paths
        self.leaves: list[Any] = []
        self.paths: list[tuple[Any, ...]] = []
        self.tree_spec: Any = None  # the spec of the whole tree, once walked

    def _leaf(self, vt: Any, path: tuple[Any, ...]) -> Any:
        self.leaves.append(vt)
        if self.with_paths:
            self.paths.append(path)
        return _LEAF_SPEC

    def _at(self, path: tuple[Any, ...], key_type: str, key: Any) -> tuple[Any, ...]:
        """The key path of a child (built only when key paths are asked for).

        `key_type` names torch's key class, read only then (the "key_paths" path).
        """
        return (*path, getattr(tp, key_type)(key)) if self.with_paths else path

    def spec(self, vt: Any, path: tuple[Any, ...] = ()) -> Any:
        """The spec of the tree `vt`, appending its leaves; raises _Fallback."""
        leaf, node_type, context, children, paths = self._expand(vt, path)
        if leaf is not None:
            return self._leaf(leaf, path)
        return tp.TreeSpec(node_type, context, [self.spec(child, child_path) for child, child_path
                                                in zip(children, paths, strict=True)])  # fmt: skip

    def iter(self, vt: Any, path: tuple[Any, ...] = ()) -> Any:
        """The leaves of `vt` one by one, as torch's `tree_iter` meets them (lazily).

        A node not answered here is yielded as a `_Subtree` (its is_leaf
        decision already made once), for the caller to hand to torch's code.
        """
        try:
            leaf, _, _, children, paths = self._expand(vt, path)
        except _Fallback:
            yield _Subtree(vt)
            return
        if leaf is not None:
            yield leaf
            return
        for child, child_path in zip(children, paths, strict=True):
            yield from self.iter(child, child_path)

    def _expand(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        """One node: (leaf tracker, None, None, [], []) for a leaf, else
        (None, node type, context, child trackers, child key paths); raises _Fallback."""
        if self.is_leaf is not None:
            decided = self.is_leaf.call_function(self.tx, [vt], {})
            if _truth(self.tx, decided):
                return vt, None, None, [], []
        if _path_off_for(vt):
            raise _Fallback  # before realizing it: see _path_off_for
        vt = vt.realize()
        kind = type(vt)
        if kind is ListVariable or kind is TupleVariable:
            node_type = list if kind is ListVariable else tuple
            if vt.python_type() is not node_type:
                raise _Fallback
            paths = [self._at(path, "SequenceKey", i) for i in range(len(vt.items))]
            return None, node_type, None, list(vt.items), paths
        if kind is ConstDictVariable and vt.python_type() is dict:
            if "dict" not in _ON:
                raise _Fallback
            return self._mapping(vt, path)
        if kind is NamedTupleVariable:
            if "namedtuple" not in _ON:
                raise _Fallback
            cls = vt.tuple_cls
            if not tp.is_namedtuple_class(cls) or cls in tp.SUPPORTED_NODES:
                raise _Fallback
            fields = cls._fields
            paths = [self._at(path, "GetAttrKey", fields[i]) for i in range(len(vt.items))]
            return None, _NAMED, cls, list(vt.items), paths
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            raise _Fallback from None
        if tp.is_namedtuple_class(python_type):
            raise _Fallback  # a namedtuple Dynamo tracks some other way
        node = tp.SUPPORTED_NODES.get(python_type)
        if node is not None:
            if "registered" not in _ON or (python_type is dict and "dict" not in _ON):
                raise _Fallback
            return self._registered(vt, node, path)
        return vt, None, None, [], []

    def _mapping(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        if not all(key.vt.is_python_constant() for key in vt.items):
            raise _Fallback
        if vt.source is not None:
            vt.install_dict_keys_match_guard()
            self.tx.output.guard_on_key_order.add(vt.source)
        keys = [key.vt.as_python_constant() for key in vt.items]
        paths = [self._at(path, "MappingKey", k) for k in keys]
        return None, dict, keys, list(vt.items.values()), paths

    def _defaultdict(self, vt: Any, path: tuple[Any, ...]) -> _Node:
        """A defaultdict tracked as a dict (torch 2.15): torch's `_defaultdict_flatten`,
        the factory read as traced code reads it, the keys as a dict's."""
        read = VariableTracker.build(self.tx, getattr).call_function(
            self.tx, [vt, ConstantVariable.create("default_factory")], {}
        )
        if not read.is_python_constant():
            # torch 2.10: the tracker answers no getattr of its factory (a
            # GetAttrVariable); its field is what 2.11+'s getattr returns, the
            # tracker the builder made (guarded) for an input's factory.
            read = getattr(vt, "default_factory", None)  # VERSIONS
            if read is None or not read.is_python_constant():
                raise _Fallback
        _, _, keys, children, paths = self._mapping(vt, path)
        context = [read.as_python_constant(), keys]
        return None, collections.defaultdict, context, children, paths

    def _registered(self, vt: Any, node: Any, path: tuple[Any, ...]) -> _Node:
        """A registered node (OrderedDict, defaultdict, deque, dataclass, custom).

        Its registered flatten function is traced, as torch's traversal traces
        it: the guards on what it reads are the ones torch's code gets. Only
        the traversal around it is not. Key paths: for torch's own kinds the
        key entries follow from the flatten result (`_derived_keys`), else
        flatten_with_keys_fn is traced too, as torch's key-path walk does.
        """
        if (
            "dict" in _ON
            and isinstance(vt, ConstDictVariable)
            and _is_torch_fn(node.flatten_fn, "_defaultdict_flatten")
        ):
            return self._defaultdict(vt, path)
        children_vt, context = _call_flatten(self.tx, node.flatten_fn, vt)
        if not self.with_paths:
            return (
                None,
                node.type,
                context,
                list(children_vt.items),
                [path] * len(children_vt.items),
            )
        keys = _derived_keys(node, context, len(children_vt.items))
        if keys is None:
            if node.flatten_with_keys_fn is None:
                raise _Fallback  # torch raises its error
            pairs_vt, _ = _call_flatten(self.tx, node.flatten_with_keys_fn, vt)
            keys, children_vt = [], pairs_vt
            for pair in pairs_vt.items:
                pair = pair.realize()
                if type(pair) is not TupleVariable or len(pair.items) != 2:
                    raise _Fallback
                if not pair.items[0].is_python_constant():
                    raise _Fallback
                keys.append(pair.items[0].as_python_constant())
            children_vt = ListVariable([pair.realize().items[1] for pair in pairs_vt.items])
        if len(keys) != len(children_vt.items):
            raise _Fallback
        return None, node.type, context, list(children_vt.items), [(*path, key) for key in keys]


def _call_flatten(tx: Any, fn: Any, vt: Any) -> tuple[Any, Any]:
    """(children tracker, constant context) of a traced flatten function."""
    flat = VariableTracker.build(tx, fn).call_function(tx, [vt], {}).realize()
    if type(flat) is not TupleVariable or len(flat.items) != 2:
        raise _Fallback
    children_vt, context_vt = (item.realize() for item in flat.items)
    if type(children_vt) not in (ListVariable, TupleVariable):
        raise _Fallback
    if not context_vt.is_python_constant():
        raise _Fallback
    return children_vt, context_vt.as_python_constant()


def _derived_keys(node: Any, context: Any, count: int) -> list[Any] | None:
    """The key entries torch's own flatten_with_keys_fn gives, from the flatten context.

    None when the node's function is not one of torch's (then it is traced).
    """
    fn = node.flatten_with_keys_fn
    if fn is None or getattr(fn, "__module__", None) != tp.__name__:
        return None
    name = getattr(fn, "__qualname__", "")
    if name in ("_ordereddict_flatten_with_keys", "_dict_flatten_with_keys"):
        return [tp.MappingKey(k) for k in context]
    if name == "_defaultdict_flatten_with_keys":
        return [tp.MappingKey(k) for k in context[1]]
    if name in ("_deque_flatten_with_keys", "_list_flatten_with_keys", "_tuple_flatten_with_keys"):
        return [tp.SequenceKey(i) for i in range(count)]
    if name == "register_dataclass.<locals>._flatten_fn_with_keys":
        return [tp.GetAttrKey(k) for k in context[0]]
    return None


def _flatten(
    tx: Any, args: list[Any], kwargs: dict[str, Any], with_paths: bool, spec_pass: bool = False
) -> _Walk | None:
    """The finished walk of `tree_*(tree[, is_leaf])`, or None to fall back.

    With key paths and `is_leaf`, the predicate is called as torch calls it:
    `tree_leaves_with_path` walks once (its key-path walk);
    `tree_flatten_with_path` (`spec_pass`) first walks as `tree_flatten` does
    for the spec, then again for the key paths, each walk calling it once
    per node it reaches.
    """
    if kwargs.keys() - {"is_leaf"} or not 1 <= len(args) + len(kwargs) <= 2:
        return None
    if len(args) == 2:
        if "is_leaf" in kwargs:
            return None
        is_leaf = args[1]
    elif len(args) == 1:
        is_leaf = kwargs.get("is_leaf")
    else:
        return None
    if is_leaf is not None and is_leaf.is_constant_none():
        is_leaf = None
    walk = _Walk(tx, is_leaf, with_paths)
    try:
        if with_paths and spec_pass and is_leaf is not None:
            first = _Walk(tx, is_leaf, with_paths=False)
            first.tree_spec = first.spec(args[0])
            walk.spec(args[0])
            walk.tree_spec = first.tree_spec  # torch returns tree_flatten's spec
        else:
            walk.tree_spec = walk.spec(args[0])
    except _Fallback:
        return None
    _guard_registry()
    return walk


def _build(tx: Any, spec: Any, leaves: list[Any], at: list[int]) -> Any:
    """Trackers for `spec` filled with `leaves` (consumed from at[0])."""
    if spec.is_leaf():
        leaf = leaves[at[0]]
        at[0] += 1
        return leaf
    children = [_build(tx, child, leaves, at) for child in spec.children()]
    if spec.type is list:
        return ListVariable(children, mutation_type=ValueMutationNew())
    if spec.type is tuple:
        return TupleVariable(children)
    if spec.type is _NAMED:
        # Built as user code builds it (Dynamo traces namedtuple's __new__).
        return VariableTracker.build(tx, spec.context).call_function(tx, children, {})
    if spec.type is dict:
        items = {ConstantVariable.create(k): v for k, v in zip(spec.context, children, strict=True)}
        return ConstDictVariable(items, mutation_type=ValueMutationNew())
    node = tp.SUPPORTED_NODES[spec.type]
    factory, keys = spec.context if spec.type is collections.defaultdict else (None, ())
    if (
        spec.type is collections.defaultdict
        and "dict" in _ON
        and _is_torch_fn(node.unflatten_fn, "_defaultdict_unflatten")
        and all(ConstantVariable.is_literal(k) for k in keys)
    ):
        # torch's `defaultdict(factory, dict(zip(keys, values)))`, called as traced code calls it.
        items = {ConstantVariable.create(k): v for k, v in zip(keys, children, strict=True)}
        mapping = ConstDictVariable(items, mutation_type=ValueMutationNew())
        build = _sourced_function(tx, collections.defaultdict)  # rebuilt through a source
        return build.call_function(tx, [VariableTracker.build(tx, factory), mapping], {})
    # Registered: its unflatten function traced, as torch's tree_unflatten does.
    args = [ListVariable(children, mutation_type=ValueMutationNew()),
            VariableTracker.build(tx, spec.context)]  # fmt: skip
    return _sourced_function(tx, node.unflatten_fn).call_function(tx, args, {})


def _is_torch_fn(fn: Any, name: str) -> bool:
    """Whether `fn` is torch.utils._pytree's function `name`."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    return module == tp.__name__ and qualname == name


def _sourced_function(tx: Any, fn: Any) -> Any:
    """A tracker for `fn` reached through a global of the frame.

    A source lets Dynamo follow what the function reads (the class a
    dataclass unflatten calls, through its closure) as torch's traced
    registry lookup does; without one it refuses to construct the class.
    """
    name = tx.output.install_global_by_id("__cpytree_node_fn", fn)
    return VariableBuilder(tx, GlobalSource(name))(fn)


def _buildable(spec: Any) -> bool:
    """Whether `_build` handles every node of `spec`."""
    stack = [spec]
    while stack:
        node = stack.pop()
        if node.is_leaf():
            continue
        if node.type is dict:
            if "dict" not in _ON or not all(ConstantVariable.is_literal(k) for k in node.context):
                return False
        elif node.type not in (list, tuple, _NAMED) and (
            "registered" not in _ON or node.type not in tp.SUPPORTED_NODES
        ):
            return False
        stack.extend(node.children())
    return True


def _unflatten(tx: Any, leaves_vt: Any, spec: Any) -> Any:
    """Trackers of `tree_unflatten(leaves, spec)`, or None to fall back."""
    leaves_vt = leaves_vt.realize()
    if type(leaves_vt) not in (ListVariable, TupleVariable):
        return None
    if len(leaves_vt.items) != spec.num_leaves or not _buildable(spec):
        return None  # torch's code raises the error
    return _build(tx, spec, list(leaves_vt.items), [0])


def _constant_spec(vt: Any) -> Any:
    """The torch TreeSpec a tracker stands for when it is a constant, else None."""
    vt = vt.realize()
    if isinstance(vt, SpecVariable) or (
        type(vt) is UserDefinedObjectVariable and vt.source is None
    ):
        value = vt.value
        return value if _is_torch_spec(value) else None
    return None


def _with_paths(tx: Any, walk: _Walk) -> Any:
    """The list of (key path, leaf) pairs, the key entries as constants."""
    pairs: list[Any] = [
        TupleVariable([TupleVariable([_key_entry(tx, k) for k in path]), leaf])
        for path, leaf in zip(walk.paths, walk.leaves, strict=True)
    ]
    return ListVariable(pairs, mutation_type=ValueMutationNew())


# torch's key classes and the field each one's constructor takes.
_KEY_FIELDS = {tp.SequenceKey: "idx", tp.MappingKey: "key", tp.GetAttrKey: "name"}


def _key_entry(tx: Any, key: Any) -> Any:
    """The tracker of one key entry of a key path.

    torch 2.12+ counts its key classes among Dynamo's constants; 2.10 and
    2.11 do not (their sourceless builder cannot wrap one: a graph break), so
    there the entry is built as torch's traced key-path walk builds it, by
    calling its class, reached through a global (a new object Dynamo can
    rebuild; the class's guard is one torch's traced walk installs too).
    """
    field = _KEY_FIELDS.get(type(key))
    if field is None or ConstantVariable.is_literal(key):
        return VariableTracker.build(tx, key)
    value = VariableTracker.build(tx, getattr(key, field))
    return _sourced_function(tx, type(key)).call_function(tx, [value], {})


def _is_registered_node(vt: Any) -> bool:
    """Whether `vt` is a registered node torch's `call_tree_map` does not answer itself.

    Those are all but lists, tuples, namedtuples and what Dynamo tracks as a
    ConstDictVariable (dicts; on torch 2.14 OrderedDicts too). Realizes `vt`
    only when it is such a node (torch's call_tree_map realizes it too).
    """
    if isinstance(vt, LazyVariableTracker) and not vt.is_realized():
        python_type = vt.peek_type()
    else:
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            return False
    if python_type in (list, tuple, dict) or tp.is_namedtuple_class(python_type):
        return False
    if python_type not in tp.SUPPORTED_NODES:
        return False
    if python_type is collections.defaultdict and _TORCH_MAPS_DEFAULTDICT_TO_DICT:
        return True  # see _holds_defaultdict
    return not isinstance(vt.realize(), ConstDictVariable)


def _holds_defaultdict(vt: Any) -> bool:
    """Whether torch's `call_tree_map` would reach a defaultdict under `vt`.

    On torch 2.15 Dynamo tracks a defaultdict as a ConstDictVariable subclass
    and its `call_tree_map` answers it by cloning the tracker untracked by
    side effects, so the result is rebuilt as a plain dict (torch alone, a
    wrong result). Such a tree is answered here instead, where the
    defaultdict is rebuilt by tracing its registered unflatten function.
    Descends only where torch's `call_tree_map` does (lists, tuples, dicts).
    """
    if isinstance(vt, LazyVariableTracker) and not vt.is_realized():
        python_type = vt.peek_type()
        if python_type is collections.defaultdict:
            return True
        if python_type not in (list, tuple, dict, collections.OrderedDict):
            return False  # torch's call_tree_map realizes it anyway; not needed here
        vt = vt.realize()
    try:
        python_type = vt.python_type()
    except NotImplementedError:
        return False
    if python_type is collections.defaultdict:
        return True
    if type(vt) in (ListVariable, TupleVariable):
        return any(_holds_defaultdict(item) for item in vt.items)
    if isinstance(vt, ConstDictVariable) and python_type in (dict, collections.OrderedDict):
        return any(_holds_defaultdict(value) for value in vt.items.values())
    return False


def _tree_map(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`tree_map(f, tree)` whose root is a registered node, or None.

    torch answers lists, tuples, dicts and namedtuples at the tracker level
    (`call_tree_map`) and, at any other registered node, falls back to
    tracing its whole tree_map on that subtree, through this same tracker:
    that subtree is answered here instead. It is walked as tree_flatten's
    fast path walks it (the node's flatten function traced, same guards),
    `f` is called on each leaf in order (traced as torch traces it), and the
    result is built as tree_unflatten's fast path builds it. The order in
    which the graph meets its inputs is torch's.
    """
    if len(args) < 2 or kwargs.keys() - {"is_leaf"}:
        return None
    map_fn, tree, *rests = args
    if not _is_registered_node(tree) and not (
        _TORCH_MAPS_DEFAULTDICT_TO_DICT and _holds_defaultdict(tree)
    ):
        return None  # torch's call_tree_map
    walk = _flatten(tx, [tree], kwargs, with_paths=False)
    if walk is None or not _buildable(walk.tree_spec):
        return None
    columns = [walk.leaves]
    for rest in rests:  # torch's treespec.flatten_up_to(rest), at the tracker level
        subtrees: list[Any] = []
        try:
            _up_to(tx, walk.tree_spec, rest, subtrees)
        except _Fallback:
            return None  # torch's code raises its error
        columns.append(subtrees)
    results = [map_fn.call_function(tx, list(row), {}) for row in zip(*columns, strict=True)]
    return _build(tx, walk.tree_spec, results, [0])


_STANDARD_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def _getitem(tx: Any, vt: Any, key: Any) -> Any:
    """`vt[key]` for a constant key, as Dynamo traces the subscript."""
    return BuiltinVariable(operator.getitem).call_function(
        tx, [vt, VariableTracker.build(tx, key)], {}
    )


def _up_to(tx: Any, spec: Any, vt: Any, out: list[Any]) -> None:
    """torch's `spec.flatten_up_to(vt)`: the subtrees of `vt` at the leaves of `spec`.

    torch's checks at each node of the spec: the node's type (dict,
    OrderedDict and defaultdict interchangeable, keys compared as sets and
    read in the spec's order), its arity and, for other types, its flatten
    context (a deque's maxlen excepted). Guards: the type guards of the
    trackers reached, DICT_KEYS_MATCH on each dict read, and what tracing
    a registered node's flatten function installs (torch traces the same).
    A mismatch or a node not read here raises _Fallback (torch's code then
    raises its error).
    """
    if spec.is_leaf():
        out.append(vt)
        return
    vt = vt.realize()
    kind = type(vt)
    if spec.type is list or spec.type is tuple:
        if kind not in (ListVariable, TupleVariable) or vt.python_type() is not spec.type:
            raise _Fallback
        children = list(vt.items)
    elif spec.type is _NAMED:
        if "namedtuple" not in _ON or kind is not NamedTupleVariable:
            raise _Fallback
        if vt.tuple_cls is not spec.context:
            raise _Fallback
        children = list(vt.items)
    elif (spec.type in _STANDARD_DICTS and isinstance(vt, ConstDictVariable)
          and vt.python_type() in _STANDARD_DICTS):  # fmt: skip
        if "dict" not in _ON:
            raise _Fallback
        if not all(key.vt.is_python_constant() for key in vt.items):
            raise _Fallback
        if vt.source is not None:
            vt.install_dict_keys_match_guard()
        keys = spec.context[1] if spec.type is collections.defaultdict else spec.context
        got = [key.vt.as_python_constant() for key in vt.items]
        if len(got) != len(keys) or set(got) != set(keys):
            raise _Fallback
        children = [_getitem(tx, vt, key) for key in keys]
    else:
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            raise _Fallback from None
        node = tp.SUPPORTED_NODES.get(python_type)
        if python_type is not spec.type or node is None or "registered" not in _ON:
            raise _Fallback
        children_vt, context = _call_flatten(tx, node.flatten_fn, vt)
        if python_type is not collections.deque and context != spec.context:
            raise _Fallback
        children = list(children_vt.items)
    if len(children) != spec.num_children:
        raise _Fallback
    for child, child_spec in zip(children, spec.children(), strict=True):
        _up_to(tx, child_spec, child, out)


def _is_torch_spec(value: Any) -> bool:
    """torch's own TreeSpec (or its LeafSpec), not a user subclass."""
    return isinstance(value, tp.TreeSpec) and type(value).__module__ == tp.__name__


# TreeSpec methods of a constant spec answered without tracing their bodies.
_SPEC_METHODS = frozenset({"unflatten", "flatten_up_to", "is_leaf", "children", "child"})


class SpecVariable(UserDefinedObjectVariable):
    """A constant torch TreeSpec made by a fast path (no source, no guards)."""

    def var_getattr(self, tx: Any, name: str) -> Any:
        if name in _SPEC_METHODS:
            return SpecMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def tp_getattro_impl(self, tx: Any, name: str) -> Any:  # attribute reads, torch 2.14
        if name in _SPEC_METHODS:
            return SpecMethodVariable(self, name)
        return super().tp_getattro_impl(tx, name)  # type: ignore[misc]

    def reconstruct(self, codegen: Any) -> None:
        # A spec that leaves the graph is loaded from a global of the frame.
        name = codegen.tx.output.install_global_by_id("__cpytree_spec", self.value)
        codegen.append_output(codegen.create_load_global(name, add=True))


class SpecMethodVariable(VariableTracker):
    """A method of a SpecVariable: answered from the constant spec, or traced.

    `unflatten` (as tree_unflatten's fast path), `flatten_up_to` (`_up_to`),
    `is_leaf()`, `children()`, `child(i)` (constants of the spec: no guard
    needed). Anything else, or a call these do not answer (torch's error
    cases), traces torch's method.
    """

    def __init__(self, spec_vt: Any, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec_vt = spec_vt
        self.name = name

    def call_function(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        result = None if kwargs else self._answer(tx, args)
        if result is not None:
            return result
        spec_vt = self.spec_vt
        return UserDefinedObjectVariable.call_method(spec_vt, tx, self.name, args, kwargs)

    def _answer(self, tx: Any, args: list[Any]) -> Any:
        spec = self.spec_vt.value
        if self.name == "unflatten":
            ok = len(args) == 1 and "unflatten" in _ON
            return _unflatten(tx, args[0], spec) if ok else None
        if self.name == "flatten_up_to":
            if len(args) != 1 or "tree_map" not in _ON:
                return None
            subtrees: list[Any] = []
            try:
                _up_to(tx, spec, args[0], subtrees)
            except _Fallback:
                return None
            return ListVariable(subtrees, mutation_type=ValueMutationNew())
        if args and self.name != "child":
            return None
        if self.name == "is_leaf":
            return ConstantVariable.create(spec.is_leaf())
        if self.name == "children":
            return ListVariable([SpecVariable(child) for child in spec.children()],
                                mutation_type=ValueMutationNew())  # fmt: skip
        if len(args) == 1 and args[0].is_python_constant():  # child(i)
            index = args[0].as_python_constant()
            if type(index) is int and -spec.num_children <= index < spec.num_children:
                return SpecVariable(spec.child(index))
        return None


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
        if not _ON.issuperset(FUNCTION_PATHS.get(name, ("?",))):
            return None
        if name in _ALL_ANY:
            from ._predicates import all_any

            return all_any(self, tx, name, args, kwargs)
        if name == "tree_flatten_spec":
            from ._fx_spec import flatten_spec

            return flatten_spec(self, tx, args, kwargs)
        if name == "tree_map":
            return _tree_map(tx, args, kwargs)
        if name == "tree_unflatten":
            if len(args) != 2 or kwargs:
                return None
            spec = _constant_spec(args[1])
            return None if spec is None else _unflatten(tx, args[0], spec)
        walk = _flatten(tx, args, kwargs, name in _WITH_PATH, name == "tree_flatten_with_path")
        if walk is None:
            return None
        if name == "tree_leaves":
            return ListVariable(walk.leaves, mutation_type=ValueMutationNew())
        if name == "tree_leaves_with_path":
            return _with_paths(tx, walk)
        spec_vt = SpecVariable(walk.tree_spec)
        if name == "tree_structure":
            return spec_vt
        if name == "tree_flatten_with_path":
            return TupleVariable([_with_paths(tx, walk), spec_vt])
        leaves_vt = ListVariable(walk.leaves, mutation_type=ValueMutationNew())
        return TupleVariable([leaves_vt, spec_vt])
