"""The fuzzer's torch mode (`pytree_fuzz.py --torch`): install() active, inputs
built with torch's own constructors, results compared with torch's.

Each input builds a tree (fuzz_trees.Builder, plus node types registered
with *torch*: a keyed pair whose flatten_with_keys_fn returns torch's key
classes, a node whose torch.fx flatten-spec function returns one child too
few, a torch constant), takes torch's spec of it with torch's Python
`tree_structure`, and rebuilds that spec with torch's constructors:
`TreeSpec(type, context, children)`, `treespec_leaf()`, `LeafSpec()`, keeping
some children as engine specs (mixed trees). Then, sometimes, an extreme
shape: a chain of torch nodes up to 100,000 deep around it, a node 100,000
wide, a cycle through `_children`, or hostile edits (a non-spec child, a
dict context with the wrong number of keys, contexts whose __eq__/__hash__
raise).

Every entry point that takes torch objects runs on it, each against torch's
Python original (saved before install()): tree_unflatten, torch.fx's
tree_flatten_spec, TreeSpec(...) of torch children then flatten_up_to, ==
both ways and hash against torch specs, repr, treespec_dumps, pickling, the
with-path functions (torch's key entries, keystr, key_get) and the n-ary
tree_map. Clean inputs must agree with torch: the same result or the same
exception type, except that where torch's recursion gives up
(RecursionError) the engine may answer. Hostile inputs: only "no crash, no
leak, a Python exception or a result".
"""

from __future__ import annotations

import contextlib
import pickle
import sys
from collections import deque

from fuzz_trees import DC, LEAVES, Bag, Builder, Const, HKey, Pair, Stream, outcome

import cpytree

E = cpytree
T: dict = {}  # torch's Python originals, saved before install()
tp = None  # torch.utils._pytree
fxp = None  # torch.fx._pytree

CHAIN_DEPTHS = [2, 30, 300, 900, 1100, 2999, 3001, 20_000, 100_000]
WIDTHS = [0, 1, 64, 1000, 100_000]


class TPair:
    """Registered with torch (keys are torch's GetAttrKey)."""

    def __init__(self, a, b):
        self.a, self.b = a, b


class TShort:
    """Registered with torch; its fx flatten-spec function drops the last child."""

    def __init__(self, *kids):
        self.kids = list(kids)


class TConst:
    """A torch constant (register_constant): a leaf-less node with a ConstantNode context."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is TConst and other.v == self.v

    def __hash__(self):
        return hash(self.v)

    def __repr__(self):
        return f"TConst({self.v!r})"


class BadKey:
    """A torch key entry whose str()/get() raise (hostile key paths)."""


HOSTILE_KEYS = [False]  # TShort's flatten_with_keys_fn returns a BadKey first when on


def setup() -> None:
    """Import torch, keep its originals, register the torch types, install()."""
    global tp, fxp, BadKey
    import torch.fx._pytree as fx_pytree
    import torch.utils._pytree as torch_pytree

    tp, fxp = torch_pytree, fx_pytree
    for name in (
        "tree_flatten",
        "tree_structure",
        "tree_unflatten",
        "tree_map",
        "tree_flatten_with_path",
        "treespec_dumps",
        "keystr",
        "key_get",
    ):
        T[name] = getattr(tp, name)
    T["fx"] = fxp.tree_flatten_spec

    class _BadKey(tp.MappingKey):
        def __str__(self):
            raise RuntimeError("hostile key str")

        def get(self, obj):
            raise RuntimeError("hostile key get")

    BadKey = _BadKey
    tp.register_pytree_node(
        TPair,
        lambda p: ([p.a, p.b], None),
        lambda v, c: TPair(*v),
        serialized_type_name="torch_mode.TPair",
        flatten_with_keys_fn=lambda p: (
            [(tp.GetAttrKey("a"), p.a), (tp.GetAttrKey("b"), p.b)],
            None,
        ),
    )
    tp.register_pytree_node(
        TShort,
        lambda t: (t.kids, len(t.kids)),
        lambda v, c: TShort(*v),
        serialized_type_name="torch_mode.TShort",
        flatten_with_keys_fn=lambda t: (
            [
                (BadKey(i) if HOSTILE_KEYS[0] and i == 0 else tp.SequenceKey(i), x)
                for i, x in enumerate(t.kids)
            ],
            len(t.kids),
        ),
    )
    fxp.register_pytree_flatten_spec(TShort, lambda t, spec: t.kids[:-1])
    fxp.register_pytree_flatten_spec(TPair, lambda p, spec: [p.a, p.b])
    tp.register_constant(TConst)
    cpytree.install()
    global _MISSING
    from cpytree._torch import _patch

    _MISSING = _patch._MISSING
    if cpytree._torch.status().get("mode") != "full":
        raise SystemExit(f"torch mode needs install()'s full mode: {cpytree._torch.status()}")


# --------------------------------------------------------------------------
# Building torch-made inputs.


class Input:
    def __init__(self) -> None:
        self.hostile = False  # no comparison with torch, only "no crash"
        self.extreme = False  # deeper or wider than torch's recursion may go
        self.limit = engine_depth_limit()
        self.huge = False  # so deep that torch takes seconds to give up: engine side only


def build_tree(s: Stream, b: Builder, depth=0):
    """A tree of Builder's kinds plus the torch-registered ones."""
    c = s.below(8)
    if depth < 4 and c == 0:
        return TPair(build_tree(s, b, depth + 1), build_tree(s, b, depth + 1))
    if depth < 4 and c == 1:
        return TShort(*[build_tree(s, b, depth + 1) for _ in range(1 + s.below(3))])
    if c == 2:
        return TConst(s.below(3))
    if depth < 4 and c == 3:
        return [build_tree(s, b, depth + 1) for _ in range(s.below(3))]
    if depth < 4 and c == 4:
        return {b.key(): build_tree(s, b, depth + 1) for _ in range(s.below(3))}
    return b.tree(depth + 1)


