"""Where pytree time goes in a cProfile run: the pytree functions, their
self time and calls, and the torch subsystems that called them.

"Pytree functions" are the Python functions of torch.utils._pytree,
torch.fx._pytree, torch.utils._cxx_pytree and cpytree (not this harness),
and the C functions of cpytree._C and optree. A profile must be taken with
`cProfile.Profile(builtins=True)`, so that the builtins pytree functions
call are counted on their behalf.

* `pytree_profile(prof)`: self time inside pytree functions, calls into them
  from outside, the top functions, and that time split by calling subsystem;
* `subsystem_split(stats, pytree)`: the split alone (see its docstring);
* `is_pytree`, `label`, `cpytree_dir`, `harness_dir`: the pieces, for
  callers that walk `pstats` themselves (`runtime_measure.count`).

Used by the compile study's children (`compile_child`) and the runtime
study (`runtime_measure`).

    prof = cProfile.Profile(builtins=True)
    prof.enable(); work(); prof.disable()
    summary = pytree_profile(prof)   # pytree_s, pytree_calls, top, subsystems_s, ...
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "SUBSYSTEMS",
    "cpytree_dir",
    "harness_dir",
    "is_pytree",
    "label",
    "pytree_profile",
    "subsystem_of",
    "subsystem_split",
]

_PYTREE_FILES = (
    os.path.join("torch", "utils", "_pytree.py"),
    os.path.join("torch", "fx", "_pytree.py"),
    os.path.join("torch", "utils", "_cxx_pytree.py"),
)
_PYTREE_C = ("cpytree._C", "optree.")


def cpytree_dir() -> str:
    """The directory of the cpytree package this process imported."""
    import cpytree

    return os.path.dirname(os.path.abspath(cpytree.__file__))


def harness_dir() -> str:
    """The harness's own directory: its code is not pytree code."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_pytree(key: tuple[str, int, str], cpytree_dir: str, harness_dir: str) -> bool:
    """Whether a cProfile key (file, line, name) is a pytree function."""
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
                        where = _short(c[0])
                        other_files[where] = other_files.get(where, 0.0) + v[2]
            if not callers:
                total["other"] += tt
        elif key[0] == "~":
            for c, v in callers.items():
                if c in pytree:  # a builtin's time on behalf of a pytree function
                    add(origin(c), v[2])
    return total


def pytree_profile(prof: Any) -> dict[str, Any]:
    """Self time inside pytree functions, from a cProfile run with builtins."""
    import pstats

    # key -> (cc, nc, tt, ct, callers); `stats` is undocumented, so not in typeshed.
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cdir, hdir = cpytree_dir(), harness_dir()
    pytree = {k for k in stats if is_pytree(k, cdir, hdir)}
    self_s = 0.0
    entries = 0
    by_fn: dict[str, float] = {}
    for key, (_, _nc, tt, _, callers) in stats.items():
        if key in pytree:
            self_s += tt
            by_fn[label(key)] = by_fn.get(label(key), 0.0) + tt
            # Calls into pytree code from outside it.
            entries += sum(v[0] for c, v in callers.items() if c not in pytree)
        elif key[0] == "~":
            # A builtin called by pytree functions: its time on their behalf.
            tt_from = sum(v[2] for c, v in callers.items() if c in pytree)
            if tt_from:
                self_s += tt_from
                builtins = "(builtins called by pytree functions)"
                by_fn[builtins] = by_fn.get(builtins, 0.0) + tt_from
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


def label(key: tuple[str, int, str]) -> str:
    """A profile key as `dir/file.py:line(name)`, or a builtin's name."""
    filename, line, name = key
    if filename == "~":
        return name
    parts = filename.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{line}({name})"
