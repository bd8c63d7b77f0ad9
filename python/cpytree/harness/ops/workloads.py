"""Default workloads of the harness: pytrees shaped like those PT2 handles.

Built with the standard library only (no torch), so the harness runs wherever
cpytree does. Tensors are stood in for by `Leaf` placeholders, opaque objects
that every backend treats as leaves, as it would a `torch.Tensor`.

The nn.Module trees reproduce what optree's `benchmark.py` extracts from
torchvision models: a module becomes
`OrderedDict(**children, tensors=Tensors(params_tuple, buffers_list),
containers=Containers(OrderedDict(_parameters), OrderedDict(_buffers)))`,
an `nn.Sequential` becomes a list of its children. `_parameters` keeps the
`None` of a missing bias, so those trees hold `None` entries. Node counts
(torch semantics: every container, leaf and `None` counts once) match the
counts optree publishes: TinyMLP 53, ResNet18 698, ResNet50 1702,
ResNet152 4932, ViT-H/14 3420.

Usage:

    from cpytree.harness.ops import workloads
    for w in workloads.default_workloads():
        tree = w.build()
        print(w.name, w.nodes, workloads.count_nodes(tree))
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHAIN_DEPTHS",
    "CHAIN_KINDS",
    "CUSTOM_NODES",
    "NAMEDTUPLES",
    "Containers",
    "CustomNode",
    "Leaf",
    "ModuleNode",
    "Tensors",
    "Workload",
    "chain",
    "count_nodes",
    "default_workloads",
    "expected_leaves",
    "get_workloads",
]


class Leaf:
    """Placeholder for a tensor: an opaque object, a leaf to every backend."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Leaf({self.name!r})"


# The two namedtuples optree's benchmark wraps each module's tensors in.
Tensors = collections.namedtuple("Tensors", ["parameters", "buffers"])
Containers = collections.namedtuple("Containers", ["parameters", "buffers"])

# The namedtuples above with the serialized names backends that write
# protocol-1 JSON (treespec_dumps) are given for them.
NAMEDTUPLES: tuple[tuple[type, str], ...] = (
    (Tensors, "cpytree.harness.ops.workloads.Tensors"),
    (Containers, "cpytree.harness.ops.workloads.Containers"),
)


class ModuleNode:
    """A registered custom node standing in for an nn.Module: named children.

    Used by the `*-registered` workloads, where each module is this class
    instead of an OrderedDict, to measure the cost of user-registered nodes.
    """

    __slots__ = ("keys", "values")

    def __init__(self, keys: tuple[str, ...], values: Iterable[Any]) -> None:
        self.keys = keys
        self.values = tuple(values)

    def __eq__(self, other: object) -> bool:
        return type(other) is ModuleNode and self.keys == other.keys and self.values == other.values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ModuleNode({dict(zip(self.keys, self.values, strict=True))!r})"


def _module_node_flatten(node: ModuleNode) -> tuple[list[Any], tuple[str, ...]]:
    return list(node.values), node.keys


def _module_node_unflatten(values: Iterable[Any], keys: tuple[str, ...]) -> ModuleNode:
    return ModuleNode(keys, values)


