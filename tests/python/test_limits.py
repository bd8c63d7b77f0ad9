"""Limits: very large trees, very deep trees, interpreter shutdown.

* Large: a tree of N leaves (10,000,000 under `make stress`, CPYTREE_STRESS=1;
  1,000,000 in `make test`) flattens, maps and unflattens with peak memory
  proportional to N, measured in a child process as peak RSS over the input's
  own size, per leaf; and the engine keeps nothing once the results are gone.
* Deep: past the depth limit (Python's recursion limit, capped at 20,000 so a
  raised limit cannot overflow the C stack) every traversal raises
  RecursionError saying what happened; just under the cap, everything works,
  in the main thread and in a thread.
* Shutdown: an interpreter that exits with live specs (in globals, in cycles,
  in contexts), registrations, atexit handlers and daemon threads still
  flattening exits cleanly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import support

STRESS = bool(os.environ.get("CPYTREE_STRESS"))
# Under `make sanitize`: ASan frames are several times larger (the depth cap
# is sized for uninstrumented frames on an 8 MB stack) and ASan's shadow
# memory cannot live under RLIMIT_AS.
SANITIZED = bool(os.environ.get("CPYTREE_SANITIZED"))
skip_sanitized = pytest.mark.skipif(SANITIZED, reason="not meaningful under ASan (see above)")
BIG = 10_000_000 if STRESS else 1_000_000
ENGINE_CAP = 20_000  # kMaxDepth in src/base/common.h


@pytest.fixture
def engine_on():
    if not support.engine_active():
        pytest.skip("the C++ engine is not active")


def run_child(code, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return proc


# ---------------------------------------------------------------- large trees

MEASURE = """
import gc, json, os, resource, sys, time
import cpytree

N, shape, op = {n}, {shape!r}, {op!r}

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

def hwm():
    # Peak RSS of this process image. Not ru_maxrss: Linux carries that over
    # from the parent across fork and exec (pytest's own size).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

def in_use():
    # Under an emulator (CPYTREE_EMULATED, set by scripts/test_python.sh --arch aarch64)
    # /proc/self/status is the emulator's own process, whose translation
    # caches grow with the guest's work: what the guest holds is measured
    # instead, malloc's bytes in use (glibc's mallinfo2, where the engine's
    # C++ memory and large Python buffers live) plus every live pymalloc
    # block counted at pymalloc's largest block size, 512 bytes.
    import ctypes
    class MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
    m = mallinfo2()
    return m.uordblks + m.hblkhd + 512 * sys.getallocatedblocks()

after_call = in_use if os.environ.get("CPYTREE_EMULATED") else hwm

leaf = object()
if shape == "flat":
    tree = [leaf] * N
