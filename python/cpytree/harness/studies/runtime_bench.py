"""`cpytree-harness --runtime`: eager torch paths that call pytree, with and
without `cpytree.install()`.

Each case (`runtime_cases.CASES`) is a call that may run torch's pytree
functions on every call, with no compile involved (compiled-call times the
steady-state call of an already compiled module): torch.export's module on
nested inputs, torch.func vmap / grad / functional_call, activation
checkpoint, a torch.compile'd module, transformers' `generate`, DTensor op
dispatch (cached and uncached) and an FSDP2 train step on 2 gloo ranks of
127.0.0.1 (`runtime_dist` starts and stops them).

Every repetition is a fresh process per mode ("torch": as shipped;
"cpytree": `cpytree.install()` before the case is built), the two modes
alternating which goes first. A process times each case as the median of
`rounds` samples of about `target` seconds, in CPU time of the process (one
intra-op thread, so CPU time is the call's own work, and it does not count
the time other programs on a shared machine take the core away) and in wall
time; the study reports the medians over processes and the speedup torch
time / cpytree time (above 1: install() is faster). Beside the times, a
separate profiled pass gives deterministic counts per call
(`runtime_measure.count`): calls into pytree functions, every pytree
function call (the pytree work), and the pytree share of the profile, in
each mode.

    study = run(reps=3)
    print(terminal(study))

The child: `python -m cpytree.harness.studies.runtime_bench '{"mode": "cpytree", ...}'`;
the last line of its stdout is `RESULT <json>`.
"""

from __future__ import annotations

import statistics
from typing import Any

from ..child import ChildFailed, serve, spawn
from .modes import MODES, check_available, enter
from .runtime_cases import CASES, DIST_CASES, build
from .runtime_measure import count, count_calls, per_call

# The modes the study may run: MODES, and "autoload" (what a user gets with no
# code change: install() by the entry point at the child's `import torch`).
RUNTIME_MODES = (*MODES, "autoload")

__all__ = ["CASES", "markdown", "run", "terminal"]

_TIMEOUT_S = 1800


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Time and count every case of `config["cases"]` in mode `config["mode"]`.

    Local cases run in this process; distributed ones on 2 ranks of their own.
    """
    import torch

    torch.set_num_threads(1)
    enter(config["mode"])  # install() in "cpytree"; in "autoload" `import torch` did
    result: dict[str, Any] = {"mode": config["mode"], "torch_version": torch.__version__}
    times: dict[str, float] = {}
    walls: dict[str, float] = {}
    counts: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for name in config["cases"]:
        try:
            if name in DIST_CASES:
                from .runtime_dist import run_case

                got = run_case(name, config, timeout=_TIMEOUT_S / 3)
                times[name], walls[name], counts[name] = got["cpu"], got["wall"], got["counts"]
                continue
            fn = build(name, config.get("quick", False))
            times[name], walls[name] = per_call(fn, config["rounds"], config["target"])
            counts[name] = count(fn, count_calls(walls[name]))
        except Exception as exc:  # noqa: BLE001 - reported per case
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
    result.update(seconds=times, wall_seconds=walls, counts=counts, errors=errors)
    return result


def _spawn(config: dict[str, Any]) -> dict[str, Any]:
    try:
        return spawn("cpytree.harness.studies.runtime_bench", config, _TIMEOUT_S)
    except ChildFailed as exc:
        return {"mode": config["mode"], "seconds": {}, "errors": {"*": str(exc)}}


def check_case_names(cases: list[str] | None) -> list[str]:
    """The cases to run (default all); KeyError naming any unknown one. Needs
    no torch, so a misspelt name is reported whether or not torch is here."""
    names = cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise KeyError(f"unknown runtime case(s): {', '.join(unknown)}; known: {', '.join(CASES)}")
    return names


def run(
    cases: list[str] | None = None,
    reps: int = 3,
    quick: bool = False,
    progress: bool = True,
    modes: tuple[str, ...] = MODES,
) -> dict[str, Any]:
    """Time and count the cases in each mode (MODES, and "autoload" if asked),
    `reps` fresh processes per mode."""
    from ..progress import ProgressBar

    names = check_case_names(cases)
    if set(MODES) - set(modes) or set(modes) - set(RUNTIME_MODES):
        raise KeyError(f"runtime modes: {', '.join(MODES)} and optionally autoload")
    check_available()
    rounds, target = (5, 0.02) if quick else (15, 0.05)
    config = {"cases": names, "rounds": rounds, "target": target, "quick": quick}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    bar = ProgressBar(len(modes) * reps, label="runtime", enabled=None if progress else False)
    try:
        for rep in range(reps):
            for mode in modes if rep % 2 == 0 else modes[::-1]:
                bar.label = f"runtime {mode}"
                runs[mode].append(_spawn(dict(config, mode=mode)))
                bar.advance()
    finally:
        bar.close()
    rows = [_row(name, runs) for name in names]
    return {
        "reps": reps,
        "rounds": rounds,
        "target_ms": target * 1e3,
        "torch_version": next(
            (r.get("torch_version") for r in runs["torch"] if r.get("torch_version")), None
        ),
        "rows": rows,
    }


def _median(values: list[float], scale: float = 1.0) -> float | None:
    return statistics.median(values) * scale if values else None


def _row(name: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One case over every process of both modes (see `run`)."""
    row: dict[str, Any] = {"case": name, "what": CASES.get(name, "")}
    for mode in runs:
        done = [r for r in runs[mode] if name in r["seconds"]]
        row[f"{mode}_us"] = _median([r["seconds"][name] for r in done], 1e6)
        row[f"{mode}_samples_us"] = [r["seconds"][name] * 1e6 for r in done]
        row[f"{mode}_wall_us"] = _median([r["wall_seconds"][name] for r in done], 1e6)
        # The counts are deterministic: the first process's stand for all.
        counts: dict[str, Any] = next(
            (r["counts"][name] for r in done if r["counts"].get(name)), {}
        )
        row[f"{mode}_pytree_calls"] = counts.get("calls")
        row[f"{mode}_pytree_fn_calls"] = counts.get("fn_calls")
        row[f"{mode}_pytree_share"] = counts.get("share")
        row[f"{mode}_pytree_top"] = counts.get("top", [])
    t, c = row["torch_us"], row["cpytree_us"]
    row["speedup"] = t / c if t and c else None
    t, c = row["torch_wall_us"], row["cpytree_wall_us"]
    row["wall_speedup"] = t / c if t and c else None
    if "autoload" in runs:
        t, a = row["torch_us"], row["autoload_us"]
        row["autoload_speedup"] = t / a if t and a else None
    row["errors"] = sorted(
        {f"{r['mode']}: {e}" for mode_runs in runs.values() for r in mode_runs
         for k, e in r["errors"].items() if k in (name, "*")}
    )  # fmt: skip
    return row


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _table(study: dict[str, Any]) -> list[list[str]]:
    out = [
        ["case", "torch us", "install() us", "speedup", "wall speedup", "pytree calls",
         "pytree fn calls", "with install()", "pytree share", "with install()"]
    ]  # fmt: skip
    autoload = any("autoload_us" in r for r in study["rows"])
    if autoload:
        out[0][3:3] = ["autoload us", "autoload speedup"]
    for r in study["rows"]:
        extra = (
            [
                _num(r["autoload_us"], ".1f"),
                "-" if r["autoload_speedup"] is None else f"{r['autoload_speedup']:.2f}x",
            ]
            if autoload
            else []
        )
        out.append(
            [
                r["case"],
                _num(r["torch_us"], ".1f"),
                _num(r["cpytree_us"], ".1f"),
                *extra,
                "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                "-" if r.get("wall_speedup") is None else f"{r['wall_speedup']:.2f}x",
                _num(r.get("torch_pytree_calls"), "g"),
                _num(r.get("torch_pytree_fn_calls"), "g"),
                _num(r.get("cpytree_pytree_fn_calls"), "g"),
                _share(r.get("torch_pytree_share")),
                _share(r.get("cpytree_pytree_share")),
            ]
        )
    return out


