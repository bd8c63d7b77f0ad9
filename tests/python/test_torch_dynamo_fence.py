"""The Dynamo fence: every private torch name cpytree uses is checked before use.

A torch that moved one of the names the tracker-level fast paths use gets
them left out, with one warning naming what moved: install()'s engine swap
stays and compiled code traces torch's own pytree exactly as without
install(). A torch that moved a name the substitution needs (Dynamo could
not be told what the C functions stand for) gets install() undone, again
with one warning. Never an error inside a user's compile.

The "drifted" torch is shown to the inventory check only (`_inventory.import_module`
hands it a copy of one Dynamo module with one name removed), so that torch's
own tracing, which still uses the name, runs as shipped.
"""

from __future__ import annotations

import collections
import types
import warnings

import pytest

pytest.importorskip("torch")

import torch
import torch._dynamo
import torch.fx._pytree
import torch.utils._pytree as tp

import cpytree
from cpytree._torch._signature import engine_of
from cpytree._torch_link import _inventory
from cpytree._torch_link._inventory import INVENTORY, VERSIONS
from cpytree.harness.studies.dynamo_probe import counting_steps

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(
        cpytree.ENGINE != "cpp", reason="install() needs the C++ engine (cpytree._C)"
    ),
]


def test_every_required_name_is_present_on_this_torch():
    for layer in _inventory.LAYERS:
        assert _inventory.missing(layer) == [], layer
    assert _inventory.paths_off() == {}
    assert {n.layer for n in INVENTORY} == set(_inventory.LAYERS)
    for n in INVENTORY:
        assert set(n.paths) <= set(_inventory.PATHS), n
        assert bool(n.paths) == (n.layer == "trackers"), n
    needed = {path for paths in _inventory.FUNCTION_PATHS.values() for path in paths}
    assert needed | {"dict", "namedtuple", "registered"} == set(_inventory.PATHS)  # node kinds


def test_optional_names_match_the_versions_table():
    minor = ".".join(torch.__version__.split(".")[:2])
    if minor not in _inventory.RELEASES:
        pytest.skip(f"torch {torch.__version__} is not in VERSIONS")
    column = _inventory.RELEASES.index(minor)
    by_name = {row[0]: row[1][column] for row in VERSIONS}
    optional = [n for n in INVENTORY if n.optional]
    assert set(by_name) <= {str(n) for n in optional}
    kinds = {"attr": "class property", "field": "instance field"}
    for n in optional:
        state = by_name.get(str(n), "present")  # not in VERSIONS: on every release
        if state in kinds.values():  # a name whose form changed between releases
            assert _inventory.present(n) == (state == kinds[n.kind]), (str(n), n.kind)
        else:
            assert _inventory.present(n) == (state == "present"), str(n)


def _drift(monkeypatch, module_name: str, class_name: str, removed: str) -> str:
    """Show the inventory check a `module_name` whose class lacks `removed`."""
    real_module = __import__(module_name, fromlist=["_"])
    real_class = getattr(real_module, class_name)
    kept = {k: v for k, v in vars(real_class).items() if k not in (removed, "__dict__",
                                                                    "__weakref__")}  # fmt: skip
    fake_module = types.ModuleType(module_name)
    fake_module.__dict__.update(vars(real_module))
    setattr(fake_module, class_name, type(class_name, (), kept))
    real_import = _inventory.import_module
    monkeypatch.setattr(
        _inventory,
        "import_module",
        lambda name: fake_module if name == module_name else real_import(name),
    )
    return f"{module_name}.{class_name}.{removed}"


class _Proxy:
    """`obj` with attribute `name` replaced by `value` (_GONE: absent)."""

    def __init__(self, obj, name, value):
        self._obj, self._name, self._value = obj, name, value

    def __getattribute__(self, attr):
        # The name replaced wins over the proxy's own attributes (a dunder
        # such as `__init__` would otherwise be found on _Proxy itself).
        if attr != "_name" and attr == object.__getattribute__(self, "_name"):
            return object.__getattribute__(self, "__getattr__")(attr)
        return object.__getattribute__(self, attr)

    def __getattr__(self, attr):
        if attr == self._name:
            if self._value is _GONE:
                raise AttributeError(attr)
            return self._value
        return getattr(self._obj, attr)


_GONE = object()


def _bare(klass, field):
    """A stand-in for one class of an MRO that neither annotates nor assigns `field`."""
    namespace = {"__annotations__": {k: v for k, v in
                                     vars(klass).get("__annotations__", {}).items()
                                     if k != field}}  # fmt: skip
    code = getattr(vars(klass).get("__init__"), "__code__", None)
    if code is not None:
        names = tuple("_moved_" if n == field else n for n in code.co_names)
        namespace["__init__"] = types.SimpleNamespace(__code__=code.replace(co_names=names))
    return type(klass.__name__, (), namespace)


