"""The spec a fast path returns, and its methods answered from the constant spec.

`SpecVariable` is the tracker of a constant torch TreeSpec made by a fast
path (tree_flatten, tree_structure, tree_flatten_with_path): it needs no
guard (specs are immutable). Its `unflatten`, `flatten_up_to`, `is_leaf`,
`children` and `child` are answered without tracing torch's method bodies
(`SpecMethodVariable`); anything else traces torch's method.
"""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as tp

from ._build import unflatten
from ._fence import (
    ConstantVariable,
    ListVariable,
    UserDefinedObjectVariable,
    ValueMutationNew,
    VariableTracker,
    on,
)
from ._walk import Fallback, up_to

__all__ = ["SpecMethodVariable", "SpecVariable", "constant_spec", "is_torch_spec"]


def is_torch_spec(value: Any) -> bool:
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

    def as_python_constant(self) -> Any:
        # torch's traced tree_flatten leaves a frozen-dataclass tracker whose
        # constant is the spec (strict export reads the output spec so).
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def reconstruct(self, codegen: Any) -> None:
        # A spec that leaves the graph is loaded from a global of the frame.
        name = codegen.tx.output.install_global_by_id("__cpytree_spec", self.value)
        codegen.append_output(codegen.create_load_global(name, add=True))


class SpecMethodVariable(VariableTracker):
    """A method of a SpecVariable: answered from the constant spec, or traced.

    `unflatten` (as tree_unflatten's fast path), `flatten_up_to` (`_walk.up_to`),
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
            ok = len(args) == 1 and on("unflatten")
            return unflatten(tx, args[0], spec) if ok else None
        if self.name == "flatten_up_to":
            if len(args) != 1 or not on("tree_map"):
                return None
            subtrees: list[Any] = []
            try:
                up_to(tx, spec, args[0], subtrees)
            except Fallback:
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


def constant_spec(vt: Any) -> Any:
    """The torch TreeSpec a tracker stands for when it is a constant, else None."""
    vt = vt.realize()
    if isinstance(vt, SpecVariable) or (
        type(vt) is UserDefinedObjectVariable and vt.source is None
    ):
        value = vt.value
        return value if is_torch_spec(value) else None
    return None
