"""torch's features that use pytree inside Dynamo, in one mode, in this process.

For each case of `feature_cases`: the outcome (a digest of the output, or
the exception's type and first line), Dynamo's bytecodes (every frame it
traced, those the operators compile for themselves included), the guards of
the frames a compiled case compiles, and a canonical digest of each graph
(the backend's for compiled cases, the exported program's for export).

Modes: "torch" (CPYTREE_INSTALL=0: torch as shipped) and "autoload" (what a
user gets: install() at `import torch` by cpytree's entry point). Run as a
child of `feature_study`:

    python -m cpytree.harness.studies.feature_probe '{"mode": "torch", "cases": [...]}'
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..child import serve
from .dynamo_probe import _output_digest, canonical_graph, counting_steps

__all__ = ["run"]


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n---\n".join(parts).encode()).hexdigest()[:16]


def _outcome(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _gradients(out: Any, args: Any) -> Any:
    import torch.utils._pytree as tp

    total: Any = 0
    for leaf in tp.tree_leaves(out):
        if getattr(leaf, "requires_grad", False) or getattr(leaf, "grad_fn", None) is not None:
            total = total + leaf.sum()
    total.backward()
    return [leaf.grad for leaf in tp.tree_leaves(args)]


def run_case(name: str) -> dict[str, Any]:
    """One case: outcome, bytecodes, guards, graphs."""
    import torch
    import torch._dynamo

    from . import feature_cases

    torch._dynamo.reset()
    guards: list[int] = []
    graphs: list[str] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append(canonical_graph(gm))
        return gm.forward

    row: dict[str, Any] = {"case": name}
    with counting_steps() as steps:
        try:
            style, built = feature_cases.build(name)
            if style == "compiled":
                fn, args = built
                compiled = torch._dynamo.optimize(
                    backend, nopython=True, guard_export_fn=lambda g: guards.append(len(g))
                )(fn)
                out = compiled(*args)
            elif style == "export":
                module, args, options = built
                program = torch.export.export(module, args, strict=options["strict"])
                if options["decompose"]:
                    program = program.run_decompositions()
                graphs.append(canonical_graph(program.graph_module))
                graphs.append(str(program.call_spec.in_spec) + str(program.call_spec.out_spec))
                out = program.module()(*args)
            elif style == "grad":
                fn, args = built
                out = _gradients(fn(*args), args)
            else:
                fn, args = built
                out = fn(*args)
            row["outcome"] = "ok " + _output_digest(out)
        except Exception as error:  # noqa: BLE001 - the outcome both modes must share
            row["outcome"] = _outcome(error)
    row["bytecodes"] = steps[0]
    row["guards"] = sum(guards)
    row["graphs"] = len(graphs)
    row["graph_digest"] = _digest(graphs)
    return row


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Every case of `config["cases"]` in this process's mode."""
    import torch

    torch.set_num_threads(1)
    import cpytree

    results = [run_case(name) for name in config["cases"]]
    return {
        "mode": config["mode"],
        "installed": cpytree.is_installed(),
        "torch_version": torch.__version__,
        "cases": results,
    }


def main(argv: list[str] | None = None) -> int:
    return serve(run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
