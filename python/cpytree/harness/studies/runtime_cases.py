"""The eager torch paths of `cpytree-harness --runtime`: each case is a call.

`build(name, quick)` returns a no-argument callable running one case once,
built with whatever pytree torch has at that moment (the caller installs
cpytree first, or not). Cases of `DIST_CASES` need a gloo process group of 2
ranks already initialised (`runtime_dist` starts one); the others run in one
process. `quick` makes the inputs smaller where that matters (tests).

    fn = build("vmap-dict")
    fn()

Every case runs on the CPU; nothing is downloaded (the transformers model is
built from a config with random weights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CASES", "DIST_CASES", "build"]

# name -> what one call does (the table's "what" column).
LOCAL_CASES = {
    "export-module": "torch.export.export(m, (batch,)).module()(batch); batch: dict of "
    "tensor, list of 8 tensors, dict of 2 (tensor, tensor) tuples",
    "vmap-dict": "torch.func.vmap(f)(d); d: dict of 16 tensors (8, 4)",
    "grad-dict": "torch.func.grad(loss)(params, x); params: dict of 8 (4, 4) tensors",
    "functional-call": "torch.func.functional_call(mlp, params, (x,), {'scale': s}); "
    "mlp: 4 Linear(8, 8), params: its 8 tensors in a dict",
    "checkpoint": "checkpoint(fn, nested, use_reentrant=False) and backward; nested: "
    "dict of list of 6 tensors and a (tensor, tensor) tuple",
    "compiled-call": "steady-state call of torch.compile(m) (inductor) on the export-module "
    "batch (the compile happens while the case is built)",
    "hf-generate": "transformers LlamaForCausalLM (2 layers, hidden 32, random weights from "
    "a config) .generate(6 tokens, max_new_tokens=8, greedy)",
}
DIST_CASES = {
    "dtensor-ops": "DTensor op dispatch on 2 gloo ranks (127.0.0.1): add, mul, mm with a "
    "replicated weight, cat and stack of lists, sum, on (8, 8) tensors Shard(0)",
    "dtensor-uncached": "dtensor-ops with DTensor's sharding caches cleared before each call "
    "(the Python dispatch path every new shape or placement takes)",
    "fsdp2-step": "FSDP2 train step on 2 gloo ranks (127.0.0.1): fully_shard of 3 Linear(16, "
    "16) blocks and the root, forward of a (dict, list) input, backward, SGD step",
}
CASES = {**LOCAL_CASES, **DIST_CASES}


class _Nested:
    """The nested-input module of export-module and compiled-call (made lazily: torch)."""

    @staticmethod
    def make() -> tuple[Any, dict[str, Any]]:
        import torch

        class Nested(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
                h = self.lin(batch["x"])
                extra = [h + y for y in batch["ys"]]
                pairs = {k: (a * h, b - h) for k, (a, b) in batch["pairs"].items()}
                return {"h": h, "extra": extra, "pairs": pairs}

        batch = {
            "x": torch.randn(2, 4),
            "ys": [torch.randn(2, 4) for _ in range(8)],
            "pairs": {k: (torch.randn(2, 4), torch.randn(2, 4)) for k in ("p", "q")},
        }
        return Nested(), batch


def _export_module() -> Callable[[], Any]:
    import torch

    model, batch = _Nested.make()
    mod = torch.export.export(model, (batch,)).module()
    return lambda: mod(batch)


def _vmap_dict() -> Callable[[], Any]:
    import torch

    d = {f"k{i}": torch.randn(8, 4) for i in range(16)}
    f = torch.func.vmap(lambda t: {k: v.sin() * 2 for k, v in t.items()})
    return lambda: f(d)


def _grad_dict() -> Callable[[], Any]:
    import torch

    params = {f"w{i}": torch.randn(4, 4) for i in range(8)}
    x = torch.randn(2, 4)

    def loss(p: dict[str, Any], x: Any) -> Any:
        for w in p.values():
            x = torch.tanh(x @ w)
        return x.sum()

    g = torch.func.grad(loss)
    return lambda: g(params, x)


def _functional_call() -> Callable[[], Any]:
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

        def forward(self, x: Any, scale: Any = None) -> Any:
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x * scale

    mlp = Scaled()
    params = {k: v.detach().clone() for k, v in mlp.named_parameters()}
    x, s = torch.randn(2, 8), torch.tensor(0.5)
    return lambda: torch.func.functional_call(mlp, params, (x,), {"scale": s})


def _checkpoint() -> Callable[[], Any]:
    import torch
    from torch.utils.checkpoint import checkpoint

    nested = {
        "xs": [torch.randn(4, 4, requires_grad=True) for _ in range(6)],
        "pair": (torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)),
    }

    def fn(t: dict[str, Any]) -> Any:
        a, b = t["pair"]
        return sum(torch.sin(x @ a) for x in t["xs"]) * b

    def step() -> None:
        checkpoint(fn, nested, use_reentrant=False).sum().backward()

    return step


def _compiled_call() -> Callable[[], Any]:
    import torch

    model, batch = _Nested.make()
    compiled: Any = torch.compile(model, backend="inductor")
    compiled(batch)  # the compile
    return lambda: compiled(batch)


def _hf_generate(quick: bool) -> Callable[[], Any]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
    )
    model: Any = LlamaForCausalLM(config)
    model.eval()
    ids = torch.randint(0, 128, (1, 6))
    new = 2 if quick else 8

    def generate() -> Any:
        with torch.no_grad():
            return model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0)

    return generate


def _dtensor_ops() -> Callable[[], Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2,))
    a = distribute_tensor(torch.randn(8, 8), mesh, [Shard(0)])
    b = distribute_tensor(torch.randn(8, 8), mesh, [Shard(0)])
    w = distribute_tensor(torch.randn(8, 8), mesh, [Replicate()])

    def ops() -> Any:
        y = a + b
        z = y * 2.0
        m = z @ w
        c = torch.cat([a, b, m], dim=1)
        s = torch.stack([a, b])
        return c.sum(), s

    return ops


def _dtensor_uncached() -> Callable[[], Any]:
    import torch
    from torch.distributed.tensor import DTensor

    ops = _dtensor_ops()
    propagator: Any = DTensor._op_dispatcher.sharding_propagator
    clear_fast_path = getattr(torch._C, "_clear_DTensor_sharding_propagator_cache", None)

    def uncached() -> Any:
        propagator.propagate_op_sharding.cache_clear()
        propagator._propagate_tensor_meta_cached.cache_clear()
        if clear_fast_path is not None:  # the C++ fast path's own cache (torch 2.13)
            clear_fast_path()
        return ops()

    return uncached


def _fsdp2_step() -> Callable[[], Any]:
    import torch
    from torch.distributed.fsdp import fully_shard

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.lin(x))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(3))

        def forward(self, batch: dict[str, Any], extra: list[Any]) -> dict[str, Any]:
            x = batch["x"] + extra[0]
            for block in self.blocks:
                x = block(x)
            return {"out": x, "aux": [x.mean()]}

    torch.manual_seed(0)  # the same initial weights on every rank
    net = Net()
    for block in net.blocks:
        fully_shard(block)
    fully_shard(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    batch = {"x": torch.randn(4, 16)}
    extra = [torch.randn(4, 16)]

    def step() -> None:
        out = net(batch, extra)
        (out["out"].sum() + out["aux"][0]).backward()
        opt.step()
        opt.zero_grad()

    return step


def build(name: str, quick: bool = False) -> Callable[[], Any]:
    """A no-argument call of case `name`, built with the pytree torch has now."""
    import torch

    torch.manual_seed(0)
    builders: dict[str, Callable[[], Callable[[], Any]]] = {
        "export-module": _export_module,
        "vmap-dict": _vmap_dict,
        "grad-dict": _grad_dict,
        "functional-call": _functional_call,
        "checkpoint": _checkpoint,
        "compiled-call": _compiled_call,
        "hf-generate": lambda: _hf_generate(quick),
        "dtensor-ops": _dtensor_ops,
        "dtensor-uncached": _dtensor_uncached,
        "fsdp2-step": _fsdp2_step,
    }
    if name not in builders:
        raise KeyError(f"unknown runtime case {name!r}; known: {', '.join(CASES)}")
    return builders[name]()
