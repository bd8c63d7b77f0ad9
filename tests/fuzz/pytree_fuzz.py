"""Differential fuzzing of the C++ engine (cpytree) against the reference.

    python tests/fuzz/pytree_fuzz.py [libFuzzer flags...]     # atheris campaign
    python tests/fuzz/pytree_fuzz.py --random N [--seed S] [--seconds T]
    python tests/fuzz/pytree_fuzz.py --torch ...    # torch mode only (torch_mode.py)

Each input is a byte string that decides, byte by byte, a mode, a tree and
the callbacks of one round of operations (flatten, leaves, structure,
unflatten, map, n-ary map, map_, with-path variants, flatten_up_to, strict
spec.flatten, tree_flatten_spec, spec attributes and children, equality and
hash, deepcopy, pickle, treespec_dumps/treespec_loads); fuzz_trees.py builds
the inputs (node types, hostile keys, the mutator, the tree builder). Modes:

* ``clean``: well-behaved trees (every node kind, custom nodes, dataclasses,
  constants, keys 1/1.0/True, NaN leaves) and at most one *deterministic*
  failure source (is_leaf raising at its k-th call, func raising at its k-th
  call, a node whose flatten or unflatten raises). The engine and the
  reference must agree: equal results (leaves by identity, spec text, counts,
  dumps) or the same exception type.
* ``hostile``: dict keys and contexts whose ``__hash__``/``__eq__``/
  ``__repr__`` raise, lie, return objects whose ``__bool__`` raises, or
  collide. Call counts of user code differ legitimately between the
  implementations (interning hashes contexts), so each implementation must
  only give a consistent result or raise a Python exception.
* ``mutation``: is_leaf, func, custom flatten functions and key ``__eq__``
  mutate the tree being traversed (clear, pop, insert, reassign) and churn
  the allocator. torch snapshots a node's children when it visits it, the
  fused engine map visits later, so results may differ: only "no crash, no
  leak, a consistent result or a Python exception".
* ``loads``: protocol-1 JSON text, made by mutating the dumps of a generated
  spec or assembled from random parts, loaded by both implementations.
* ``ctor``: TreeSpec(type, context, children) with generated arguments.
* ``torch`` (``--torch``, every input; needs torch): install() active, specs
  built with torch's own constructors, mixed with engine specs, at extreme
  depths and widths and with hostile edits, fed to every entry point that
  takes torch objects and compared with torch's Python originals
  (torch_mode.py).

After every input, in every mode: the reference counts of the sentinel
leaves, keys and contexts and the size of the engine's intern table are
back where they were (a leak of one reference fails the input), and no
SystemError (an engine invariant) was raised.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import sys
import time
from collections import OrderedDict, defaultdict, deque, namedtuple

import cpytree
import cpytree._reference as ref
from cpytree import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_trees import (
    DC,
    LEAVES,
    NT,
    SENTINELS,
    STATE,
    Bag,
    Builder,
    Const,
    HKey,
    Leaf,
    Mutator,
    Pair,
    Rec,
    Stream,
    make_func,
    make_is_leaf,
    outcome,
)

E, R = cpytree, ref
E_LOADS = getattr(cpytree.treespec_loads, "__wrapped__", cpytree.treespec_loads)
R_LOADS = getattr(ref.treespec_loads, "__wrapped__", ref.treespec_loads)


# --------------------------------------------------------------------------
# Comparing outcomes.


def canon(x, depth=0):
    """A comparable picture of a tree: node types, keys, leaves by identity."""
    if depth > 50:
        return ("deep",)
    t = type(x)
    if t in (list, tuple) or (issubclass(t, tuple) and hasattr(t, "_fields")):
        return (t, [canon(v, depth + 1) for v in x])
    if t in (dict, OrderedDict, defaultdict):
        extra = x.default_factory if t is defaultdict else None
        return (t, extra, [((type(k), repr(k)), canon(v, depth + 1)) for k, v in x.items()])
    if t is deque:
        return (t, x.maxlen, [canon(v, depth + 1) for v in x])
    if t is Pair:
        return (t, canon(x.a, depth + 1), canon(x.b, depth + 1))
    if t is Bag:
        return (t, repr(x.ctx), [canon(v, depth + 1) for v in x.items])
    if t is DC:
        return (t, canon(x.x, depth + 1), canon(x.y, depth + 1))
    if t is Const:
        return (t, x.v)
    return ("leaf", id(x))


def spec_picture(spec):
    return (repr(spec), spec.num_leaves, spec.num_nodes, spec.num_children, spec.is_leaf())


class Mismatch(AssertionError):
    pass


def consistent_flatten(impl, res):
    leaves, spec = res
    if type(leaves) is not list or spec.num_leaves != len(leaves):
        raise Mismatch(f"{impl.__name__}: {len(leaves)} leaves but spec says {spec.num_leaves}")


# --------------------------------------------------------------------------
# One input.

STATS = {"inputs": 0}


def _count(key):
    STATS[key] = STATS.get(key, 0) + 1


def ops_for(impl, tree, other, is_leaf_cfg, func_cfg, mutator, compare):
    """name -> thunk of every operation for one implementation."""
    il = lambda: make_is_leaf(is_leaf_cfg, mutator)  # noqa: E731
    fn = lambda: make_func(func_cfg, mutator)  # noqa: E731
    loads = E_LOADS if impl is E else R_LOADS

    def flatten():
        res = impl.tree_flatten(tree, is_leaf=il())
        consistent_flatten(impl, res)
        leaves, spec = res
        return [canon(leaves), spec_picture(spec)]

    def unflatten():
        leaves, spec = impl.tree_flatten(tree, is_leaf=il())
        return canon(impl.tree_unflatten(leaves, spec))

    def with_path():
        pairs, spec = impl.tree_flatten_with_path(tree, is_leaf=il())
        if len(pairs) != spec.num_leaves:
            raise Mismatch("with_path: count")
        return [(impl.keystr(kp), canon(v)) for kp, v in pairs]

    def up_to():
        spec = impl.tree_structure(tree, is_leaf=il())
        return canon(spec.flatten_up_to(other))

    def spec_api():
        spec = impl.tree_structure(tree, is_leaf=il())
        kids = spec.children()
        out = [spec_picture(c) for c in kids]
        if kids:
            out.append(spec_picture(spec.child(len(kids) - 1)))
        out.append(spec.type is not None and spec.type.__name__)
        out.append(repr(spec.context))
        return out

    def dumps():
        spec = impl.tree_structure(tree, is_leaf=il())
        text = impl.treespec_dumps(spec)
        back = loads(text)
        if back != spec or (hash(back) != hash(spec) and compare):
            raise Mismatch(f"{impl.__name__}: loads(dumps(spec)) != spec: {text}")
        return text

    def eq_hash():
        a = impl.tree_structure(tree, is_leaf=il())
        b = impl.tree_structure(copy.copy(tree), is_leaf=il())
        eq = a == b
        if eq and hash(a) != hash(b):
            raise Mismatch(f"{impl.__name__}: equal specs, different hashes")
        return eq

    ops = {
        "flatten": flatten,
        "leaves": lambda: canon(impl.tree_leaves(tree, is_leaf=il())),
        "structure": lambda: spec_picture(impl.tree_structure(tree, is_leaf=il())),
        "unflatten": unflatten,
        "map": lambda: canon(impl.tree_map(fn(), tree, is_leaf=il())),
        "map_nary": lambda: canon(impl.tree_map(fn(), tree, other, is_leaf=il())),
        "map_": lambda: impl.tree_map_(fn(), tree, is_leaf=il()) is tree,
        "with_path": with_path,
        "map_with_path": lambda: canon(impl.tree_map_with_path(fn(), tree, is_leaf=il())),
        "flatten_up_to": up_to,
        "spec_api": spec_api,
        "dumps": dumps,
        "eq_hash": eq_hash,
    }
    if impl is E:
        spec_e = [None]

        def strict():
            spec_e[0] = E.tree_structure(tree)
            return canon(spec_e[0].flatten(tree))

        def fx():
            spec = E.tree_structure(tree)
            return canon(_C.tree_flatten_spec(tree, spec))

        def deepcopy_pickle():
            # Contexts compared by identity (no __eq__) make copies unequal,
            # in torch too: compare the shape.
            spec = E.tree_structure(tree)
            for other_spec in (copy.deepcopy(spec), pickle.loads(pickle.dumps(spec))):
                if [s.num_nodes for s in (spec, other_spec)] != [spec.num_nodes] * 2:
                    raise Mismatch("deepcopy/pickle changed the shape of a spec")
            return True

        ops.update(strict=strict, fx=fx, deepcopy_pickle=deepcopy_pickle)
    return ops


def check_leaks(before_refs, before_specs, what):
    after = [sys.getrefcount(o) for o in SENTINELS]
    specs = _C._intern_table_size()
    if after != before_refs or specs != before_specs:
        gc.collect()
        after = [sys.getrefcount(o) for o in SENTINELS]
        specs = _C._intern_table_size()
    if after != before_refs:
        drift = {repr(o)[:30]: a - b for o, a, b in zip(SENTINELS, after, before_refs) if a != b}
        raise Mismatch(f"{what}: reference counts drifted: {drift}")
    if specs != before_specs:
        raise Mismatch(f"{what}: intern table {before_specs} -> {specs} specs")


def containers_of(tree, depth=0):
    """The mutable containers of a tree (for the mutator)."""
    t = type(tree)
    if depth > 20:
        return []
    if t in (list, deque):
        kids = list(tree)
    elif t in (dict, OrderedDict, defaultdict):
        kids = list(tree.values())
    elif t is Bag:
        kids = list(tree.items)
    elif t in (tuple, NT, Rec):
        return [c for k in tree for c in containers_of(k, depth + 1)]
    else:
        return []
    return [tree] + [c for k in kids for c in containers_of(k, depth + 1)]


def run_tree_mode(s: Stream, mode: str):
    b = Builder(s, mode)
    tree = b.tree()
    try:  # a tree with `tree` as a prefix, for the n-ary map and flatten_up_to
        other = ref.tree_map(lambda x: [x, {"o": x}] if s.chance(3) else x, tree)
    except Exception:  # noqa: BLE001 - a raising or odd node: use the tree itself
        other = tree
    types = s.pick([(), (tuple,), (list, Pair), (dict,), (Bag, deque), (NT, DC)])
    is_leaf_cfg = None if s.chance(2) else ("types", 0, types)
    func_cfg = ("none", 0)
    if mode == "clean" and not b.raisers:
        src = s.below(4)
        if src == 1:
            is_leaf_cfg = ("raise", 1 + s.below(12), types)
        elif src == 2:
            func_cfg = ("raise", 1 + s.below(12))
    mutator = None
    if mode == "hostile" and s.chance(4):
        is_leaf_cfg = ("weird", 1 + s.below(12), types)
    if mode == "mutation":
        mutator = Mutator(s, b.containers + containers_of(other))
        STATE["mutator"] = mutator
        if is_leaf_cfg is None:
            is_leaf_cfg = ("types", 0, types)
    names = list(ops_for(E, tree, other, is_leaf_cfg, func_cfg, mutator, False))
    start = s.below(len(names))
    chosen = names[start:] + names[:start]
    if mode != "clean":
        chosen = chosen[: 1 + s.below(len(chosen))]
    HKey.armed = mode != "clean"
    try:
        for name in chosen:
            if mutator is not None:
                mutator.armed = True
            got_e = outcome(ops_for(E, tree, other, is_leaf_cfg, func_cfg, mutator, True)[name])
            if mutator is not None:
                mutator.armed = False
            if mode != "clean":
                _count(f"{mode}:{got_e[0]}")
                continue
            _count(f"clean:{got_e[0]}")
            if name in ("strict", "fx", "deepcopy_pickle"):
                continue  # engine-only operations: no crash and consistency only
            got_r = outcome(ops_for(R, tree, other, is_leaf_cfg, func_cfg, None, True)[name])
            if name in ("with_path", "map_with_path") and is_leaf_cfg and is_leaf_cfg[0] == "raise":
                continue  # torch (so the reference) calls is_leaf twice per node there
            if (
                name in ("with_path", "map_with_path")
                and got_e[0] == got_r[0] == "exc"
                and ValueError in (got_e[1], got_r[1])
            ):
                # The engine raises "no flatten_with_keys_fn" when it meets the
                # node; torch flattens the whole tree first, so another error
                # from deeper down may win there.
                continue
            if got_e != got_r:
                raise Mismatch(f"{name}: engine {got_e!r}\n reference {got_r!r}\n tree {tree!r}")
    finally:
        HKey.armed = False
        STATE["mutator"] = None


def random_json_spec(s: Stream, depth=0):
    types = [
        None,
        "builtins.list",
        "builtins.tuple",
        "builtins.dict",
        "collections.OrderedDict",
        "collections.defaultdict",
        "collections.deque",
        "collections.namedtuple",
        "fuzz.Pair",
        "fuzz.Bag",
        "fuzz.DC",
        "nope.Nope",
        "builtins.int",
    ]
    t = s.pick(types)
    n = 0 if t is None or depth > 3 else s.below(4)
    ctxs = [
        "null",
        '["a", "b"]',
        "[]",
        '["a"]',
        '{"default_factory_module": "builtins", '
        '"default_factory_name": "list", "dict_keys": ["a"]}',
        "3",
        '"NT"',
        "[1, 1.0]",
        "[null]",
        '{"a": 1}',
        '["x", "y"]',
        "-1",
        '"ctx"',
        s.text(6),
    ]
    ctx = s.pick(ctxs)
    node = {
        "type": t,
        "context": None if t is None and s.chance(2) else ctx,
        "children_spec": [random_json_spec(s, depth + 1) for _ in range(n)],
    }
    if s.chance(16):
        node.pop(s.pick(list(node)))
    return node


def run_loads_mode(s: Stream):
    import json

    if s.chance(2):
        tree = Builder(s, "clean").tree()
        try:
            text = E.treespec_dumps(E.tree_structure(tree))
        except Exception:  # noqa: BLE001 - unserializable node: use a random one
            text = "[1, {}]"
        chars = list(text)
        for _ in range(s.below(4)):
            if not chars:
                break
            i = s.below(len(chars))
            op = s.below(4)
            if op == 0:
                del chars[i]
            elif op == 1:
                chars.insert(i, s.pick('[]{}",:0123456789 -.nulltrue\\e'))
            elif op == 2:
                chars[i] = chr(s.u8())
            else:
                chars[i:i] = chars[s.below(len(chars)) :][: s.below(30)]
        text = "".join(chars)
    else:
        text = json.dumps([s.pick([1, 1, 1, 0, 2, "1"]), random_json_spec(s)])
    got_e = outcome(lambda: E_LOADS(text))
    got_r = outcome(lambda: R_LOADS(text))
    _count(f"loads:{got_e[0]}")
    if got_e[0] == "ok" and got_r[0] == "ok":
        if repr(got_e[1]) != repr(got_r[1]) or E.treespec_dumps(got_e[1]) != R.treespec_dumps(
            got_r[1]
        ):
            raise Mismatch(f"loads({text!r}): {got_e[1]!r} vs {got_r[1]!r}")
    elif got_e[0] == "ok" and got_r[0] == "exc":
        raise Mismatch(f"loads({text!r}): engine accepted, reference raised {got_r[1]}")
    # The engine's constructor validates contexts the reference keeps as given.
    elif got_e[0] == "exc" and got_r[0] == "ok" and got_e[1] not in (ValueError, TypeError):
        raise Mismatch(f"loads({text!r}): engine raised {got_e[1]}, reference accepted")


def run_ctor_mode(s: Stream):
    b = Builder(s, "hostile" if s.chance(2) else "clean")
    for impl in (E, R):
        leaf = impl.tree_structure(0)
        kids = []
        for _ in range(s.below(4)):
            got = outcome(lambda: impl.tree_structure(b.tree(2))) if s.chance(2) else ("exc",)
            kids.append(got[1] if got[0] == "ok" else leaf)
        t = s.pick(
            [
                None,
                list,
                tuple,
                dict,
                OrderedDict,
                defaultdict,
                deque,
                namedtuple,
                NT,
                Pair,
                Bag,
                Leaf,
                "str",
                DC,
            ]
        )
        ctx = s.pick(
            [
                None,
                [b.key() for _ in kids],
                b.context(),
                NT,
                3,
                -1,
                [s.pick([list, int, None, len]), [b.key() for _ in kids]],
            ]
        )
        HKey.armed = b.mode != "clean"
        try:
            got = outcome(lambda: impl.TreeSpec(t, ctx, kids))
            _count(f"ctor:{got[0]}")
            if got[0] == "ok":
                spec = got[1]
                outcome(lambda: (repr(spec), hash(spec), spec == leaf, spec.children()))
                outcome(lambda: spec.unflatten([LEAVES[0]] * spec.num_leaves))
        finally:
            HKey.armed = False


MODES = ["clean", "clean", "clean", "hostile", "hostile", "mutation", "mutation", "loads", "ctor"]
TORCH_MODE = False  # --torch: every input in torch mode, install() active


def one_input(data: bytes) -> None:
    """The fuzz target: raises on a mismatch, a leak or an engine SystemError."""
    STATS["inputs"] += 1
    if STATS["inputs"] == 1:
        # On free-threaded CPython (3.13t) code objects, top-level functions,
        # modules and heap types are reference-counted "deferred": they die
        # only in a collection. Code objects dropped since start-up (import,
        # atheris instrumentation, torch) are such garbage and hold constants
        # (fuzz_trees' module code holds the sentinel 2.5 twice): collect it
        # before the first baseline, or the first automatic collection inside
        # an input reads as a negative drift. Later inputs start from a
        # collected state (check_leaks collects on any difference).
        gc.collect()
    s = Stream(data)
    mode = "torch" if TORCH_MODE else s.pick(MODES)
    before_refs = [sys.getrefcount(o) for o in SENTINELS]
    before_specs = _C._intern_table_size()
    if mode == "torch":
        import torch_mode

        torch_mode.run_torch_mode(s, _count)
    elif mode == "loads":
        run_loads_mode(s)
    elif mode == "ctor":
        run_ctor_mode(s)
    else:
        run_tree_mode(s, mode)
    del s
    check_leaks(before_refs, before_specs, mode)


def run_random(n: int, seed: int, seconds: float) -> int:
    """Random inputs without atheris (the short run of `make test` without it)."""
    import random

    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    done = 0
    while done < n and time.monotonic() < deadline:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(4, 400)))
        try:
            one_input(data)
        except BaseException:
            print(f"pytree_fuzz: failing input (seed {seed}, #{done}): {data.hex()}", flush=True)
            raise
        done += 1
    return done


def report():
    keys = sorted(k for k in STATS if k != "inputs")
    print(
        f"pytree_fuzz: {STATS['inputs']} inputs; " + ", ".join(f"{k}={STATS[k]}" for k in keys),
        flush=True,
    )


def _instrument_python(atheris):
    """Instruments the functions of cpytree's Python modules and of this file.

    (atheris.instrument_all() takes ~20 s over the whole interpreter, and the
    editable install's import hook hides cpytree from instrument_imports.)
    """
    import types

    def functions(ns, depth=0):
        for v in list(vars(ns).values()):
            if isinstance(v, types.FunctionType):
                yield v
            elif isinstance(v, (staticmethod, classmethod)):
                if isinstance(v.__func__, types.FunctionType):
                    yield v.__func__
            elif isinstance(v, property):
                yield from (f for f in (v.fget, v.fset) if isinstance(f, types.FunctionType))
            elif (
                isinstance(v, type) and depth < 2 and v.__module__ == getattr(ns, "__name__", None)
            ):
                yield from functions(v, depth + 1)

    seen = set()
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name.startswith("cpytree") or name in (__name__, "fuzz_trees")):
            continue
        for f in functions(mod):
            if (
                id(f.__code__) not in seen
                and f.__module__
                and f.__module__.split(".")[0] in ("cpytree", __name__, "fuzz_trees")
            ):
                seen.add(id(f.__code__))
                atheris.instrument_func(f)


def main(argv):
    global TORCH_MODE
    if "--torch" in argv:
        argv = [a for a in argv if a != "--torch"]
        import torch_mode

        torch_mode.setup()
        TORCH_MODE = True
    if "--random" in argv:
        i = argv.index("--random")
        n = int(argv[i + 1])
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
        secs = float(argv[argv.index("--seconds") + 1]) if "--seconds" in argv else 1e9
        run_random(n, seed, secs)
        report()
        return
    if "--replay" in argv:  # hex inputs (as printed on failure), files or corpus dirs
        for item in argv[argv.index("--replay") + 1 :]:
            if os.path.isdir(item):
                paths = sorted(os.path.join(item, f) for f in os.listdir(item))
            else:
                paths = [item]
            for path in paths:
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                else:
                    data = bytes.fromhex(path)
                try:
                    one_input(data)
                except BaseException:
                    print(f"pytree_fuzz: failing input {path}: {data.hex()}", flush=True)
                    raise
        report()
        return
    import atexit

    import atheris

    atexit.register(report)
    # Coverage of cpytree's Python code (the reference, the serialization and
    # registry modules; instrumented at import, top of file) guides the
    # search; the extension's C++ is not instrumented (`make fuzz` replays the
    # corpus against the ASan+UBSan build).
    _instrument_python(atheris)
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    main(sys.argv)
