"""One compile of one zoo model in this (fresh) process; prints a JSON result.

    python -m cpytree.harness.studies.compile_child '{"model": "mlp", "mode": "cpytree",
        "backend": "inductor", "profile": false}'

Steps: import torch (timed apart), build the model and run it eagerly (the
reference output), then enter the mode (`modes.enter`: in "cpytree" and
"cpytree-attrs" call `cpytree.install()`, timed apart), then time the first
call of `torch.compile(model, backend=...)`, which compiles (with
"backward": true, followed by backward() of the sum of its outputs, the
inputs requiring grad: the backward graph compiles too): wall clock and CPU
time (this process and the compiler processes it waited for), and Dynamo's
own phase timers. Then: graph breaks
and graphs from Dynamo's counters; the output
compared with the eager one (structure, and values with allclose) and a
digest of it (the parent checks both modes give identical outputs); and,
unless profiling, the time per call of the compiled and the eager model on
these tiny inputs, where per-call pytree work shows, and the calls into
pytree functions per call of the compiled model.

With "profile": true the compile runs under cProfile instead, and the result
carries the time spent inside pytree functions: the self time of the Python
functions of torch.utils._pytree, torch.fx._pytree, torch.utils._cxx_pytree
and cpytree, of cpytree's and optree's C functions, and of the builtins those
functions call directly (callbacks they make into other code are not
counted), and that time split by the torch subsystem that called pytree
(`profiling.subsystem_split`). Profiling slows the compile, so its times are reported
apart.

"model" is a zoo name or a user's `module:callable` (a module name or a .py
path) returning (model or function, example inputs); inputs are a tuple of
positional arguments or a single argument.

The last line of stdout is `RESULT <json>`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
import time
from typing import Any

from ..child import serve
from .modes import enter
from .profiling import pytree_profile


def _walk(obj: Any, out: list[Any]) -> None:
    """Structure tokens and tensors of an output, in order."""
    import torch

    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        out.append(("dict", tuple(map(str, obj))))
        for v in obj.values():
            _walk(v, out)
    elif isinstance(obj, (list, tuple)):
        out.append((type(obj).__name__, len(obj)))
        for v in obj:
            _walk(v, out)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f.name for f in dataclasses.fields(obj)]
        out.append((type(obj).__name__, tuple(fields)))
        for name in fields:
            _walk(getattr(obj, name), out)
    else:
        out.append(("leaf", repr(obj)))


def _compare(eager: Any, compiled: Any) -> tuple[bool, bool, str]:
    """(same structure, allclose values, digest of the compiled output)."""
    import torch

    a: list[Any] = []
    b: list[Any] = []
    _walk(eager, a)
    _walk(compiled, b)
    h = hashlib.sha256()
    for item in b:
        if isinstance(item, torch.Tensor):
            t = item.detach().contiguous().cpu()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(str(t.tolist()).encode())  # no numpy: it is optional for torch
        else:
            h.update(repr(item).encode())
    kinds = [("T", x.shape) if isinstance(x, torch.Tensor) else x for x in a]
    kinds_b = [("T", x.shape) if isinstance(x, torch.Tensor) else x for x in b]
    same = kinds == kinds_b
    close = same and all(
        torch.allclose(x.detach(), y.detach(), rtol=1e-4, atol=1e-5)
        for x, y in zip(a, b, strict=True)
        if isinstance(x, torch.Tensor)
    )
    return same, close, h.hexdigest()[:16]


def _per_call(fn: Any, inputs: tuple[Any, ...], target: float = 0.01, rounds: int = 15) -> float:
    """Median seconds per call over `rounds` samples of about `target` seconds."""
    fn(*inputs)
    t0 = time.perf_counter()
    fn(*inputs)
    one = max(time.perf_counter() - t0, 1e-7)
    n = max(1, int(target / one))
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*inputs)
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def _pytree_calls_per_call(fn: Any, inputs: tuple[Any, ...], calls: int = 50) -> float:
    """Calls into pytree functions per steady-state call of `fn` (profiled,
    after the timing): a call that makes none cannot change with install()."""
    import cProfile

    prof = cProfile.Profile(builtins=True)
    prof.enable()
    for _ in range(calls):
        fn(*inputs)
    prof.disable()
    return float(pytree_profile(prof)["pytree_calls"]) / calls


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the C++
    compiler Inductor runs is a child process)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _phases(first_call_s: float) -> dict[str, float]:
    from torch._dynamo.utils import compilation_time_metrics as m

    def total(key: str) -> float:
        return float(sum(m.get(key, [])))

    phases = {
        "dynamo_tracing_s": total("bytecode_tracing"),
        "backend_compile_s": total("OutputGraph.call_user_compiler"),
        "guards_s": total("build_guards"),
    }
    phases["other_s"] = max(first_call_s - sum(phases.values()), 0.0)
    return phases


def build_model(name: str) -> tuple[Any, tuple[Any, ...]]:
    """(model or function, positional inputs) of a zoo name or a `module:callable`."""
    if ":" not in name:
        from . import zoo

        return zoo.build(name)
    import torch

    from ..usercode import load_callable

    torch.manual_seed(0)
    made = load_callable(name, "--model")()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise TypeError("--model: the callable must return (model or function, example inputs)")
    fn, inputs = made
    return fn, inputs if isinstance(inputs, tuple) else (inputs,)


def run(config: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch.set_num_threads(1)
    import_s = time.perf_counter() - t0
    model, inputs = build_model(config["model"])
    backward = bool(config.get("backward"))
    if backward:
        from . import zoo

        zoo.requires_grad(inputs)
    eager = model(*inputs)
    t0 = time.perf_counter()
    enter(config["mode"])
    install_s = time.perf_counter() - t0 if config["mode"] != "torch" else 0.0
    compiled: Any = torch.compile(model, backend=config["backend"])
    prof = None
    if config.get("profile"):
        import cProfile

        prof = cProfile.Profile(builtins=True)
        prof.enable()
    w0, c0 = time.perf_counter(), _cpu()
    out = compiled(*inputs)
    if backward:
        torch.autograd.backward(zoo.loss(out))
    w1, c1 = time.perf_counter(), _cpu()
    if prof is not None:
        prof.disable()
    same, close, digest = _compare(eager, out)
    result: dict[str, Any] = {
        "model": config["model"],
        "mode": config["mode"],
        "backend": config["backend"],
        "torch_version": torch.__version__,
        "profile": bool(prof),
        "import_s": import_s,
        "install_s": install_s,
        "compile_s": w1 - w0,
        "compile_cpu_s": c1 - c0,
        "phases": _phases(w1 - w0),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "break_reasons": sorted(counters["graph_break"])[:5],
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
        "same_structure": same,
        "allclose_to_eager": close,
        "digest": digest,
    }
    if prof is not None:
        result.update(pytree_profile(prof))
    else:
        result["call_us"] = _per_call(compiled, inputs) * 1e6
        result["eager_call_us"] = _per_call(model, inputs) * 1e6
        result["call_pytree_calls"] = _pytree_calls_per_call(compiled, inputs)
        result["recompiles"] = int(counters["stats"].get("unique_graphs", 0)) - result["graphs"]
    return result


def main(argv: list[str] | None = None) -> int:
    return serve(run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
