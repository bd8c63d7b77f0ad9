"""Instructions of a whole first compile in a fresh process, by phase (callgrind).

    counts = count("pytree-blocks", "autoload")
    counts["total"], counts["phases"]["dynamo"], counts["phases"]["cpytree install"]

Runs `compile_count_child.py` (by path: see there for the phases) under
`valgrind --tool=callgrind --dump-before=getpgrp`: the child calls getpgrp()
at every change of phase, so callgrind writes the instructions of each
interval to a dump of its own, and the child lists which phase each dump
belongs to. Adding the dumps up per phase gives the instructions of the
process's own thread(s), deterministic up to a few in a million on one
machine (PYTHONHASHSEED=0, one intra-op thread, in-process Inductor
compilation); the C++ compiler processes Inductor starts are not counted
(the compile study's CPU time counts them). Under callgrind a compile runs
about 50 times slower: a few minutes per run.

The child's environment is the compile study's (`child.child_env(mode)`), so
"autoload" gets cpytree's entry point and "torch" has CPYTREE_INSTALL=0.
Inductor's on-disk caches are whatever TORCHINDUCTOR_CACHE_DIR holds: the
compile study runs its warm-up first, as it does for the timed runs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..child import ChildFailed, child_env

__all__ = ["PHASES", "available", "count"]

CHILD = Path(__file__).resolve().parent / "compile_count_child.py"
# Every phase the child marks, in report order.
PHASES = (
    "startup",
    "import torch",
    "cpytree install",
    "import dynamo",
    "dynamo layer",
    "model",
    "dynamo",
    "aotautograd",
    "inductor",
    "exit",
)
_TIMEOUT_S = 3600
_TOTALS = re.compile(rb"^totals:\s+(\d+)", re.MULTILINE)


def available() -> bool:
    """Whether valgrind is on PATH."""
    return shutil.which("valgrind") is not None


def _dump_number(path: Path) -> int:
    """cg.out.N is the N-th dump; cg.out (written at exit) comes last."""
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else sys.maxsize


def count(model: str, mode: str, backend: str = "inductor") -> dict[str, Any]:
    """{"total": instructions, "phases": {phase: instructions}, "graphs", "graph_breaks",
    "installed", "torch_version", "import_watch_calls"} of one whole first compile of
    `model` in `mode`."""
    with tempfile.TemporaryDirectory(prefix="cpytree-count-") as tmp:
        out = Path(tmp) / "cg.out"
        events = Path(tmp) / "events.json"
        config = {"model": model, "mode": mode, "backend": backend, "events": str(events)}
        cmd = [
            "valgrind", "--tool=callgrind", "--dump-before=getpgrp", "--dump-instr=no",
            "--dump-line=no", f"--callgrind-out-file={out}",
            sys.executable, str(CHILD), json.dumps(config),
        ]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=child_env(mode),
                timeout=_TIMEOUT_S, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise ChildFailed(f"callgrind run timed out after {_TIMEOUT_S} s") from exc
        if proc.returncode != 0 or not events.exists():
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise ChildFailed(f"callgrind run: exit {proc.returncode}: {tail[-400:]}")
        result: dict[str, Any] = json.loads(events.read_text())
        dumps = sorted(Path(tmp).glob("cg.out*"), key=_dump_number)
        owners = result.pop("owners")
        if len(dumps) != len(owners):
            raise ChildFailed(f"{len(dumps)} callgrind dumps for {len(owners)} phase changes")
        phases: dict[str, int] = defaultdict(int)
        for owner, dump in zip(owners, dumps, strict=True):
            found = _TOTALS.search(dump.read_bytes())
            if found is None:
                raise ChildFailed(f"no totals in {dump.name}")
            phases[owner] += int(found.group(1))
    result["phases"] = {p: phases.get(p, 0) for p in PHASES}
    result["total"] = sum(phases.values())
    result["mode"] = mode
    result["model"] = model
    return result


def main(argv: list[str] | None = None) -> int:
    """python -m cpytree.harness.studies.compile_count MODEL MODE...: one JSON line each."""
    args = sys.argv[1:] if argv is None else argv
    for mode in args[1:]:
        print(json.dumps(count(args[0], mode)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
