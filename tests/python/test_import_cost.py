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
