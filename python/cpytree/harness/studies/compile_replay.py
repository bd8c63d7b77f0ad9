"""`cpytree-harness --compile --replay`: the pytree time one compile spends, replayed.

One child process records every call torch code makes to the pytree
functions install() can swap (`NAMES`) during one compile of the model,
first call and backward() of its outputs' sum: through the module
attributes of torch.utils._pytree and through the names torch modules bound
at import (`_torch._patch.rebind_imports`), calls made from inside pytree
itself left out. It then replays the recorded calls with torch's functions
and with cpytree's (best of 7 per function), callbacks replaced by
side-effect-free ones (`tree_map`'s by the identity, `tree_map_`'s by a
no-op; n-ary maps keep the traversal of the first tree), so that the two
columns time the same traversals. By default the recorded compile is a warm
one (after a first compile and `torch._dynamo.reset()`); `cold=True`
records the first compile of the process.

    study = run(["block"], backend="aot_eager", cold=True)
    print(terminal(study))

The child: `python -m cpytree.harness.studies.compile_replay '{"model": "block", ...}'`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from ..child import ChildFailed, serve, spawn

__all__ = ["NAMES", "markdown", "run", "terminal"]

_TIMEOUT_S = 1800

# The functions recorded and replayed: those install() swaps in torch.utils._pytree.
NAMES = (
    "tree_leaves",
    "tree_iter",
    "arg_tree_leaves",
    "tree_map",
    "tree_map_",
    "tree_flatten",
    "tree_structure",
    "tree_unflatten",
)

# A recorded call: (function name, positional arguments, keyword arguments).
Call = tuple[str, tuple[Any, ...], dict[str, Any]]
Step = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def _keep(x: Any) -> Any:
    return x


def _nothing(*args: Any) -> None:
    return None


class _Recorder:
    """Records the calls that come from outside pytree, and by which route."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.routes: dict[str, int] = {}
        self._depth = 0

    def wrap(self, name: str, fn: Callable[..., Any], route: str) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:  # only calls from outside pytree itself
                self.calls.append((name, args, kwargs))
                key = f"{name}/{route}"
                self.routes[key] = self.routes.get(key, 0) + 1
            self._depth += 1
            try:
                result = fn(*args, **kwargs)
                return list(result) if name == "tree_iter" else result
            finally:
                self._depth -= 1

        return record


def _plan(calls: list[Call], impl: ModuleType, tp: ModuleType) -> list[Step]:
    """(function, args, kwargs) of `impl` per call, side-effect-free callbacks,
    specs of impl's kind."""
    import cpytree

    out: list[Step] = []
    for name, args, kwargs in calls:
        fn = getattr(impl, name)
        if name in ("tree_map", "tree_map_"):
            args = ((_keep if name == "tree_map" else _nothing), *args[1:])
            if len(args) > 2:
                args = args[:2]  # n-ary: keep the traversal of the first tree
        if name == "tree_unflatten":
            leaves, spec = args if isinstance(args[1], tp.TreeSpec) else args[::-1]
            if impl is cpytree:
                dummy = tp.tree_unflatten(list(range(spec.num_leaves)), spec)
                spec = cpytree.tree_structure(dummy)
            args = (list(leaves), spec)
        out.append((fn, args, kwargs))
    return out


def _best_of(steps: list[Step], consume: bool) -> float:
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for fn, args, kwargs in steps:
            r = fn(*args, **kwargs)
            if consume:
                for _ in r:
                    pass
        best = min(best, time.perf_counter() - t0)
    return best


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Record one compile's pytree calls, replay them with torch's and cpytree's."""
    import torch
    import torch._dynamo
    import torch.utils._pytree as tp

    import cpytree
    from cpytree._torch import _patch

    from . import zoo
    from .compile_child import build_model

    model, inputs = build_model(config["model"])
    zoo.requires_grad(inputs)
    backend = config["backend"]

    def compile_once() -> None:
        compiled: Any = torch.compile(model, backend=backend)
        torch.autograd.backward(zoo.loss(compiled(*inputs)))

    if not config["cold"]:
        compile_once()  # warm-up
        torch._dynamo.reset()

    rec = _Recorder()
    originals = {n: getattr(tp, n) for n in NAMES}
    patches = _patch.Patches()
    pairs = {}
    for n in NAMES:
        patches.set(tp, n, rec.wrap(n, originals[n], "attr"))
        pairs[id(originals[n])] = (originals[n], rec.wrap(n, originals[n], "import"))
    _patch.rebind_imports(patches, pairs, skip=("torch.utils._pytree",))
    try:
        compile_once()
    finally:
        patches.undo()

    by_name: dict[str, int] = {}
    for name, _, _ in rec.calls:
        by_name[name] = by_name.get(name, 0) + 1
    result: dict[str, Any] = {
        "model": config["model"],
        "torch_version": torch.__version__,
        "calls": by_name,
        "routes": rec.routes,
    }
    for label, impl in (("torch", tp), ("cpytree", cpytree)):
        steps = _plan(rec.calls, impl, tp)
        per = {}
        for name in by_name:
            sel = [step for step, (n, _, _) in zip(steps, rec.calls, strict=True) if n == name]
            per[name] = _best_of(sel, consume=(name == "tree_iter"))
        result[label + "_by_name"] = per
        result[label] = sum(per.values())
    return result


def run(models: Sequence[str], backend: str, cold: bool = False) -> dict[str, Any]:
    """One child per model; the study for results.json."""
    results = []
    for name in models:
        config = {"model": name, "backend": backend, "cold": cold}
        try:
            results.append(spawn("cpytree.harness.studies.compile_replay", config, _TIMEOUT_S))
        except ChildFailed as exc:
            results.append({"model": name, "error": str(exc)})
    return {"measure": "replay", "backend": backend, "cold": cold, "results": results}


def terminal(study: dict[str, Any]) -> str:
    """Per model: calls and replayed ms per function, torch against cpytree, and routes."""
    lines = []
    for r in study["results"]:
        lines.append(
            f"pytree calls torch code makes during one {'first' if study['cold'] else 'warm'} "
            f"torch.compile({r['model']}, backend={study['backend']!r}) forward+backward, "
            "replayed (best of 7)"
        )
        if "error" in r:
            lines.append(f"  ERROR {r['error']}")
            continue
        lines.append(f"  {'function':16s} {'calls':>6s} {'torch ms':>9s} {'cpytree ms':>11s}")
        for name, count in sorted(r["calls"].items(), key=lambda kv: -r["torch_by_name"][kv[0]]):
            lines.append(
                f"  {name:16s} {count:6d} {r['torch_by_name'][name] * 1e3:9.2f} "
                f"{r['cpytree_by_name'][name] * 1e3:11.2f}"
            )
        lines.append(
            f"  {'all':16s} {sum(r['calls'].values()):6d} {r['torch'] * 1e3:9.2f} "
            f"{r['cpytree'] * 1e3:11.2f}"
        )
        lines.append(
            "  calls by route (attr: through the module attribute; import: a name bound at import):"
        )
        for route, count in sorted(r["routes"].items()):
            lines.append(f"    {route:24s} {count:6d}")
    return "\n".join(lines)


def markdown(study: dict[str, Any]) -> str:
    """The terminal text under a heading, for report.md."""
    title = "## One compile's pytree calls, replayed with torch and cpytree"
    return "\n".join([title, "", "```", terminal(study), "```"])


def main(argv: list[str] | None = None) -> int:
    return serve(child, argv)


if __name__ == "__main__":
    raise SystemExit(main())
