"""Counts crashing interpreter exits with daemon threads inside pytree calls.

    python lab/count_exit_crashes.py --impl cpytree --runs 2000
    nice -n 19 taskset -c 1 .venv-3.10/bin/python lab/count_exit_crashes.py --impl optree

Each run starts a child interpreter (this one, or --python) that builds a few
specs (one in a reference cycle through a context), registers a custom node,
starts --threads daemon threads looping over tree_map / tree_flatten with
Python callbacks (is_leaf, the custom node's flatten/unflatten), sleeps
--sleep seconds and exits with `sys.exit(0)`: the program of
tests/python/test_limits.py::test_interpreter_shutdown_is_clean, written once
per pytree implementation:

  cpytree    the C++ engine (cpytree with its extension)
  reference  cpytree's pure-Python reference (the extension blocked, as in
             the fallback: `sys.modules["cpytree._C"] = None`)
  optree     optree (none_is_leaf=True, a namespace of its own)
  torch      torch.utils._pytree
  plain      CPython alone: a minimal recursive tree_map/flatten in plain
             Python with the same callbacks, no library

A run counts as clean when it exits 0 with both markers printed ("exiting",
"atexit ran") and nothing on stderr; anything else is a failure, tallied by
its exit status (-11 is SIGSEGV). Prints one JSON line with the counts, the
interpreter and the implementation's version. Exit status 0 whatever the
count: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time

PRELUDE = {
    "cpytree": "import cpytree as pt\n",
    "reference": (
        "import sys, warnings\n"
        "sys.modules['cpytree._C'] = None\n"
        "warnings.simplefilter('ignore')\n"
        "import cpytree as pt\n"
        "assert pt.ENGINE == 'python', pt.ENGINE\n"
    ),
    "torch": "import torch.utils._pytree as pt\n",
    # CPython alone: the same callbacks from plain recursive Python, no pytree
    # library at all.
    "plain": (
        "import types\n"
        "_NODES = {}\n"
        "def _register(cls, flatten, unflatten, serialized_type_name=None):\n"
        "    _NODES[cls] = (flatten, unflatten)\n"
        "def _map(f, t, is_leaf=None):\n"
        "    if is_leaf is not None and is_leaf(t):\n"
        "        return f(t)\n"
        "    if type(t) is dict:\n"
        "        return {k: _map(f, v, is_leaf) for k, v in t.items()}\n"
        "    if type(t) in (list, tuple):\n"
        "        return type(t)(_map(f, v, is_leaf) for v in t)\n"
        "    node = _NODES.get(type(t))\n"
        "    if node is not None:\n"
        "        children, ctx = node[0](t)\n"
        "        return node[1]([_map(f, c, is_leaf) for c in children], ctx)\n"
        "    return f(t)\n"
        "def _flatten(t, is_leaf=None):\n"
        "    leaves = []\n"
        "    _map(leaves.append, t, is_leaf)\n"
        "    return leaves, t\n"
        "pt = types.SimpleNamespace(\n"
        "    register_pytree_node=_register, tree_map=_map, tree_flatten=_flatten,\n"
        "    tree_structure=lambda t: t, tree_unflatten=lambda leaves, spec: spec)\n"
    ),
    # optree's argument orders differ from torch's: an adapter with torch's.
    "optree": (
        "import optree, types\n"
        "NS = 'exit_crashes'\n"
        "def _register(cls, flatten, unflatten, serialized_type_name=None):\n"
        "    optree.register_pytree_node(\n"
        "        cls, flatten, lambda c, v: unflatten(v, c), namespace=NS)\n"
        "pt = types.SimpleNamespace(\n"
        "    register_pytree_node=_register,\n"
        "    tree_map=lambda f, t: optree.tree_map(f, t, none_is_leaf=True, namespace=NS),\n"
        "    tree_flatten=lambda t, is_leaf=None: optree.tree_flatten(\n"
        "        t, is_leaf=is_leaf, none_is_leaf=True, namespace=NS),\n"
        "    tree_structure=lambda t: optree.tree_structure(t, none_is_leaf=True, namespace=NS),\n"
        "    tree_unflatten=lambda leaves, spec: optree.tree_unflatten(spec, leaves),\n"
        ")\n"
    ),
}

VERSION = {
    "cpytree": "import cpytree; print(cpytree.__version__, cpytree.ENGINE)",
    "reference": "import cpytree; print(cpytree.__version__)",
    "torch": "import torch; print(torch.__version__)",
    "optree": "import optree; print(optree.__version__)",
    "plain": "import sys; print(sys.version.split()[0])",
}

BODY = """
import atexit, collections, sys, threading, time