def _without(obj, parts, kind):
    """A view of `obj` where the name at `parts` is absent (only that name)."""
    head, rest = parts[0], parts[1:]
    if kind == "field" and len(rest) == 1:
        cls = getattr(obj, head)
        mro = tuple(_bare(k, rest[0]) for k in cls.__mro__)
        return _Proxy(obj, head, _Proxy(cls, "__mro__", mro))
    if not rest:
        return _Proxy(obj, head, _GONE)
    return _Proxy(obj, head, _without(getattr(obj, head), rest, kind))


def _drift_name(monkeypatch, module, path, kind):
    """Show the inventory check a torch whose `module` lacks `path`."""
    real_import = _inventory.import_module
    fake = _without(real_import(module), path.split("."), kind)
    monkeypatch.setattr(_inventory, "import_module",
                        lambda name: fake if name == module else real_import(name))  # fmt: skip


def _flatten_unflatten(tree, x):
    leaves, spec = tp.tree_flatten(tree)
    return tp.tree_unflatten([v * x for v in leaves], spec)


def _compile(fn, *args):
    """(output, bytecodes, guards) of a fresh fullgraph compile and call."""
    torch._dynamo.reset()
    guards = []
    compiled = torch._dynamo.optimize(
        "eager", nopython=True, guard_export_fn=lambda g: guards.append(len(g))
    )(fn)
    with counting_steps() as steps:
        out = compiled(*args)
    return out, steps[0], sum(guards)


def _tree():
    t = torch.arange(3.0)
    return {"a": [t, (t + 1, t + 2)], "b": {"c": t * 2}}


def _equal(a, b) -> bool:
    la, sa = tp.tree_flatten(a)
    lb, sb = tp.tree_flatten(b)
    return sa == sb and all(torch.equal(x, y) for x, y in zip(la, lb))


@pytest.fixture
def clean():
    yield
    cpytree.uninstall()
    torch._dynamo.reset()


@pytest.mark.usefixtures("clean")
def test_drifted_tracker_name_turns_its_fast_path_off_with_one_warning(monkeypatch):
    x = torch.tensor(2.0)
    expected, torch_steps, torch_guards = _compile(_flatten_unflatten, _tree(), x)
    moved = _drift(monkeypatch, "torch._dynamo.variables", "ConstDictVariable",
                   "install_dict_keys_match_guard")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [type(w.message) for w in caught] == [RuntimeWarning]
    assert str(caught[0].message) == (
        f"cpytree.install(): torch has moved names cpytree's Dynamo fast paths use ({moved}); "
        "these fast paths are off: dict. Compiled code traces torch's own pytree functions "
        "there, as without install(); the other fast paths and the C engine stay on (see "
        "cpytree.status())."
    )
    # The engine swap stays; the Dynamo substitution stays; only the dict path is off.
    assert cpytree.is_installed() and engine_of(tp.tree_flatten) is cpytree.tree_flatten
    state = cpytree.status()
    assert state["dynamo"]["substitute"] == "on"
    assert state["dynamo"]["trackers"] == f"partly on: dict off: torch moved {moved}"
    assert state["fast_paths"] == {p: "on" for p in _inventory.PATHS} | {
        "dict": f"off: torch moved {moved}"
    }
    # A tree with dicts traces torch's own pytree: same result, same steps and guards.
    out, steps, guards = _compile(_flatten_unflatten, _tree(), x)
    assert _equal(out, expected) and _equal(out, _flatten_unflatten(_tree(), x))
    assert steps == torch_steps
    # No more guards: the walk falls back at the root dict before realizing it
    # (realized first, its TYPE_MATCH was created a second time at another
    # point of the trace than torch's own: 125 vs 124 on torch 2.15).
    assert guards <= torch_guards
    # One without: the walk is still answered at the tracker level (fewer steps).
    flat = [torch.arange(3.0), (torch.ones(2), [torch.zeros(1)])]
    cpytree.uninstall()
    _, torch_flat_steps, _ = _compile(_flatten_unflatten, flat, x)
    cpytree.install()
    out, steps, _ = _compile(_flatten_unflatten, flat, x)
    assert _equal(out, _flatten_unflatten(flat, x)) and steps < torch_flat_steps


@pytest.mark.usefixtures("clean")
def test_drifted_substitution_name_undoes_install_with_one_warning(monkeypatch):
    x = torch.tensor(2.0)
    expected, torch_steps, _ = _compile(_flatten_unflatten, _tree(), x)
    original = tp.tree_flatten
    moved = _drift(monkeypatch, "torch._dynamo.guards", "GuardBuilder", "CLOSURE_MATCH")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
    assert [type(w.message) for w in caught] == [RuntimeWarning]
    assert moved in str(caught[0].message) and "install() was undone" in str(caught[0].message)
    assert not cpytree.is_installed() and tp.tree_flatten is original
    out, steps, _ = _compile(_flatten_unflatten, _tree(), x)
    assert _equal(out, expected) and steps == torch_steps
    monkeypatch.undo()
    cpytree.install()  # an intact torch installs as usual
    assert cpytree.status()["dynamo"] == {"trackers": "on", "substitute": "on", "spec": "on"}


