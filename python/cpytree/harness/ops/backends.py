"""Every pytree backend importable in this process, behind one small interface.

A `Backend` maps each op of `OPS` it can do to a *stager*: given the
operands (a tree, a separately built twin of it, a unary and a binary
function), the stager does any setup (e.g. flattening to get a spec) and
returns `(fn, args, kwargs)`, the library's own function and arguments, so
timing loops call it with no adapter frame in between. An op a backend has
no equivalent for is absent (shown as "n/a"); where the backend's nearest
spelling is not the op itself, `equivalents[op]` says what runs.

Ops (what cpytree and torch run):
  flatten        tree_flatten(tree)
  leaves         tree_leaves(tree)
  unflatten      tree_unflatten(leaves, spec)
  map            tree_map(f, tree)
  map-nary       tree_map(f2, tree, twin): two trees of one structure
  flatten-paths  tree_flatten_with_path(tree)
  flatten-spec   the twin flattened against tree's spec, as every call of an
                 exported or compiled graph does: spec.flatten(twin) (cpytree),
                 torch.fx._pytree.tree_flatten_spec(twin, spec) (torch)
  spec-eq        spec == spec_of_twin: two separately built specs
  dumps, loads   treespec_dumps(spec), treespec_loads(text); loads is timed
                 uncached: where a backend's treespec_loads is an lru_cache
                 (torch's, cpytree's: equal strings give one spec object), the
                 function it wraps (`treespec_loads.__wrapped__`) runs, else
                 every repetition after the first is a cache hit.

A backend that cannot be imported is returned with `available=False` and
the reason; discovery never raises.

Backends (name: what):
  cpytree            the package (`import cpytree`)
  cpytree-reference  `cpytree._reference`, the pure-Python implementation
  torch              `torch.utils._pytree`
  optree             optree with torch's settings: none_is_leaf=True and
                     insertion-ordered dicts, in its own namespace
  jax                `jax.tree_util` (None is an empty node, dict keys sorted)
  dm-tree            `tree` (dict keys sorted, no spec object: the structure
                     is the tree itself; cannot register custom nodes)
  floor              `pytree_floor`, the measuring instrument kept outside
                     the product (../shared/tools/floor from the project
                     root; `make floor` builds it): list/tuple/dict only, so
                     it runs builtin-only workloads, and only the first four ops.
                     Found on sys.path or in the folder named by
                     $CPYTREE_FLOOR_PATH.

Workloads' custom node classes (and their namedtuples, for serialization)
are registered with every backend that can register them, once per process.

Usage:

    from cpytree.harness.ops import backends
    for b in backends.discover():
        print(b.name, b.available, b.reason)
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import operator
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .workloads import CUSTOM_NODES, NAMEDTUPLES, CustomNode, Workload

__all__ = [
    "ALIASES",
    "BACKEND_NAMES",
    "OPS",
    "Backend",
    "Operands",
    "Staged",
    "discover",
    "identity",
    "resolve_names",
]

OPS = (
    "flatten",
    "leaves",
    "unflatten",
    "map",
    "map-nary",
    "flatten-paths",
    "flatten-spec",
    "spec-eq",
    "dumps",
    "loads",
)

BACKEND_NAMES = ("cpytree", "cpytree-reference", "torch", "optree", "jax", "dm-tree", "floor")

ALIASES = {
    "reference": "cpytree-reference",
    "cpytree._reference": "cpytree-reference",
    "torch.utils._pytree": "torch",
    "jax.tree_util": "jax",
    "dm_tree": "dm-tree",
    "tree": "dm-tree",
    "pytree_floor": "floor",
}

# optree namespace holding torch's settings and the workloads' custom nodes.
OPTREE_NAMESPACE = "cpytree-harness"

Staged = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def identity(x: Any) -> Any:
    """The function mapped: a Python function, as PT2's tree_map callers pass."""
    return x


def first(x: Any, y: Any) -> Any:
    """The function of the n-ary map."""
    return x


