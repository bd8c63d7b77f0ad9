"""torch's own features that call pytree inside Dynamo: the cases `feature_probe` runs.

torch's higher-order operators (cond, while_loop, scan, associative_scan,
map, flex_attention, invoke_subgraph behind nested_compile_region, wrap,
checkpoint), nonstrict_trace, leaf functions and strict export hand pytree
functions to Dynamo's tracer from torch's own code (`_make_inlined`), not from
user code. Each case here runs one of them eagerly (they compile
themselves), compiled with `fullgraph=True`, or through `torch.export`, with
operands of every node kind torch handles.

A case is a name `feature/kind/style` and a builder returning what
`feature_probe` runs:

* style ``eager``: (function, args), called as is;
* style ``compiled``: (function, args), compiled with `nopython=True`;
* style ``export``: (module, args, options): `torch.export.export(module,
  args, strict=options["strict"])`, its module called on args, and
  `run_decompositions()` when options["decompose"];
* style ``grad``: (function, args), eager, then `.backward()` of the summed
  leaves of its output; the result is the gradients of args' tensors.

    >>> [c for c in names() if c.startswith("cond/dict/")]
    ['cond/dict/eager', 'cond/dict/compiled']
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, namedtuple
from collections.abc import Callable
from typing import Any

__all__ = ["KINDS", "build", "names"]

Pair = namedtuple("Pair", ["a", "b"])


@dataclasses.dataclass
class Data:
    """A dataclass operand (registered with torch's register_dataclass)."""

    a: Any
    b: Any


class Custom:
    """A custom node (registered with torch's register_pytree_node)."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a = a
        self.b = b


_REGISTERED: list[bool] = []


def _register() -> None:
    """Register Data and Custom with torch's registry (once per process)."""
    if _REGISTERED:
        return
    import torch.utils._pytree as tp

    tp.register_dataclass(Data)
    tp.register_pytree_node(
        Custom,
        lambda c: ([c.a, c.b], None),
        lambda leaves, _: Custom(*leaves),
        serialized_type_name="cpytree_feature_cases.Custom",
    )
    _REGISTERED.append(True)


# Node kind -> the tree of two tensors a, b it makes.
KINDS: dict[str, Callable[[Any, Any], Any]] = {
    "tuple": lambda a, b: (a, b),
    "list": lambda a, b: [a, b],
    "dict": lambda a, b: {"a": a, "b": b},
    "namedtuple": lambda a, b: Pair(a, b),
    "ordereddict": lambda a, b: OrderedDict(a=a, b=b),
    "dataclass": lambda a, b: Data(a, b),
    "custom": lambda a, b: Custom(a, b),
    "none": lambda a, b: {"a": a, "n": None, "b": (b, None)},
    "nested": lambda a, b: {"x": [a, (b, {"y": a * 2})], "z": [b, (a,)]},
}

# Kinds whose leaves are all tensors (the operands every operator accepts).
_TENSOR_KINDS = tuple(KINDS)


def _leaves_sum(tree: Any) -> Any:
    import torch.utils._pytree as tp

    total = 0
    for leaf in tp.tree_leaves(tree):
        total = total + leaf
    return total


def _double(tree: Any) -> Any:
    import torch.utils._pytree as tp

    return tp.tree_map(lambda t: t * 2, tree)


def _operands(kind: str, shape: tuple[int, ...] = (3,)) -> Any:
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(shape, generator=gen)
    b = torch.randn(shape, generator=gen)
    return KINDS[kind](a, b)


# ---------------------------------------------------------------- the features


def _cond(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    def true_fn(ops: Any) -> Any:
        return _leaves_sum(ops) + 1

    def false_fn(ops: Any) -> Any:
        return _leaves_sum(ops) - 1

    def fn(x: Any, ops: Any) -> Any:
        return torch.cond(x.sum() > 0, true_fn, false_fn, (ops,))

    return fn, (torch.ones(3), _operands(kind))


def _cond_tree_out(kind: str) -> tuple[Any, tuple[Any, ...]]:
    """cond whose branches return the operand tree itself (the output spec)."""
    import torch

    def fn(x: Any, ops: Any) -> Any:
        return torch.cond(x.sum() > 0, _double, lambda o: _double(_double(o)), (ops,))

    return fn, (torch.ones(3), _operands(kind))


def _loop_cond(i: Any, ops: Any) -> Any:
    return i < 3


def _loop_body(i: Any, ops: Any) -> Any:
    return i + 1, _double(ops)


def _while_loop(kind: str) -> tuple[Any, tuple[Any, ...]]:
    return _while_loop_of, (_operands(kind),)


def _scan_combine(carry: Any, x: Any) -> Any:
    import torch.utils._pytree as tp

    new = tp.tree_map(lambda c, v: c + v, carry, x)
    return new, tp.tree_map(lambda t: t.clone(), new)


def _scan(kind: str) -> tuple[Any, tuple[Any, ...]]:
    return _scan_of, (_operands(kind), _operands(kind, (4, 3)))


def _associative_scan(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch.utils._pytree as tp
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine(a: Any, b: Any) -> Any:
        return tp.tree_map(lambda x, y: x + y, a, b)

    def fn(xs: Any) -> Any:
        return associative_scan(combine, xs, dim=0, combine_mode="generic")

    return fn, (_operands(kind, (4, 3)),)


def _map_body(xs: Any, y: Any) -> Any:
    return _leaves_sum(xs) + y


def _map(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    return _map_of, (_operands(kind, (2, 3)), torch.ones(3))


def _nested_region(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    @torch.compiler.nested_compile_region
    def region(ops: Any) -> Any:
        return _leaves_sum(ops).sin()

    def fn(ops: Any) -> Any:
        return region(ops) + region(ops)  # the second call reuses the first's subgraph

    return fn, (_operands(kind),)


def _checkpoint(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch.utils.checkpoint

    def fn(ops: Any) -> Any:
        return torch.utils.checkpoint.checkpoint(
            lambda o: _leaves_sum(_double(o)).cos(), ops, use_reentrant=False
        )

    return fn, (_operands(kind),)


def _wrap(kind: str) -> tuple[Any, tuple[Any, ...]]:
    from torch._higher_order_ops.wrap import wrap

    def fn(ops: Any) -> Any:
        return wrap(lambda o: _leaves_sum(o) * 3, ops)

    return fn, (_operands(kind),)


def _nonstrict_trace(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    @torch._dynamo.nonstrict_trace
    def opaque(ops: Any) -> Any:
        return _leaves_sum(ops) * 2

    def fn(ops: Any) -> Any:
        return opaque(ops) + 1

    return fn, (_operands(kind),)


def _leaf_function(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch._dynamo.decorators import leaf_function  # 2.12+

    @leaf_function
    def leaf(ops: Any) -> Any:
        return (_leaves_sum(ops) * 2,)

    @leaf.register_fake  # type: ignore[attr-defined, untyped-decorator]
    def leaf_fake(ops: Any) -> Any:
        import torch.utils._pytree as tp

        return (torch.empty_like(tp.tree_leaves(ops)[0]),)

    def fn(ops: Any) -> Any:
        return leaf(ops)[0] + 1

    return fn, (_operands(kind),)


def _flex(variant: str) -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=gen) for _ in range(3))
    if variant == "score_mod":

        def fn(q: Any, k: Any, v: Any) -> Any:
            return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + (qi - kv))

        return fn, (q, k, v)
    mask = create_block_mask(lambda b, h, qi, kv: qi >= kv, 1, 1, 16, 16, device="cpu",
                             BLOCK_SIZE=8)  # fmt: skip

    def masked(q: Any, k: Any, v: Any) -> Any:
        return flex_attention(q, k, v, block_mask=mask)

    return masked, (q, k, v)


def _func_transforms(kind: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    model = torch.nn.Linear(3, 3)
    torch.manual_seed(0)
    params = dict(model.named_parameters())

    def loss(p: Any, ops: Any) -> Any:
        out = torch.func.functional_call(model, p, (_leaves_sum(ops),))
        return out.sum()

    def fn(ops: Any) -> Any:
        grads = torch.func.grad(loss)(params, ops)
        batched = torch.func.vmap(lambda t: t * 2)(torch.stack(list(grads.values())[:1]))
        return grads, batched

    return fn, (_operands(kind),)


def _export_module(feature: str) -> Any:
    """A module whose forward(ops, x) uses `feature` ("export": none, else a
    control-flow operator) on the operand tree."""
    import torch
    import torch.utils._pytree as tp

    def stacked(ops: Any) -> Any:
        return tp.tree_map(lambda t: torch.stack([t, t + 1]), ops)

    class Module(torch.nn.Module):
        def forward(self, ops: Any, x: Any) -> Any:
            if feature == "export_cond":
                return torch.cond(x.sum() > 0, _double, lambda o: _double(_double(o)), (ops,))
            if feature == "export_while_loop":
                return _while_loop_of(ops)
            if feature == "export_scan":
                return _scan_of(ops, stacked(ops))
            if feature == "export_map":
                return _map_of(stacked(ops), x)
            return {"sum": _leaves_sum(ops) + x, "tree": _double(ops)}

    return Module()


def _while_loop_of(ops: Any) -> Any:
    import torch
    from torch._higher_order_ops import while_loop

    return while_loop(_loop_cond, _loop_body, (torch.tensor(0), ops))  # type: ignore[no-untyped-call]


def _scan_of(init: Any, xs: Any) -> Any:
    from torch._higher_order_ops import scan

    return scan(_scan_combine, init, xs)


def _map_of(xs: Any, y: Any) -> Any:
    from functorch.experimental.control_flow import (  # type: ignore[import-untyped]
        map as control_map,
    )

    return control_map(_map_body, xs, y)


# feature -> (builder, kinds it runs on, styles)
_ALL = ("eager", "compiled")
_FEATURES: dict[str, tuple[Callable[[str], Any], tuple[str, ...], tuple[str, ...]]] = {
    "cond": (_cond, _TENSOR_KINDS, _ALL),
    "cond_tree_out": (_cond_tree_out, _TENSOR_KINDS, _ALL),
    "while_loop": (_while_loop, _TENSOR_KINDS, _ALL),
    "scan": (_scan, _TENSOR_KINDS, _ALL),
    "associative_scan": (_associative_scan, ("tuple", "dict", "nested"), ("compiled",)),
    "map": (_map, _TENSOR_KINDS, _ALL),
    "nested_compile_region": (_nested_region, _TENSOR_KINDS, ("compiled",)),
    "checkpoint": (_checkpoint, ("tuple", "dict", "dataclass", "custom", "nested"), ("compiled",)),
    "wrap": (_wrap, ("tuple", "dict", "namedtuple", "custom", "nested"), ("compiled",)),
    "nonstrict_trace": (_nonstrict_trace, _TENSOR_KINDS, ("compiled",)),
    "leaf_function": (_leaf_function, ("tuple", "dict", "nested"), ("compiled",)),
    "flex_attention": (_flex, ("score_mod", "block_mask"), _ALL),
    "func": (_func_transforms, ("tuple", "dict", "nested"), ("compiled",)),
    "cond_grad": (_cond, ("tuple", "dict", "nested"), ("grad",)),
    "while_loop_grad": (_while_loop, ("tuple", "dict"), ("grad",)),
    "scan_grad": (_scan, ("tuple", "dict", "nested"), ("grad",)),
}

_EXPORT_KINDS = ("tuple", "dict", "namedtuple", "ordereddict", "dataclass", "custom", "none",
                 "nested")  # fmt: skip


# export of a module using each feature: the kinds it runs on
_EXPORTS: dict[str, tuple[str, ...]] = {
    "export": _EXPORT_KINDS,
    "export_cond": _EXPORT_KINDS,
    "export_while_loop": ("tuple", "dict", "nested"),
    "export_scan": ("tuple", "dict", "nested"),
    "export_map": ("tuple", "dict", "nested"),
}


def names() -> list[str]:
    """Every case name, `feature/kind/style`."""
    out = [
        f"{feature}/{kind}/{style}"
        for feature, (_, kinds, styles) in _FEATURES.items()
        for kind in kinds
        for style in styles
    ]
    for feature, kinds in _EXPORTS.items():
        out += [
            f"{feature}/{kind}/{strict}" for kind in kinds for strict in ("strict", "nonstrict")
        ]
    out += [f"export_decompose/{kind}/nonstrict" for kind in _EXPORT_KINDS]
    return out


def build(name: str) -> tuple[str, Any]:
    """(style, what the probe runs) for case `name` (see the module docstring)."""
    _register()
    feature, kind, style = name.split("/")
    if feature.startswith("export"):
        module = _export_module(feature)
        import torch

        args = (_operands(kind), torch.ones(3))
        options = {"strict": style == "strict", "decompose": feature == "export_decompose"}
        return "export", (module, args, options)
    builder, kinds, styles = _FEATURES[feature]
    if kind not in kinds or style not in styles:
        raise KeyError(name)
    fn, args = builder(kind)
    if style == "grad":
        import torch.utils._pytree as tp

        for leaf in tp.tree_leaves(args):
            leaf.requires_grad_(True)
    return style, (fn, args)
