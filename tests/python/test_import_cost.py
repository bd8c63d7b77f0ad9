"""What `import cpytree` loads: with the C++ engine, not the pure-Python
reference (loaded on first use) nor the parts of install() that only
install() needs. A count of modules, not a timing (benchmarks/import_time.py
times it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cpytree

LAZY = [
    "cpytree._keys",
    "cpytree._serialization",
    "cpytree._reference",
    "cpytree._match",
    "cpytree._torch.dynamo",
    "cpytree._torch._spec_interop",
    "cpytree._torch._versions",
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
