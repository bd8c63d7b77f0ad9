"""Thread stress for free-threaded CPython (3.13t): many threads on shared trees.

Written for the build without the GIL (`make test-ft` runs it on 3.13t, and
`make test-ft-tsan` under ThreadSanitizer), and run on every build: with the
GIL the same programs must give the same answers. Each test is bounded in
time (CPYTREE_THREAD_SECONDS, default 1 s; `make stress` runs 30 s) and checks
deterministic facts, never timings:

- shared read-only trees: flatten/unflatten/map/leaves/paths/flatten_up_to/
  dumps/loads give the answer computed single-threaded first (leaves by
  identity, the interned spec object itself, equal hashes);
- the intern table under insert/remove churn from fresh structures: lookups
  of live structures still return the one interned spec, and the table
  shrinks back once the churned specs die;
- registration: a type registered by one thread is a node for every call
  that starts after register_pytree_node returned (the leaf-type cache must
  not keep it a leaf), and churn of register/deregister never crashes;
- reclamation (issue 29): threads traverse instances of types that other
  threads register and deregister in a loop, so lookups race with writers
  freeing the maps and registrations they replaced: every call gives the
  answer of one registry state (node or leaf) or the KeyError of a type
  deregistered mid-call, and once the threads stop every churned class is
  collectable (nothing retired is kept);
- is_leaf callbacks and custom flatten functions run concurrently;
- threads mutating the very lists, dicts and deques being flattened: every
  call returns a self-consistent result (spec and leaves agree; the leaves are
  objects the tree held) or raises RuntimeError (a deque or dict changed
  during iteration, as CPython's own iterators raise);
- one tree_iter consumed from two threads: every leaf comes out exactly once
  (without the GIL a second concurrent __next__ raises ValueError, as a
  generator's does).
"""

from __future__ import annotations

import collections
import gc
import os
import subprocess
import sys
import sysconfig
import threading
import time

import pytest

import cpytree
import support

SECONDS = float(
    os.environ.get("CPYTREE_THREAD_SECONDS", "30" if os.environ.get("CPYTREE_STRESS") else "1")
)
THREADS = 8
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

pytestmark = pytest.mark.skipif(not support.engine_active(), reason="the C++ engine is not active")


def run_threads(workers, seconds=SECONDS):
    """Runs each (name, fn) in its own thread until `seconds` pass; returns rounds per name."""
    stop = time.monotonic() + seconds
    errors: list = []
    counts: collections.Counter = collections.Counter()
    lock = threading.Lock()
    start = threading.Barrier(len(workers))

    def wrap(name, fn):
        def run():
            start.wait()
            n = 0
            try:
                while True:  # one round at least, however loaded the machine
                    fn()
                    n += 1
                    if time.monotonic() >= stop:
                        break
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append((name, repr(exc)))
            with lock:
                counts[name] += n

        return run

    support.start_and_join(
        [threading.Thread(target=wrap(n, f), name=n) for n, f in workers], seconds + 120
    )
    assert not errors, errors[:5]
    assert all(counts[n] > 0 for n, _ in workers), counts
    return counts


class Node:
    """A registered custom node (its flatten runs Python code mid-traversal)."""

    def __init__(self, a, b):
        self.a, self.b = a, b


cpytree.register_pytree_node(
    Node,
    lambda n: ([n.a, n.b], "node"),
    lambda v, c: Node(*v),
    serialized_type_name="test_threads_stress.Node",
    flatten_with_keys_fn=lambda n: (
        [(cpytree.GetAttrKey("a"), n.a), (cpytree.GetAttrKey("b"), n.b)],
        "node",
    ),
)

Point = collections.namedtuple("Point", "x y")
cpytree._register_namedtuple(Point, serialized_type_name="test_threads_stress.Point")