@dataclass(frozen=True)
class CustomNode:
    """A node class the workloads use that backends must register.

    `flatten` and `unflatten` follow torch's convention:
    `flatten(obj) -> (children, context)`, `unflatten(children, context) -> obj`.
    `child_names(obj)` names the children, for the key paths of
    `tree_flatten_with_path` (each backend wraps them in its `MappingKey`).
    """

    cls: type
    flatten: Callable[[Any], tuple[list[Any], Any]]
    unflatten: Callable[[Iterable[Any], Any], Any]
    serialized_type_name: str
    child_names: Callable[[Any], Iterable[Any]]

    def flatten_with_keys(self, key: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """torch's `flatten_with_keys_fn` with `key(name)` as each child's key."""
        flatten, names = self.flatten, self.child_names

        def flatten_with_keys(obj: Any) -> tuple[list[tuple[Any, Any]], Any]:
            children, context = flatten(obj)
            keyed = [(key(n), c) for n, c in zip(names(obj), children, strict=True)]
            return keyed, context

        return flatten_with_keys


CUSTOM_NODES: tuple[CustomNode, ...] = (
    CustomNode(
        ModuleNode,
        _module_node_flatten,
        _module_node_unflatten,
        "cpytree.harness.ops.workloads.ModuleNode",
        lambda node: node.keys,
    ),
)


@dataclass(frozen=True)
class Workload:
    """One default workload.

    `build()` returns a fresh tree. `builtin_only` means only list, tuple,
    dict and None occur (the floor instrument can run it). `nodes` is the
    node count under torch semantics, verified against torch.utils._pytree.
    """

    name: str
    build: Callable[[], Any]
    builtin_only: bool
    nodes: int
    description: str
    custom_nodes: tuple[type, ...] = ()
    # Nesting depth, when deep enough to matter (the harness probes
    # workloads deeper than Python's recursion limit in a child first).
    depth: int = 0


# ---------------------------------------------------------------------------
# A stdlib model of the nn.Module hierarchy of the zoo.


@dataclass
class _Mod:
    """An nn.Module skeleton: what optree's extract() and state_dict() read."""

    # (name, present): a missing bias is registered as None in _parameters.
    params: list[tuple[str, bool]]
    buffers: list[str]
    children: list[tuple[str, _Mod]]
    # nn.Sequential (and subclasses, e.g. torchvision's MLPBlock): a list.
    sequential: bool = False


def _leafmod(params: Iterable[tuple[str, bool]] = (), buffers: Iterable[str] = ()) -> _Mod:
    return _Mod(list(params), list(buffers), [])


def _linear(bias: bool = True) -> _Mod:
    return _leafmod([("weight", True), ("bias", bias)])


_conv = _linear  # Conv2d has the same _parameters layout as Linear.


def _norm() -> _Mod:  # LayerNorm, or the affine part of a BatchNorm
    return _leafmod([("weight", True), ("bias", True)])


def _batchnorm() -> _Mod:
    return _leafmod(
        [("weight", True), ("bias", True)],
        ["running_mean", "running_var", "num_batches_tracked"],
    )


def _act() -> _Mod:  # ReLU, GELU, Sigmoid, Dropout, pooling: no tensors
    return _leafmod()


def _mod(*children: tuple[str, _Mod], params: Iterable[tuple[str, bool]] = ()) -> _Mod:
    return _Mod(list(params), [], list(children))


def _seq(*children: _Mod, names: Iterable[str] | None = None) -> _Mod:
    names = list(names) if names is not None else [str(i) for i in range(len(children))]
    return _Mod([], [], list(zip(names, children, strict=True)), sequential=True)


def _tiny_mlp() -> _Mod:
    return _seq(_linear(True), _batchnorm(), _act(), _linear(False), _act())


def _basic_block(downsample: bool) -> _Mod:
    children = [
        ("conv1", _conv(False)),
        ("bn1", _batchnorm()),
        ("relu", _act()),
        ("conv2", _conv(False)),
        ("bn2", _batchnorm()),
    ]
    if downsample:
        children.append(("downsample", _seq(_conv(False), _batchnorm())))
    return _mod(*children)


def _bottleneck(downsample: bool) -> _Mod:
    children = [
        ("conv1", _conv(False)),
        ("bn1", _batchnorm()),
        ("conv2", _conv(False)),
        ("bn2", _batchnorm()),
        ("conv3", _conv(False)),
        ("bn3", _batchnorm()),
        ("relu", _act()),
    ]
    if downsample:
        children.append(("downsample", _seq(_conv(False), _batchnorm())))
    return _mod(*children)


def _resnet(bottleneck: bool, layers: tuple[int, int, int, int]) -> _Mod:
    block = _bottleneck if bottleneck else _basic_block
    stages = []
    for i, n in enumerate(layers):
        # torchvision downsamples in the first block of a stage when the stride
        # or the channel count changes: every stage of a bottleneck ResNet,
        # stages 2-4 of a basic-block one.
        first_downsamples = bottleneck or i > 0
        blocks = [block(first_downsamples)] + [block(False) for _ in range(n - 1)]
        stages.append((f"layer{i + 1}", _seq(*blocks)))
    return _mod(
        ("conv1", _conv(False)),
        ("bn1", _batchnorm()),
        ("relu", _act()),
        ("maxpool", _act()),
        *stages,
        ("avgpool", _act()),
        ("fc", _linear(True)),
    )


def _multihead_attention() -> _Mod:
    # q/k/v_proj_weight are registered as None when embed dims agree.
    return _mod(
        ("out_proj", _linear(True)),
        params=[
            ("in_proj_weight", True),
            ("q_proj_weight", False),
            ("k_proj_weight", False),
            ("v_proj_weight", False),
            ("in_proj_bias", True),
        ],
    )


def _vit(num_layers: int) -> _Mod:
    def encoder_block() -> _Mod:
        mlp = _seq(_linear(True), _act(), _act(), _linear(True), _act())  # MLPBlock
        return _mod(
            ("ln_1", _norm()),
            ("self_attention", _multihead_attention()),
            ("dropout", _act()),
            ("ln_2", _norm()),
            ("mlp", mlp),
        )

    encoder = _mod(
        ("dropout", _act()),
        (
            "layers",
            _seq(
                *[encoder_block() for _ in range(num_layers)],
                names=[f"encoder_layer_{i}" for i in range(num_layers)],
            ),
        ),
        ("ln", _norm()),
        params=[("pos_embedding", True)],
    )
    return _mod(
        ("conv_proj", _conv(True)),
        ("encoder", encoder),
        ("heads", _seq(_linear(True), names=["head"])),
        params=[("class_token", True)],
    )


_MODELS: dict[str, Callable[[], _Mod]] = {
    "tinymlp": _tiny_mlp,
    "resnet18": lambda: _resnet(False, (2, 2, 2, 2)),
    "resnet50": lambda: _resnet(True, (3, 4, 6, 3)),
    "resnet152": lambda: _resnet(True, (3, 8, 36, 3)),
    "vit-h14": lambda: _vit(32),
}


def _extract(mod: _Mod, style: str, prefix: str = "") -> Any:
    """optree's benchmark `extract()`, over the skeleton.

    style "optree": OrderedDict modules and Tensors/Containers namedtuples, as
    optree builds them; "builtin": the same shape with dict and tuple only;
    "registered": modules are ModuleNode, the rest as "optree".
    """
    children = [(name, _extract(child, style, f"{prefix}{name}.")) for name, child in mod.children]
    if mod.sequential:
        return [child for _, child in children]
    # One Leaf per tensor, shared by both views (optree's views alias storage).
    params = [(name, Leaf(prefix + name) if present else None) for name, present in mod.params]
    buffers = [(name, Leaf(prefix + name)) for name in mod.buffers]
    present = tuple(leaf for _, leaf in params if leaf is not None)
    buffer_list = [leaf for _, leaf in buffers]
    if style == "builtin":
        tensors: Any = (present, buffer_list)
        containers: Any = (dict(params), dict(buffers))
    else:
        tensors = Tensors(present, buffer_list)
        od = collections.OrderedDict
        containers = Containers(od(params), od(buffers))
    entries = [*children, ("tensors", tensors), ("containers", containers)]
    if style == "builtin":
        return dict(entries)
    if style == "registered":
        return ModuleNode(tuple(k for k, _ in entries), [v for _, v in entries])
    return collections.OrderedDict(entries)


def _state_dict(mod: _Mod, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """nn.Module.state_dict() order: own params, own buffers, then children."""
    out = {} if out is None else out
    for name, present in mod.params:
        if present:
            out[prefix + name] = Leaf(prefix + name)
    for name in mod.buffers:
        out[prefix + name] = Leaf(prefix + name)
    for name, child in mod.children:
        _state_dict(child, f"{prefix}{name}.", out)
    return out


# ---------------------------------------------------------------------------
# Other PT2-shaped trees.


def _kv_cache(num_layers: int = 32) -> dict[str, Any]:
    """A decoder's output: logits plus a legacy key/value cache per layer."""
    cache = tuple((Leaf(f"k{i}"), Leaf(f"v{i}")) for i in range(num_layers))
    return {"logits": Leaf("logits"), "past_key_values": cache}


def _flat_list(n: int = 1000) -> list[Any]:
    return [Leaf(f"arg{i}") for i in range(n)]


def _tiny_call() -> tuple[Any, ...]:
    """One `(args, kwargs)` call: `((a, b), {"x": c})`."""
    return ((Leaf("a"), Leaf("b")), {"x": Leaf("c")})


def _deep(depth: int = 200) -> Any:
    """Containers nested `depth` deep, cycling list/tuple/dict, a leaf beside each."""
    tree: Any = Leaf("bottom")
    for i in range(depth):
        leaf = Leaf(f"d{i}")
        kind = i % 3
        if kind == 0:
            tree = [tree, leaf]
        elif kind == 1:
            tree = (tree, leaf)
        else:
            tree = {"next": tree, "leaf": leaf}
    return tree


# The deep family: one kind of node nested `depth` deep, one leaf at the
# bottom (the leaf is a `Leaf`: None is a node to jax and optree).
CHAIN_KINDS = ("list", "tuple", "dict", "custom")
CHAIN_DEPTHS = (200, 2000)


def chain(kind: str, depth: int) -> Any:
    """A chain of `depth` nodes of one `kind` of CHAIN_KINDS, each the only
    child of its parent, around one leaf: `[[...[leaf]...]]` for "list"."""
    tree: Any = Leaf("bottom")
    for _ in range(depth):
        if kind == "list":
            tree = [tree]
        elif kind == "tuple":
            tree = (tree,)
        elif kind == "dict":
            tree = {"next": tree}
        elif kind == "custom":
            tree = ModuleNode(("next",), (tree,))
        else:
            raise ValueError(f"unknown chain kind {kind!r}; known: {', '.join(CHAIN_KINDS)}")
    return tree


def _chain_workload(kind: str, depth: int) -> Workload:
    what = "registered custom node (ModuleNode)" if kind == "custom" else kind
    return Workload(
        name=f"chain-{kind}-{depth}",
        build=lambda: chain(kind, depth),
        builtin_only=kind != "custom",
        nodes=depth + 1,
        description=f"{depth} nested one-child {what} nodes around one leaf",
        custom_nodes=(ModuleNode,) if kind == "custom" else (),
        depth=depth,
    )


def _module_workload(model: str, label: str, nodes: int, style: str) -> Workload:
    build_model = _MODELS[model]
    suffix = {"optree": "", "builtin": "-builtin", "registered": "-registered"}[style]
    what = {
        "optree": "OrderedDict modules, Tensors/Containers namedtuples, as optree extracts them",
        "builtin": "same shape with dict/tuple only",
        "registered": "modules as a registered custom node class",
    }[style]
    return Workload(
        name=model + suffix,
        build=lambda: _extract(build_model(), style),
        builtin_only=style == "builtin",
        nodes=nodes,
        description=f"{label} nn.Module tree: {what}",
        custom_nodes=(ModuleNode,) if style == "registered" else (),
    )


_MODULE_NODES = (
    ("tinymlp", "TinyMLP", 53),
    ("resnet18", "ResNet18", 698),
    ("resnet50", "ResNet50", 1702),
    ("resnet152", "ResNet152", 4932),
    ("vit-h14", "ViT-H/14", 3420),
)


def default_workloads() -> list[Workload]:
    """All default workloads, in table order."""
    out = [_module_workload(m, label, n, "optree") for m, label, n in _MODULE_NODES]
    out += [_module_workload(m, label, n, "builtin") for m, label, n in _MODULE_NODES]
    out.append(_module_workload("resnet50", "ResNet50", 1702, "registered"))
    out += [
        Workload(
            "state-dict-resnet50",
            lambda: _state_dict(_MODELS["resnet50"]()),
            True,
            321,
            "ResNet50 state dict: flat insertion-ordered dict name -> tensor (320 entries)",
        ),
        Workload(
            "kv-cache",
            _kv_cache,
            True,
            99,
            "decoder output: {'logits', 'past_key_values': 32 x (k, v)}",
        ),
        Workload("flat-list-1000", _flat_list, True, 1001, "flat list of 1,000 arguments"),
        Workload("tiny-call", _tiny_call, True, 6, "one call: ((a, b), {'x': c})"),
        Workload("deep-200", _deep, True, 401, "200 nested list/tuple/dict levels", depth=200),
    ]
    out += [_chain_workload(kind, depth) for depth in CHAIN_DEPTHS for kind in CHAIN_KINDS]
    return out


def get_workloads(names: Iterable[str] | None = None) -> list[Workload]:
    """The named default workloads (all when `names` is None), in table order.

    Raises KeyError naming any unknown workload.
    """
    every = default_workloads()
    if names is None:
        return every
    wanted = list(names)
    known = {w.name for w in every}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise KeyError(
            f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return [w for w in every if w.name in wanted]


# ---------------------------------------------------------------------------
# Torch semantics for the node types above, to check backends' answers.


def _children(node: Any) -> Iterator[Any] | None:
    t = type(node)
    if t is list or t is tuple or t is collections.OrderedDict or t is dict:
        items: Iterable[Any] = node.values() if isinstance(node, dict) else node
        return iter(items)
    if t is ModuleNode:
        module: ModuleNode = node
        return iter(module.values)
    if isinstance(node, tuple) and hasattr(t, "_fields"):  # namedtuple
        return iter(tuple(node))
    return None


def expected_leaves(tree: Any) -> list[Any]:
    """The leaves torch.utils._pytree would give, in its order (None is a leaf)."""
    out: list[Any] = []
    stack = [iter((tree,))]
    while stack:
        for node in stack[-1]:
            kids = _children(node)
            if kids is None:
                out.append(node)
            else:
                stack.append(kids)
            break
        else:
            stack.pop()
    return out


def count_nodes(tree: Any) -> int:
    """num_nodes of torch's spec of `tree`: containers, leaves and Nones."""
    n = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        n += 1
        kids = _children(node)
        if kids is not None:
            stack.extend(kids)
    return n