def leaf_spec(s: Stream):
    c = s.below(4)
    if c == 0:
        return tp.LeafSpec()
    if c == 1:
        return tp._LEAF_SPEC
    if c == 2:
        return E.treespec_leaf()  # an engine leaf among torch nodes
    return tp.treespec_leaf()


def rebuild(s: Stream, spec, depth=0):
    """spec rebuilt with torch's constructors, some subtrees left to the engine."""
    if spec.is_leaf():
        return leaf_spec(s)
    kids = spec.children()
    if depth > 0 and s.chance(5):
        return E.TreeSpec(spec.type, spec.context, [rebuild(s, k, depth + 1) for k in kids])
    if depth > 200:  # Builder trees are shallow; a chain is rebuilt iteratively
        return spec
    return tp.TreeSpec(spec.type, spec.context, [rebuild(s, k, depth + 1) for k in kids])


def chain(spec, depth, node_type, s: Stream):
    """`depth` torch nodes of `node_type` around spec (one child each)."""
    for k in range(depth):
        if node_type is dict:
            spec = tp.TreeSpec(dict, ["k"], [spec])
        elif node_type is TShort:
            spec = tp.TreeSpec(TShort, 2, [spec, tp.treespec_leaf()])
        elif k % 7 == 3 and depth <= 3001 and s.chance(2):
            # An engine link in the chain (it converts the torch part below
            # it: quadratic, so not in the longest chains).
            spec = E.TreeSpec(node_type, None, [spec])
        else:
            spec = tp.TreeSpec(node_type, None, [spec])
    return spec


def chain_tree(tree, depth, node_type):
    for _ in range(depth):
        if node_type is dict:
            tree = {"k": tree}
        elif node_type is TShort:
            tree = TShort(tree, LEAVES[1])
        elif node_type is tuple:
            tree = (tree,)
        else:
            tree = [tree]
    return tree


def hostile_edit(s: Stream, spec, b: Builder):
    """A torch spec edited as only a hostile caller would (torch specs are mutable)."""
    c = s.below(6)
    if c == 0:
        outer = tp.TreeSpec(list, None, [spec])
        outer._children.append(outer)  # a cycle
        return outer
    if c == 1:
        return tp.TreeSpec(list, None, [spec, s.pick(["spec", None, 3, LEAVES[0]])])
    if c == 2:
        return tp.TreeSpec(dict, [b.key() for _ in range(s.below(3))], [spec])
    if c == 3:
        return tp.TreeSpec(
            TPair,
            HKey(1, s.pick(["hash_raise", "eq_raise", "eq_weird"])),
            [spec, tp.treespec_leaf()],
        )
    if c == 4:
        return tp.TreeSpec(s.pick([int, "str", LEAVES[0]]), None, [spec])
    return tp.TreeSpec(tuple, s.pick([1, "ctx", [1]]), [spec])


