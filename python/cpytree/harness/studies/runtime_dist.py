"""The distributed cases of `--runtime`: 2 gloo ranks on 127.0.0.1, started and stopped here.

`run_case(name, config)` runs one case of `runtime_cases.DIST_CASES` on a
process group of its own: two fresh interpreters
(`python -m cpytree.harness.studies.runtime_dist`, the measuring children's
environment), on a free TCP port of 127.0.0.1 (gloo bound to the loopback
interface), each installing cpytree or not as `config["mode"]` says, before
torch.distributed is used. Both ranks time the same number of calls (they
agree on it with an all-reduce, since the calls run collectives); rank 0's
numbers are the result, and only rank 0 profiles the counting pass. The
process group is destroyed and both processes joined before it returns; a
rank that fails or a run past `timeout` s stops both.

    seconds, wall_seconds, counts = run_case("dtensor-ops", {"mode": "torch", ...})
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..child import child_env

__all__ = ["run_case"]

WORLD = 2
_ADDR = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_ADDR, 0))
        port: int = s.getsockname()[1]
        return port


def _env(port: int) -> dict[str, str]:
    # GLOO_SOCKET_IFNAME: gloo's own connections stay on the loopback interface too.
    return {"MASTER_ADDR": _ADDR, "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo"}


def _rank(rank: int, name: str, config: dict[str, Any], port: int, out: str) -> None:
    """One rank: install or not, join the group, time and count `name`, leave."""
    os.environ.update(_env(port))
    import torch
    import torch.distributed as dist

    from .modes import enter
    from .runtime_cases import build
    from .runtime_measure import count, count_calls, per_call

    torch.set_num_threads(1)
    enter(config["mode"])  # install() in "cpytree"; in "autoload" `import torch` did
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{_ADDR}:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=120),
    )
    try:

        def agree(n: int) -> int:
            t = torch.tensor([n], dtype=torch.int64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return int(t.item())

        fn = build(name, config.get("quick", False))
        cpu, wall = per_call(fn, config["rounds"], config["target"], agree)
        counts = count(fn, agree(count_calls(wall)), profile=rank == 0)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"cpu": cpu, "wall": wall, "counts": counts}, f)


def run_case(name: str, config: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Run case `name` on 2 fresh ranks; rank 0's {"cpu", "wall", "counts"}.

    Raises RuntimeError (with the failing rank's last words) or TimeoutError.
    """
    port = _free_port()
    env = dict(child_env(config["mode"]), **_env(port))
    with tempfile.TemporaryDirectory(prefix="cpytree-dist-") as tmp:
        out = os.path.join(tmp, "rank0.json")
        logs = [_log(tmp, r) for r in range(WORLD)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", __name__, json.dumps([r, name, config, port, out])],
                stdout=logs[r],
                stderr=subprocess.STDOUT,
                env=env,
            )
            for r in range(WORLD)
        ]
        deadline = time.monotonic() + timeout
        try:
            while any(p.poll() is None for p in procs):
                failed = [r for r, p in enumerate(procs) if p.returncode not in (None, 0)]
                if failed:
                    raise RuntimeError(_last_words(name, failed[0], logs[failed[0]]))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name}: no result from {WORLD} ranks in {timeout:g} s")
                time.sleep(0.2)
            failed = [r for r, p in enumerate(procs) if p.returncode != 0]
            if failed:
                raise RuntimeError(_last_words(name, failed[0], logs[failed[0]]))
        finally:
            for p in procs:  # only after a failure is any still running
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for f in logs:
                f.close()
        with open(out, encoding="utf-8") as f:
            result: dict[str, Any] = json.load(f)
    return result


def _log(tmp: str, rank: int) -> Any:
    """The file a rank's output goes to (closed by run_case)."""
    return open(os.path.join(tmp, f"rank{rank}.log"), "w+", encoding="utf-8")


def _last_words(name: str, rank: int, log: Any) -> str:
    log.flush()
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return f"{name}: rank {rank} failed: " + (lines[-1] if lines else "no output")[-300:]


def main(argv: list[str] | None = None) -> int:
    """A rank: `python -m cpytree.harness.studies.runtime_dist ARGS`.

    ARGS is the JSON list `[rank, name, config, port, out]`.
    """
    rank, name, config, port, out = json.loads((sys.argv[1:] if argv is None else argv)[0])
    _rank(rank, name, config, port, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