Point = collections.namedtuple("Point", "a b")


def _every_path(tree, x):
    """One call of each answered function (each fast path), on every node kind."""
    leaves, spec = tp.tree_flatten(tree)
    out = tp.tree_unflatten([v * x for v in leaves], spec)
    paths = [keystr for keystr, _ in tp.tree_leaves_with_path(tree)]
    flat_paths, _ = tp.tree_flatten_with_path(tree)
    mapped = tp.tree_map(lambda v: v + x, tree["od"])
    both = tp.tree_map(lambda v, w: v - w, tree["od"], mapped)
    positive = tp.tree_all(lambda v: v.dim() == 1, tree)
    anything = tp.tree_any_only(torch.Tensor, lambda v: v.shape[0] > 100, tree)
    spec_leaves = torch.fx._pytree.tree_flatten_spec(tree, spec)
    again = spec.unflatten(spec_leaves)
    parts = [spec.num_leaves, spec.is_leaf(), len(spec.children()), spec.child(0).num_leaves]
    structure = tp.tree_structure(tree)
    return (
        out,
        len(paths),
        len(flat_paths),
        mapped,
        both,
        positive,
        anything,
        again,
        parts,
        (structure == spec),
    )


def _paths_tree():
    t = torch.arange(3.0)
    return {
        "d": {"k": t, "l": [t + 1, (t + 2,)]},
        "nt": Point(t * 2, t * 3),
        "od": collections.OrderedDict(a=t + 4, b=collections.deque([t + 5])),
    }


_COMPILED: dict[str, object] = {}


def _rows():
    """(name, kind) of each Dynamo inventory name, once (a name may sit in several rows)."""
    dynamo = [n for n in INVENTORY if n.layer in ("substitute", "spec", "trackers")]
    return sorted({(str(n), n.module, n.path, n.kind) for n in dynamo})


def _expected_off(name):
    """What removing `name` does: "undo" (a Dynamo layer needs it), "refuse"
    (install() needs it), else (spec-free mode or not, the fast paths off)."""
    # the name itself, and (a class or module removed) every name inside it
    rows = [n for n in INVENTORY if (str(n), n.kind) == (name[0], name[3])
            or (name[3] == "attr" and str(n).startswith(name[0] + "."))]  # fmt: skip
    required = {n.layer for n in rows if not n.optional}
    if required & {"substitute", "spec"}:
        return "undo"
    if "install" in required:
        return "refuse"
    off = set()
    for n in rows:
        if n.layer != "trackers" or not _inventory.present(n):
            continue  # absent on this torch already: removing it changes nothing
        if n.optional:
            others = [m for m in INVENTORY if n.group and m.group == n.group and m is not n]
            if not others or any(_inventory.present(m) and m not in rows for m in others):
                continue  # used when present, or another form stands in
        off |= set(_inventory.PATHS) if "walk" in n.paths else set(n.paths)
    if off & {"flatten_spec", "unflatten", "tree_map"}:
        off.add("spec_object")  # no constant specs without them (_inventory._REQUIRES)
    return "interop" in required, off


def _same(a, b) -> bool:
    la, sa = tp.tree_flatten(a)
    lb, sb = tp.tree_flatten(b)
    return sa == sb and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(la, lb)
    )


@pytest.mark.usefixtures("clean")
@pytest.mark.parametrize("name", _rows(), ids=lambda row: f"{row[0]}:{row[3]}")
def test_each_moved_name_turns_off_only_its_paths(monkeypatch, name):
    x = torch.tensor(2.0)
    expected = _every_path(_paths_tree(), x)  # torch's own code (not installed)
    if not any(_inventory.present(n) for n in INVENTORY if (str(n), n.kind) == (name[0], name[3])):
        pytest.skip("absent on this torch already (another form stands in: VERSIONS)")
    off = _expected_off(name)
    _drift_name(monkeypatch, name[1], name[2], name[3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpytree.install()
        # What a compile meets depends only on which paths are on: one compile
        # per distinct outcome (the names with that outcome share it).
        key = repr(cpytree._torch.status().get("fast_paths"))
        if key not in _COMPILED:
            torch._dynamo.reset()
            compiled = torch.compile(_every_path, backend="eager", fullgraph=True)
            _COMPILED[key] = compiled(_paths_tree(), x)
    assert _same(_COMPILED[key], expected)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    if off in ("undo", "refuse"):
        assert not cpytree.is_installed()
        assert len(messages) == 1 and name[0] in messages[0], messages
        return
    spec_free, off = off
    status = cpytree._torch.status()
    assert status["mode"] == ("spec-free" if spec_free else "full")
    fast_paths = status["fast_paths"]
    assert {p for p, state in fast_paths.items() if state != "on"} == off
    assert status["dynamo"]["substitute"] == "on"
    if off:
        assert len(messages) == 1, messages
        assert name[0] in messages[0] and all(p in messages[0] for p in off)
        assert all(name[0] in fast_paths[p] for p in off)
    else:
        assert messages == []