def make_input(s: Stream):
    inp = Input()
    b = Builder(s, "hostile" if s.chance(4) else "clean")
    tree = build_tree(s, b)
    if b.mode != "clean":
        inp.hostile = True
    try:
        with torch_originals():
            torch_spec = T["tree_structure"](tree)
        spec = rebuild(s, torch_spec)
    except Exception:  # noqa: BLE001 - a raising node (Raiser): a plain input
        tree, spec = [LEAVES[0]], tp.TreeSpec(list, None, [tp.treespec_leaf()])
    shape = s.below(16)
    if shape in (0, 1, 2):
        depth = s.pick(CHAIN_DEPTHS)
        if depth >= 20_000 and not s.chance(4):
            depth = 1100  # the longest chains are slow to build: keep them rare
        node_type = s.pick([list, tuple, dict, TShort])
        spec, tree = chain(spec, depth, node_type, s), chain_tree(tree, depth, node_type)
        inp.extreme = depth >= 300
        inp.huge = depth >= 20_000
    elif shape == 3:
        width = s.pick(WIDTHS)
        kid = spec
        spec = tp.TreeSpec(tuple, None, [kid] * width)
        tree = (tree,) * width
        inp.extreme = width >= 1000
    elif shape == 4:
        with contextlib.suppress(Exception):  # torch's constructor may refuse it
            spec = hostile_edit(s, spec, b)
        inp.hostile = True
    if inp.hostile and s.chance(2):
        HOSTILE_KEYS[0] = True
    return inp, tree, spec


# --------------------------------------------------------------------------
# Operations: (engine thunk, torch thunk) pairs.


def canon(x, depth=0):
    """Comparable and safe at any depth (iterative over one-child chains)."""
    out = []
    while depth < 40:
        t = type(x)
        if t in (list, tuple) and len(x) == 1:
            out.append(t)
            x = x[0]
            continue
        if t is dict and len(x) == 1 and "k" in x:
            out.append(t)
            x = x["k"]
            continue
        break
    t = type(x)
    if depth >= 40:
        return (*out, "deep")
    if t in (list, tuple) or (issubclass(t, tuple) and hasattr(t, "_fields")):
        return (*out, t, [canon(v, depth + 1) for v in x])
    if isinstance(x, dict):
        return (*out, t, [(repr(k), canon(v, depth + 1)) for k, v in x.items()])
    if t is TPair:
        return (*out, t, canon(x.a, depth + 1), canon(x.b, depth + 1))
    if t is TShort:
        return (*out, t, [canon(v, depth + 1) for v in x.kids])
    if t is TConst or t is Const:
        return (*out, t, x.v)
    if t is Pair:
        return (*out, t, canon(x.a, depth + 1), canon(x.b, depth + 1))
    if t is Bag:
        return (*out, t, repr(x.ctx), [canon(v, depth + 1) for v in x.items])
    if t is DC:
        return (*out, t, canon(x.x, depth + 1), canon(x.y, depth + 1))
    if t is deque:
        return (*out, t, x.maxlen, [canon(v, depth + 1) for v in x])
    return (*out, "leaf", id(x) if not isinstance(x, (int, str, float)) else repr(x))


def engine_spec(spec):
    return E.TreeSpec(spec.type, spec._context, spec._children)


def ops(tree, spec, other_spec):
    n = spec.num_leaves

    def leaves():
        return [LEAVES[k % len(LEAVES)] for k in range(n)]

    def up_to(conv):
        return canon(conv.flatten_up_to(tree))

    def paths(fn, keystr, key_get):
        pairs, _ = fn(tree)
        return [
            (keystr(kp), [type(k) for k in kp], canon(key_get(tree, kp))) for kp, _ in pairs[:50]
        ]

    return {
        "unflatten": (
            lambda: canon(tp.tree_unflatten(leaves(), spec)),
            lambda: canon(T["tree_unflatten"](leaves(), spec)),
        ),
        "fx": (
            lambda: canon(fxp.tree_flatten_spec(tree, spec)),
            lambda: canon(T["fx"](tree, spec)),
        ),
        "flatten_up_to": (lambda: up_to(engine_spec(spec)), lambda: up_to(spec)),
        "eq": (
            lambda: (engine_spec(spec) == other_spec, other_spec == engine_spec(spec)),
            lambda: (spec == other_spec, other_spec == spec),
        ),
        "hash": (lambda: hash(engine_spec(spec)), lambda: hash(spec)),
        "repr": (lambda: repr(engine_spec(spec)), lambda: repr(spec)),
        "dumps": (
            lambda: (E.treespec_dumps(spec), E.treespec_dumps(engine_spec(spec))),
            lambda: (T["treespec_dumps"](spec),) * 2,
        ),
        "pickle": (
            lambda: pickle.loads(pickle.dumps(engine_spec(spec))) == spec,
            lambda: pickle.loads(pickle.dumps(spec)) == spec,
        ),
        "with_path": (
            lambda: paths(tp.tree_flatten_with_path, E.keystr, E.key_get),
            lambda: paths(T["tree_flatten_with_path"], T["keystr"], T["key_get"]),
        ),
        "map_nary": (
            lambda: canon(tp.tree_map(lambda a, b: b, tree, tree)),
            lambda: canon(T["tree_map"](lambda a, b: b, tree, tree)),
        ),
        "ctor": (lambda: engine_spec(spec) == spec, lambda: spec == spec),
    }


