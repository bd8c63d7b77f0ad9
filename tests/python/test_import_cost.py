"""What `import cpytree` loads: with the C++ engine, not the pure-Python
reference (loaded on first use) nor the parts of install() that only
install() needs. A count of modules, not a timing (benchmarks/import_time.py
times it)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import cpytree
from cpytree import _releases

LAZY = [
    "cpytree._keys",
    "cpytree._serialization",
    "cpytree._reference",
    "cpytree._match",
    "cpytree._torch.dynamo",
    "cpytree._torch._spec_interop",
    "cpytree._torch._versions",
    "cpytree._torch._patch",
]


def _child(code: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_all_names_are_the_references() -> None:
    assert cpytree.__all__ == cpytree._reference.__all__


@pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active")
def test_import_does_not_load_the_reference() -> None:
    res = _child(
        """
        import json, sys
        import cpytree
        loaded = sorted(m for m in sys.modules if m.startswith("cpytree"))
        fn = cpytree._generate_key_paths  # torch's helper, defined by the reference only
        print(json.dumps({"loaded": loaded, "after": "cpytree._reference" in sys.modules,
                          "fn": fn.__module__, "engine": cpytree.ENGINE}))
        """
    )
    assert res["engine"] == "cpp"
    assert not set(LAZY) & set(res["loaded"]), res["loaded"]
    assert res["after"] is True and res["fn"] == "cpytree._reference"


def test_fallback_still_loads_the_reference() -> None:
    res = _child(
        """
        import json, sys, warnings
        sys.modules["cpytree._C"] = None
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import cpytree
        leaves, spec = cpytree.tree_flatten({"a": [1, 2]})
        print(json.dumps({"engine": cpytree.ENGINE, "leaves": leaves,
                          "ref": "cpytree._reference" in sys.modules,
                          "iter": list(cpytree.tree_iter([1, (2,)])),
                          "warned": any("pure-Python" in str(x.message) for x in w)}))
        """
    )
    assert res == {
        "engine": "python",
        "leaves": [1, 2],
        "ref": True,
        "iter": [1, 2],
        "warned": True,
    }


@pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active")
def test_engine_loads_keys_and_serialization_on_first_use() -> None:
    # In a fresh interpreter, the engine's first with-path call, dumps and
    # loads work with nothing loaded beforehand, and load what they need.
    res = _child(
        """
        import json, sys
        import cpytree
        from cpytree import _C
        loaded = lambda m: m in sys.modules
        before = [loaded("cpytree._keys"), loaded("cpytree._serialization")]
        (path, leaf), = _C.tree_leaves_with_path({"a": [1]})
        keys = [loaded("cpytree._keys"), type(path[0]).__module__, _C.keystr(path)]
        spec = _C.tree_structure({"a": [1]})
        text = _C.treespec_dumps(spec)
        dumped = [loaded("cpytree._serialization"), text]
        again = _C.treespec_loads(text) == spec
        print(json.dumps({"before": before, "keys": keys, "dumped": dumped, "again": again,
                          "cached": cpytree.treespec_loads(text) is cpytree.treespec_loads(text)}))
        """
    )
    assert res == {
        "before": [False, False],
        "keys": [True, "cpytree._keys", "['a'][0]"],
        "dumped": [
            True,
            '[1, {"type": "builtins.dict", "context": "[\\"a\\"]", "children_spec": '
            '[{"type": "builtins.list", "context": "null", "children_spec": '
            '[{"type": null, "context": null, "children_spec": []}]}]}]',
        ],
        "again": True,
        "cached": True,
    }


def test_lazy_names_are_listed_and_star_imported() -> None:
    res = _child(
        """
        import json
        import cpytree
        listed = sorted(n for n in ("SequenceKey", "treespec_loads", "pytree_to_str")
                        if n in dir(cpytree))
        namespace = {}
        exec("from cpytree import *", namespace)
        missing = sorted(set(cpytree.__all__) - set(namespace))
        print(json.dumps({"listed": listed, "missing": missing,
                          "key": repr(namespace["SequenceKey"](3)),
                          "loads": namespace["treespec_loads"].__module__}))
        """
    )
    assert res == {
        "listed": ["SequenceKey", "pytree_to_str", "treespec_loads"],
        "missing": [],
        "key": "SequenceKey(idx=3)",
        "loads": "cpytree",
    }


# What `import cpytree` loads after `import torch`, exactly: a module added
# here is a cost every user pays (benchmarks/import_time.py measures it).
IMPORTED = [
    "cpytree",
    "cpytree._C",
    "cpytree._derived",
    "cpytree._engine",  # the one handover to _C
    "cpytree._namedtuple",
    "cpytree._names",  # the table of names (__all__)
    "cpytree._nodes",
    "cpytree._registry",
    "cpytree._torch_link",  # below the face (and CPYTREE_INSTALL's one reader); install()'s
    # cpytree._torch loads on first use
    "cpytree._torch_link._follow",
    "cpytree._torch_link._inventory",  # the registry link checks its names first
    "cpytree._torch_link._sync",
]


@pytest.mark.torch
@pytest.mark.skipif(cpytree.ENGINE != "cpp", reason="the C++ engine is not active")
def test_import_and_install_compile_nothing_and_load_what_they_need() -> None:
    # Python-level compiles (dataclass and namedtuple methods, ForwardRefs)
    # raise the "compile" audit event with a "<string>" filename; importing
    # a module from source has its path (and .pyc files need none).
    pytest.importorskip("torch")
    res = _child(
        """
        import json, sys
        import torch
        compiled = []
        sys.addaudithook(lambda event, args: event == "compile"
                         and not str(args[1]).endswith(".py") and compiled.append(str(args[1])))
        before = set(sys.modules)
        import cpytree
        imported = sorted(m for m in set(sys.modules) - before if m.startswith("cpytree"))
        at_import = list(compiled)
        cpytree.install()
        at_install = compiled[len(at_import):]
        inventory = "cpytree._torch_link._inventory" in sys.modules
        rows = "INVENTORY" in vars(sys.modules["cpytree._torch_link._inventory"])
        import torch._dynamo
        from cpytree._torch import status
        print(json.dumps({"imported": imported, "at_import": at_import, "at_install": at_install,
                          "inventory": [inventory, "cpytree._torch_link._inventory" in sys.modules],
                          "dynamo_rows": [rows, "INVENTORY" in vars(sys.modules[
                              "cpytree._torch_link._inventory"])],
                          "dynamo": status()["dynamo"]}))
        """
    )
    assert res["imported"] == IMPORTED
    if sys.version_info < (3, 14):  # 3.14+: the registry's NamedTuples are typing's (_namedtuple)
        assert res["at_import"] == [] and res["at_install"] == []
    # the inventory loads with the registry link (torch was imported first)
    assert res["inventory"] == [True, True]
    # ... but not the Dynamo layers' rows: built once Dynamo is imported (DynamoHooks)
    assert res["dynamo_rows"] == [False, True]
    assert res["dynamo"] == {"trackers": "on", "substitute": "on", "spec": "on"}


def test_inventory_builds_the_dynamo_rows_on_first_use() -> None:
    res = _child(
        """
        import json
        from cpytree._torch_link import _inventory as inv
        def gone(name):
            raise ImportError(name)
        inv.import_module = gone  # a torch without these modules (and none imported)
        early = [str(n) for n in inv.missing("registry") + inv.missing("watch")]
        built_early = "INVENTORY" in vars(inv)
        rows = inv.INVENTORY
        print(json.dumps({
            "built": [built_early, "INVENTORY" in vars(inv)],
            "same": rows is inv.INVENTORY and rows is inv._load(),
            "order": [n.layer for n in rows] == sorted(
                (n.layer for n in rows), key=inv.LAYERS.index),
            "split": rows == inv._EARLY + rows[len(inv._EARLY):]
                and {n.layer for n in inv._EARLY} == {"registry", "install", "interop", "watch"},
            "layers": sorted({n.layer for n in rows}) == sorted(inv.LAYERS),
            "count": len(rows), "early": early}))
        """
    )
    # missing() of an early layer reads the early rows only (all gone: no module imports)
    assert res["built"] == [False, True]
    assert res["same"] and res["order"] and res["split"] and res["layers"]
    assert res["count"] == 146
    assert res["early"][:2] == [
        "torch.utils._pytree._private_register_pytree_node",
        "torch.utils._pytree._deregister_pytree_node",
    ]


def _behaviour(cls: type, value: object) -> dict:
    import copy
    import dataclasses
    import pickle

    def outcome(fn):  # type: ignore[no-untyped-def]
        try:
            return ("ok", fn())
        except Exception as error:  # noqa: BLE001 - compared, not handled
            return (type(error).__name__, str(error))

    x = cls(value)
    return {
        "repr": repr(x),
        "eq": [x == cls(value), x == cls(3), x == value, x != cls(value)],
        "hash": outcome(lambda: hash(x)),
        "fields": [
            (f.name, repr(f.type), f.init, f.repr, f.compare) for f in dataclasses.fields(cls)
        ],
        "params": repr(cls.__dataclass_params__),
        "asdict": outcome(lambda: dataclasses.asdict(x)),
        "replace": repr(dataclasses.replace(x, value=5)),
        "pickle": repr(pickle.loads(pickle.dumps(x))),
        "state": x.__getstate__(),
        "copy": [repr(copy.copy(x)), repr(copy.deepcopy(x))],
        "set": outcome(lambda: setattr(x, "value", 1)),
        "del": outcome(lambda: delattr(x, "value")),
        "dict": hasattr(x, "__dict__") or hasattr(x, "__weakref__"),
        "slots": cls.__slots__,
        "match_args": cls.__match_args__,
        "names": sorted(vars(cls)),
        "generic": [cls.__parameters__ == (cls.__parameters__[0],), cls[int].__origin__ is cls],
        "signature": str(__import__("inspect").signature(cls)),
        "is_dataclass": dataclasses.is_dataclass(x),
    }


def _constant_node_of_2_11() -> type:
    """torch 2.11+'s ConstantNode, as its torch/utils/_pytree.py defines it."""
    import dataclasses
    import types
    from typing import Generic, TypeVar

    T = TypeVar("T")
    body = {"__annotations__": {"value": T}, "__module__": __name__}
    # (annotations evaluated, as in torch's module: this one's are strings)
    cls = types.new_class("ConstantNode", (Generic[T],), exec_body=lambda ns: ns.update(body))
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


