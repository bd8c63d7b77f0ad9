"""Pytree calls on builtin containers answered at Dynamo's VariableTracker level.

With install() active, Dynamo meets `tree_flatten`, `tree_leaves`,
`tree_structure` and `tree_unflatten` (and `spec.unflatten` on the specs they
return) as `PytreeFunctionVariable`s instead of tracing torch's Python bodies
bytecode by bytecode. When the tree is made only of lists, tuples, dicts,
OrderedDicts and namedtuples whose structure Dynamo already knows (their
VariableTrackers), and `is_leaf` is not given, the answer is computed
directly from the trackers: the leaves are the trackers themselves, the spec
is a constant torch TreeSpec, and unflatten builds new container trackers.
Anything else (another node type, a registered class, `is_leaf`, leaves that
are not a list) falls back to tracing torch's original, unchanged.

Why the guards make it sound: a tree's spec is a function of the type of
every node, the length of every sequence, the keys (and their order) of every
mapping, and whether each leaf's type is a registered node.
* Lists, tuples and namedtuples that came from a source carry the guards
  Dynamo's builder installed when it wrapped them: TYPE_MATCH and
  SEQUENCE_LENGTH (a list of another length, or a tuple in its place,
  fails the guard and recompiles). Trackers built during tracing have no
  source and need none: their structure is fixed by the traced code.
* Mappings from a source get DICT_KEYS_MATCH and a key-order guard, the ones
  Dynamo installs when traced code iterates them (as torch's dict_flatten does).
* Every node's type is checked by the trackers' own type guards (TENSOR_MATCH,
  CONSTANT_MATCH, TYPE_MATCH), and a leaf's being a leaf by a DICT_KEYS_MATCH
  on `torch.utils._pytree.SUPPORTED_NODES` (tracing torch's code installs it
  too): registering a type after compiling recompiles.
* The spec returned is a constant (specs are immutable), made of torch's own
  TreeSpec nodes, equal to what torch's tree_structure returns for the tree.
Every guard installed here is one that tracing torch's original also
installs on the same source; tracing installs more (a TYPE_MATCH per leaf).
"""

from __future__ import annotations

import collections
from typing import Any

_LEAF = object()  # walk(): "this tracker is a leaf"


FAST_FUNCTIONS = frozenset({"tree_flatten", "tree_leaves", "tree_structure", "tree_unflatten"})