class Mismatch(AssertionError):
    pass


class torch_originals:  # noqa: N801 - a context manager, used like a function
    """Puts torch's own functions back for the duration (install()'s patches).

    torch's Python functions call each other through their module globals
    (tree_structure calls tree_flatten, tree_map calls tree_flatten and
    tree_unflatten): with install() active they would reach the engine.
    Inside this block they are torch's again; the engine's specs keep posing
    as torch's (specs made by the engine earlier stay valid torch inputs).
    """

    def __enter__(self):
        self.records = [r for r in cpytree._torch._state.patches._records if r[2] is not _MISSING]
        for module, name, previous, _ in self.records:
            setattr(module, name, previous)

    def __exit__(self, *exc):
        for module, name, _, value in self.records:
            setattr(module, name, value)


_MISSING = None


def torch_outcome(fn):
    with torch_originals():
        return outcome(fn)


def run_torch_mode(s: Stream, count) -> None:
    inp, tree, spec = make_input(s)
    other_tree = build_tree(s, Builder(s, "clean")) if s.chance(2) else tree
    try:
        with torch_originals():
            torch_spec = T["tree_structure"](other_tree)
        other_spec = rebuild(s, torch_spec)
    except Exception:  # noqa: BLE001
        other_spec = tp.treespec_leaf()
    table = ops(tree, spec, other_spec)
    names = list(table)
    start = s.below(len(names))
    chosen = names[start:] + names[:start]
    if inp.extreme or inp.hostile:
        chosen = chosen[: 1 + s.below(4)]  # deep inputs are slow in torch: fewer ops
    HKey.armed = inp.hostile
    try:
        for name in chosen:
            engine_fn, torch_fn = table[name]
            got_e = outcome(engine_fn)
            count(f"torch:{got_e[0]}")
            if inp.hostile or inp.huge:
                continue
            got_t = torch_outcome(torch_fn)
            if got_t == ("exc", RecursionError):
                continue  # torch's recursion gave up: the engine may answer
            if got_e == ("exc", RecursionError) and inp.extreme and spec_depth(spec) >= inp.limit:
                continue  # past the engine's documented depth limit (torch's
                # constructor and `is` comparison have no recursion to give up)
            if name in ("with_path",) and got_e[0] == got_t[0] == "exc":
                continue  # which hostile key fails first differs legitimately
            if name == "ctor" and got_e[0] == "exc" and got_e[1] in (ValueError, TypeError):
                continue  # the engine validates contexts torch keeps as given
            if got_e != got_t:
                raise Mismatch(
                    f"{name}: engine {got_e!r:.300}\n torch {got_t!r:.300}\n"
                    f" spec {repr_safe(spec):.600}"
                )
    finally:
        HKey.armed = False
        HOSTILE_KEYS[0] = False
        _break_cycles(spec)


def engine_depth_limit() -> int:
    """About the engine's depth limit (common.h: DepthLimit): the recursion
    limit, capped by the C stack at 384 bytes a level (8 KB under ASan) after
    a 256 KB reserve; 10% off for the stack this process already uses."""
    import os
    import resource

    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    stack = 8 << 20 if soft in (resource.RLIM_INFINITY, -1) else soft
    per_level = 8192 if os.environ.get("CPYTREE_SANITIZED") else 384
    by_stack = (stack - (256 << 10)) // per_level
    return int(min(sys.getrecursionlimit(), by_stack) * 0.9)


def spec_depth(spec):
    """Nesting depth of a torch/engine spec, iteratively (cycles count as deep)."""
    deepest, stack, seen = 0, [(spec, 1)], 0
    while stack and seen < 1_000_000:
        node, d = stack.pop()
        seen += 1
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in node.children())
    return deepest if not stack else 10**9


def repr_safe(spec):
    try:
        return repr(spec)
    except BaseException as error:  # noqa: BLE001
        return f"<unprintable spec: {type(error).__name__}>"


def _break_cycles(spec):
    """Drop the self-reference a hostile edit made (for the leak check)."""
    children = getattr(spec, "_children", None)
    if type(children) is list and any(c is spec for c in children):
        children[:] = [c for c in children if c is not spec]