def resnet_like(leaf):
    """A module-state tree shaped like a ResNet's: OrderedDicts of layers of tensors."""
    od = collections.OrderedDict
    return od(
        (
            f"layer{i}",
            od(
                (
                    f"block{j}",
                    od(conv1=leaf(), bn1=od(weight=leaf(), bias=leaf()), conv2=leaf()),
                )
                for j in range(3)
            ),
        )
        for i in range(4)
    )


def shared_trees():
    counter = support.Serial()

    def leaf():
        return f"leaf{next(counter)}"  # distinct objects, immutable

    return [
        {f"k{i}": [leaf(), leaf(), leaf()] for i in range(200)},  # a dict of 200 small lists
        resnet_like(leaf),
        [Point(leaf(), (leaf(), None)), collections.deque([leaf(), leaf()], maxlen=4)],
        Node(leaf(), {"x": Node(leaf(), [leaf()]), "y": collections.defaultdict(list, a=leaf())}),
        tuple(range(50)),
    ]


def canon(x):
    """The structure and leaf identities of a tree (for comparing rebuilt trees)."""
    t = type(x)
    if isinstance(x, dict):
        return (t, [(k, canon(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple, collections.deque)):
        return (t, [canon(v) for v in x])
    if t is Node:
        return (t, canon(x.a), canon(x.b))
    return ("leaf", id(x))


def test_import_keeps_the_gil_disabled():
    if not FREE_THREADED:
        pytest.skip("a GIL build of CPython")
    code = (
        "import warnings, sys; warnings.simplefilter('error');"
        "import cpytree, cpytree._C; print(sys._is_gil_enabled())"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("PYTHON_GIL", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "False"


def test_shared_read_only_trees():
    trees = shared_trees()
    want = []
    for t in trees:
        leaves, spec = cpytree.tree_flatten(t)
        want.append(
            {
                "leaves": leaves,
                "spec": spec,
                "hash": hash(spec),
                "repr": repr(spec),
                "map": canon(cpytree.tree_map(lambda x: x, t)),
                "paths": [cpytree.keystr(kp) for kp, _ in cpytree.tree_flatten_with_path(t)[0]],
                "dumps": cpytree.treespec_dumps(spec),
            }
        )

    def flatten():
        for t, w in zip(trees, want):
            leaves, spec = cpytree.tree_flatten(t)
            assert spec is w["spec"]  # the interned spec, found from any thread
            support.assert_same_objects(leaves, w["leaves"])
            support.assert_same_objects(cpytree.tree_leaves(t), w["leaves"])
            assert canon(cpytree.tree_unflatten(leaves, spec)) == canon(t)

    def mapper():
        for t, w in zip(trees, want):
            assert canon(cpytree.tree_map(lambda x: x, t)) == w["map"]
            assert canon(cpytree.tree_map(lambda x, y: y, t, t)) == w["map"]
            assert cpytree.tree_map_(lambda x: None, t) is t

    def specs():
        for t, w in zip(trees, want):
            spec = cpytree.tree_structure(t)
            assert spec == w["spec"] and hash(spec) == w["hash"] and repr(spec) == w["repr"]
            support.assert_same_objects(spec.flatten_up_to(t), w["leaves"])
            loaded = cpytree.treespec_loads(w["dumps"])
            assert loaded == w["spec"] and cpytree.treespec_dumps(loaded) == w["dumps"]

    def paths():
        for t, w in zip(trees, want):
            pairs, spec = cpytree.tree_flatten_with_path(t)
            assert [cpytree.keystr(kp) for kp, _ in pairs] == w["paths"]
            assert spec is w["spec"]

    def iterate():
        for t, w in zip(trees, want):
            support.assert_same_objects(list(cpytree.tree_iter(t)), w["leaves"])

    run_threads(
        [
            ("flatten", flatten),
            ("flatten2", flatten),
            ("map", mapper),
            ("specs", specs),
            ("paths", paths),
            ("iter", iterate),
            ("flatten3", flatten),
            ("map2", mapper),
        ]
    )


def test_intern_table_churn():
    fixed = {"a": [1, 2], "b": (3, {"c": 4})}
    want = cpytree.tree_structure(fixed)
    gc.collect()
    before = cpytree._C._intern_table_size()
    serial = support.Serial()

    def lookup():
        spec = cpytree.tree_structure(fixed)
        assert spec is want and hash(spec) == hash(want)

    def churn():
        # A fresh structure per round: an insert now, a removal when it dies.
        i = next(serial)
        a = cpytree.tree_structure({f"fresh{i}": [None, i]})
        b = cpytree.tree_structure({f"fresh{i}": [None, i]})
        assert a == b and hash(a) == hash(b)
        assert a != want

    run_threads(
        [("lookup", lookup), ("lookup2", lookup)] + [(f"churn{k}", churn) for k in range(6)]
    )
    gc.collect()
    assert cpytree._C._intern_table_size() <= before + THREADS  # the churned specs died


class Churned:
    def __init__(self, v):
        self.v = v


def test_register_then_visible_everywhere():
    """After register_pytree_node returns, every later call in any thread sees the node."""
    obj = Churned([1, 2])
    registered = threading.Event()
    seen_after: list = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            was = registered.is_set()
            leaves = cpytree.tree_leaves([obj, 3])
            if was:  # registration returned before this call started
                seen_after.append(leaves == [1, 2, 3])
            else:
                assert leaves in ([obj, 3], [1, 2, 3])

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(min(SECONDS, 0.5))
    cpytree.register_pytree_node(
        Churned,
        lambda c: (c.v, None),
        lambda v, c: Churned(v),
        serialized_type_name="test_threads_stress.Churned",
    )
    registered.set()
    time.sleep(min(SECONDS, 0.5))
    stop.set()
    for t in threads:
        t.join(60)
    try:
        assert seen_after and all(seen_after), seen_after.count(False)
    finally:
        cpytree._deregister_pytree_node(Churned)


def test_register_deregister_churn():
    serial = support.Serial()
    base = [{"a": (1, 2)}, [3]]
    base_leaves = cpytree.tree_leaves(base)

    def registrar():
        i = next(serial)
        cls = type(f"Fresh{i}", (), {})
        cpytree.register_pytree_node(
            cls,
            lambda o: ([o.v], i),
            lambda v, c: cls(),
            serialized_type_name=f"test_threads_stress.Fresh{i}",
        )
        obj = cls()
        obj.v = base
        assert cpytree.tree_leaves(obj) == base_leaves
        cpytree._deregister_pytree_node(cls)
        assert cpytree.tree_leaves(obj) == [obj]

    def reader():
        assert cpytree.tree_leaves(base) == base_leaves
        assert cpytree.tree_leaves([Node(1, 2), Point(3, 4)]) == [1, 2, 3, 4]

    run_threads(
        [(f"register{k}", registrar) for k in range(4)] + [(f"read{k}", reader) for k in range(4)]
    )


class Flicker:
    """Base of the classes that registrar threads register and deregister in a loop."""

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_traversals_race_reclamation():
    import weakref

    classes = [type(f"Flicker{k}", (Flicker,), {}) for k in range(4)]
    objs = [cls(f"a{k}", f"b{k}") for k, cls in enumerate(classes)]
    tree = [objs[0], {"x": objs[1], "y": (objs[2], [objs[3]])}]
    # What every registration held, by weak reference. Closures: CPython 3.13t
    # makes classes and top-level functions immortal once a thread has
    # started (gh-117783), nested functions never.
    held: list = []
    serial = support.Serial()

    def register(cls, name):
        flatten = lambda o: ([o.a, o.b], "ctx")  # noqa: E731 - a fresh closure per call
        unflatten = lambda v, c: cls(*v)  # noqa: E731
        cpytree.register_pytree_node(
            cls, flatten, unflatten, serialized_type_name=f"test_threads_stress.{name}"
        )
        held.extend((weakref.ref(flatten), weakref.ref(unflatten)))

    def flicker(k):
        def registrar():  # the one thread that (de)registers classes[k]
            register(classes[k], f"Flicker{k}")
            cpytree._deregister_pytree_node(classes[k])

        return registrar

    def fresh_registrar():
        i = next(serial)
        cls = type(f"Fresh{i}", (Flicker,), {})
        register(cls, f"FreshFlicker{i}")
        assert cpytree.tree_leaves(cls(1, 2)) == [1, 2]
        cpytree._deregister_pytree_node(cls)

    def leaves_of_one_state(leaves):
        # Each Flicker object is one leaf (deregistered) or gives its a, b.
        i = 0
        for o in objs:
            if i < len(leaves) and leaves[i] is o:
                i += 1
            elif i + 1 < len(leaves) and leaves[i] is o.a and leaves[i + 1] is o.b:
                i += 2
            else:
                return False
        return i == len(leaves)

    def same_objects(out):
        got = [out[0], out[1]["x"], out[1]["y"][0], out[1]["y"][1][0]]
        for o, g in zip(objs, got):
            assert g is o or (type(g) is type(o) and g.a is o.a and g.b is o.b), (o, g)

    def reader():
        leaves, spec = cpytree.tree_flatten(tree)
        assert leaves_of_one_state(leaves), leaves
        assert spec.num_leaves == len(leaves)
        assert leaves_of_one_state(cpytree.tree_leaves(tree))
        assert leaves_of_one_state(list(cpytree.tree_iter(tree)))
        same_objects(cpytree.tree_map(lambda x: x, tree))
        assert cpytree.tree_is_leaf(objs[0]) in (True, False)
        try:  # a type the spec holds as a node may be deregistered since
            same_objects(cpytree.tree_unflatten(leaves, spec))
        except KeyError as e:
            assert e.args[0] in classes, e
        try:
            assert leaves_of_one_state(spec.flatten_up_to(tree))
        except KeyError as e:
            assert e.args[0] in classes, e

    run_threads(
        [(f"flicker{k}", flicker(k)) for k in range(len(classes))]
        + [("fresh", fresh_registrar)]
        + [(f"read{k}", reader) for k in range(4)]
    )
    # No lookup runs now: the next writer frees everything still retired,
    # and with it the last references to every registration's functions.
    register(classes[0], "Flicker0")
    cpytree._deregister_pytree_node(classes[0])
    gc.collect()
    assert len(held) > 2 * len(classes)
    assert sum(r() is not None for r in held) == 0


def test_callbacks_run_concurrently():
    trees = shared_trees()
    want = [cpytree.tree_leaves(t) for t in trees]

    def never(x):
        return False

    def lists_are_leaves(x):
        return type(x) is list

    want_lists = [cpytree.tree_leaves(t, is_leaf=lists_are_leaves) for t in trees]

    def with_is_leaf():
        for t, w, wl in zip(trees, want, want_lists):
            support.assert_same_objects(cpytree.tree_leaves(t, is_leaf=never), w)
            support.assert_same_objects(cpytree.tree_flatten(t, is_leaf=lists_are_leaves)[0], wl)
            mapped = cpytree.tree_map(lambda x: x, t, is_leaf=lists_are_leaves)
            support.assert_same_objects(cpytree.tree_leaves(mapped, is_leaf=lists_are_leaves), wl)

    def custom_nodes():
        t = [Node(i, Node(str(i), [i])) for i in range(20)]
        leaves, spec = cpytree.tree_flatten(t)
        assert leaves == [x for i in range(20) for x in (i, str(i), i)]
        assert canon(cpytree.tree_unflatten(leaves, spec)) == canon(t)

    run_threads(
        [(f"is_leaf{k}", with_is_leaf) for k in range(4)]
        + [(f"custom{k}", custom_nodes) for k in range(4)]
    )


def test_mutation_during_flatten():
    """Threads mutate the lists, dicts and deques that other threads flatten."""
    pool = [f"x{i}" for i in range(64)]
    allowed = {id(x) for x in pool} | {id(None)}
    shared_list = pool[:10]
    shared_dict = {f"k{i}": pool[i] for i in range(10)}
    shared_deque = collections.deque(pool[:10])
    nested = [shared_list, shared_dict, {"inner": shared_list, "dq": shared_deque}, (shared_dict,)]
    tally: collections.Counter = collections.Counter()
    specs: list = []

    def all_allowed(leaves):
        assert all(id(x) in allowed for x in leaves), leaves

    def consistent(leaves, spec):
        assert spec.num_leaves == len(leaves)
        assert all(id(x) in allowed for x in leaves), leaves
        rebuilt = cpytree.tree_unflatten(leaves, spec)
        assert cpytree.tree_leaves(rebuilt) == leaves

    def attempt(fn):
        try:
            fn()
            tally["ok"] += 1
        except RuntimeError as exc:  # CPython's own iterators raise these
            msg = str(exc)
            assert "mutated during iteration" in msg or "changed size" in msg, msg
            tally["raised"] += 1

    def flattener():
        attempt(lambda: consistent(*cpytree.tree_flatten(nested)))
        attempt(lambda: all_allowed(cpytree.tree_leaves(nested)))
        attempt(lambda: consistent(*cpytree.tree_flatten(cpytree.tree_map(lambda x: x, nested))))
        attempt(lambda: all_allowed([x for _, x in cpytree.tree_flatten_with_path(nested)[0]]))
        attempt(lambda: all_allowed(list(cpytree.tree_iter(nested))))

    def against_spec():
        attempt(lambda: specs.append(cpytree.tree_structure(nested)))
        if not specs:
            return
        spec = specs.pop()
        for fn in (
            spec.flatten_up_to,
            lambda t: cpytree.tree_leaves(cpytree.tree_map(lambda x, y: y, nested, t)),
        ):
            try:
                all_allowed(fn(nested))
            except ValueError:  # the structure changed meanwhile
                tally["mismatch"] += 1
            except RuntimeError as exc:
                assert "mutated during iteration" in str(exc) or "changed size" in str(exc)

    def mutate_list():
        shared_list.append(pool[len(shared_list) % 64])
        if len(shared_list) > 20:
            del shared_list[3:15]
        shared_list[:] = pool[:7]

    def mutate_dict():
        for i in range(12):
            shared_dict[f"k{i}"] = pool[i + 20]
        for i in range(0, 12, 2):
            shared_dict.pop(f"k{i}", None)
        if len(shared_dict) > 30:
            shared_dict.clear()

    def mutate_deque():
        shared_deque.append(pool[30])
        shared_deque.appendleft(pool[31])
        if len(shared_deque) > 20:
            shared_deque.clear()

    run_threads(
        [
            ("flatten", flattener),
            ("flatten2", flattener),
            ("spec", against_spec),
            ("flatten3", flattener),
            ("list", mutate_list),
            ("dict", mutate_dict),
            ("deque", mutate_deque),
            ("list2", mutate_list),
        ]
    )
    assert tally["ok"] > 0


def test_one_iterator_two_threads():
    tree = [{"a": list(range(i, i + 5))} for i in range(0, 2000, 5)]
    want = sorted(cpytree.tree_leaves(tree))
    for _ in range(20):
        it = cpytree.tree_iter(tree)
        got: list = [[], []]
        busy = [0, 0]

        def consume(k):
            while True:
                try:
                    x = next(it)
                except StopIteration:
                    return
                except ValueError as exc:  # another thread is inside __next__
                    assert "already executing" in str(exc)
                    busy[k] += 1
                    continue
                got[k].append(x)

        threads = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(got[0] + got[1]) == want
        if not FREE_THREADED:
            assert busy == [0, 0]
