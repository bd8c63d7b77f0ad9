"""`cpytree.install()`: make a live torch run its pytree work in cpytree's engine.

    import cpytree
    cpytree.install()      # torch.utils._pytree.tree_map & co. are cpytree's now
    ...                    # torch.compile / export / eager: results unchanged
    cpytree.uninstall()    # torch exactly as before

`import torch` installs by itself when the package is installed (the
`torch.backends` entry point, `_autoload.py`: CPYTREE_INSTALL=0 opts out);
`CPYTREE_INSTALL=1` also installs at `import cpytree`.

This package sits above the package's face: `import cpytree` does not load
it; the face's install(), uninstall() and status() do, and install() is
handed the face (its functions are what torch gets). What `import cpytree`
needs of torch (following its registry, the inventory of its private names)
is `cpytree._torch_link`, below the face.

What install() does, in order (uninstall() undoes each step):

1. Registries: torch's and cpytree's become one while installed
   (`_torch_link._sync.RegistrySync.join()`, the link that follows torch's registry
   from `import cpytree` on, joined both ways): every type either knows is a
   node in both, and every later (de)registration through either API
   reaches the other.
2. Spec interop: if the engine's TreeSpec can pose as torch's
   (`_spec_interop`), it is switched on and the functions that return or take
   specs are swapped too ("full" mode); otherwise only the functions that
   never expose a spec are ("spec-free" mode).
3. Functions: each name of `TARGETS` whose cpytree version runs on the C++
   engine replaces torch's module attribute, after Dynamo has been told to
   trace torch's Python original in its place (`dynamo.DynamoHooks`), so
   compiled code traces what it traced before: no new graph breaks.
4. Import-time bindings: torch modules that did
   `from torch.utils._pytree import tree_map` hold the original function, not
   the module attribute; `rebind_imports=True` (the default) patches those
   bindings too. FakeTensor's `tree_map` is one: it runs on every operator
   FakeTensor sees during a compile.

torch's names point at Python functions with torch's signature, name,
module, docstring and annotations whose body is one call of the engine's C
function (`_signature.as_torch_function`: torch's code and tests inspect
them as functions; one Python frame, about 25 ns a call), and torch's
Python helpers (`tree_map_only`, `tree_all`, ...) reach them through their
module globals.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import _engine, _torch_link

# What only install() and uninstall() use is imported there, on first use, so
# `import cpytree` does not load it (Dynamo hooks, spec interop, version
# table, attribute patches).
if TYPE_CHECKING:
    from .._torch_link._sync import RegistrySync
    from . import dynamo as _dynamo
    from ._patch import Patches

__all__ = ["install", "is_installed", "status", "uninstall"]

FREE = "spec-free"  # never returns or takes a TreeSpec or key path
SPEC = "spec"  # returns or takes a TreeSpec: needs the engine's spec interop

# (torch module, attribute, kind): what install() may swap for cpytree's
# function of the same name. `tree_is_leaf` is deliberately absent: Dynamo
# maps torch's `tree_is_leaf` to a special variable by the object found at
# `torch.utils._pytree.tree_is_leaf` when it (re)builds its rule table, which
# `torch.distributed.init_process_group` triggers at any time; the function
# is one dict lookup, so swapping it buys nothing worth that hazard.
# `tree_flatten_with_path` and `tree_leaves_with_path` are the engine's
# `_torch_tree_*_with_path` (`ENGINE_NAMES`): they build torch's own key
# classes (torch code matches key entries with isinstance against torch's
# SequenceKey/MappingKey/GetAttrKey; the engine's public with-path functions
# build cpytree's) and call user functions in torch's order. export's module
# checks every call's inputs with `tree_flatten_with_path`. `tree_map_with_path`
# stays torch's (it calls the swapped `tree_flatten_with_path`).
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("torch.utils._pytree", "tree_leaves", FREE),
    ("torch.utils._pytree", "tree_iter", FREE),
    ("torch.utils._pytree", "arg_tree_leaves", FREE),
    ("torch.utils._pytree", "tree_map", FREE),
    ("torch.utils._pytree", "tree_map_", FREE),
    ("torch.utils._pytree", "tree_map_only", FREE),
    ("torch.utils._pytree", "tree_map_only_", FREE),
    ("torch.utils._pytree", "tree_flatten", SPEC),
    ("torch.utils._pytree", "tree_structure", SPEC),
    ("torch.utils._pytree", "tree_unflatten", SPEC),
    ("torch.utils._pytree", "tree_flatten_with_path", SPEC),
    ("torch.utils._pytree", "tree_leaves_with_path", FREE),
    ("torch.fx._pytree", "tree_flatten_spec", SPEC),
)

# TARGETS names whose replacement is an engine function of another name.
ENGINE_NAMES = {
    "tree_flatten_with_path": "_torch_tree_flatten_with_path",
    "tree_leaves_with_path": "_torch_tree_leaves_with_path",
}

_LOCK = threading.RLock()  # held by install() and uninstall() for their whole run


class _Installed:
    """Everything install() changed, for uninstall() and status().

    A plain class: as a dataclass it compiled three methods at every
    `import cpytree` (see benchmarks/import_time.py).
    """

    __slots__ = ("dynamo", "mode", "patches", "rebound", "skipped", "swapped", "sync", "undo_map")

    def __init__(
        self,
        *,
        patches: Patches,
        sync: RegistrySync,
        dynamo: _dynamo.DynamoHooks,
        mode: str,
        swapped: list[str],
        skipped: dict[str, str],
        rebound: int,
        undo_map: dict[int, tuple[Any, Any]],
    ) -> None:
        self.patches = patches
        self.sync = sync  # the registries, joined by install(), left by uninstall()
        self.dynamo = dynamo
        self.mode = mode
        self.swapped = swapped
        self.skipped = skipped
        self.rebound = rebound
        # id(replacement) -> (replacement, original), for bindings made after install
        self.undo_map = undo_map


_state: _Installed | None = None


def is_installed() -> bool:
    """Whether install() is in effect."""
    return _state is not None


# Why the last install() installed nothing (a torch that moved a name it needs).
_refused = ""


def status() -> dict[str, Any]:
    """What cpytree does to the loaded torch (`cpytree.status()`; never imports torch).

    Always: ``installed``; ``torch`` (its version, None if not imported);
    ``tested`` (whether that release is in cpytree's tested set, None without
    torch); ``registry`` (torch's registry followed: "following", "waiting
    for torch", or why not); ``refused`` (why the last install() installed
    nothing, "" if it did not refuse). While installed, also: ``mode``,
    ``swapped``, ``skipped`` (name -> why kept), ``rebound_imports``,
    ``dynamo`` (each Dynamo layer: "on" or why off) and ``fast_paths`` (each
    Dynamo fast path: "on" or why off); those two are empty until
    torch._dynamo is imported.
    """
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    tested = None
    if isinstance(version, str):
        from . import _versions

        tested = _versions.is_tested(version)
    follower = _torch_link.follower()
    if follower is not None and follower.following():
        registry = "following"
    elif follower is not None and follower.failure():
        registry = "off: " + follower.failure()
    else:
        registry = "waiting for torch"
    out: dict[str, Any] = {
        "installed": _state is not None,
        "torch": version,
        "tested": tested,
        "registry": registry,
        "refused": _refused,
    }
    state = _state
    if state is None:
        return out
    out.update(
        mode=state.mode,
        swapped=list(state.swapped),
        skipped=dict(state.skipped),
        rebound_imports=state.rebound,
        dynamo=state.dynamo.layers(),
        fast_paths=state.dynamo.fast_paths(),
    )
    return out


def _fast_function(module: ModuleType, name: str, original: Any, cpytree: Any) -> Any:
    """What install() puts at `module.name`: torch's signature around the engine's function.

    None when cpytree has no such function. torch.fx keeps a registry of its
    own (`register_pytree_flatten_spec`); the engine's tree_flatten_spec
    consults it (the live dict: later registrations count).
    """
    import functools

    from ._signature import as_torch_function

    assert _engine.C is not None  # install() runs only with the engine
    engine: Any
    if module.__name__ == "torch.fx._pytree":
        engine = functools.partial(_engine.C.tree_flatten_spec, registry=module.SUPPORTED_NODES)
    elif name in ENGINE_NAMES:
        engine = getattr(_engine.C, ENGINE_NAMES[name])
    else:
        engine = getattr(cpytree, name, None)
    if engine is None or original is None:
        return engine
    return as_torch_function(engine, original)


def _known_flattens() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """torch's flatten functions whose results the engine computes itself.

    torch.fx's immutable_dict / immutable_list are registered with functions
    that return exactly torch's dict / list flatten results:
    (list(d.values()), list(d.keys())) and (a list of d's items, None).
    FakeTensor and FX flatten them on every operator of a compile.
    """
    dict_like: list[Any] = []
    list_like: list[Any] = []
    immutable = sys.modules.get("torch.fx.immutable_collections")
    for module, name, out in (
        (immutable, "_immutable_dict_flatten", dict_like),
        (immutable, "_immutable_list_flatten", list_like),
        (sys.modules.get("torch.utils._pytree"), "_dict_flatten", dict_like),
        (sys.modules.get("torch.utils._pytree"), "_list_flatten", list_like),
    ):
        fn = getattr(module, name, None)
        if fn is not None:
            out.append(fn)
    return tuple(dict_like), tuple(list_like)


def _why_not(kind: str, fast: Any, original: Any, blockers: dict[str, str | None]) -> str | None:
    """Why a function must stay torch's, or None if cpytree's `fast` may replace it."""
    if original is None:
        return "torch has no such function"
    if fast is None:
        return "cpytree has no such function"
    return blockers.get(kind)


def install(cpytree: ModuleType, *, rebind_imports: bool = True) -> None:
    """Make torch's pytree functions `cpytree`'s C++ ones (see the module docstring).

    `cpytree` is the package's face, which calls this (`cpytree.install()`)
    and hands itself in: its functions are what torch gets. Idempotent: a
    second call while installed does nothing. With the pure-Python fallback
    engine there is nothing to gain, so install() warns and leaves torch
    alone. Raises ImportError when torch is not installed.
    """
    global _state, _refused
    with _LOCK:
        if _state is not None:
            return
        if cpytree.ENGINE != "cpp":
            warnings.warn(
                "cpytree.install(): the C++ engine is not available; torch left unchanged.",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        import torch.utils._pytree as tp

        # The modules it loads by name (not `from . import _spec_interop, dynamo`,
        # which asks this package for each first), and `_inventory` through its
        # package (loaded; a from-import out of it would ask its __getattr__
        # for `__path__`): install()'s import cost.
        from .._torch_link import _inventory
        from ._patch import Patches
        from ._signature import engine_of
        from ._spec_interop import (
            disable as disable_interop,
            enable as enable_interop,
            to_torch_spec,
        )
        from .dynamo import DynamoDrift, DynamoHooks, warn_failed

        # Every private name install() needs, checked before anything changes.
        moved = [str(name) for name in _inventory.missing("install")]
        # Following torch's registry already, unless torch was still loading
        # at `import cpytree`: then from now on (attach() checks its names).
        follower = _torch_link.follow_torch_registry(frozenset(cpytree.BUILTIN_TYPES))
        if not moved:
            follower.attach()
        if moved or not follower.following():
            why = "torch moved " + ", ".join(moved) if moved else follower.failure()
            _refused = f"the registry link is off ({why})" if not moved else why
            warnings.warn(
                f"cpytree.install(): {_refused}; nothing installed, torch is as shipped "
                "(see cpytree.status()).",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        _refused = ""
        interop_moved = [str(name) for name in _inventory.missing("interop")]
        patches, hooks = Patches(), DynamoHooks()
        sync = follower.sync
        spec_ready = False
        try:
            sync.join()
            _engine.set_known_flattens(*_known_flattens())
            _engine.set_torch_key_types(tp.SequenceKey, tp.MappingKey, tp.GetAttrKey)
            originals = {"tree_structure": tp.tree_structure}
            if interop_moved:
                spec_blocker: str | None = "torch moved " + ", ".join(interop_moved)
            else:
                spec_blocker = enable_interop(cpytree, tp, originals)
            spec_ready = spec_blocker is None
            blockers: dict[str, str | None] = {FREE: None, SPEC: spec_blocker}
            swapped: list[str] = []
            skipped: dict[str, str] = {}
            replacements: dict[int, tuple[Any, Any]] = {}
            for module_name, name, kind in TARGETS:
                module = sys.modules.get(module_name) or importlib.import_module(module_name)
                original = vars(module).get(name)
                fast = _fast_function(module, name, original, cpytree)
                qualified = f"{module_name}.{name}"
                reason = _why_not(kind, fast, original, blockers)
                if reason is not None:
                    skipped[qualified] = reason
                    continue
                assert fast is not None and original is not None  # else _why_not() said why
                hooks.substitute(fast, original)
                # The engine function the made one calls: what Dynamo meets
                # if it traces the made function's own frame.
                hooks.substitute(engine_of(fast), original)
                patches.set(module, name, fast)
                replacements[id(original)] = (original, fast)
                swapped.append(qualified)
            if spec_ready:
                hooks.add_spec_type(cpytree.TreeSpec, lambda spec: to_torch_spec(spec, tp))
            # Now if Dynamo is loaded, else when it is first imported.
            hooks.activate(_undo_after_dynamo_failure)
            rebound = 0
            if rebind_imports:
                rebound = _rebind_imports(
                    patches,
                    {**replacements, **sync.rebindings()},
                    skip=("torch.utils._pytree",),
                )
        except BaseException as error:
            _engine.set_known_flattens((), ())
            hooks.remove_all()
            patches.undo()
            sync.leave()
            if spec_ready:
                disable_interop()
            if isinstance(error, DynamoDrift):
                warn_failed(error)  # torch as shipped, and said once
                return
            raise
        # Only the replacements: torch's registration functions stay wrapped
        # (following) after uninstall(), so bindings made to them may stay.
        undo_map = {id(new): (new, old) for old, new in replacements.values()}
        _state = _Installed(
            patches=patches,
            sync=sync,
            dynamo=hooks,
            mode="full" if spec_ready else FREE,
            swapped=swapped,
            skipped=skipped,
            rebound=rebound,
            undo_map=undo_map,
        )


def _rebind_imports(
    patches: Patches, originals_to_new: dict[int, tuple[Any, Any]], skip: tuple[str, ...]
) -> int:
    """`_patch.rebind_imports`, loaded on first use (a name tests can replace)."""
    from ._patch import rebind_imports

    return rebind_imports(patches, originals_to_new, skip)


def _undo_after_dynamo_failure(error: BaseException) -> None:
    """Dynamo was imported after install() and refused its entries: put torch back."""
    from . import dynamo as _dynamo

    _dynamo.warn_failed(error)
    uninstall()


def uninstall() -> None:
    """Undo install() exactly: every attribute, registration and Dynamo rule it added.

    Also resets bindings that torch modules imported after install() made to
    cpytree's functions (`from torch.utils._pytree import tree_map` ran while
    installed). A no-op when not installed. In full mode the engine's specs
    keep posing as torch's afterwards (those made while installed may still
    be held by torch objects); that is cpytree's state, not torch's.
    """
    global _state
    with _LOCK:
        state = _state
        if state is None:
            return
        from ._patch import find_bindings

        state.dynamo.remove_all()
        # Registries first, while torch's names are still cpytree's functions:
        # torch's own Python traversal, back once the names are, never sees a
        # copy leave torch's registry midway.
        state.sync.leave()
        skipped = state.patches.undo()
        late = {key: pair[0] for key, pair in state.undo_map.items()}
        for module_name, attr in find_bindings(late, skip=()):
            module = sys.modules[module_name]
            setattr(module, attr, state.undo_map[id(vars(module)[attr])][1])
        _engine.set_known_flattens((), ())
        # The engine's spec interop stays on: specs made while installed live
        # on in torch objects (an ExportedProgram's call_spec, AOTAutograd's
        # runtime wrappers) that torch's own functions must still accept.
        # Only pickling goes back to cpytree's own form.
        _engine.set_torch_pickling(False)
        _state = None
    if skipped:
        warnings.warn(
            "cpytree.uninstall(): left alone because they were replaced after install(): "
            + ", ".join(skipped),
            RuntimeWarning,
            stacklevel=2,
        )
