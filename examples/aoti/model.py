"""The model of examples/aoti: nested inputs and outputs, exported and AOT-compiled.

The C++ program (aoti_main.cc) builds the same inputs and runs the package this
script writes; tests/aoti_test.py compares the two. Inputs are deterministic
formulas both languages compute (``Inputs`` below), so nothing but the package
and the reference outputs crosses the language boundary.

    python examples/aoti/model.py build/aoti       # writes model.pt2, reference.pt
    python examples/aoti/model.py build/aoti --time-pytree   # torch's pytree cost per call

Inputs: ``forward(feats, pair, scale, mask)`` with
  feats  a dict of tuples of lists of tensors: {"a": ([x0, x1], [x2]), "b": ([x3], [])}
  pair   a namedtuple Pair(left, right)
  scale  a dataclass Scale(weight, shift) registered with torch.export
  mask   None
Outputs: {"sum": (y0, [y1, y2]), "pair": Pair(..), "scale": Scale(..), "none": None}.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


@dataclass
class Scale:
    weight: torch.Tensor
    shift: torch.Tensor


# The serialized names the C++ side refers to (aoti_main.cc's NodeTraits).
Pair.__module__ = "cpytree_aoti"
Pair.__qualname__ = "Pair"
# torch.export needs a serialized name for a namedtuple in a call spec; torch
# offers no public function for it (its error message names this one).
pytree._register_namedtuple(Pair, serialized_type_name="cpytree_aoti.Pair")
torch.export.register_dataclass(Scale, serialized_type_name="cpytree_aoti.Scale")


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(
        self,
        feats: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]],
        pair: Pair,
        scale: Scale,
        mask: None = None,
    ) -> dict[str, Any]:
        a_first, a_second = feats["a"]
        b_first, _ = feats["b"]
        h = self.proj(a_first[0] + a_first[1]) * scale.weight + scale.shift
        g = a_second[0] - b_first[0]
        return {
            "sum": (h.sum(dim=0), [h + g, g * 2]),
            "pair": Pair(pair.left @ pair.right, pair.right - pair.left),
            "scale": Scale(scale.weight * 3, h.mean().reshape(1)),
            "none": None,
        }


def leaf(k: int, *shape: int) -> torch.Tensor:
    """Input leaf number k: the formula aoti_main.cc's Leaf() computes."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32).reshape(shape) * 0.25 - k).sin()


def inputs() -> tuple[Any, ...]:
    """The example inputs (the same values aoti_main.cc builds)."""
    feats = {"a": ([leaf(0, 3, 4), leaf(1, 3, 4)], [leaf(2, 3, 4)]), "b": ([leaf(3, 3, 4)], [])}
    return (feats, Pair(leaf(4, 2, 2), leaf(5, 2, 2)), Scale(leaf(6, 4), leaf(7, 4)), None)


def build(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Model().eval()
    args = inputs()
    exported = torch.export.export(model, args)
    package = out / "model.pt2"
    torch._inductor.aoti_compile_and_package(exported, package_path=str(package))
    compiled = torch._inductor.aoti_load_package(str(package))
    with torch.no_grad():
        expected = compiled(*args)
        eager = model(*args)
    # The compiled model agrees with eager; the C++ run must equal `expected` exactly.
    for got, want in zip(pytree.tree_leaves(expected), pytree.tree_leaves(eager), strict=True):
        torch.testing.assert_close(got, want)
    leaves, spec = pytree.tree_flatten(expected)
    torch.save({"leaves": leaves, "spec": pytree.treespec_dumps(spec)}, out / "reference.pt")
    print(f"wrote {package} and {out / 'reference.pt'}")


def time_pytree(out: pathlib.Path, iters: int) -> None:
    """torch's Python pytree work around one call of the package, per call."""
    compiled = torch._inductor.aoti_load_package(str(out / "model.pt2"))
    loader = compiled.loader
    in_spec_text, out_spec_text = loader.get_call_spec()
    in_spec = pytree.treespec_loads(in_spec_text)
    out_spec = pytree.treespec_loads(out_spec_text)
    args = inputs()
    flat = [x for x in pytree.tree_leaves((args, {})) if isinstance(x, torch.Tensor)]
    outputs = loader.boxed_run(list(flat))

    def median(f: Any) -> float:
        runs = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(iters):
                f()
            runs.append((time.perf_counter() - start) * 1e6 / iters)
        return sorted(runs)[3]

    def around() -> None:
        # What AOTICompiledModel.__call__ does around boxed_run, specs loaded once.
        leaves = pytree.tree_flatten((args, {}))[0]
        _ = [x for x in leaves if isinstance(x, torch.Tensor)]
        pytree.tree_unflatten(outputs, out_spec)

    def around_with_loads() -> None:
        # AOTICompiledModel.__call__ as torch ships it: it loads both specs every call.
        pytree.treespec_loads(in_spec_text)
        pytree.treespec_loads(out_spec_text)
        around()

    def run() -> None:
        loader.boxed_run(list(flat))

    print(f"in_spec {in_spec.num_nodes} nodes / out_spec {out_spec.num_nodes} nodes")
    print(f"python flatten+unflatten around the model     {median(around):8.2f} us")
    print(f"python __call__ pytree work (with 2x loads)    {median(around_with_loads):8.2f} us")
    print(f"model boxed_run alone                          {median(run):8.2f} us")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--time-pytree", action="store_true")
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.time_pytree:
        time_pytree(args.out, args.iters)
    else:
        build(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