@dataclass(frozen=True)
class Operands:
    """What an op works on: `tree`, and `twin`, a separately built tree of the
    same structure (for n-ary map, flatten against a spec, spec equality)."""

    tree: Any
    twin: Any
    f: Callable[[Any], Any] = identity
    f2: Callable[[Any, Any], Any] = first


Stager = Callable[[Operands], Staged]


@dataclass
class Backend:
    """One pytree implementation; `available` False means only `reason` is set."""

    name: str
    available: bool
    reason: str = ""
    note: str = ""
    version: str = ""
    builtin_only: bool = False
    can_register: bool = True
    ops: dict[str, Stager] = field(default_factory=dict)
    # op -> the backend's nearest spelling, when it is not the op itself.
    equivalents: dict[str, str] = field(default_factory=dict)

    def supports(self, workload: Workload) -> tuple[bool, str]:
        """Whether this backend can run `workload`, and why not."""
        if not self.available:
            return False, f"missing: {self.reason}"
        if self.builtin_only and not workload.builtin_only:
            return False, "handles list/tuple/dict only"
        if workload.custom_nodes and not self.can_register:
            return False, "cannot register custom nodes"
        return True, ""

    def stage(self, op: str, operands: Operands) -> Staged:
        """`(fn, args, kwargs)` performing `op`; KeyError when n/a."""
        return self.ops[op](operands)

    def run(self, op: str, tree: Any, twin: Any = None) -> Any:
        """Perform `op` once (twin defaults to tree) and return its result."""
        fn, args, kwargs = self.stage(op, Operands(tree, tree if twin is None else twin))
        return fn(*args, **kwargs)

    def leaves(self, tree: Any) -> list[Any]:
        return list(self.run("leaves", tree))

    def flatten(self, tree: Any) -> tuple[list[Any], Any]:
        leaves, spec = self.run("flatten", tree)
        return leaves, spec


def _missing(name: str, exc: BaseException | str) -> Backend:
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return Backend(name, False, reason=reason.splitlines()[0] if reason else "unavailable")


def _basic_ops(
    flatten: Callable[..., Any],
    leaves: Callable[..., Any],
    unflatten: Callable[..., Any],
    tree_map: Callable[..., Any],
    unflatten_order: str,
    kw: dict[str, Any] | None = None,
) -> dict[str, Stager]:
    """flatten/leaves/unflatten/map/map-nary of a library; `unflatten_order`
    is "leaves,spec" (torch) or "spec,leaves" (optree, jax, dm-tree)."""
    kw = kw or {}

    def stage_unflatten(o: Operands) -> Staged:
        flat, spec = flatten(o.tree, **kw)
        args = (flat, spec) if unflatten_order == "leaves,spec" else (spec, flat)
        return unflatten, args, {}

    return {
        "flatten": lambda o: (flatten, (o.tree,), dict(kw)),
        "leaves": lambda o: (leaves, (o.tree,), dict(kw)),
        "unflatten": stage_unflatten,
        "map": lambda o: (tree_map, (o.f, o.tree), dict(kw)),
        "map-nary": lambda o: (tree_map, (o.f2, o.tree, o.twin), dict(kw)),
    }


def _spec_ops(
    structure: Callable[[Any], Any], flatten_against: Callable[[Any], Stager]
) -> dict[str, Stager]:
    """flatten-spec and spec-eq from `structure(tree) -> spec`."""
    return {
        "flatten-spec": flatten_against(structure),
        "spec-eq": lambda o: (operator.eq, (structure(o.tree), structure(o.twin)), {}),
    }


def _flatten_up_to(structure: Callable[[Any], Any]) -> Stager:
    return lambda o: (structure(o.tree).flatten_up_to, (o.twin,), {})


def _torch_style(mod: Any, flatten_against: Callable[[Any], Stager]) -> dict[str, Stager]:
    """Ops of a module with torch's API (cpytree, its reference, torch)."""

    def structure(tree: Any) -> Any:
        return mod.tree_flatten(tree)[1]

    ops = _basic_ops(
        mod.tree_flatten, mod.tree_leaves, mod.tree_unflatten, mod.tree_map, "leaves,spec"
    )
    ops["flatten-paths"] = lambda o: (mod.tree_flatten_with_path, (o.tree,), {})
    ops.update(_spec_ops(structure, flatten_against))
    ops["dumps"] = lambda o: (mod.treespec_dumps, (structure(o.tree),), {})
    ops["loads"] = lambda o: (
        uncached(mod.treespec_loads),
        (mod.treespec_dumps(structure(o.tree)),),
        {},
    )
    return ops