else:  # dicts of lists and tuples, 10 leaves each
    tree = [{{"a": leaf, "b": leaf, "c": (leaf, leaf, None), "d": [leaf] * 5}} for _ in range(N // 10)]
pre = None
if op == "unflatten":
    pre = cpytree.tree_structure(tree)

def run():
    if op == "flatten":
        leaves, spec = cpytree.tree_flatten(tree)
        assert len(leaves) == N and spec.num_leaves == N and leaves[-1] is leaf
        return leaves, spec
    if op == "leaves":
        out = cpytree.tree_leaves(tree)
        assert len(out) == N
        return out
    if op == "map":
        out = cpytree.tree_map(lambda x: x, tree)
        assert len(out) == len(tree)
        return out
    out = cpytree.tree_unflatten([leaf] * N, pre)
    assert len(out) == len(tree)
    return out

gc.collect()
base = rss()
t0 = time.perf_counter()
out = run()
seconds = time.perf_counter() - t0
peak = hwm()
held_with_result = rss() - base
# More calls: nothing accumulates (the allocator keeps what it got and may
# need a round or two to settle, so compare the peak after 3 calls and 6;
# under an emulator, the memory in use with the result held, see in_use).
peaks = []
for _ in range(5):
    del out
    gc.collect()
    out = run()
    peaks.append(after_call())
print(json.dumps(dict(peak=(peak - base) / N, result=held_with_result / N,
                      growth=(peaks[-1] - peaks[1]) / N, seconds=seconds)))
"""

# Bytes per leaf over the input: what the results must hold (a list of leaf
# pointers, 8 bytes; a spec, 32 bytes a node) plus growth slack. Measured at
# 10M leaves: flatten 80 (flat) / 61 (dicts), leaves 16, map 27 / 39,
# unflatten 48 / 47.
# At 1M leaves the allocator's fixed costs add up to ~45 bytes a leaf more.
PEAK_LIMIT = {"flatten": 96, "leaves": 24, "map": 64, "unflatten": 64}
SMALL_SLACK = 0 if BIG >= 10_000_000 else 48


# The child measures with /proc/self (and `resource` for the page size).
@pytest.mark.skipif(not support.HAS_PROCFS, reason=f"the test {support.NO_PROCFS}")
@pytest.mark.parametrize("shape", ["flat", "dicts"])
@pytest.mark.parametrize("op", ["flatten", "leaves", "map", "unflatten"])
def test_large_tree_memory_is_proportional(engine_on, shape, op):
    proc = run_child(MEASURE.format(n=BIG, shape=shape, op=op))
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{shape} {op} at {BIG} leaves: {m}")
    if os.environ.get("CPYTREE_SANITIZED"):
        return  # ASan's quarantine and redzones make RSS meaningless
    assert m["peak"] <= PEAK_LIMIT[op] + SMALL_SLACK, f"peak {m['peak']:.1f} bytes per leaf: {m}"
    # Calls do not accumulate memory (the per-thread scratch space is
    # trimmed after each call; the results' memory is reused).
    if support.FREE_THREADED and op == "unflatten":
        # 3.13t's allocator (mimalloc) does not hand freed 8 MB blocks back to
        # the next call's same-sized ones: this very script with the call
        # replaced by `out = list(tuple([leaf] * N))` (no engine) grows 24
        # bytes a leaf there too, 0 on 3.13. The peak above is still checked.
        return
    assert m["growth"] <= 2, f"peak grew by {m['growth']:.1f} bytes per leaf over 4 calls: {m}"


# ---------------------------------------------------------------- deep trees

DEEP = """
import sys, threading
import cpytree
from collections import OrderedDict

sys.setrecursionlimit({limit})
depth = {depth}

def nest(d):
    t = 0
    for i in range(d):
        t = [t] if i % 3 == 0 else ({{"k": t}} if i % 3 == 1 else (t,))
    return t

tree = nest(depth)
ops = {{
    "tree_flatten": lambda: cpytree.tree_flatten(tree),
    "tree_leaves": lambda: cpytree.tree_leaves(tree),
    "tree_structure": lambda: cpytree.tree_structure(tree),
    "tree_map": lambda: cpytree.tree_map(lambda x: x, tree),
    "tree_map_nary": lambda: cpytree.tree_map(lambda x, y: x, tree, tree),
    "tree_map_": lambda: cpytree.tree_map_(lambda x: x, tree),
    "tree_flatten_with_path": lambda: cpytree.tree_flatten_with_path(tree),
    "is_leaf": lambda: cpytree.tree_leaves(tree, is_leaf=lambda x: False),
    "spec.flatten": lambda: cpytree.tree_structure(tree).flatten(tree),
    "flatten_up_to": lambda: cpytree.tree_structure(tree).flatten_up_to(tree),
}}
results = {{}}

def run_all(tag):
    for name, fn in ops.items():
        try:
            fn()
            results[tag + name] = "ok"
        except RecursionError as exc:
            results[tag + name] = "RecursionError: " + str(exc)

run_all("main:")
threading.stack_size({stack})
t = threading.Thread(target=run_all, args=("thread:",))
t.start()
t.join()
import json
print(json.dumps(results))
"""


def _deep(limit, depth, stack=0):
    proc = run_child(DEEP.format(limit=limit, depth=depth, stack=stack), timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_deeper_than_recursion_limit_raises_clear_error(engine_on):
    results = _deep(limit=1000, depth=1100)
    for name, got in results.items():
        assert got.startswith("RecursionError: maximum recursion depth exceeded"), (name, got)
        assert "nested deeper than" in got and "reference cycle" in got, (name, got)


@skip_sanitized
def test_raised_recursion_limit_is_capped(engine_on):
    # sys.setrecursionlimit(10**6) must not let a 50,000-deep tree overflow
    # the C stack: the engine stops at its own cap, 20,000 levels.
    results = _deep(limit=10**6, depth=2 * ENGINE_CAP + 10_000)
    for name, got in results.items():
        assert got.startswith("RecursionError"), (name, got)
        assert str(ENGINE_CAP) in got, (name, got)


@skip_sanitized
def test_just_under_the_cap_works_in_threads(engine_on):
    results = _deep(limit=10**6, depth=ENGINE_CAP - 100)
    bad = {k: v for k, v in results.items() if v != "ok"}
    assert not bad, bad


@skip_sanitized
def test_a_small_thread_stack_stops_every_traversal_before_it_overflows(engine_on):
    # 1 MiB holds a few thousand levels. Past a depth that fits at any frame
    # size, every level compares the stack pointer with the thread's floor, so
    # the traversal stops where the stack does, whatever the compiler's frames
    # (a gcc build's spec walk took ~430 bytes a level on 3.13t, more than the
    # fixed per-level estimate this replaced, and overflowed at 19,408 levels).
    depth = 12_000  # fits the main thread's 8 MiB at any measured frame size
    results = _deep(limit=10**6, depth=depth, stack=1 << 20)
    reached = {}
    for name, got in results.items():
        if name.startswith("main:"):
            assert got == "ok", (name, got)
            continue
        if got != "ok":  # a walk with small frames may finish in 1 MiB
            assert got.startswith("RecursionError: maximum recursion depth exceeded in "), got
            reached[name] = int(got.split("nested deeper than ")[1].split()[0])
    assert {"thread:tree_flatten", "thread:tree_map", "thread:flatten_up_to"} <= reached.keys()
    # Stopped by the stack (not the depth limit): at least what 1 MiB less
    # the 256 KiB kept free holds at 1 KiB a level.
    assert all(768 < n < depth - 1 for n in reached.values()), reached


# ---------------------------------------------------------------- shutdown

SHUTDOWN = """
import atexit, collections, sys, threading, time
import cpytree

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

cpytree.register_pytree_node(Node, lambda n: ([n.a], n.ctx), lambda v, c: Node(v[0], c),
                             serialized_type_name="shutdown.Node")
ctx = Ctx()
SPECS = [cpytree.tree_structure({{"a": [1, (2, 3)], "n": Node(4, ctx)}})]
ctx.spec = SPECS[0]  # a cycle: spec -> context -> spec
Node.class_spec = cpytree.tree_structure(Node(1, Ctx()))  # a spec on a registered class
cycle = []
cycle.append(cpytree.tree_structure([cycle, collections.OrderedDict(x=1)]))
leaves, SPEC = cpytree.tree_flatten(collections.defaultdict(list, {{"k": [1, 2]}}))

def at_exit():
    # Runs during finalization, with everything above still alive.
    leaves, spec = cpytree.tree_flatten({{"x": Node(1, Ctx())}})
    assert cpytree.tree_unflatten(leaves, spec)["x"].a == 1
    print("atexit ran", flush=True)

atexit.register(at_exit)

def spin():
    tree = {{"a": [Node(i, ctx) for i in range(50)]}}
    while True:
        cpytree.tree_map(lambda x: x, tree)
        cpytree.tree_flatten(tree, is_leaf=lambda x: False)

for _ in range({threads}):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.2)
print("exiting", flush=True)
{exit}
"""


@pytest.mark.parametrize("how", ["return", "sys.exit", "exception"])
@pytest.mark.parametrize("threads", [0, 4])
def test_interpreter_shutdown_is_clean(how, threads):
    # With daemon threads inside the engine at exit, CPython 3.11-3.13 ends
    # them with pthread_exit, which runs the C++ destructors of their frames
    # without the GIL: that crashed (SIGSEGV) about one exit in four until
    # destructors learnt to leave references alone then (src/base/common.h).
    # CPython 3.10 crashed (SIGSEGV in take_gil, about one exit in 100) when a
    # daemon thread still waiting for the GIL timed out after the interpreter
    # state was freed, until the engine let such threads leave first
    # (ExitDrain, src/module.cc).
    if threads and SANITIZED:
        # pthread_exit's forced unwind leaves the skipped frames poisoned and
        # ASan then reports its own sigaltstack interceptor (a known false
        # positive of ASan with pthread_exit): only the plain build tells.
        pytest.skip("ASan misreports pthread_exit unwinding of daemon threads")
    exit_stmt = {"return": "", "sys.exit": "sys.exit(0)", "exception": "raise SystemExit(0)"}[how]
    for _ in range(6 if threads else 1):  # the crash was a race: try a few times
        proc = run_child(SHUTDOWN.format(threads=threads, exit=exit_stmt), timeout=120)
        assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
        assert "exiting" in proc.stdout and "atexit ran" in proc.stdout, proc.stdout
        assert proc.stderr.strip() == "", proc.stderr[-3000:]


EXIT_DRAIN = """
import atexit, sys, threading, time

def report():  # registered before cpytree's hook, so it runs after it (LIFO)
    print("drain armed:", hasattr(sys.modules["cpytree._C"], "_exit_drain"), flush=True)

atexit.register(report)
import cpytree

def spin():
    while True:
        cpytree.tree_map(lambda x: x, [1, (2, 3)])

for _ in range({threads}):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.05)
"""


@pytest.mark.parametrize("threads", [0, 2])
def test_exit_drain_armed_on_310_with_threads(threads):
    # The 3.10 exit fix (ExitDrain, src/module.cc) is armed by the atexit hook
    # only on CPython 3.10 and only when other Python threads are alive.
    proc = run_child(EXIT_DRAIN.format(threads=threads), timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    armed = threads > 0 and sys.version_info[:2] == (3, 10)
    assert f"drain armed: {armed}" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- out of memory

OOM = """
import resource
import cpytree

