"""Autoload wherever torch runs: torchrun ranks, spawn and DataLoader workers,
Inductor's compile workers, two gloo ranks running DTensor and FSDP2, and an
exported program saved in one process and loaded in another.

Every process sees the entry point (autoload_env.py puts it on PYTHONPATH,
which every child inherits) and reports whether its own `import torch`
installed cpytree; the work each does is checked against torch's answer in
the same process. Networking stays on 127.0.0.1 (gloo on `lo`).
"""

from __future__ import annotations

import json
import os
import socket
import textwrap

import pytest

torch = pytest.importorskip("torch")

from autoload_env import child_env, run, run_json

pytestmark = pytest.mark.torch

# Whether this process's cpytree is installed into torch (cpytree was
# imported by torch's entry point, never by the script).
_STATE = textwrap.dedent(
    """
    import sys
    def installed():
        cp = sys.modules.get("cpytree")
        return bool(cp is not None and cp.is_installed())
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_RANK = _STATE + textwrap.dedent(
    """
    import copy, json, os, pathlib, sys
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    dx = distribute_tensor(x, mesh, [Shard(0)])
    full = (dx * 2).redistribute(mesh, [Replicate()]).to_local()

    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    ref = copy.deepcopy(model)
    for layer in (model[0], model[2], model):
        fully_shard(layer)
    inp = {"a": torch.randn(5, 6), "b": [torch.randn(5, 6)]}
    out = model(inp["a"] + inp["b"][0])
    out.sum().backward()
    ref_out = ref(inp["a"] + inp["b"][0])
    ref_out.sum().backward()
    grads = all(
        torch.allclose(p.grad.full_tensor(), q.grad, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters())
    )
    dist.destroy_process_group()
    # One file per rank: the ranks share torchrun's stdout, where their lines
    # can interleave.
    pathlib.Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps({
        "rank": rank, "installed": installed(),
        "dtensor": torch.equal(full, x * 2),
        "fsdp_out": torch.allclose(out, ref_out, atol=1e-6), "fsdp_grads": grads,
    }))
    # torch's gloo aborts some exits after destroy_process_group ("terminate
    # called without an active exception" during interpreter finalization):
    # 1 exit in 16 with torch 2.13.0 alone (TORCH_DEVICE_BACKEND_AUTOLOAD=0,
    # cpytree never loaded). The rank's work is done and written: end here.
    os._exit(0)
    """
)


def test_torchrun_gloo_ranks_run_dtensor_and_fsdp2(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    env = child_env(tmp_path / "ep", CPYTREE_INSTALL=None, GLOO_SOCKET_IFNAME="lo")
    args = ["-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2"]
    out = tmp_path / "results"
    out.mkdir()
    args += ["--master-addr=127.0.0.1", f"--master-port={_free_port()}", str(script), str(out)]
    run(args, env, timeout=240)
    got = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert got == [
        {"rank": r, "installed": True, "dtensor": True, "fsdp_out": True, "fsdp_grads": True}
        for r in (0, 1)
    ]


_WORKERS = _STATE + textwrap.dedent(
    """
    import json, multiprocessing as mp, os
    import torch
    from torch.utils.data import DataLoader, Dataset

    def report(_=None):
        return {"pid": os.getpid(), "installed": installed()}

    def first(batch):
        return batch[0]

    class Data(Dataset):
        def __len__(self):
            return 2
        def __getitem__(self, i):
            return {"i": i, "worker": report(), "t": [torch.full((2,), i)]}

    if __name__ == "__main__":
        with mp.get_context("spawn").Pool(1) as pool:
            spawned = pool.map(report, [0])[0]
        loader = DataLoader(
            Data(), batch_size=1, num_workers=2, multiprocessing_context="spawn", collate_fn=first
        )
        batches = list(loader)
        pids = {spawned["pid"], *(b["worker"]["pid"] for b in batches)}
        print(json.dumps({
            "main": installed(), "spawn": spawned["installed"],
            "workers": [b["worker"]["installed"] for b in batches],
            "data": [b["i"] for b in batches],
            "tensors": [b["t"][0].tolist() for b in batches],
            "processes": len(pids - {os.getpid()}),
        }))
    """
)


def test_spawn_and_dataloader_workers(tmp_path):
    script = tmp_path / "workers.py"
    script.write_text(_WORKERS)
    proc = run([str(script)], child_env(tmp_path / "ep", CPYTREE_INSTALL=None), timeout=240)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "main": True,
        "spawn": True,
        "workers": [True, True],
        "data": [0, 1],
        "tensors": [[0, 0], [1, 1]],
        "processes": 3,
    }


# The sidecar of Inductor's SubprocPool is a fresh `python .../compile_worker/__main__.py`;
# its workers fork from it. A job reports the worker's state: the sidecar is
# left as torch ships it (it runs kernel-compile jobs only, which never call
# pytree; _cpytree_autoload returns before importing cpytree there), while
# the process that started the pool is installed.
_COMPILE_WORKERS = _STATE + textwrap.dedent(
    """
    import json, sys
    import torch
    from torch._inductor.compile_worker.subproc_pool import SubprocPool
    pool = SubprocPool(2)
    try:
        job = "sorted(m for m in __import__('sys').modules if m.split('.')[0] in ('cpytree', '_cpytree_autoload'))"
        worker = pool.submit(eval, job).result(timeout=120)
        argv0 = pool.submit(eval, "__import__('sys').argv[0]").result(timeout=120)
    finally:
        pool.shutdown()
    print(json.dumps({"main": installed(), "worker": worker, "sidecar": argv0}))
    """
)


def test_inductor_compile_workers(tmp_path):
    script = tmp_path / "compile_workers.py"
    script.write_text(_COMPILE_WORKERS)
    env = child_env(tmp_path / "ep", CPYTREE_INSTALL=None)
    proc = run([str(script)], env, timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["sidecar"].endswith(
        os.path.join("torch", "_inductor", "compile_worker", "__main__.py")
    )
    assert {"main": got["main"], "worker": got["worker"]} == {
        "main": True,
        "worker": ["_cpytree_autoload"],
    }


_EXPORT = _STATE + textwrap.dedent(
    """
    import json, sys
    import torch

    class M(torch.nn.Module):
        def forward(self, inputs):
            return {"sum": inputs["a"] + inputs["b"][0], "pair": (inputs["b"][1] * 2, inputs["a"])}

    inputs = ({"a": torch.arange(3.0), "b": [torch.ones(3), torch.full((3,), 4.0)]},)
    path = sys.argv[2]
    if sys.argv[1] == "save":
        ep = torch.export.export(M(), inputs)
        torch.export.save(ep, path)
    else:
        ep = torch.export.load(path)
    out = ep.module()(*inputs)
    want = M()(*inputs)
    same = (torch.utils._pytree.tree_structure(out) == torch.utils._pytree.tree_structure(want)
            and all(torch.equal(a, b) for a, b in zip(torch.utils._pytree.tree_leaves(out),
                                                       torch.utils._pytree.tree_leaves(want))))
    print(json.dumps({"installed": installed(), "same": same, "spec": str(ep.call_spec.in_spec)[:40]}))
    """
)


def test_export_save_in_one_process_load_in_another(tmp_path):
    # Saved with autoload; loaded with it and without: the file is torch's format.
    script = tmp_path / "export.py"
    script.write_text(_EXPORT)
    saved = str(tmp_path / "m.pt2")
    ep = tmp_path / "ep"
    save = run_json_file(script, ["save", saved], child_env(ep, CPYTREE_INSTALL=None))
    load = run_json_file(script, ["load", saved], child_env(ep, CPYTREE_INSTALL=None))
    plain = run_json_file(script, ["load", saved], child_env(ep, CPYTREE_INSTALL="0"))
    assert [save["installed"], load["installed"], plain["installed"]] == [True, True, False]
    assert save["same"] and load["same"] and plain["same"]
    assert save["spec"] == load["spec"] == plain["spec"]


def run_json_file(script, args: list[str], env: dict[str, str]) -> dict:
    proc = run([str(script), *args], env, timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_helpers_see_the_entry_point(tmp_path):
    # The premise of this file: with autoload_env's PYTHONPATH, torch finds the entry point.
    code = (
        "import json, importlib.metadata as m\n"
        "print(json.dumps(sorted({e.value for e in m.entry_points(group='torch.backends')})))"
    )
    got = run_json(code, child_env(tmp_path, CPYTREE_INSTALL=None))
    assert "_cpytree_autoload:autoload" in got