def _intro(study: dict[str, Any]) -> str:
    return (
        f"Eager torch paths that call pytree (torch {study.get('torch_version')}): CPU us per "
        f"call (one thread), median over {study['reps']} fresh process(es) per mode (modes "
        f"alternating), each the median of {study['rounds']} samples of "
        f"~{study['target_ms']:g} ms; speedup = torch time / time with cpytree.install(), in "
        "CPU time and in wall time. Counts per call, from a separate profiled pass "
        "(deterministic): pytree calls = calls into pytree functions from torch (without "
        "install()); pytree fn calls = every call of a pytree function, nested ones included "
        "(the pytree work), without and with install(); pytree share = self time of pytree "
        "functions in the profile, without and with install()"
    )


def _over(study: dict[str, Any], limit: float = 0.05) -> list[str]:
    """Lines naming the cases whose pytree share stays over `limit` with install()."""
    out = []
    for r in study["rows"]:
        share = r.get("cpytree_pytree_share")
        if share is not None and share > limit:
            top = ", ".join(f"{n} ({c:g}/call)" for n, c, _ in r.get("cpytree_pytree_top", [])[:3])
            out.append(f"{r['case']}: pytree {share * 100:.1f}% with install(): {top}")
    return out


def _same_code(study: dict[str, Any]) -> list[str]:
    """The cases that call no pytree function in either mode."""
    return [
        r["case"]
        for r in study["rows"]
        if r.get("torch_pytree_fn_calls") == 0 and r.get("cpytree_pytree_fn_calls") == 0
    ]


def _same_code_note(study: dict[str, Any]) -> list[str]:
    same = _same_code(study)
    if not same:
        return []
    return [
        f"No pytree call in either mode: {', '.join(same)}; install() cannot change these "
        "paths (the same code runs), so their ratios show the noise of the measurement."
    ]


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
    over = [f"OVER 5% {line}" for line in _over(study)]
    errors = [f"ERROR {r['case']} {e}" for r in study["rows"] for e in r["errors"]]
    return "\n".join([_intro(study), *lines, *_same_code_note(study), *over, *errors])


def markdown(study: dict[str, Any]) -> str:
    table = _table(study)
    md = ["## Runtime: eager torch paths that call pytree", "", _intro(study) + ".", ""]
    md += ["| " + " | ".join(table[0]) + " | what |", "|" + "---|" * (len(table[0]) + 1)]
    md += [
        "| " + " | ".join(r) + f" | {row['what']} |"
        for r, row in zip(table[1:], study["rows"], strict=True)
    ]
    md += ["", *_same_code_note(study)] if _same_code(study) else []
    over = _over(study)
    if over:
        md += ["", "Pytree share over 5% with install() (top pytree functions):", ""]
        md += [f"- {line}" for line in over]
    errors = [f"- {r['case']}: {e}" for r in study["rows"] for e in r["errors"]]
    if errors:
        md += ["", "Errors:", "", *errors]
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    return serve(child, argv)


if __name__ == "__main__":
    raise SystemExit(main())
