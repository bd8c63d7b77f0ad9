"""Whether the engine's TreeSpec can stand in for torch's.

Swapping a function that returns or takes a TreeSpec (`tree_flatten`,
`tree_structure`, `tree_unflatten`, `tree_flatten_spec`) sends engine specs
into torch code that does `isinstance(spec, TreeSpec)` against a class it
imported by name, compares them with torch specs, hashes them next to torch
specs, reads `spec._context`/`spec._children`, builds torch specs with engine
children (`treespec_tuple([out_spec])`), hands torch specs back to
`tree_unflatten`, and pickles them into on-disk caches that a process without
cpytree may read. None of that can be arranged from Python for a static C
type, so the engine provides it behind one switch,
``_set_torch_spec_classes(TreeSpec, LeafSpec, treespec_leaf, ConstantNode)`
(handed over by `cpytree._engine`; docs/torch_install.md lists what it must
provide), and install() turns
it on only when every behaviour below checks out (`enable` returns why not
otherwise). Until then install() swaps only the functions that never expose
a spec.
"""

from __future__ import annotations

import pickle
import warnings
from collections import OrderedDict
from types import ModuleType
from typing import Any

from .. import _engine, _registry

# By its name, not `from .. import _releases`: install() loads it first here,
# and that form asks the package's __getattr__ for it first (a miss).
from .._releases import has as release_has

# One tree with every builtin node kind that has a context.
_SAMPLE = {"a": [1, (2, 3)], "b": None, "c": OrderedDict(x=4)}


def _checks(
    cpytree: ModuleType, tp: ModuleType, originals: dict[str, Any]
) -> list[tuple[str, Any]]:
    """(what torch needs, a thunk returning whether the engine provides it)."""
    leaves, spec = cpytree.tree_flatten(_SAMPLE)
    torch_spec = originals["tree_structure"](_SAMPLE)
    child = spec.child(0)
    return [
        ("isinstance(spec, torch TreeSpec) for engine specs",
         lambda: isinstance(spec, tp.TreeSpec) and isinstance(child.child(0), tp.TreeSpec)),
        ("engine spec == torch spec, both ways",
         lambda: spec == torch_spec and torch_spec == spec and spec != tp.treespec_leaf()),
        ("hash(engine spec) == hash(equal torch spec)", lambda: hash(spec) == hash(torch_spec)),
        ("spec._context and spec._children",
         lambda: spec._context == torch_spec._context and spec._children == torch_spec._children),
        ("tree_unflatten(leaves, torch spec)",
         lambda: cpytree.tree_unflatten(leaves, torch_spec) == _SAMPLE),
        ("TreeSpec(type, context, [torch specs])",
         lambda: cpytree.TreeSpec(tuple, None, [torch_spec]) == tp.TreeSpec(tuple, None, [spec])),
        ("pickle.loads(pickle.dumps(spec)) is a torch TreeSpec (readable without cpytree)",
         lambda: type(_round_trip(spec)) is tp.TreeSpec),
    ]  # fmt: skip


def _round_trip(spec: Any) -> Any:
    # Quietly: before torch 2.14 its leaves load as `LeafSpec()`, which warns
    # (FutureWarning) as torch's own pickled specs do; install() gives none.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pickle.loads(pickle.dumps(spec))


def _first_failure(checks: list[tuple[str, Any]]) -> str | None:
    for what, check in checks:
        try:
            ok = check()
        except Exception as error:  # noqa: BLE001 - any failure means "not ready"
            return f"{what}: {type(error).__name__}: {error}"
        if not ok:
            return f"{what}: not provided by the engine"
    return None


def enable(cpytree: ModuleType, tp: ModuleType, originals: dict[str, Any]) -> str | None:
    """Turn the engine's torch spec interop on. None on success, else why not (left off)."""
    # What a leaf spec pickles to: torch's LeafSpec.__reduce__ of this release
    # (2.14+ `treespec_leaf()`, the one leaf spec; before, a new `LeafSpec()`
    # with its FutureWarning: cpytree._releases.DIFFERENCES["leafspec_reduce"]).
    leaf_target = tp.treespec_leaf if release_has("leafspec_reduce") else tp.LeafSpec
    try:
        _engine.set_torch_spec_classes(tp.TreeSpec, tp.LeafSpec, leaf_target, tp.ConstantNode)
    except Exception as error:  # noqa: BLE001
        return f"cpytree._C._set_torch_spec_classes failed: {type(error).__name__}: {error}"
    reason = _first_failure(_checks(cpytree, tp, originals))
    if reason is not None:
        disable()
        return reason
    # Every entry point taking an engine spec takes a torch spec too, so
    # cpytree.treespec_dumps does (written against the public spec API, it
    # reads torch specs as they are; torch's TreeSpec stays accepted after
    # uninstall(), like the engine's posing as torch's). Through the registry
    # module: loading cpytree._serialization here cost install() 7 compiles.
    _registry.register_spec_type(tp.TreeSpec)
    return None


def disable() -> None:
    """Turn the engine's torch spec interop off."""
    _engine.set_torch_spec_classes(None, None, None, None)


def to_torch_spec(spec: Any, tp: ModuleType) -> Any:
    """The torch TreeSpec equal to an engine spec (for code Dynamo traces)."""
    if spec.is_leaf():
        return tp._LEAF_SPEC
    children = [to_torch_spec(child, tp) for child in spec.children()]
    return tp.TreeSpec(spec.type, spec.context, children)