ConstantNode = _constant_node_of_2_11()  # at module level: instances pickle


@pytest.mark.torch
@pytest.mark.parametrize("value", [1, "a", (1, [2]), None])
def test_constant_node_behaves_as_the_frozen_slots_dataclass(value: object) -> None:
    # cpytree's ConstantNode is written out instead of generated (nothing to
    # compile at import); it must behave as torch's @dataclass(frozen=True,
    # slots=True) does, class name aside.
    ours = _behaviour(cpytree._registry.ConstantNode, value)
    torch_pytree = pytest.importorskip("torch.utils._pytree")
    if _releases.active() >= (2, 11):
        genuine = _behaviour(torch_pytree.ConstantNode, value)
    else:  # 2.10's is neither slots nor Generic (DIFFERENCES["slots_classes"])
        assert not hasattr(torch_pytree.ConstantNode, "__slots__")
        assert not hasattr(torch_pytree.ConstantNode, "__parameters__")
        genuine = _behaviour(ConstantNode, value)  # cpytree's is 2.11+'s
    assert ours == genuine
    node = cpytree._registry.ConstantNode([1])
    node_list = [node]
    object.__setattr__(node, "value", node_list)  # a cycle: repr stops at it
    assert repr(node) == "ConstantNode(value=[...])"


