"""Every pytree backend importable in this process, behind one small interface.

A `Backend` exposes `flatten(tree) -> (leaves, spec)`, `leaves(tree)`,
`unflatten(spec, leaves)` and `map(f, tree)`, plus `call(op, tree, f)`, which
gives the library's own function and arguments so timing loops call it with
no adapter frame in between. A backend that cannot be imported is returned
with `available=False` and the reason; discovery never raises.

Backends (name: what):
  cpytree            the package (`import cpytree`)
  cpytree-reference  `cpytree._reference`, the pure-Python implementation
  torch              `torch.utils._pytree`
  optree             optree with torch's settings: none_is_leaf=True and
                     insertion-ordered dicts, in its own namespace
  jax                `jax.tree_util` (None is an empty node, dict keys sorted)
  dm-tree            `tree` (dict keys sorted, no spec object: the structure
                     is the tree itself; cannot register custom nodes)
  floor              `pytree_floor`, the measuring instrument of
                     /work/shared/tools/floor: list/tuple/dict only, so it
                     runs builtin-only workloads. Found on sys.path or in the
                     folder named by $CPYTREE_FLOOR_PATH.

Workloads' custom node classes are registered with every backend that can
register them, once per process.

Usage:

    from cpytree.harness import backends
    for b in backends.discover():
        print(b.name, b.available, b.reason)
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .workloads import CUSTOM_NODES, CustomNode, Workload

__all__ = ["ALIASES", "BACKEND_NAMES", "OPS", "Backend", "NativeCall", "discover", "resolve_names"]

OPS = ("flatten", "leaves", "unflatten", "map")

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


@dataclass(frozen=True)
class NativeCall:
    """How a library spells one op: `fn(*args, **kwargs)` with args built from
    the operands by `order`, one of "tree", "f,tree", "spec,leaves", "leaves,spec"."""

    fn: Callable[..., Any]
    order: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def args(
        self, tree: Any = None, f: Any = None, spec: Any = None, leaves: Any = None
    ) -> tuple[Any, ...]:
        return {
            "tree": (tree,),
            "f,tree": (f, tree),
            "spec,leaves": (spec, leaves),
            "leaves,spec": (leaves, spec),
        }[self.order]

    def __call__(self, **operands: Any) -> Any:
        return self.fn(*self.args(**operands), **self.kwargs)


@dataclass
class Backend:
    """One pytree implementation; `available` False means only `reason` is set."""

    name: str
    available: bool
    reason: str = ""
    note: str = ""
    builtin_only: bool = False
    can_register: bool = True
    native: dict[str, NativeCall] = field(default_factory=dict)

    def supports(self, workload: Workload) -> tuple[bool, str]:
        """Whether this backend can run `workload`, and why not."""
        if not self.available:
            return False, f"missing: {self.reason}"
        if self.builtin_only and not workload.builtin_only:
            return False, "handles list/tuple/dict only"
        if workload.custom_nodes and not self.can_register:
            return False, "cannot register custom nodes"
        return True, ""

    def flatten(self, tree: Any) -> tuple[list[Any], Any]:
        leaves, spec = self.native["flatten"](tree=tree)
        return leaves, spec

    def leaves(self, tree: Any) -> list[Any]:
        return list(self.native["leaves"](tree=tree))

    def unflatten(self, spec: Any, leaves: Sequence[Any]) -> Any:
        return self.native["unflatten"](spec=spec, leaves=list(leaves))

    def map(self, f: Callable[[Any], Any], tree: Any) -> Any:
        return self.native["map"](f=f, tree=tree)

    def call(
        self, op: str, tree: Any, f: Callable[[Any], Any]
    ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        """`(fn, args, kwargs)` such that `fn(*args, **kwargs)` performs `op` on
        `tree` (for "unflatten": rebuilds it from a flatten done here)."""
        native = self.native[op]
        if op == "unflatten":
            leaves, spec = self.flatten(tree)
            args = native.args(spec=spec, leaves=leaves)
        else:
            args = native.args(tree=tree, f=f)
        return native.fn, args, dict(native.kwargs)


def _missing(name: str, exc: BaseException | str) -> Backend:
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return Backend(name, False, reason=reason.splitlines()[0] if reason else "unavailable")


def _torch_style(mod: Any) -> dict[str, NativeCall]:
    """Ops of a module with torch's API (cpytree, its reference, torch)."""
    return {
        "flatten": NativeCall(mod.tree_flatten, "tree"),
        "leaves": NativeCall(mod.tree_leaves, "tree"),
        "unflatten": NativeCall(mod.tree_unflatten, "leaves,spec"),
        "map": NativeCall(mod.tree_map, "f,tree"),
    }


# (backend name, class) pairs registered in this process: registries are global.
_REGISTERED: set[tuple[str, type]] = set()


def _register_torch_style(
    key: str, register: Callable[..., Any], supported: Any, nodes: Iterable[CustomNode]
) -> None:
    """Register `nodes` through a torch-style `register_pytree_node`, skipping
    classes already in `supported` (the registry of record, when known)."""
    for node in nodes:
        if (key, node.cls) in _REGISTERED:
            continue
        if supported is None or node.cls not in supported:
            register(
                node.cls,
                node.flatten,
                node.unflatten,
                serialized_type_name=node.serialized_type_name,
            )
        _REGISTERED.add((key, node.cls))


