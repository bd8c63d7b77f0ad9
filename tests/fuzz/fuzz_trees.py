"""Inputs of the differential fuzzer (pytree_fuzz.py): the byte stream that
decides everything, the node types (registered once in the shared registry),
hostile keys and contexts, the mutator that edits a tree from inside user
callbacks, the tree builder and the callbacks with their call counters.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import NamedTuple

import cpytree

E = cpytree
MAX_DEPTH = 5


class Stream:
    """Reads decisions from the input bytes; 0 once they run out (so leaves)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def u8(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def below(self, n: int) -> int:
        if n <= 1:
            return 0
        if n <= 256:
            return self.u8() % n
        return (self.u8() << 8 | self.u8()) % n

    def chance(self, k: int) -> bool:
        return self.below(k) == 0

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def text(self, maxlen: int) -> str:
        n = self.below(maxlen + 1)
        return bytes(self.u8() for _ in range(n)).decode("latin-1")


# --------------------------------------------------------------------------
# Types: registered once (the registry is shared, so both implementations see
# every registration).


class Leaf:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"Leaf({self.i})"


class LeafList(list):  # list subclass: a leaf unless registered
    pass


class Opaque:  # an unregistered, unhashable-by-value object
    __hash__ = None


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class Bag:
    """Custom node whose flatten returns its live internal list."""

    def __init__(self, items, ctx):
        self.items, self.ctx = items, ctx


class Raiser:
    """flatten_fn raises."""


class BadUnflatten:
    """unflatten_fn raises."""

    def __init__(self, x):
        self.x = x


class Weird:
    """flatten_fn / flatten_with_keys_fn return odd shapes (hostile modes)."""

    def __init__(self, kids, how):
        self.kids, self.how = kids, how


def _weird_flatten(w):
    how, kids = w.how, w.kids
    if how == 0:
        return tuple(kids), None  # children as a tuple
    if how == 1:
        return iter([kids, "ctx"])  # the pair as an iterator
    if how == 2:
        return (k for k in kids), None  # children as a generator
    if how == 3:
        return kids, None, None  # three values
    if how == 4:
        return 42  # not iterable
    if how == 5:
        return {i: k for i, k in enumerate(kids)}, None  # a dict: its keys are the children
    return [kids], Opaque()


def _weird_keys(w):
    how = w.how
    if how == 0:
        return [(E.SequenceKey(i), k) for i, k in enumerate(w.kids)][:-1], None  # one short
    if how == 1:
        return [("notakey", k) for k in w.kids], None
    if how == 2:
        return [(E.SequenceKey(0),) for _ in w.kids], None  # 1-tuples
    return [(E.SequenceKey(i), k) for i, k in enumerate(w.kids)], None


class FlattenError(Exception):
    pass


class UnflattenError(Exception):
    pass


class CallbackError(Exception):
    pass


class HostileError(Exception):
    pass


@dataclasses.dataclass
class DC:
    x: object
    y: object = None


class Const:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Const and other.v == self.v

    def __hash__(self):
        return hash(self.v)

    def __repr__(self):
        return f"Const({self.v!r})"


NT = namedtuple("NT", "x y")


class Rec(NamedTuple):
    a: object
    b: object
    c: object


STATE = {"mutator": None}  # the active Mutator (mutation mode) or None


def _bag_flatten(bag):
    m = STATE["mutator"]
    if m is not None and m.armed:
        m.maybe_mutate("bag_flatten")
    return bag.items, bag.ctx


def _raise_flatten(_):
    raise FlattenError("flatten failed")


def _raise_unflatten(values, ctx):
    raise UnflattenError("unflatten failed")


def _register():
    reg = cpytree.register_pytree_node
    reg(
        Pair,
        lambda p: ([p.a, p.b], None),
        lambda v, c: Pair(*v),
        serialized_type_name="fuzz.Pair",
        flatten_with_keys_fn=lambda p: ([(E.GetAttrKey("a"), p.a), (E.GetAttrKey("b"), p.b)], None),
    )
    reg(
        Bag,
        _bag_flatten,
        lambda v, c: Bag(list(v), c),
        serialized_type_name="fuzz.Bag",
        flatten_with_keys_fn=lambda b: (
            [(E.SequenceKey(i), x) for i, x in enumerate(b.items)],
            b.ctx,
        ),
    )
    reg(Raiser, _raise_flatten, lambda v, c: Raiser())
    reg(BadUnflatten, lambda b: ([b.x], None), _raise_unflatten)
    reg(Weird, _weird_flatten, lambda v, c: Weird(list(v), 0), flatten_with_keys_fn=_weird_keys)
    cpytree.register_dataclass(DC, serialized_type_name="fuzz.DC")
    cpytree.register_constant(Const)


_register()

# Sentinels: every tree is built from these, so their reference counts must
# be back after each input.
LEAVES = [Leaf(i) for i in range(8)]
KEYS = ["".join(["k", str(i)]) for i in range(4)]  # not interned: only we hold them
CTXS = [Leaf(100 + i) for i in range(3)]
NAN = float("nan")
SHARED = [
    LeafList([1]),
    time.gmtime(0),
    bytes(bytearray(b"xyz")),
    int,
    2.5,
    NAN,
    Const(1),
    Const("c"),
]
SENTINELS = [*LEAVES, *KEYS, *CTXS, *SHARED, Pair, Bag, DC, NT, Rec, Const, Weird]
PLAIN_KEYS = ["a", "b", 0, 1, 1.0, True, False, 0.0, -0.0, None, (1, "x"), 2, 2.5]


# --------------------------------------------------------------------------
# Hostile keys and the mutator.


class WeirdBool:
    def __bool__(self):
        raise HostileError("bool")


class HKey:
    """A dict key / context item whose protocol methods misbehave once armed."""

    __slots__ = ("mode", "v")
    armed = False

    def __init__(self, v, mode):
        self.v, self.mode = v, mode

    def __hash__(self):
        if HKey.armed:
            if self.mode == "hash_raise":
                raise HostileError("hash")
            if self.mode == "mutate":
                _mutate("hkey_hash")
        if self.mode == "eq_true":
            # Unique: a key equal to every key it collides with loops CPython's
            # own OrderedDict iteration forever; spec comparisons still see it.
            return id(self) >> 4
        return 7 if self.mode == "collide" else hash(self.v)

    def __eq__(self, other):
        if HKey.armed:
            if self.mode == "eq_raise":
                raise HostileError("eq")
            if self.mode == "eq_true":
                return True
            if self.mode == "eq_weird":
                return WeirdBool()
            if self.mode == "mutate":
                _mutate("hkey_eq")
        return type(other) is HKey and other.v == self.v

    def __repr__(self):
        if HKey.armed and self.mode == "repr_raise":
            raise HostileError("repr")
        return f"H({self.v!r})"


HKEY_MODES = ["hash_raise", "eq_raise", "eq_true", "eq_weird", "collide", "repr_raise", "mutate"]


def _mutate(where):
    m = STATE["mutator"]
    if m is not None and m.armed:
        m.maybe_mutate(where)


def _churn():
    junk = [object() for _ in range(200)] + [[None] * 6 for _ in range(50)]
    del junk


class Mutator:
    """Mutates the containers of the tree from inside user callbacks."""

    def __init__(self, s: Stream, containers: list):
        self.s = s
        self.containers = containers
        self.armed = False
        self.count = 0

    def maybe_mutate(self, where):
        self.count += 1
        if self.count > 40 or not self.containers or not self.s.chance(3):
            return
        c = self.s.pick(self.containers)
        op = self.s.below(6)
        new = self.s.pick(LEAVES)
        try:
            if isinstance(c, Bag):
                if op == 0:
                    c.items = [new]
                else:
                    c = c.items
            if isinstance(c, list):
                [
                    c.clear,
                    c.pop,
                    lambda: c.append(new),
                    lambda: c.insert(0, [new, new]),
                    lambda: c.__setitem__(slice(1, None), []),
                    lambda: c.extend([new] * 5),
                ][op]()
            elif isinstance(c, deque):
                [
                    c.clear,
                    c.pop,
                    lambda: c.append(new),
                    c.popleft,
                    c.rotate,
                    lambda: c.extend([new] * 3),
                ][op]()
            elif isinstance(c, dict):
                if op == 0:
                    c.clear()
                elif op == 1 and c:
                    del c[next(iter(c))]
                elif op == 2:
                    c[self.s.pick(KEYS)] = new
                elif op == 3 and isinstance(c, OrderedDict) and c:
                    c.move_to_end(next(iter(c)))
                elif op == 4 and c:
                    c[next(iter(c))] = [new, (new,)]
                else:
                    c.update({k: new for k in KEYS})
        except (IndexError, KeyError, RuntimeError):
            pass
        _churn()


# --------------------------------------------------------------------------
# Tree generation.


class Builder:
    def __init__(self, s: Stream, mode: str):
        self.s = s
        self.mode = mode
        self.containers: list = []  # mutable containers, for the mutator
        self.raisers = False

    def leaf(self):
        s = self.s
        c = s.below(10)
        if c < 4:
            return s.pick(LEAVES)
        if c == 4:
            return None
        if c == 5:
            return s.pick(SHARED)
        if c == 6:
            return s.below(5) - 1
        if c == 7:
            return s.pick(["s", "", 1.5, True])
        if c == 8:
            return Opaque()
        return s.pick(LEAVES)

    def key(self):
        s = self.s
        if self.mode != "clean" and s.chance(3):
            return HKey(s.below(4), s.pick(HKEY_MODES))
        return s.pick(KEYS) if s.chance(2) else s.pick(PLAIN_KEYS)

    def context(self):
        s = self.s
        c = s.below(9)
        if c == 0:
            return None
        if c == 1:
            return s.pick(CTXS)
        if c == 2:
            return (1, s.pick(KEYS))
        if c == 3:
            return [s.pick(LEAVES), 2]
        if c == 4:
            return {s.pick(KEYS): 1}
        if c == 5 and self.mode != "clean":
            return [HKey(s.below(3), s.pick(HKEY_MODES)), s.pick(LEAVES)]
        if c == 6 and self.mode != "clean":
            return {HKey(s.below(3), s.pick(HKEY_MODES)): s.pick(LEAVES)}
        if c == 7:
            return Opaque()
        return "ctx"

    def children(self, depth, lo=0, hi=4):
        return [self.tree(depth + 1) for _ in range(lo + self.s.below(hi - lo + 1))]

    def tree(self, depth=0):
        s = self.s
        c = s.below(20)
        if depth >= MAX_DEPTH or c < 5:
            return self.leaf()
        if c == 5 or c == 6:
            t = self.children(depth)
            self.containers.append(t)
            return t
        if c == 7:
            return tuple(self.children(depth))
        if c in (8, 9, 10, 11):
            d = {}
            for _ in range(s.below(5)):
                d[self.key()] = self.tree(depth + 1)
            kind = s.below(4)
            if kind == 1:
                d = OrderedDict(d)
            elif kind == 2:
                d = defaultdict(s.pick([list, int, None, Leaf]), d)
            self.containers.append(d)
            return d
        if c == 12:
            t = deque(self.children(depth), maxlen=s.pick([None, 4, 5]))
            self.containers.append(t)
            return t
        if c == 13:
            return NT(self.tree(depth + 1), self.tree(depth + 1))
        if c == 14:
            return Rec(*self.children(depth, 3, 3))
        if c == 15:
            return Pair(self.tree(depth + 1), self.tree(depth + 1))
        if c == 16:
            b = Bag(self.children(depth), self.context())
            self.containers.append(b)
            return b
        if c == 17:
            return DC(self.tree(depth + 1), s.pick([None, self.tree(depth + 1)]))
        if c == 18:
            if self.mode != "clean" and s.chance(2):
                return Weird(self.children(depth), s.below(7))
            return Const(s.below(3))
        if self.mode == "clean" and (self.raisers or not s.chance(3)):
            # One failure source per clean tree: with several, which error
            # wins legitimately differs (torch flattens the whole tree before
            # any unflatten; the fused engine map meets them in tree order).
            return self.leaf()
        self.raisers = True
        return Raiser() if s.chance(2) else BadUnflatten(self.tree(depth + 1))


# --------------------------------------------------------------------------
# Callbacks (fresh per implementation, so call counters agree).


def make_is_leaf(cfg, mutator):
    if cfg is None:
        return None
    kind, k, types = cfg
    calls = [0]

    def is_leaf(x):
        calls[0] += 1
        if kind == "raise" and calls[0] == k:
            raise CallbackError("is_leaf")
        if mutator is not None and mutator.armed:
            mutator.maybe_mutate("is_leaf")
        if kind == "weird" and calls[0] == k:
            return WeirdBool()
        return type(x) in types

    return is_leaf


def make_func(cfg, mutator):
    kind, k = cfg
    calls = [0]

    def func(*xs):
        calls[0] += 1
        if kind == "raise" and calls[0] == k:
            raise CallbackError("func")
        if mutator is not None and mutator.armed:
            mutator.maybe_mutate("func")
        return ("m", xs[-1])

    return func


def outcome(fn):
    """("ok", value) or ("exc", exception type); SystemError is an engine bug."""
    try:
        return ("ok", fn())
    except RecursionError:
        return ("exc", RecursionError)
    except SystemError:
        raise
    except Exception as exc:  # noqa: BLE001 - compared by type
        return ("exc", type(exc))
