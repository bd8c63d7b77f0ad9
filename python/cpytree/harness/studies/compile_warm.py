"""`cpytree-harness --compile --warm`: warm compiles in one process, modes interleaved.

The fresh-process study (`compile_bench`) pays for imports and first-time
caches on every run; the few percent install() changes a compile by drown in
that noise on a busy machine. Here one child process builds the model,
compiles it once (not counted: imports, first-time caches), then `reps`
rounds in which every mode in turn enters its mode (`modes.enter`), compiles
after `torch._dynamo.reset()` and a garbage collection, runs the first call
and backward() of its outputs' sum, and `cpytree.uninstall()`s: wall clock
and CPU time of the process per compile.

    study = run(["block"], backend="aot_eager", reps=7, modes=("torch", "cpytree"))
    print(terminal(study))

The child: `python -m cpytree.harness.studies.compile_warm '{"model": "block", ...}'`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..child import ChildFailed, serve, spawn
from .modes import MODES

__all__ = ["markdown", "run", "terminal"]

_TIMEOUT_S = 1800


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Warm compiles of one model, modes interleaved: seconds per mode."""
    import gc

    import torch
    import torch._dynamo

    import cpytree

    from . import zoo
    from .compile_child import build_model
    from .modes import enter

    model, inputs = build_model(config["model"])
    zoo.requires_grad(inputs)

    def compile_once() -> tuple[float, float]:
        torch._dynamo.reset()
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        compiled: Any = torch.compile(model, backend=config["backend"])
        torch.autograd.backward(zoo.loss(compiled(*inputs)))
        return time.perf_counter() - t0, time.process_time() - c0

    compile_once()  # warm-up: imports, first-time caches
    wall: dict[str, list[float]] = {m: [] for m in config["modes"]}
    cpu: dict[str, list[float]] = {m: [] for m in config["modes"]}
    for _ in range(config["reps"]):
        for mode in wall:
            enter(mode)
            w, c = compile_once()
            cpytree.uninstall()
            wall[mode].append(w)
            cpu[mode].append(c)
    return {"model": config["model"], "torch_version": torch.__version__, "wall": wall, "cpu": cpu}


def run(
    models: Sequence[str], backend: str, reps: int, modes: Sequence[str] = MODES
) -> dict[str, Any]:
    """One child per model; the study for results.json."""
    results = []
    for name in models:
        config = {"model": name, "backend": backend, "reps": reps, "modes": list(modes)}
        try:
            results.append(spawn("cpytree.harness.studies.compile_warm", config, _TIMEOUT_S))
        except ChildFailed as exc:
            results.append({"model": name, "error": str(exc)})
    return {
        "measure": "warm",
        "backend": backend,
        "reps": reps,
        "modes": list(modes),
        "results": results,
    }


def terminal(study: dict[str, Any]) -> str:
    """Per model: median and least ms per compile, CPU then wall, against the first mode."""
    modes = study["modes"]
    width = max(7, *map(len, modes))
    lines = []
    for r in study["results"]:
        lines.append(
            f"torch.compile({r['model']}, backend={study['backend']!r}) forward+backward, warm "
            f"compiles in one process after torch._dynamo.reset(), modes interleaved, "
            f"{study['reps']} each"
        )
        if "error" in r:
            lines.append(f"  ERROR {r['error']}")
            continue
        for kind in ("cpu", "wall"):
            base = statistics.median(r[kind][modes[0]])
            for mode in modes:
                ts = r[kind][mode]
                med = statistics.median(ts)
                lines.append(
                    f"  {kind:4s} {mode:{width}s} median {med * 1e3:7.1f} ms  "
                    f"min {min(ts) * 1e3:7.1f}  ({(med / base - 1) * 100:+.1f}% vs {modes[0]})"
                )
    return "\n".join(lines)


def markdown(study: dict[str, Any]) -> str:
    """The terminal text under a heading, for report.md."""
    return "\n".join(
        [
            "## torch.compile warm, in one process, with and without cpytree.install()",
            "",
            "```",
            terminal(study),
            "```",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    return serve(child, argv)


if __name__ == "__main__":
    raise SystemExit(main())
