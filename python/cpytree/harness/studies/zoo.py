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

Usage:

    model, inputs = zoo.build("mlp")
    out = model(*inputs)
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

__all__ = ["NAMES", "Features", "Pair", "Prediction", "build"]

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


def _inputs(name: str) -> tuple[Any, ...]:
    if name == "mlp":
        return (torch.randn(2, 16),)
    if name == "resnet":
        return (torch.randn(1, 3, 16, 16),)
    if name == "transformer":
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
    raise KeyError(f"unknown model {name!r}; known: {', '.join(NAMES)}")


NAMES = ("mlp", "resnet", "transformer", "nested-io")


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model `name` (eval mode, seeded weights) and its example inputs."""
    torch.manual_seed(seed)
    model = _model(name).eval()
    return model, _inputs(name)