def _source_reference() -> ModuleType:
    """cpytree/_reference.py loaded from beside this package, when the package
    itself cannot be imported (development before the engine lands)."""
    path = Path(__file__).resolve().parent.parent / "_reference.py"
    if not path.is_file():
        raise ImportError(f"no {path}")
    spec = importlib.util.spec_from_file_location("cpytree._reference", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
        try:
            ref = importlib.import_module("cpytree._reference")
        except ImportError:
            ref = _source_reference()
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
            _register_torch_style(
                "cpytree", registrar.register_pytree_node, supported, CUSTOM_NODES
            )
            registered = True
        except Exception:  # noqa: BLE001 - then registered workloads are skipped
            pass

    if pkg is not None:
        engine = getattr(pkg, "ENGINE", None)  # "cpp" or "python"
        fallback = engine == "python" or (ref is not None and pkg.tree_flatten is ref.tree_flatten)
        note = "pure-Python fallback: the C++ engine did not load" if fallback else "C++ engine"
        pkg_backend = Backend(
            "cpytree", True, note=note, can_register=registered, native=_torch_style(pkg)
        )
    else:
        pkg_backend = _missing("cpytree", pkg_error)
    if ref is not None:
        ref_backend = Backend(
            "cpytree-reference",
            True,
            note="pure-Python reference",
            can_register=registered,
            native=_torch_style(ref),
        )
    else:
        ref_backend = _missing("cpytree-reference", ref_error)
    return pkg_backend, ref_backend


def _load_torch() -> Backend:
    try:
        pt = importlib.import_module("torch.utils._pytree")
    except Exception as exc:  # noqa: BLE001
        return _missing("torch", exc)
    _register_torch_style("torch", pt.register_pytree_node, pt.SUPPORTED_NODES, CUSTOM_NODES)
    return Backend(
        "torch", True, note=f"torch {sys.modules['torch'].__version__}", native=_torch_style(pt)
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
    return Backend(
        "optree",
        True,
        note=f"optree {optree.__version__}, none_is_leaf=True, insertion-ordered dicts",
        native={
            "flatten": NativeCall(optree.tree_flatten, "tree", kw),
            "leaves": NativeCall(optree.tree_leaves, "tree", kw),
            "unflatten": NativeCall(optree.tree_unflatten, "spec,leaves"),
            "map": NativeCall(optree.tree_map, "f,tree", kw),
        },
    )


def _load_jax() -> Backend:
    try:
        jtu = importlib.import_module("jax.tree_util")
    except Exception as exc:  # noqa: BLE001
        return _missing("jax", exc)
    for node in CUSTOM_NODES:
        if ("jax", node.cls) not in _REGISTERED:
            with contextlib.suppress(ValueError):  # registered earlier in this process
                jtu.register_pytree_node(
                    node.cls,
                    node.flatten,
                    lambda aux, children, _u=node.unflatten: _u(children, aux),
                )
            _REGISTERED.add(("jax", node.cls))
    version = getattr(sys.modules.get("jax"), "__version__", "?")
    return Backend(
        "jax",
        True,
        note=f"jax {version}: None is an empty node, dict keys sorted",
        native={
            "flatten": NativeCall(jtu.tree_flatten, "tree"),
            "leaves": NativeCall(jtu.tree_leaves, "tree"),
            "unflatten": NativeCall(jtu.tree_unflatten, "spec,leaves"),
            "map": NativeCall(jtu.tree_map, "f,tree"),
        },
    )


def _load_dm_tree() -> Backend:
    try:
        dm = importlib.import_module("tree")
        dm_flatten = dm.flatten
    except Exception as exc:  # noqa: BLE001
        return _missing("dm-tree", exc)

    def flatten(tree: Any) -> tuple[list[Any], Any]:
        return dm_flatten(tree), tree  # the structure is the tree itself

    return Backend(
        "dm-tree",
        True,
        note="dm-tree: mapping keys sorted; flatten = (tree.flatten(x), x)",
        can_register=False,
        native={
            "flatten": NativeCall(flatten, "tree"),
            "leaves": NativeCall(dm_flatten, "tree"),
            "unflatten": NativeCall(dm.unflatten_as, "spec,leaves"),
            "map": NativeCall(dm.map_structure, "f,tree"),
        },
    )


def _load_floor() -> Backend:
    try:
        floor = importlib.import_module("pytree_floor")
    except ImportError as first:
        folder = os.environ.get("CPYTREE_FLOOR_PATH")
        if not folder:
            return _missing(
                "floor", f"{first} (build /work/shared/tools/floor, set CPYTREE_FLOOR_PATH)"
            )
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            floor = importlib.import_module("pytree_floor")
        except Exception as exc:  # noqa: BLE001
            return _missing("floor", f"{type(exc).__name__}: {exc} (CPYTREE_FLOOR_PATH={folder})")
    except Exception as exc:  # noqa: BLE001
        return _missing("floor", exc)
    return Backend(
        "floor",
        True,
        note="pytree_floor: the minimal C traversal (list/tuple/dict only)",
        builtin_only=True,
        can_register=False,
        native={
            "flatten": NativeCall(floor.flatten, "tree"),
            "leaves": NativeCall(floor.leaves, "tree"),
            "unflatten": NativeCall(floor.unflatten, "spec,leaves"),
            "map": NativeCall(floor.tree_map, "f,tree"),
        },
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
