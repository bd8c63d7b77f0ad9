"""The --compile model zoo: tiny models built from torch.nn only.

Importing this module imports torch; the harness imports it only inside the
child processes of the compile study (`compile_child`). Every model is
small, so a CPU compile takes seconds, and is put in eval mode (dropout off,
batch norm on running statistics) so outputs are deterministic.

* mlp          Linear/ReLU stack, input (2, 16)
* resnet       ResNet-style CNN: conv stem, two basic blocks (one
               downsampling), pooling, linear head; input (1, 3, 16, 16)
* transformer  nn.TransformerEncoderLayer (d_model 32, 4 heads); input (2, 5, 32)
* nested-io    takes {"features": Features dataclass, "pair": Pair namedtuple,
               "extra": [tensor, tensor]}, calls tree_map inside forward, and
               returns {"pred": Prediction dataclass holding a dict with a
               namedtuple, "totals": [tensor]}: the pytree-heavy calling
               convention of real models
* block        a pre-norm transformer block (LayerNorm, 4-head
               nn.MultiheadAttention, GELU MLP; d 32); input (2, 5, 32)
* stack        six such blocks; input (2, 5, 32)
* pytree-blocks six blocks whose forward flattens a dict of five tensors
               (torch.utils._pytree.tree_flatten) and unflattens the
               updated leaves; input (2, 16): the model of issue 40, a
               user's forward with pytree calls in it

`block` and `stack` are not in the default `--compile` set: they are the
models of the install() variants study (`--compile-modes`, `--backward`,
`--warm`, `--replay`), which compiles forward and backward.

Usage:

    model, inputs = zoo.build("mlp")
    out = model(*inputs)
    loss(out).backward()          # after requires_grad(inputs), for the inputs' grads too
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

__all__ = ["NAMES", "Features", "Pair", "Prediction", "build", "loss", "requires_grad"]

Pair = collections.namedtuple("Pair", ["a", "b"])


@dataclasses.dataclass
class Features:
    x: torch.Tensor
    mask: torch.Tensor


@dataclasses.dataclass
class Prediction:
    logits: torch.Tensor
    aux: dict[str, Any]


# Registered as pytree nodes, as libraries that pass dataclasses around do.
pytree.register_dataclass(Features)
pytree.register_dataclass(Prediction)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        result: torch.Tensor = self.relu(out + identity)
        return result


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        )
        self.layer1 = BasicBlock(16, 16, 1)
        self.layer2 = BasicBlock(16, 32, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        logits: torch.Tensor = self.fc(torch.flatten(self.pool(x), 1))
        return logits


class NestedIO(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(8, 16)
        self.gate = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        f: Features = batch["features"]
        pair: Pair = batch["pair"]
        h = torch.relu(self.enc(f.x)) * f.mask
        g = torch.sigmoid(self.gate(pair.a + pair.b))
        # Looked up at call time: after cpytree.install() this is cpytree's.
        extra = pytree.tree_map(lambda t: t * 2.0, batch["extra"])
        h = h * g + extra[0] - extra[1]
        pred = Prediction(logits=self.head(h), aux={"h": h, "pair": Pair(g, h.mean(-1))})
        return {"pred": pred, "totals": [h.sum()]}


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then + ff(ln2(x))."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        out: torch.Tensor = x + self.ff(self.ln2(x))
        return out


class Stack(nn.Module):
    """`n` Blocks in a row."""

    def __init__(self, n: int = 6) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class PytreeBlock(nn.Module):
    """Updates a dict of five tensors through one flatten and one unflatten."""

    KEYS = ("q", "k", "v", "gate", "bias")

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # Looked up at call time: after cpytree.install() these are cpytree's.
        leaves, spec = pytree.tree_flatten(state)
        mixed = torch.tanh(self.proj(leaves[0] + leaves[1]))
        new = [mixed * (i + 1) + leaf for i, leaf in enumerate(leaves)]
        out: dict[str, torch.Tensor] = pytree.tree_unflatten(new, spec)
        return out


class PytreeBlocks(nn.Module):
    """`n` PytreeBlocks in a row; takes and returns the dict of five tensors."""

    def __init__(self, n: int = 6) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PytreeBlock() for _ in range(n))

    def forward(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        for block in self.blocks:
            state = block(state)
        return state


def _inputs(name: str) -> tuple[Any, ...]:
    if name == "pytree-blocks":
        return ({k: torch.randn(2, 16) for k in PytreeBlock.KEYS},)
    if name == "mlp":
        return (torch.randn(2, 16),)
    if name == "resnet":
        return (torch.randn(1, 3, 16, 16),)
    if name in ("transformer", "block", "stack"):
        return (torch.randn(2, 5, 32),)
    batch = {
        "features": Features(torch.randn(2, 8), (torch.rand(2, 16) > 0.2).float()),
        "pair": Pair(torch.randn(2, 8), torch.randn(2, 8)),
        "extra": [torch.randn(2, 16), torch.randn(2, 16)],
    }
    return (batch,)


def _model(name: str) -> nn.Module:
    if name == "mlp":
        return nn.Sequential(
            nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)
        )
    if name == "resnet":
        return TinyResNet()
    if name == "transformer":
        return nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
        )
    if name == "nested-io":
        return NestedIO()
    if name == "block":
        return Block()
    if name == "stack":
        return Stack()
    if name == "pytree-blocks":
        return PytreeBlocks()
    raise KeyError(f"unknown model {name!r}; known: {', '.join(NAMES)}")


NAMES = ("mlp", "resnet", "transformer", "nested-io", "block", "stack", "pytree-blocks")


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model `name` (eval mode, seeded weights) and its example inputs."""
    torch.manual_seed(seed)
    model = _model(name).eval()
    return model, _inputs(name)


def _tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors of a model's inputs or outputs, in order, without pytree
    functions (whose cost install() changes)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in _tensors(getattr(obj, f.name))]
    return []


def requires_grad(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """`inputs`, their floating-point tensors now requiring grad (in place)."""
    for t in _tensors(inputs):
        if t.is_floating_point():
            t.requires_grad_()
    return inputs


def loss(out: Any) -> torch.Tensor:
    """A scalar to call backward() on: the sum of every tensor of `out`."""
    tensors = _tensors(out)
    total = tensors[0].sum()
    for t in tensors[1:]:
        total = total + t.sum()
    return total