def _namedtuple_behaviour(cls: type) -> dict:
    import copy
    import inspect

    n = len(cls._fields)
    x = cls(*range(n))
    return {
        "fields": cls._fields,
        "defaults": cls._field_defaults,
        "annotations": cls.__annotations__,
        "new_annotations": cls.__new__.__annotations__,
        "repr": repr(x),
        "make": repr(cls._make(range(n))),
        "replace": repr(x._replace(**{cls._fields[0]: "r"})),
        "asdict": x._asdict(),
        "getnewargs": x.__getnewargs__(),
        "copy": repr(copy.deepcopy(x)),  # the reduce pickle uses (the twin has no importable name)
        "reduce": x.__reduce_ex__(2)[1][1:],
        "match_args": cls.__match_args__,
        "slots": cls.__slots__,
        "mro": [c.__name__ for c in cls.__mro__],
        "doc": cls.__doc__,
        "qualname": cls.__qualname__,
        "module": cls.__module__,
        "signature": str(inspect.signature(cls)),
        "new_doc": cls.__new__.__doc__,
        "methods": {
            m: (getattr(cls, m).__qualname__, getattr(cls, m).__doc__)
            for m in ("_make", "_replace", "__repr__", "_asdict", "__getnewargs__", "__new__")
        },
        "getters": [(getattr(cls, f).__doc__, type(getattr(cls, f)).__name__) for f in cls._fields],
        # What a class statement adds and typing's functional form (the twin)
        # lacks: 3.13+'s first line and attributes, 3.14+'s class-dict cell,
        # and on 3.14+ (typing's own class there) the body's `_new` method.
        "names": sorted(
            set(vars(cls))
            - {"__firstlineno__", "__static_attributes__", "__classdictcell__", "_new"}
        ),
        "errors": [
            repr(_raises(lambda: cls._make(range(n + 1)))),
            repr(_raises(lambda: x._replace(bogus=1))),
            repr(_raises(lambda: cls(*range(n - 1)))).replace(cls.__qualname__, "X"),
        ],
    }