def uncached(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` without its functools cache, if it has one (see the loads op)."""
    return getattr(fn, "__wrapped__", fn) if hasattr(fn, "cache_info") else fn


# (backend name, class) pairs registered in this process: registries are global.
_REGISTERED: set[tuple[str, type]] = set()


def _register_torch_style(key: str, mod: Any, supported: Any, nodes: Iterable[CustomNode]) -> None:
    """Register `nodes` through a torch-style `register_pytree_node`, skipping
    classes already in `supported` (the registry of record, when known), and
    give the workloads' namedtuples a serialized name where `mod` can."""
    for node in nodes:
        if (key, node.cls) in _REGISTERED:
            continue
        if supported is None or node.cls not in supported:
            mod.register_pytree_node(
                node.cls,
                node.flatten,
                node.unflatten,
                serialized_type_name=node.serialized_type_name,
                flatten_with_keys_fn=node.flatten_with_keys(mod.MappingKey),
            )
        _REGISTERED.add((key, node.cls))
    register_namedtuple = getattr(mod, "_register_namedtuple", None)
    for cls, name in NAMEDTUPLES:
        if (key, cls) in _REGISTERED or register_namedtuple is None:
            continue
        with contextlib.suppress(ValueError):  # already registered in this process
            register_namedtuple(cls, serialized_type_name=name)
        _REGISTERED.add((key, cls))


def _load_cpytree() -> tuple[Backend, Backend]:
    """The cpytree package and its reference; they share one registry."""
    pkg: Any = None
    pkg_error: BaseException | str = ""
    try:
        pkg = importlib.import_module("cpytree")
        if not hasattr(pkg, "tree_flatten"):
            pkg, pkg_error = None, "package has no tree_flatten yet (not built?)"
    except Exception as exc:  # noqa: BLE001 - any failure means "missing"
        pkg_error = exc
    ref: Any = None
    ref_error: BaseException | str = ""
    try:
        ref = importlib.import_module("cpytree._reference")
        if not hasattr(ref, "tree_flatten"):
            ref, ref_error = None, "cpytree._reference has no tree_flatten yet"
    except Exception as exc:  # noqa: BLE001
        ref_error = exc

    # Register once, through the package when it loads: it mirrors into _C.
    registrar = pkg if hasattr(pkg, "register_pytree_node") else ref
    registered = False
    if hasattr(registrar, "register_pytree_node"):
        try:
            supported = getattr(ref, "SUPPORTED_NODES", None)
            _register_torch_style("cpytree", registrar, supported, CUSTOM_NODES)
            registered = True
        except Exception:  # noqa: BLE001, S110 - then registered workloads are skipped
            pass

    version = getattr(pkg, "__version__", "") if pkg is not None else ""
    if pkg is not None:
        engine = getattr(pkg, "ENGINE", None)  # "cpp" or "python"
        fallback = engine == "python" or (ref is not None and pkg.tree_flatten is ref.tree_flatten)
        note = "pure-Python fallback: the C++ engine did not load" if fallback else "C++ engine"
        # The engine's TreeSpec validates and collects in one pass: spec.flatten(tree).
        has_flatten = hasattr(pkg.tree_structure(((),)), "flatten")
        against = (
            (lambda structure: lambda o: (structure(o.tree).flatten, (o.twin,), {}))
            if has_flatten
            else _flatten_up_to
        )
        pkg_backend = Backend(
            "cpytree",
            True,
            note=f"cpytree {version}, {note}",
            version=version,
            can_register=registered,
            ops=_torch_style(pkg, against),
            equivalents={} if has_flatten else {"flatten-spec": "spec.flatten_up_to(twin)"},
        )
    else:
        pkg_backend = _missing("cpytree", pkg_error)
    if ref is not None:
        ref_backend = Backend(
            "cpytree-reference",
            True,
            note="pure-Python reference",
            version=version,
            can_register=registered,
            ops=_torch_style(ref, _flatten_up_to),
            equivalents={"flatten-spec": "spec.flatten_up_to(twin)"},
        )
    else:
        ref_backend = _missing("cpytree-reference", ref_error)
    return pkg_backend, ref_backend


def _load_torch() -> Backend:
    try:
        pt = importlib.import_module("torch.utils._pytree")
        fx = importlib.import_module("torch.fx._pytree")
    except Exception as exc:  # noqa: BLE001
        return _missing("torch", exc)
    _register_torch_style("torch", pt, pt.SUPPORTED_NODES, CUSTOM_NODES)
    version = sys.modules["torch"].__version__

    def against(structure: Callable[[Any], Any]) -> Stager:
        return lambda o: (fx.tree_flatten_spec, (o.twin, structure(o.tree)), {})

    return Backend(
        "torch", True, note=f"torch {version}", version=version, ops=_torch_style(pt, against)
    )


_OPTREE_SESSION: Any = None  # the entered dict_insertion_ordered context


def _load_optree() -> Backend:
    global _OPTREE_SESSION
    try:
        optree = importlib.import_module("optree")
    except Exception as exc:  # noqa: BLE001
        return _missing("optree", exc)
    ns = OPTREE_NAMESPACE
    if _OPTREE_SESSION is None:
        # Enabled for good, as torch.utils._cxx_pytree does for namespace "torch".
        _OPTREE_SESSION = optree.dict_insertion_ordered(True, namespace=ns)
        _OPTREE_SESSION.__enter__()
        # Leave it before interpreter teardown: exiting it then, from the
        # generator's finalizer, fails on optree's already-cleared lock.
        atexit.register(_OPTREE_SESSION.__exit__, None, None, None)
    for node in CUSTOM_NODES:
        if ("optree", node.cls) not in _REGISTERED:
            optree.register_pytree_node(
                node.cls,
                node.flatten,
                lambda context, children, _u=node.unflatten: _u(children, context),
                namespace=ns,
            )
            _REGISTERED.add(("optree", node.cls))
    kw = {"none_is_leaf": True, "namespace": ns}

    def structure(tree: Any) -> Any:
        return optree.tree_structure(tree, **kw)

    ops = _basic_ops(
        optree.tree_flatten,
        optree.tree_leaves,
        optree.tree_unflatten,
        optree.tree_map,
        "spec,leaves",
        kw,
    )
    ops["flatten-paths"] = lambda o: (optree.tree_flatten_with_path, (o.tree,), dict(kw))
    ops.update(_spec_ops(structure, _flatten_up_to))
    return Backend(
        "optree",
        True,
        note=f"optree {optree.__version__}, none_is_leaf=True, insertion-ordered dicts",
        version=optree.__version__,
        ops=ops,
        equivalents={"flatten-spec": "spec.flatten_up_to(twin)"},
    )


def _load_jax() -> Backend:
    try:
        jtu = importlib.import_module("jax.tree_util")
    except Exception as exc:  # noqa: BLE001
        return _missing("jax", exc)
    for node in CUSTOM_NODES:
        if ("jax", node.cls) not in _REGISTERED:
            # With keys, as torch registers them: key paths name each child
            # through the same user function (`flatten_with_keys`, here with
            # jax's DictKey), so flatten-paths compares equal work; plain
            # flatten still uses `node.flatten`.
            with contextlib.suppress(ValueError):  # registered earlier in this process
                jtu.register_pytree_with_keys(
                    node.cls,
                    node.flatten_with_keys(jtu.DictKey),
                    lambda aux, children, _u=node.unflatten: _u(children, aux),
                    node.flatten,
                )
            _REGISTERED.add(("jax", node.cls))
    version = getattr(sys.modules.get("jax"), "__version__", "?")
    ops = _basic_ops(
        jtu.tree_flatten, jtu.tree_leaves, jtu.tree_unflatten, jtu.tree_map, "spec,leaves"
    )
    ops["flatten-paths"] = lambda o: (jtu.tree_flatten_with_path, (o.tree,), {})
    ops.update(_spec_ops(jtu.tree_structure, _flatten_up_to))
    return Backend(
        "jax",
        True,
        note=f"jax {version}: None is an empty node, dict keys sorted",
        version=version,
        ops=ops,
        equivalents={"flatten-spec": "treedef.flatten_up_to(twin)"},
    )


def _load_dm_tree() -> Backend:
    try:
        dm = importlib.import_module("tree")
        dm_flatten = dm.flatten
    except Exception as exc:  # noqa: BLE001
        return _missing("dm-tree", exc)

    def flatten(tree: Any) -> tuple[list[Any], Any]:
        return dm_flatten(tree), tree  # the structure is the tree itself

    ops = _basic_ops(flatten, dm_flatten, dm.unflatten_as, dm.map_structure, "spec,leaves")
    ops["flatten-paths"] = lambda o: (dm.flatten_with_path, (o.tree,), {})
    ops["flatten-spec"] = lambda o: (dm.flatten_up_to, (o.tree, o.twin), {})
    ops["spec-eq"] = lambda o: (dm.assert_same_structure, (o.tree, o.twin), {})
    version = getattr(dm, "__version__", "")
    return Backend(
        "dm-tree",
        True,
        note=f"dm-tree {version}: mapping keys sorted; flatten = (tree.flatten(x), x)".strip(),
        version=version,
        can_register=False,
        ops=ops,
        equivalents={
            "flatten": "(tree.flatten(tree), tree)",
            "flatten-spec": "tree.flatten_up_to(tree, twin)",
            "spec-eq": "tree.assert_same_structure(tree, twin)",
        },
    )


def _load_floor() -> Backend:
    try:
        floor = importlib.import_module("pytree_floor")
    except ImportError as first_error:
        folder = os.environ.get("CPYTREE_FLOOR_PATH")
        if not folder:
            return _missing("floor", f"{first_error} (`make floor`, or set CPYTREE_FLOOR_PATH)")
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            floor = importlib.import_module("pytree_floor")
        except Exception as exc:  # noqa: BLE001
            return _missing("floor", f"{type(exc).__name__}: {exc} (CPYTREE_FLOOR_PATH={folder})")
    except Exception as exc:  # noqa: BLE001
        return _missing("floor", exc)
    ops = _basic_ops(floor.flatten, floor.leaves, floor.unflatten, floor.tree_map, "spec,leaves")
    del ops["map-nary"]
    return Backend(
        "floor",
        True,
        note="pytree_floor: the minimal C traversal (list/tuple/dict only)",
        builtin_only=True,
        can_register=False,
        ops=ops,
    )


def resolve_names(names: Iterable[str]) -> list[str]:
    """Canonical backend names for `names` (aliases allowed); KeyError if unknown."""
    out = []
    for raw in names:
        name = ALIASES.get(raw, raw)
        if name not in BACKEND_NAMES:
            known = ", ".join(BACKEND_NAMES)
            raise KeyError(
                f"unknown backend {raw!r}; known: {known} (aliases: {', '.join(ALIASES)})"
            )
        if name not in out:
            out.append(name)
    return out


def discover(names: Iterable[str] | None = None) -> list[Backend]:
    """The named backends (all by default) in table order, missing ones included."""
    wanted = resolve_names(names) if names is not None else list(BACKEND_NAMES)
    found: dict[str, Backend] = {}
    if "cpytree" in wanted or "cpytree-reference" in wanted:
        found["cpytree"], found["cpytree-reference"] = _load_cpytree()
    loaders = {
        "torch": _load_torch,
        "optree": _load_optree,
        "jax": _load_jax,
        "dm-tree": _load_dm_tree,
        "floor": _load_floor,
    }
    for name in wanted:
        if name not in found:
            try:
                found[name] = loaders[name]()
            except Exception as exc:  # noqa: BLE001 - a broken backend is reported, not fatal
                found[name] = _missing(name, exc)
    return [found[n] for n in BACKEND_NAMES if n in wanted]