def make_function_variable(tp: Any) -> type:
    """The tracker class for torch's FAST_FUNCTIONS (built once Dynamo is imported).

    Instantiate it as UserFunctionVariable: `cls(torch_original, source=...)`.
    """
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.variables import (
        ConstantVariable,
        ConstDictVariable,
        ListVariable,
        NamedTupleVariable,
        TupleVariable,
        UserDefinedObjectVariable,
        UserFunctionVariable,
        VariableTracker,
        dicts as dict_variables,
    )
    from torch._dynamo.variables.base import ValueMutationNew
    from torch._dynamo.variables.functions import get_pytree_SUPPORTED_NODES_source
    from torch._dynamo.variables.lazy import LazyVariableTracker

    leaf_spec = tp.treespec_leaf()
    # torch 2.14 has a tracker class of its own for OrderedDict; 2.13 one class
    # for both, told apart by `user_cls`.
    ordered_variable = getattr(dict_variables, "OrderedDictVariable", None)
    dict_kinds = {ConstDictVariable, ordered_variable} - {None}

    def dict_variable(items: dict[Any, Any], cls: type) -> Any:
        if cls is dict:
            return ConstDictVariable(items, mutation_type=ValueMutationNew())
        if ordered_variable is not None:
            return ordered_variable(items, mutation_type=ValueMutationNew())
        return ConstDictVariable(items, user_cls=cls, mutation_type=ValueMutationNew())

    ordered = collections.OrderedDict
    named = collections.namedtuple

    def guard_registry() -> None:
        # What is a node is what torch's registry holds now: any registration
        # after compiling fails this guard (tracing torch's code installs it too).
        install_guard(get_pytree_SUPPORTED_NODES_source().make_guard(GuardBuilder.DICT_KEYS_MATCH))

    def walk(tx: Any, vt: Any, leaves: list[Any]) -> Any:
        """The spec of the tree `vt`, appending its leaf trackers; None to fall back."""
        if isinstance(vt, LazyVariableTracker) and not vt.is_realized():
            # A node this walk would not build: fall back before realizing it,
            # so that tracing installs exactly the guards it would have.
            peeked = vt.peek_type()
            if peeked in tp.SUPPORTED_NODES and peeked not in (list, tuple, dict):
                return None
        vt = vt.realize()
        kind = type(vt)
        if kind is ListVariable or kind is TupleVariable:
            node_type = list if kind is ListVariable else tuple
            if vt.python_type() is not node_type:
                return None
            children = [walk(tx, item, leaves) for item in vt.items]
            if None in children:
                return None
            return tp.TreeSpec(node_type, None, children)
        if kind in dict_kinds:
            user_cls = vt.python_type()
            if user_cls is not dict and user_cls is not ordered:
                return None
            if not all(key.vt.is_python_constant() for key in vt.items):
                return None
            if vt.source is not None:
                vt.install_dict_keys_match_guard()
                tx.output.guard_on_key_order.add(vt.source)
            keys = [key.vt.as_python_constant() for key in vt.items]
            children = [walk(tx, value, leaves) for value in vt.items.values()]
            if None in children:
                return None
            return tp.TreeSpec(user_cls, keys, children)
        if kind is NamedTupleVariable:
            if not tp.is_namedtuple_class(vt.tuple_cls) or vt.tuple_cls in tp.SUPPORTED_NODES:
                return None
            children = [walk(tx, item, leaves) for item in vt.items]
            if None in children:
                return None
            return tp.TreeSpec(named, vt.tuple_cls, children)
        try:
            python_type = vt.python_type()
        except NotImplementedError:
            return None
        if python_type in tp.SUPPORTED_NODES or tp.is_namedtuple_class(python_type):
            return None  # a node this walk does not build: trace torch's code
        leaves.append(vt)
        return leaf_spec

    def flatten(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], Any] | None:
        """(leaf trackers, spec) of `tree_*(tree)` without is_leaf, or None."""
        if len(args) != 1 or kwargs.keys() - {"is_leaf"}:
            return None
        is_leaf = kwargs.get("is_leaf")
        if is_leaf is not None and not is_leaf.is_constant_none():
            return None
        leaves: list[Any] = []
        spec = walk(tx, args[0], leaves)
        if spec is None:
            return None
        guard_registry()
        return leaves, spec

    def build(tx: Any, spec: Any, leaves: list[Any], at: list[int]) -> Any:
        """Trackers for `spec` filled with `leaves` (consumed from at[0])."""
        if spec.is_leaf():
            leaf = leaves[at[0]]
            at[0] += 1
            return leaf
        children = [build(tx, child, leaves, at) for child in spec.children()]
        if spec.type is list:
            return ListVariable(children, mutation_type=ValueMutationNew())
        if spec.type is tuple:
            return TupleVariable(children)
        if spec.type is named:
            # Built as user code builds it (Dynamo traces namedtuple's __new__).
            return VariableTracker.build(tx, spec.context).call_function(tx, children, {})
        items = {ConstantVariable.create(k): v for k, v in zip(spec.context, children, strict=True)}
        return dict_variable(items, spec.type)

    def buildable(spec: Any) -> bool:
        """Whether `build` handles every node of `spec`."""
        stack = [spec]
        while stack:
            node = stack.pop()
            if node.is_leaf():
                continue
            if node.type not in (list, tuple, dict, ordered, named):
                return False
            if node.type in (dict, ordered) and not all(
                ConstantVariable.is_literal(k) for k in node.context
            ):
                return False
            stack.extend(node.children())
        return True

    def unflatten(tx: Any, leaves_vt: Any, spec: Any) -> Any:
        """Trackers of `tree_unflatten(leaves, spec)`, or None to fall back."""
        leaves_vt = leaves_vt.realize()
        if type(leaves_vt) not in (ListVariable, TupleVariable):
            return None
        if len(leaves_vt.items) != spec.num_leaves or not buildable(spec):
            return None  # torch's code raises the error
        return build(tx, spec, list(leaves_vt.items), [0])

    def constant_spec(vt: Any) -> Any:
        """The torch TreeSpec a tracker stands for when it is a constant, else None."""
        vt = vt.realize()
        if isinstance(vt, SpecVariable) or (
            type(vt) is UserDefinedObjectVariable and vt.source is None
        ):
            value = vt.value
            return value if type(value) is tp.TreeSpec else None
        return None

    class SpecVariable(UserDefinedObjectVariable):
        """A constant torch TreeSpec made by a fast path (no source, no guards)."""

        def var_getattr(self, tx: Any, name: str) -> Any:
            if name == "unflatten":
                return SpecUnflattenVariable(self)
            return super().var_getattr(tx, name)

        def tp_getattro_impl(self, tx: Any, name: str) -> Any:  # attribute reads, torch 2.14
            if name == "unflatten":
                return SpecUnflattenVariable(self)
            return super().tp_getattro_impl(tx, name)  # type: ignore[misc]

        def reconstruct(self, codegen: Any) -> None:
            # A spec that leaves the graph is loaded from a global of the frame.
            name = codegen.tx.output.install_global_by_id("__cpytree_spec", self.value)
            codegen.append_output(codegen.create_load_global(name, add=True))

    class SpecUnflattenVariable(VariableTracker):
        """`spec.unflatten` of a SpecVariable: answered directly, or traced."""

        def __init__(self, spec_vt: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.spec_vt = spec_vt

        def call_function(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
            if len(args) == 1 and not kwargs:
                result = unflatten(tx, args[0], self.spec_vt.value)
                if result is not None:
                    return result
            spec_vt = self.spec_vt
            return UserDefinedObjectVariable.call_method(spec_vt, tx, "unflatten", args, kwargs)

    class PytreeFunctionVariable(UserFunctionVariable):
        """torch's original function, answered directly when the tree allows it."""

        def call_function(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
            result = self._fast(tx, args, kwargs)
            if result is not None:
                return result
            return super().call_function(tx, args, kwargs)

        def _fast(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
            name = getattr(self.fn, "__name__", "")
            if name == "tree_unflatten":
                if len(args) != 2 or kwargs:
                    return None
                spec = constant_spec(args[1])
                return None if spec is None else unflatten(tx, args[0], spec)
            found = flatten(tx, args, kwargs)
            if found is None:
                return None
            leaves, spec = found
            if name == "tree_leaves":
                return ListVariable(leaves, mutation_type=ValueMutationNew())
            spec_vt = SpecVariable(spec)
            if name == "tree_structure":
                return spec_vt
            leaves_vt = ListVariable(leaves, mutation_type=ValueMutationNew())
            return TupleVariable([leaves_vt, spec_vt])

    return PytreeFunctionVariable
