"""One compile of one zoo model in this (fresh) process; prints a JSON result.

    python -m cpytree.harness.studies.compile_child '{"model": "mlp", "mode": "cpytree",
        "backend": "inductor", "profile": false}'

Steps: import torch (timed apart), build the model and run it eagerly (the
reference output), then in mode "cpytree" call `cpytree.install()` (timed
apart), then time the first call of `torch.compile(model, backend=...)`,
which compiles: wall clock and CPU time (this process and the compiler
processes it waited for), and Dynamo's own phase timers. Then: graph breaks
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
(`subsystem_split`). Profiling slows the compile, so its times are reported
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

_PYTREE_FILES = (
    os.path.join("torch", "utils", "_pytree.py"),
    os.path.join("torch", "fx", "_pytree.py"),
    os.path.join("torch", "utils", "_cxx_pytree.py"),
)
_PYTREE_C = ("cpytree._C", "optree.")


def _cpytree_dir() -> str:
    import cpytree

    return os.path.dirname(os.path.abspath(cpytree.__file__))


def _is_pytree(key: tuple[str, int, str], cpytree_dir: str, harness_dir: str) -> bool:
    filename, _, name = key
    if filename == "~":
        return any(tag in name for tag in _PYTREE_C)
    if filename.endswith(_PYTREE_FILES):
        return True
    return filename.startswith(cpytree_dir) and not filename.startswith(harness_dir)


# Torch subsystem of a caller, by the path of its file: the first entry whose
# fragment the path contains wins (proxy_tensor before the rest of torch/fx).
SUBSYSTEMS = ("Dynamo", "AOTAutograd", "FakeTensor/proxy", "export", "inductor", "other")
_SUBSYSTEM_PATHS = (
    ("torch/_dynamo/", "Dynamo"),
    ("torch/_functorch/", "AOTAutograd"),
    ("torch/fx/experimental/proxy_tensor", "FakeTensor/proxy"),
    ("torch/_subclasses/", "FakeTensor/proxy"),
    ("torch/fx/", "FakeTensor/proxy"),
    ("torch/export/", "export"),
    ("torch/_export/", "export"),
    ("torch/_inductor/", "inductor"),
)


def subsystem_of(filename: str) -> str:
    """The subsystem of SUBSYSTEMS a source file belongs to ("other" if none)."""
    path = filename.replace(os.sep, "/")
    for fragment, name in _SUBSYSTEM_PATHS:
        if fragment in path:
            return name
    return "other"


def subsystem_split(
    stats: dict[Any, Any], pytree: set[Any], other_files: dict[str, float] | None = None
) -> dict[str, float]:
    """Pytree time of a cProfile run split by the subsystem that called pytree.

    cProfile keeps, for each function, its callers one level up with the
    time spent in it per caller (pstats' `callers`: caller -> (calls,
    primitive calls, self time, cumulative time)), not whole stacks. The
    split therefore propagates along those edges: each pytree function's
    self time, and the time of the builtins it calls directly, goes to its
    callers in proportion to the self time each edge carries; a caller that
    is not pytree code gives the subsystem of its file (`subsystem_of`); a
    caller that is pytree code, or a builtin (no file, e.g. `map`), passes its
    share on to its own callers in proportion to the cumulative time of each
    of its caller edges; recursion (a function reached again along the same
    chain) is cut. So pytree time lands on the nearest non-pytree caller
    with a file, exactly for direct calls and by the one-level averages
    cProfile has for calls made through other pytree functions. A stack walk
    under `sys.setprofile` would be exact but slows the compile several fold;
    the cProfile run is already there. `other_files`, when given, receives
    the seconds of direct calls from files of no listed subsystem, per file.
    """
    memo: dict[Any, dict[str, float]] = {}
    active: set[Any] = set()  # the chain being resolved: edges back into it are cut

    def share(key: Any) -> tuple[dict[str, float], bool]:
        """Where a call of `key` (pytree function or builtin) comes from, as
        fractions per subsystem, and whether no edge was cut to get it (only
        then is it final: a cut result depends on the chain it was asked from).
        A caller whose own share is empty (every path back ran into the chain)
        is left out of the weighting."""
        if key in memo:
            return memo[key], True
        if key not in stats:
            return {"other": 1.0}, True
        active.add(key)
        cut = False
        parts: list[tuple[float, dict[str, float]]] = []
        for c, v in stats[key][4].items():
            if c in active:
                cut = True
                continue
            if c in pytree or c[0] == "~":
                dist, complete = share(c)
                cut = cut or not complete
                if not dist:
                    continue
            else:
                dist = {subsystem_of(c[0]): 1.0}
            parts.append((v[3], dist))
        active.discard(key)
        weight = sum(w for w, _ in parts)
        out: dict[str, float] = {}
        for w, dist in parts:
            frac = w / weight if weight > 0 else 1.0 / len(parts)
            for name, x in dist.items():
                out[name] = out.get(name, 0.0) + frac * x
        if not parts and not cut:
            out = {"other": 1.0}  # called from nowhere the profile saw
        if not cut:
            memo[key] = out
        return out, not cut

    def origin(key: Any) -> dict[str, float]:
        return share(key)[0] or {"other": 1.0}

    total = dict.fromkeys(SUBSYSTEMS, 0.0)

    def add(dist: dict[str, float], secs: float) -> None:
        for name, frac in dist.items():
            total[name] += secs * frac

    for key, (_, _nc, tt, _, callers) in stats.items():
        if key in pytree:
            for c, v in callers.items():
                if c == key:  # self-recursion: as the function's outer calls
                    add(origin(key), v[2])
                elif c in pytree or c[0] == "~":
                    add(origin(c), v[2])
                else:
                    name = subsystem_of(c[0])
                    total[name] += v[2]
                    if name == "other" and other_files is not None:
                        label = _short(c[0])
                        other_files[label] = other_files.get(label, 0.0) + v[2]
            if not callers:
                total["other"] += tt
        elif key[0] == "~":
            for c, v in callers.items():
                if c in pytree:  # a builtin's time on behalf of a pytree function
                    add(origin(c), v[2])
    return total


def _pytree_profile(prof: Any) -> dict[str, Any]:
    """Self time inside pytree functions, from a cProfile run with builtins."""
    import pstats

    # key -> (cc, nc, tt, ct, callers); `stats` is undocumented, so not in typeshed.
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cdir = _cpytree_dir()
    hdir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the harness
    pytree = {k for k in stats if _is_pytree(k, cdir, hdir)}
    self_s = 0.0
    entries = 0
    by_fn: dict[str, float] = {}
    for key, (_, _nc, tt, _, callers) in stats.items():
        if key in pytree:
            self_s += tt
            by_fn[_label(key)] = by_fn.get(_label(key), 0.0) + tt
            # Calls into pytree code from outside it.
            entries += sum(v[0] for c, v in callers.items() if c not in pytree)
        elif key[0] == "~":
            # A builtin called by pytree functions: its time on their behalf.
            tt_from = sum(v[2] for c, v in callers.items() if c in pytree)
            if tt_from:
                self_s += tt_from
                label = "(builtins called by pytree functions)"
                by_fn[label] = by_fn.get(label, 0.0) + tt_from
    total = sum(v[2] for v in stats.values())
    top = sorted(by_fn.items(), key=lambda kv: -kv[1])[:10]
    other: dict[str, float] = {}
    return {
        "pytree_s": self_s,
        "pytree_calls": entries,
        "profiled_total_s": total,
        "top": [[name, secs] for name, secs in top],
        "subsystems_s": subsystem_split(stats, pytree, other),
        "other_callers": [[k, v] for k, v in sorted(other.items(), key=lambda kv: -kv[1])[:8]],
    }


def _short(filename: str) -> str:
    """A file's path from its `torch/` or `cpytree/` directory on, else its last parts."""
    path = filename.replace(os.sep, "/")
    for root in ("/torch/", "/cpytree/"):
        if root in path:
            return root[1:] + path.rsplit(root, 1)[1]
    return "/".join(path.split("/")[-2:])


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    parts = filename.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{line}({name})"


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
    return float(_pytree_profile(prof)["pytree_calls"]) / calls


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
    eager = model(*inputs)
    install_s = 0.0
    if config["mode"] == "cpytree":
        import cpytree

        t0 = time.perf_counter()
        cpytree.install()
        install_s = time.perf_counter() - t0
    compiled: Any = torch.compile(model, backend=config["backend"])
    prof = None
    if config.get("profile"):
        import cProfile

        prof = cProfile.Profile(builtins=True)
        prof.enable()
    w0, c0 = time.perf_counter(), _cpu()
    out = compiled(*inputs)
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
        result.update(_pytree_profile(prof))
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