tree = [0] * 5_000_000  # 40 MB; its spec needs 160 MB of nodes
with open("/proc/self/statm") as f:
    vm = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (vm + 64 * 2**20, resource.RLIM_INFINITY))
for name, fn in [("tree_flatten", lambda: cpytree.tree_flatten(tree)),
                 ("tree_structure", lambda: cpytree.tree_structure(tree)),
                 ("tree_map", lambda: cpytree.tree_map(lambda x: x, [tree, tree, tree]))]:
    try:
        fn()
        print(name, "ok")
    except MemoryError:
        print(name, "MemoryError")
"""


@skip_sanitized
@pytest.mark.skipif(not support.HAS_PROCFS, reason=f"the test {support.NO_PROCFS}")
@pytest.mark.skipif(not support.HAS_RLIMIT_AS, reason=f"the test {support.NO_RLIMIT_AS}")
def test_out_of_memory_raises_memory_error(engine_on):
    # A C++ allocation that fails (std::bad_alloc) must become MemoryError;
    # an exception escaping into CPython's C frames calls std::terminate.
    proc = run_child(OOM, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    for line in proc.stdout.splitlines():
        assert line.endswith(("ok", "MemoryError")), line
    assert "MemoryError" in proc.stdout, proc.stdout


@pytest.mark.parametrize("indent", [-3, -(2**40), 0, 4])
def test_repr_indent_out_of_range(impl, indent):
    # torch: children joined with "\n" + " " * indent (no spaces for n <= 0).
    # The engine aborted the interpreter (std::length_error) on a negative one.
    spec = impl.tree_structure([1, [2, 3]])
    text = spec.__repr__(indent=indent)
    pad, pad2 = " " * (indent + 2), " " * (indent + 4)
    assert text == f"TreeSpec(list, None, [*,\n{pad}TreeSpec(list, None, [*,\n{pad2}*])])"


# ---------------------------------------------------------------- intern chains


class CollidingCtx:
    """A context whose hash is the same for every value (a poor user __hash__)."""

    eq_calls = 0

    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return 1

    def __eq__(self, other):
        CollidingCtx.eq_calls += 1
        return type(other) is CollidingCtx and other.v == self.v


class CtxNode:
    def __init__(self, ctx):
        self.ctx = ctx


def test_colliding_contexts_do_not_make_flatten_linear(engine_on):
    # Specs whose context items hash alike share one intern chain; a lookup
    # called __eq__ on every live spec of the chain, so with N such specs alive
    # every flatten of a new one cost N user __eq__ calls (quadratic overall).
    import cpytree

    if CtxNode not in cpytree.SUPPORTED_NODES:
        cpytree.register_pytree_node(CtxNode, lambda n: ([0], n.ctx), lambda v, c: CtxNode(c))
    live = [cpytree.tree_structure(CtxNode(CollidingCtx(i))) for i in range(2000)]
    CollidingCtx.eq_calls = 0
    for i in range(100):
        spec = cpytree.tree_structure(CtxNode(CollidingCtx(-1 - i)))
        assert spec == cpytree.tree_structure(CtxNode(CollidingCtx(-1 - i)))
    assert CollidingCtx.eq_calls <= 100 * 2 * 64, CollidingCtx.eq_calls
    del live


CHAIN = """
import cpytree

