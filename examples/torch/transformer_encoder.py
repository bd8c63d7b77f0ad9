"""A model for `cpytree-harness --compile --model`: a 12-layer TransformerEncoder.

    cpytree-harness --compile --model examples/torch/transformer_encoder.py:make \
        --compile-backend aot_eager

`make()` returns (model, example inputs), the form `--model` expects. With
aot_eager, Dynamo, AOTAutograd and FakeTensor do all the work of a compile
and no kernels are generated: the share of pytree work is the largest.
"""

from __future__ import annotations

from typing import Any

import torch


def make(layers: int = 12, d_model: int = 64) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=d_model, nhead=4, dim_feedforward=2 * d_model, batch_first=True
    )
    model = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    return model.eval(), (torch.randn(2, 8, d_model),)  # eval: no dropout, outputs comparable
