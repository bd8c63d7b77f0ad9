"""`cpytree-harness --runtime`: eager torch paths that call pytree, with and
without `cpytree.install()`.

Each case is a call that runs torch's pytree functions on every call (no
compile involved):

* export-module: the module of `torch.export.export(...).module()` called on
  a nested dict/list input (it flattens the input against the exported
  spec and unflattens the output);
* vmap-dict: `torch.func.vmap` of a function of a dict of tensors;
* grad-dict: `torch.func.grad` of a loss over a dict of parameters;
* checkpoint: `torch.utils.checkpoint.checkpoint(fn, nested,
  use_reentrant=False)`, forward and backward.

Every repetition is a fresh process per mode ("torch": as shipped;
"cpytree": `cpytree.install()` before the case is built), the two modes
alternating which goes first. A process times each case as the median of
`rounds` samples of about `target` seconds, in CPU time of the process (one
intra-op thread, so CPU time is the call's own work, and it does not count
the time other programs on a shared machine take the core away) and in wall
time; the study reports the medians over processes and the speedup torch
time / cpytree time (above 1: install() is faster), in CPU time and in wall
time. It also counts the calls into pytree functions per call (profiled).

    study = run(reps=3)
    print(terminal(study))

The child: `python -m cpytree.harness.runtime_bench '{"mode": "cpytree"}'`;
the last line of its stdout is `RESULT <json>`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .child import ChildFailed, serve, spawn
from .compile_bench import MODES, check_available

__all__ = ["CASES", "markdown", "run", "terminal"]

_TIMEOUT_S = 900

CASES = {
    "export-module": "torch.export.export(m, (batch,)).module()(batch); batch: dict of "
    "tensor, list of 8 tensors, dict of 2 (tensor, tensor) tuples",
    "vmap-dict": "torch.func.vmap(f)(d); d: dict of 16 tensors (8, 4)",
    "grad-dict": "torch.func.grad(loss)(params, x); params: dict of 8 (4, 4) tensors",
    "checkpoint": "checkpoint(fn, nested, use_reentrant=False) and backward; nested: "
    "dict of list of 6 tensors and a (tensor, tensor) tuple",
}


def _build(name: str) -> Callable[[], Any]:
    """A no-argument call of case `name`, built with the pytree torch has now."""
    import torch

    torch.manual_seed(0)
    if name == "export-module":

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
        mod = torch.export.export(Nested(), (batch,)).module()
        return lambda: mod(batch)
    if name == "vmap-dict":
        d = {f"k{i}": torch.randn(8, 4) for i in range(16)}
        f = torch.func.vmap(lambda t: {k: v.sin() * 2 for k, v in t.items()})
        return lambda: f(d)
    if name == "grad-dict":
        params = {f"w{i}": torch.randn(4, 4) for i in range(8)}
        x = torch.randn(2, 4)

        def loss(p: dict[str, Any], x: Any) -> Any:
            for w in p.values():
                x = torch.tanh(x @ w)
            return x.sum()

        g = torch.func.grad(loss)
        return lambda: g(params, x)
    if name == "checkpoint":
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
    raise KeyError(f"unknown runtime case {name!r}; known: {', '.join(CASES)}")


def _per_call(fn: Callable[[], Any], rounds: int, target: float) -> tuple[float, float]:
    """Median (CPU, wall) seconds per call over `rounds` samples of about `target` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    n = max(1, int(target / max(time.perf_counter() - t0, 1e-7)))
    cpu, wall = [], []
    for _ in range(rounds):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            fn()
        cpu.append((time.process_time() - c0) / n)
        wall.append((time.perf_counter() - t0) / n)
    return statistics.median(cpu), statistics.median(wall)


