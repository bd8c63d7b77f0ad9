"""The Dynamo suite: compiled functions that call pytree functions.

Every public pytree function user code calls inside a compiled region, over
every node kind torch handles, with and without `is_leaf`, at 10, 100 and
1,000 leaves, plus nn.Modules whose forward takes and returns nested
structures. `dynamo_probe` compiles each case and counts what Dynamo did;
`dynamo_study` runs it with and without `cpytree.install()`. The models of
the compile zoo (`zoo/<name>`) are cases too.

A case is a name and a builder; `build(name)` returns (function, args). The
functions read `torch.utils._pytree` through the module attribute at call
time (as user code does), so they meet whatever install() put there.

    >>> [c.name for c in cases(sizes=(10,))][:2]
    ['tree_map/mixed/10', 'tree_map_only/mixed/10']
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CONTAINERS", "OPS", "SIZES", "Case", "build", "cases", "parse"]

SIZES = (10, 100, 1000)

# Operation -> (what it calls, whether it takes is_leaf). Each is a function of
# (pytree module, tree, extra tensor) that a case compiles.
OPS: dict[str, str] = {
    "tree_map": "tree_map(f, tree)",
    "tree_map_only": "tree_map_only(Tensor, f, tree)",
    "tree_map_nary": "tree_map(f, tree, tree)",
    "flatten_unflatten": "tree_unflatten(f(leaves), tree_flatten(tree)[1])",
    "leaves": "tree_leaves(tree)",
    "structure": "tree_structure(tree).num_leaves",
    "spec_unflatten": "tree_flatten(tree)[1].unflatten(...)",
    "flatten_with_path": "tree_flatten_with_path(tree)",
    "leaves_with_path": "tree_leaves_with_path(tree)",
    "map_with_path": "tree_map_with_path(f, tree)",
    "tree_map_is_leaf": "tree_map(f, tree, is_leaf=...)",
    "flatten_is_leaf": "tree_flatten(tree, is_leaf=...)",
    "tree_all": "tree_all(pred, tree)",
    "tree_any": "tree_any(pred, tree)",
    "tree_all_only": "tree_all_only(Tensor, pred, tree)",
    "tree_any_only": "tree_any_only(Tensor, pred, tree)",
    "flatten_spec": "torch.fx._pytree.tree_flatten_spec(tree, spec)",
    "flatten_up_to": "tree_structure(tree).flatten_up_to(tree)",
    "spec_methods": "num_leaves/num_nodes/children()/child(0)/is_leaf() of tree_structure(tree)",
    "flatten_with_path_is_leaf": "tree_flatten_with_path(tree, is_leaf=...)",
    "leaves_with_path_is_leaf": "tree_leaves_with_path(tree, is_leaf=...)",
}

# Container -> what a tree of it is made of.
CONTAINERS: dict[str, str] = {
    "mixed": "dict of lists of (tensor, tensor) tuples",
    "dict": "flat dict",
    "list": "flat list",
    "tuple": "flat tuple",
    "namedtuple": "list of namedtuple(a, b)",
    "ordereddict": "flat OrderedDict",
    "defaultdict": "defaultdict(list) of lists",
    "deque": "flat deque",
    "dataclass": "list of register_dataclass instances",
    "custom": "list of register_pytree_node instances",
}

# Operations run on every container (at 100 leaves); the others on "mixed" only.
_EVERY_CONTAINER = ("tree_map", "flatten_unflatten", "leaves")
# ... and on the registered (non-builtin-literal) containers only.
_REGISTERED_CONTAINERS = ("ordereddict", "defaultdict", "deque", "dataclass", "custom")
_EVERY_REGISTERED = ("tree_map_nary",)

Point = namedtuple("Point", "a b")


@dataclasses.dataclass
class Pair:
    """A dataclass registered with torch's register_dataclass."""

    x: Any
    y: Any


class Box:
    """A class registered with register_pytree_node (context: its tag)."""

    def __init__(self, tag: str, a: Any, b: Any) -> None:
        self.tag, self.a, self.b = tag, a, b


_REGISTERED = False


def _register(pt: Any) -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    pt.register_dataclass(Pair, field_names=["x", "y"])
    pt.register_pytree_node(
        Box,
        lambda box: ([box.a, box.b], box.tag),
        lambda children, tag: Box(tag, *children),
        serialized_type_name=f"{__name__}.Box",
    )
    _REGISTERED = True


@dataclasses.dataclass(frozen=True)
class Case:
    name: str  # op/container/size, or module/<name>
    op: str
    container: str
    size: int


