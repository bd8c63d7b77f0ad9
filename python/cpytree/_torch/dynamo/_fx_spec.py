"""torch.fx's `tree_flatten_spec(tree, spec)` answered from the trackers.

Part of the ``trackers`` layer (the "flatten_spec" fast path): imported by
`_trackers` on the first such call, once `_inventory.paths_off()` found every
name this path uses.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from torch._dynamo.variables import (  # present: this path is on
    UserDefinedObjectVariable,
    UserFunctionVariable,
    VariableTracker,
)

from ._fence import (
    AttrSource,
    GuardBuilder,
    ImportSource,
    ListVariable,
    TorchSource,
    Unsupported,
    ValueMutationNew,
    install_guard,
    moved,
)
from ._spec_methods import SpecVariable, constant_spec, is_torch_spec
from ._walk import flatten, getitem

__all__ = ["flatten_spec"]


def _inlining_realizes_first_argument() -> bool:
    """Whether Dynamo realizes the first argument of every call it inlines.

    torch 2.10-2.11's `build_inline_tracer` asks `isinstance(args[0],
    NNModuleVariable)` of every inlined call, which realizes a lazy tracker:
    tracing torch.fx's recursive `tree_flatten_spec(child, child_spec)`
    realizes every node of the tree, each leaf a graph input in tree order,
    before the compiled code's next read. 2.12+ peeks at a lazy tracker's
    type instead (`peek_type`) and leaves it lazy (VERSIONS).
    """
    from ..._torch_link._inventory import lookup

    method = lookup("torch._dynamo.symbolic_convert",
                    "InliningInstructionTranslator.build_inline_tracer")  # VERSIONS  # fmt: skip
    code = getattr(method, "__code__", None)
    return code is not None and "peek_type" not in code.co_names


_REALIZES_FIRST_ARGUMENT = _inlining_realizes_first_argument()


def _guard_fx_registry(tx: Any) -> None:
    # torch.fx's own registry decides how each spec node is read: a
    # registration after compiling recompiles. (Its keys are types: the
    # guard compares them in order.)
    root = TorchSource() if moved(ImportSource) else ImportSource("torch")  # VERSIONS
    source = AttrSource(AttrSource(AttrSource(root, "fx"), "_pytree"),
                        "SUPPORTED_NODES")  # fmt: skip
    tx.output.guard_on_key_order.add(source)
    install_guard(source.make_guard(GuardBuilder.DICT_KEYS_MATCH))


def _known_spec(tx: Any, vt: Any) -> Any:
    """The torch TreeSpec `vt` is known to be for as long as the guards hold, or None.

    A constant spec (made by a fast path, or sourceless) needs no guard. A
    torch TreeSpec reached through a source (a module's `_in_spec`, a
    global) is pinned by an ID_MATCH: torch's TreeSpec is a frozen dataclass
    that torch never changes after construction (it is hashed by structure);
    an engine spec posing as one is immutable and pinned by its own ID_MATCH.
    """
    spec = constant_spec(vt)
    if spec is not None:
        return spec
    vt = vt.realize()
    if (isinstance(vt, UserDefinedObjectVariable) and vt.source is not None
            and is_torch_spec(vt.value)):  # fmt: skip
        install_guard(vt.source.make_guard(GuardBuilder.ID_MATCH))
        return vt.value
    return None


def flatten_spec(fn_vt: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`torch.fx._pytree.tree_flatten_spec(tree, spec)` against a known spec, or None.

    torch.fx reads each node the way its registry says (dict: `tree[key]`
    for each key of the spec; list, tuple, namedtuple: `tree[i]` for each
    child; no type check) and, for a spec type it has no entry for,
    flattens that subtree and compares specs. The same reads are made here
    as Dynamo traces a subscript (same guards), a custom entry's function
    is traced, and an unregistered subtree goes through the flatten fast
    path; a subtree whose spec differs is handed to torch's function (which
    raises its error). Guards: DICT_KEYS_MATCH on torch.fx's registry, an
    ID_MATCH on a spec reached through a source (`_known_spec`), and those
    of the reads.
    """
    if len(args) != 2 or kwargs:
        return None
    spec = _known_spec(tx, args[1])
    if spec is None:
        return None
    _guard_fx_registry(tx)
    _closure_check(args[0], spec)
    out: list[Any] = []
    _spec_leaves(fn_vt, tx, args[0], spec, out)
    return ListVariable(out, mutation_type=ValueMutationNew())


def _closure_check(vt: Any, spec: Any) -> None:
    """What tracing torch.fx's first read of the root does besides the read.

    On CPython < 3.12 the comprehension in `_dict_flatten_spec` (and the
    list/tuple ones) is a nested function closing over the node; before
    inlining it, Dynamo tries to turn that closure into a constant, which
    realizes the tree's trackers in order up to the first that is not one
    (the first tensor leaf: it becomes a graph input at that moment). Once
    per compiled call, as measured on torch 2.13 and 2.14; done here too so
    that the graph's inputs come in torch's order.
    """
    if sys.version_info >= (3, 12) or spec.is_leaf():
        return
    with contextlib.suppress(NotImplementedError, Unsupported):
        vt.as_python_constant()


def _spec_leaves(fn_vt: Any, tx: Any, vt: Any, spec: Any, out: list[Any]) -> None:
    import torch.fx._pytree as fx

    if _REALIZES_FIRST_ARGUMENT:  # as inlining torch.fx's call on this node does
        vt = vt.realize()
    if spec.is_leaf():
        out.append(vt)
        return
    fn = fx.SUPPORTED_NODES.get(spec.type)
    if fn is None:
        walk = flatten(tx, [vt], {}, with_paths=False)
        if walk is not None and walk.tree_spec == spec:
            out.extend(walk.leaves)
            return
        result = UserFunctionVariable.call_function(fn_vt, tx, [vt, SpecVariable(spec)], {})
        out.extend(result.unpack_var_sequence(tx))
        return
    if fn is fx._dict_flatten_spec:
        children = [getitem(tx, vt, key) for key in spec.context]
    elif fn in (fx._list_flatten_spec, fx._tuple_flatten_spec, fx._namedtuple_flatten_spec):
        children = [getitem(tx, vt, i) for i in range(spec.num_children)]
    else:
        flat = VariableTracker.build(tx, fn).call_function(tx, [vt, SpecVariable(spec)], {})
        children = flat.unpack_var_sequence(tx)
    for child, child_spec in zip(children, spec.children(), strict=False):
        _spec_leaves(fn_vt, tx, child, child_spec, out)