def _raises(fn):  # type: ignore[no-untyped-def]
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - compared, not handled
        return type(error).__name__, str(error)
    return None


def _typing_twin(cls: type) -> type:
    import typing

    twin = typing.NamedTuple(cls.__name__, list(cls.__annotations__.items()))
    twin.__module__ = cls.__module__
    twin.__qualname__ = cls.__qualname__
    twin.__doc__ = cls.__doc__
    return twin


def test_namedtuples_behave_as_typing_namedtuple() -> None:
    # The registry's NamedTuples are built without compiling code; each must
    # behave as the typing.NamedTuple of the same fields.
    from cpytree._derived import Derived
    from cpytree._registry import NodeDef, _SerializeNodeDef
    from cpytree._torch_link._sync import _Entry

    for cls in (NodeDef, _SerializeNodeDef, Derived, _Entry):
        ours = _namedtuple_behaviour(cls)
        twin = _namedtuple_behaviour(_typing_twin(cls))
        # the class body's _new (its __new__) is the one difference
        assert ours == twin, cls
        value = cls(*range(len(cls._fields)))
        assert pickle.loads(pickle.dumps(value)) == value
        assert cpytree.is_namedtuple_class(cls)


def test_fast_namedtuple_refuses_what_it_cannot_build() -> None:
    from cpytree._namedtuple import FastNamedTuple as NamedTuple

    with pytest.raises(TypeError, match="must be defined"):

        class NoNew(NamedTuple):
            a: int

    with pytest.raises(TypeError, match="must be defined"):

        class WrongNew(NamedTuple):
            a: int
            b: int

            def _new(_cls, b, a):  # type: ignore[no-untyped-def]
                return tuple.__new__(_cls, (b, a))

    with pytest.raises(TypeError, match="defaults"):

        class Default(NamedTuple):
            a: int = 1

            def _new(_cls, a=1):  # type: ignore[no-untyped-def]
                return tuple.__new__(_cls, (a,))