def cases(
    sizes: Sequence[int] = SIZES, ops: Sequence[str] | None = None, modules: bool = True
) -> list[Case]:
    """The suite: every op on "mixed" at each size, the common ops on every container."""
    out: list[Case] = []
    chosen = list(OPS) if ops is None else [op for op in OPS if op in ops]
    for size in sizes:
        out.extend(Case(f"{op}/mixed/{size}", op, "mixed", size) for op in chosen)
    middle = 100 if 100 in sizes else sizes[len(sizes) // 2]
    for container in CONTAINERS:
        if container == "mixed":
            continue
        out.extend(
            Case(f"{op}/{container}/{middle}", op, container, middle)
            for op in chosen
            if op in _EVERY_CONTAINER
            or (op in _EVERY_REGISTERED and container in _REGISTERED_CONTAINERS)
        )
    if modules:
        out.extend(Case(f"module/{name}", "module", name, 0) for name in _MODULES)
        out.extend(Case(f"zoo/{name}", "zoo", name, 0) for name in _ZOO)
    return out


def parse(name: str) -> Case | None:
    """The case a name denotes (`op/container/size` or `module/name`), or None."""
    parts = name.split("/")
    if len(parts) == 2 and parts[0] == "module" and parts[1] in _MODULES:
        return Case(name, "module", parts[1], 0)
    if len(parts) == 2 and parts[0] == "zoo" and parts[1] in _ZOO:
        return Case(name, "zoo", parts[1], 0)
    if len(parts) == 3 and parts[0] in OPS and parts[1] in CONTAINERS and parts[2].isdigit():
        return Case(name, parts[0], parts[1], int(parts[2]))
    return None


def _tree(container: str, n: int) -> Any:
    import torch

    def t(i: int) -> Any:
        return torch.full((2,), float(i))

    if container == "mixed":
        groups = max(1, n // 10)
        return {f"g{g}": [(t(2 * i), t(2 * i + 1)) for i in range(5)] for g in range(groups)}
    if container == "dict":
        return {f"k{i}": t(i) for i in range(n)}
    if container == "list":
        return [t(i) for i in range(n)]
    if container == "tuple":
        return tuple(t(i) for i in range(n))
    if container == "namedtuple":
        return [Point(t(2 * i), t(2 * i + 1)) for i in range(n // 2)]
    if container == "ordereddict":
        return OrderedDict((f"k{i}", t(i)) for i in range(n))
    if container == "defaultdict":
        tree: defaultdict[str, list[Any]] = defaultdict(list)
        for i in range(n):
            tree[f"k{i % 10}"].append(t(i))
        return tree
    if container == "deque":
        return deque(t(i) for i in range(n))
    if container == "dataclass":
        return [Pair(t(2 * i), t(2 * i + 1)) for i in range(n // 2)]
    if container == "custom":
        return [Box(f"b{i % 3}", t(2 * i), t(2 * i + 1)) for i in range(n // 2)]
    raise KeyError(container)


def _op(op: str) -> Callable[..., Any]:
    import torch
    import torch.utils._pytree  # bound below through the torch module

    def pt() -> Any:
        return torch.utils._pytree  # the attribute as it is now: install() may swap it

    def is_tensor(x: Any) -> bool:
        return isinstance(x, torch.Tensor)

    table: dict[str, Callable[[Any, Any], Any]] = {
        "tree_map": lambda tree, x: pt().tree_map(lambda v: v + x, tree),
        "tree_map_only": lambda tree, x: pt().tree_map_only(torch.Tensor, lambda v: v * x, tree),
        "tree_map_nary": lambda tree, x: pt().tree_map(lambda a, b: a + b, tree, tree),
        "flatten_unflatten": lambda tree, x: _flatten_unflatten(pt(), tree, x),
        "leaves": lambda tree, x: [v + x for v in pt().tree_leaves(tree)],
        "structure": lambda tree, x: x * pt().tree_structure(tree).num_leaves,
        "spec_unflatten": lambda tree, x: _spec_unflatten(pt(), tree, x),
        "flatten_with_path": lambda tree, x: [
            v + x for _, v in pt().tree_flatten_with_path(tree)[0]
        ],
        "leaves_with_path": lambda tree, x: [v * x for _, v in pt().tree_leaves_with_path(tree)],
        "map_with_path": lambda tree, x: pt().tree_map_with_path(lambda p, v: v + x, tree),
        "tree_map_is_leaf": lambda tree, x: pt().tree_map(lambda v: v - x, tree, is_leaf=is_tensor),
        "flatten_is_leaf": lambda tree, x: [
            v - x for v in pt().tree_flatten(tree, is_leaf=is_tensor)[0]
        ],
        # the predicates hold on every leaf (all) or on none (any): whole walks
        "tree_all": lambda tree, x: x + pt().tree_all(lambda v: v.dim() == 1, tree),
        "tree_any": lambda tree, x: x + pt().tree_any(lambda v: v.dim() == 2, tree),
        "tree_all_only": lambda tree, x: (
            x + pt().tree_all_only(torch.Tensor, lambda v: v.dim() == 1, tree)
        ),
        "tree_any_only": lambda tree, x: (
            x + pt().tree_any_only(torch.Tensor, lambda v: v.dim() == 2, tree)
        ),
        "flatten_up_to": lambda tree, x: [
            v * x for v in pt().tree_structure(tree).flatten_up_to(tree)
        ],
        "spec_methods": lambda tree, x: x * _spec_methods(pt().tree_structure(tree)),
        "flatten_with_path_is_leaf": lambda tree, x: [
            v + x for _, v in pt().tree_flatten_with_path(tree, is_leaf=is_tensor)[0]
        ],
        "leaves_with_path_is_leaf": lambda tree, x: [
            v * x for _, v in pt().tree_leaves_with_path(tree, is_leaf=is_tensor)
        ],
    }
    return table[op]


def _spec_methods(spec: Any) -> int:
    first = spec.child(0)
    return int(spec.num_leaves + spec.num_nodes + len(spec.children()) + first.is_leaf())


def _flatten_spec_op(tree: Any) -> Callable[..., Any]:
    """tree_flatten_spec against the tree's spec, made before compiling (a known spec).

    As in the call of an exported module (`self._in_spec`); the spec is
    made by whatever `tree_structure` is at build time (the engine's after
    install()).
    """
    import torch.fx._pytree as fx_pytree
    import torch.utils._pytree

    spec = torch.utils._pytree.tree_structure(tree)
    return lambda tree, x: [v + x for v in fx_pytree.tree_flatten_spec(tree, spec)]


def _flatten_unflatten(pt: Any, tree: Any, x: Any) -> Any:
    leaves, spec = pt.tree_flatten(tree)
    return pt.tree_unflatten([v + x for v in leaves], spec)


def _spec_unflatten(pt: Any, tree: Any, x: Any) -> Any:
    leaves, spec = pt.tree_flatten(tree)
    return spec.unflatten([v * x for v in leaves])


# ---------------------------------------------------------------- modules


def _nested_io() -> tuple[Any, tuple[Any, ...]]:
    """forward(batch dict of tensor/list/namedtuple) -> dict of tuple/namedtuple."""
    import torch

    class NestedIO(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = torch.nn.Linear(8, 8)
            self.heads = torch.nn.ModuleList(torch.nn.Linear(8, 4) for _ in range(4))

        def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
            h = torch.relu(self.enc(batch["x"]))
            extra = sum(e.sum() for e in batch["extra"])
            outs = [head(h) + extra for head in self.heads]
            p = batch["point"]
            return {"logits": tuple(outs), "point": Point(p.a + 1, p.b * h.mean())}

    batch = {
        "x": torch.randn(3, 8),
        "extra": [torch.randn(2) for _ in range(6)],
        "point": Point(torch.randn(2), torch.randn(2)),
    }
    return NestedIO(), (batch,)


def _pytree_forward() -> tuple[Any, tuple[Any, ...]]:
    """A forward that tree_maps, flattens and unflattens its nested input."""
    import torch
    import torch.utils._pytree

    class PytreeForward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, inputs: dict[str, Any]) -> Any:
            pt = torch.utils._pytree
            normed = pt.tree_map(lambda t: t / (t.norm() + 1), inputs)
            leaves, spec = pt.tree_flatten(normed)
            mixed = [self.proj(leaf) for leaf in leaves]
            return pt.tree_unflatten(mixed, spec)

    inputs = {
        "a": [torch.randn(2, 4) for _ in range(8)],
        "b": {
            "c": (torch.randn(2, 4), torch.randn(2, 4)),
            "d": Point(torch.randn(2, 4), torch.randn(2, 4)),
        },
    }
    return PytreeForward(), (inputs,)


def _kv_cache() -> tuple[Any, tuple[Any, ...]]:
    """A decoder step over a tuple of (key, value) cache pairs, returned updated."""
    import torch

    class CacheStep(torch.nn.Module):
        def __init__(self, layers: int = 6, d: int = 8) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))

        def forward(self, x: Any, cache: tuple[tuple[Any, Any], ...]) -> Any:
            new_cache = []
            for layer, (k, v) in zip(self.layers, cache, strict=True):
                x = torch.tanh(layer(x))
                new_cache.append((torch.cat([k, x], 0), torch.cat([v, x], 0)))
            return {"hidden": x, "cache": tuple(new_cache)}

    cache = tuple((torch.randn(3, 8), torch.randn(3, 8)) for _ in range(6))
    return CacheStep(), (torch.randn(1, 8), cache)


_MODULES: dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]] = {
    "nested_io": _nested_io,
    "pytree_forward": _pytree_forward,
    "kv_cache": _kv_cache,
}


# The models of `cpytree-harness --compile` (harness/studies/zoo.py), traced as they are.
_ZOO = ("mlp", "resnet", "transformer", "nested-io")


def build(case: Case) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(function or module to compile, its arguments) for one case."""
    import torch
    import torch.utils._pytree as pt

    _register(pt)
    torch.manual_seed(0)
    if case.op == "module":
        return _MODULES[case.container]()
    if case.op == "zoo":
        from . import zoo

        return zoo.build(case.container)
    tree = _tree(case.container, case.size)
    fn = _flatten_spec_op(tree) if case.op == "flatten_spec" else _op(case.op)
    return fn, (tree, torch.tensor(2.0))
