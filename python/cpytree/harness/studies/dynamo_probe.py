"""What Dynamo does to compile one function: a deterministic account.

For each case of `dynamo_cases` (or a user's model), in this process:

* bytecodes: instruction-translator steps Dynamo took, the root frame and
  every inlined function (a counter on `InstructionTranslatorBase.step`);
* guards: the guards Dynamo installed on the compiled code (`guard_export_fn`),
  summed over the frames compiled;
* graphs, graph breaks (Dynamo's counters) and a digest of each FX graph's
  code (identical digests = identical graphs);
* compile wall time: the first call, which compiles (noisy; the counts above
  are the stable measure).

Run as a child of `dynamo_study` so that each mode gets a fresh process:

    python -m cpytree.harness.studies.dynamo_probe '{"mode": "cpytree", "cases": [...]}'

Mode "cpytree" calls `cpytree.install()` before `torch._dynamo` is imported
(install() is lazy: Dynamo learns about it on import), "torch" leaves torch
as shipped. The last line of stdout is `RESULT <json>`.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..child import serve


@contextmanager
def counting_steps() -> Iterator[list[int]]:
    """Count Dynamo's instruction steps (root and inlined frames) while active."""
    from torch._dynamo import symbolic_convert

    cls = symbolic_convert.InstructionTranslatorBase
    original = cls.step
    count = [0]

    def step(self: Any) -> Any:
        count[0] += 1
        return original(self)

    cls.step = step  # type: ignore[method-assign]
    try:
        yield count
    finally:
        cls.step = original  # type: ignore[method-assign]


def canonical_graph(gm: Any) -> str:
    """An FX graph as text without node names: op, target and argument wiring.

    Node names come from the local variables of the code Dynamo traced (a
    tensor stored into torch's `value` in dict unflatten is named `value`),
    so two traces that build the same graph through different Python can
    name its nodes differently. Two graphs with equal canonical text compute
    the same thing in the same order.
    """
    import torch.fx

    index = {node: i for i, node in enumerate(gm.graph.nodes)}

    def arg(a: Any) -> Any:
        return f"%{index[a]}" if isinstance(a, torch.fx.Node) else a

    lines = []
    for node in gm.graph.nodes:
        args = torch.fx.node.map_aggregate(node.args, arg)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, arg)
        target = node.target if isinstance(node.target, str) else torch.typename(node.target)
        lines.append(f"{node.op} {target} {args} {kwargs}")
    return "\n".join(lines)


def measure(fn: Callable[..., Any], args: tuple[Any, ...], calls: int = 1) -> dict[str, Any]:
    """Compile `fn` afresh, call it `calls` times, and count what Dynamo did."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    guards: list[int] = []
    graphs: list[str] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append(canonical_graph(gm))
        return gm.forward

    compiled = torch._dynamo.optimize(backend, guard_export_fn=lambda g: guards.append(len(g)))(fn)
    with counting_steps() as steps:
        t0 = time.perf_counter()
        out = compiled(*args)
        compile_s = time.perf_counter() - t0
        for _ in range(calls - 1):
            out = compiled(*args)
    digest = hashlib.sha256("\n---\n".join(graphs).encode()).hexdigest()[:16]
    return {
        "bytecodes": steps[0],
        "guards": sum(guards),
        "frames": len(guards),
        "graphs": len(graphs),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "break_reasons": sorted(counters["graph_break"])[:3],
        "graph_digest": digest,
        "compile_s": compile_s,
        "output": out,
    }


def _output_digest(out: Any) -> str:
    """Structure, container types and values of an output, as a digest both modes must share.

    The type of every node is hashed too (a defaultdict rebuilt as a dict
    has the same spec string on some releases and the same leaves).
    """
    import torch
    import torch.utils._pytree as pt

    kinds: list[str] = []

    def note_kind(node: Any) -> bool:
        kinds.append(f"{type(node).__module__}.{type(node).__qualname__}")
        return False

    leaves, spec = pt.tree_flatten(out, is_leaf=note_kind)
    h = hashlib.sha256(str(spec).encode())
    h.update(" ".join(kinds).encode())
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            h.update(f"{leaf.dtype}{tuple(leaf.shape)}{leaf.detach().tolist()}".encode())
        else:
            h.update(repr(leaf).encode())
    return h.hexdigest()[:16]


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Measure every case of `config["cases"]` (names) in mode `config["mode"]`."""
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    import_s = time.perf_counter() - t0
    install_s = install_cpu_s = 0.0
    if config["mode"] == "cpytree":
        import cpytree

        t0, c0 = time.perf_counter(), time.process_time()
        cpytree.install()
        install_s, install_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    dynamo_imported_by_install = "torch._dynamo" in sys.modules
    from . import dynamo_cases

    results = []
    # A warm-up compile, not reported: the first compile in a process pays
    # for lazy imports inside Dynamo, which would land on the first case.
    measure(*dynamo_cases.build(dynamo_cases.Case("warm-up", "tree_map", "mixed", 10)))
    for name in config["cases"]:
        case = dynamo_cases.parse(name)
        if case is not None:
            fn, args = dynamo_cases.build(case)
        else:  # module:callable, a user's model
            from ..usercode import load_callable

            fn, args = _user_model(load_callable(name, "--model"))
        row = measure(fn, args)
        row["output_digest"] = _output_digest(row.pop("output"))
        row["case"] = name
        results.append(row)
    return {
        "mode": config["mode"],
        "torch_version": torch.__version__,
        "import_s": import_s,
        "install_s": install_s,
        "install_cpu_s": install_cpu_s,
        "dynamo_imported_by_install": dynamo_imported_by_install,
        "cases": results,
    }


def _user_model(factory: Callable[[], Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(callable, args) from a user's factory returning (model or function, inputs)."""
    made = factory()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise TypeError("--model: the callable must return (model or function, example inputs)")
    fn, inputs = made
    return fn, inputs if isinstance(inputs, tuple) else (inputs,)


def main(argv: list[str] | None = None) -> int:
    return serve(run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