def _pytree_calls(fn: Callable[[], Any], n: int = 20) -> float:
    """Calls into pytree functions per call (profiled, after the timing)."""
    import cProfile

    from .compile_child import _pytree_profile

    prof = cProfile.Profile(builtins=True)
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    return float(_pytree_profile(prof)["pytree_calls"]) / n


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Time every case of `config["cases"]` in mode `config["mode"]`, in this process."""
    import torch

    torch.set_num_threads(1)
    if config["mode"] == "cpytree":
        import cpytree

        cpytree.install()
    result: dict[str, Any] = {"mode": config["mode"], "torch_version": torch.__version__}
    times: dict[str, float] = {}
    walls: dict[str, float] = {}
    calls: dict[str, float] = {}
    errors: dict[str, str] = {}
    for name in config["cases"]:
        try:
            fn = _build(name)
            times[name], walls[name] = _per_call(fn, config["rounds"], config["target"])
            calls[name] = _pytree_calls(fn)
        except Exception as exc:  # noqa: BLE001 - reported per case
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
    result.update(seconds=times, wall_seconds=walls, pytree_calls=calls, errors=errors)
    return result


def _spawn(config: dict[str, Any]) -> dict[str, Any]:
    try:
        return spawn("cpytree.harness.runtime_bench", config, _TIMEOUT_S)
    except ChildFailed as exc:
        return {"mode": config["mode"], "seconds": {}, "errors": {"*": str(exc)}}


def run(
    cases: list[str] | None = None, reps: int = 3, quick: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Time the cases in both modes, `reps` fresh processes per mode."""
    from .progress import ProgressBar

    check_available()
    names = cases or list(CASES)
    rounds, target = (5, 0.02) if quick else (15, 0.05)
    config = {"cases": names, "rounds": rounds, "target": target}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    bar = ProgressBar(2 * reps, label="runtime", enabled=None if progress else False)
    try:
        for rep in range(reps):
            for mode in MODES if rep % 2 == 0 else MODES[::-1]:
                bar.label = f"runtime {mode}"
                runs[mode].append(_spawn(dict(config, mode=mode)))
                bar.advance()
    finally:
        bar.close()
    rows = []
    for name in names:
        row: dict[str, Any] = {"case": name, "what": CASES.get(name, "")}
        for mode in MODES:
            vals = [r["seconds"][name] for r in runs[mode] if name in r["seconds"]]
            row[f"{mode}_us"] = statistics.median(vals) * 1e6 if vals else None
            row[f"{mode}_samples_us"] = [v * 1e6 for v in vals]
            walls = [
                r["wall_seconds"][name] for r in runs[mode] if name in r.get("wall_seconds", {})
            ]
            row[f"{mode}_wall_us"] = statistics.median(walls) * 1e6 if walls else None
            counts = [
                r["pytree_calls"][name] for r in runs[mode] if name in r.get("pytree_calls", {})
            ]
            row[f"{mode}_pytree_calls"] = counts[0] if counts else None
        t, c = row["torch_us"], row["cpytree_us"]
        row["speedup"] = t / c if t and c else None
        t, c = row["torch_wall_us"], row["cpytree_wall_us"]
        row["wall_speedup"] = t / c if t and c else None
        row["errors"] = sorted(
            {f"{r['mode']}: {e}" for r in runs["torch"] + runs["cpytree"]
             for k, e in r["errors"].items() if k in (name, "*")}
        )  # fmt: skip
        rows.append(row)
    return {
        "reps": reps,
        "rounds": rounds,
        "target_ms": target * 1e3,
        "torch_version": next(
            (r.get("torch_version") for r in runs["torch"] if r.get("torch_version")), None
        ),
        "rows": rows,
    }


def _table(study: dict[str, Any]) -> list[list[str]]:
    out = [["case", "torch us", "cpytree us", "speedup", "wall speedup", "pytree calls/call"]]
    for r in study["rows"]:
        n = r.get("torch_pytree_calls")
        out.append(
            [
                r["case"],
                "-" if r["torch_us"] is None else f"{r['torch_us']:.1f}",
                "-" if r["cpytree_us"] is None else f"{r['cpytree_us']:.1f}",
                "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                "-" if r.get("wall_speedup") is None else f"{r['wall_speedup']:.2f}x",
                "-" if n is None else f"{n:g}",
            ]
        )
    return out


def _intro(study: dict[str, Any]) -> str:
    return (
        f"Eager torch paths that call pytree: CPU us per call (one thread), median over "
        f"{study['reps']} fresh process(es) per mode (modes alternating), each the median of "
        f"{study['rounds']} samples of ~{study['target_ms']:g} ms; speedup = torch time / "
        "time with cpytree.install(), in CPU time and in wall time; pytree calls/call: calls "
        "into pytree functions per call without install() (profiled)"
    )


def terminal(study: dict[str, Any]) -> str:
    table = _table(study)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in table
    ]
    errors = [f"ERROR {r['case']} {e}" for r in study["rows"] for e in r["errors"]]
    return "\n".join([_intro(study), *lines, *errors])


def markdown(study: dict[str, Any]) -> str:
    table = _table(study)
    md = ["## Runtime: eager torch paths that call pytree", "", _intro(study) + ".", ""]
    md += ["| " + " | ".join(table[0]) + " | what |", "|" + "---|" * (len(table[0]) + 1)]
    md += [
        "| " + " | ".join(r) + f" | {row['what']} |"
        for r, row in zip(table[1:], study["rows"], strict=True)
    ]
    errors = [f"- {r['case']}: {e}" for r in study["rows"] for e in r["errors"]]
    if errors:
        md += ["", "Errors:", "", *errors]
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    return serve(child, argv)


if __name__ == "__main__":
    raise SystemExit(main())
