"""The site inventory: every place torch's code uses a swapped function other than by calling it.

`cpytree._torch._sites.scan` reads the installed torch's source (AST) and
lists each site; every one must be classified in `SITES` (a release that adds
one fails here, on that release, naming it). The scanner itself is checked on
a source written here, so that a scanner which finds nothing cannot pass.
"""

from __future__ import annotations

import os
import textwrap

import pytest

pytest.importorskip("torch")

import torch

from cpytree._torch import _sites

pytestmark = pytest.mark.torch

ROOT = os.path.dirname(os.path.dirname(torch.__file__))


def test_every_site_of_the_installed_torch_is_classified() -> None:
    found = _sites.scan(ROOT)
    assert [f"{s.file}:{s.line} {s.function} {s.name} {s.use} {s.callee}"
            for s in _sites.unclassified(ROOT)] == []  # fmt: skip
    # The higher-order operators' own flatten is among them on every release.
    speculate = ("torch/_dynamo/variables/higher_order_ops.py", "speculate_subgraph",
                 "torch.utils._pytree.tree_flatten", "argument", "_make_inlined")  # fmt: skip
    assert speculate in {s.key for s in found}
    assert _sites.SITES[speculate][0] == "tracer"
    assert len(found) >= 17


def test_the_scanner_sees_every_kind_of_use(tmp_path) -> None:
    source = textwrap.dedent(
        """
        import torch.utils._pytree as pytree
        from torch.utils import _pytree as tp2
        from torch.utils._pytree import tree_unflatten as unf, tree_map_with_path
        import torch.fx._pytree as fx_pytree

        TABLE = {pytree.tree_flatten: 1}

        def handed(tx):
            return _make_inlined(tx, pytree.tree_flatten)(x)

        class V:
            def m(self, fn=tp2.tree_leaves):
                if fn is unf:
                    return pytree.tree_map.__name__
                keep = fx_pytree.tree_flatten_spec
                pytree.tree_flatten(1)  # a call: not a site
                tree_map_with_path(f, t)  # not swapped
                return unf
        """
    )
    folder = tmp_path / "torch" / "_dynamo"
    folder.mkdir(parents=True)
    (folder / "probe.py").write_text(source)
    got = sorted((s.function, s.name.rsplit(".", 1)[1], s.use, s.callee)
                 for s in _sites.scan(str(tmp_path)))  # fmt: skip
    assert got == [
        ("<module>", "tree_flatten", "container", ""),
        ("V.m", "tree_flatten_spec", "assign", ""),
        ("V.m", "tree_leaves", "default", ""),
        ("V.m", "tree_map", "attribute", "__name__"),
        ("V.m", "tree_unflatten", "compare", ""),
        ("V.m", "tree_unflatten", "return", ""),
        ("handed", "tree_flatten", "argument", "_make_inlined"),
    ]
    assert [s.key for s in _sites.unclassified(str(tmp_path))] == [
        s.key for s in _sites.scan(str(tmp_path))
    ]