class Node:
    def __init__(self, a, ctx):
        self.a, self.ctx = a, ctx

class Ctx:
    def __init__(self):
        self.spec = None
    def __eq__(self, other):
        return isinstance(other, Ctx)
    def __hash__(self):
        return 1

pt.register_pytree_node(Node, lambda n: ([n.a], n.ctx), lambda v, c: Node(v[0], c),
                        serialized_type_name="shutdown.Node")
ctx = Ctx()
SPECS = [pt.tree_structure({{"a": [1, (2, 3)], "n": Node(4, ctx)}})]
ctx.spec = SPECS[0]  # a cycle: spec -> context -> spec
Node.class_spec = pt.tree_structure(Node(1, Ctx()))
cycle = []
cycle.append(pt.tree_structure([cycle, collections.OrderedDict(x=1)]))
leaves, SPEC = pt.tree_flatten(collections.defaultdict(list, {{"k": [1, 2]}}))

def at_exit():
    leaves, spec = pt.tree_flatten({{"x": Node(1, Ctx())}})
    assert pt.tree_unflatten(leaves, spec)["x"].a == 1
    print("atexit ran", flush=True)

atexit.register(at_exit)

def spin():
    tree = {{"a": [Node(i, ctx) for i in range(50)]}}
    while True:
        pt.tree_map(lambda x: x, tree)
        pt.tree_flatten(tree, is_leaf=lambda x: False)

for _ in range({threads}):
    threading.Thread(target=spin, daemon=True).start()
time.sleep({sleep})
print("exiting", flush=True)
sys.exit(0)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=sorted(PRELUDE), default="cpytree")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=0.05)
    ap.add_argument("--python", default=sys.executable, help="the child interpreter")
    ap.add_argument("--keep", type=int, default=3, help="stderr tails kept of failed runs")
    args = ap.parse_args()

    code = PRELUDE[args.impl] + BODY.format(threads=args.threads, sleep=args.sleep)
    version = subprocess.run(
        [args.python, "-c", VERSION[args.impl]], capture_output=True, text=True, check=True
    ).stdout.strip()
    pyver = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    statuses: collections.Counter[str] = collections.Counter()
    tails: list[str] = []
    start = time.monotonic()
    for i in range(args.runs):
        proc = subprocess.run(
            [args.python, "-c", code], capture_output=True, text=True, timeout=120
        )
        clean = (
            proc.returncode == 0
            and "exiting" in proc.stdout
            and "atexit ran" in proc.stdout
            and proc.stderr.strip() == ""
        )
        if clean:
            statuses["clean"] += 1
        else:
            statuses[f"exit {proc.returncode}"] += 1
            if len(tails) < args.keep:
                tails.append(f"run {i}: exit {proc.returncode}: {proc.stderr[-400:]}")
        if (i + 1) % 250 == 0:
            print(f"# {i + 1}/{args.runs}: {dict(statuses)}", file=sys.stderr, flush=True)
    failures = args.runs - statuses["clean"]
    print(
        json.dumps(
            {
                "python": pyver,
                "impl": args.impl,
                "impl_version": version,
                "threads": args.threads,
                "sleep": args.sleep,
                "runs": args.runs,
                "failures": failures,
                "rate": failures / args.runs,
                "statuses": dict(statuses),
                "seconds": round(time.monotonic() - start, 1),
                "failure_tails": tails,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