class Holder:
    def __init__(self, ctx):
        self.ctx = ctx

cpytree.register_pytree_node(Holder, lambda h: ([], h.ctx), lambda v, c: Holder(c))
spec = cpytree.tree_structure(0)
for _ in range(200_000):  # each spec's context is the previous spec
    spec = cpytree.tree_structure(Holder(spec))
del spec  # frees 200,000 specs, each from the previous one's deallocator
print("freed")
"""


def test_freeing_a_long_chain_of_specs(engine_on):
    # A spec whose context holds a spec whose context holds a spec...: freeing
    # the head freed the next one from inside its deallocator, one C frame
    # each, and overflowed the stack (CPython's containers bound this with the
    # trashcan mechanism; specs now do too).
    proc = run_child(CHAIN, timeout=300)
    assert proc.returncode == 0 and "freed" in proc.stdout, f"exit {proc.returncode}"


REENTRANT = """
import cpytree

def nest(d):
    t = 0
    for _ in range(d):
        t = [t]
    return t

deep = nest(950)  # under the default recursion limit (1000)
calls = [0]

def is_leaf(x):
    # At the bottom of each traversal, flatten the deep tree again from here.
    if x == 0 and calls[0] < 5000:
        calls[0] += 1
        {op}
    return False

try:
    cpytree.tree_leaves(deep, is_leaf=is_leaf)
    print("ok", calls[0])
except RecursionError as exc:
    print("RecursionError", calls[0], exc)
"""


@pytest.mark.parametrize(
    "op",
    [
        "cpytree.tree_leaves(deep, is_leaf=is_leaf)",
        "cpytree.tree_map(lambda v: v, deep, is_leaf=is_leaf)",
        "cpytree.tree_structure(deep).flatten_up_to(deep); cpytree.tree_leaves(deep, is_leaf=is_leaf)",
    ],
)
def test_reentrant_traversals_share_the_c_stack(engine_on, op):
    # Each call counted its own depth against the recursion limit, so an
    # is_leaf that flattens again from the bottom of a 950-deep tree nested
    # hundreds of 950-level C recursions: SIGSEGV with the default limit.
    # The depth a call may reach now also follows the C stack it has left.
    proc = run_child(REENTRANT.format(op=op), timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("RecursionError"), proc.stdout
