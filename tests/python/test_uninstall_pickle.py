"""After uninstall(), cpytree specs pickle in cpytree's own form again (while
installed they pickle as torch's, so caches load in processes without cpytree)."""

from __future__ import annotations

import pickle

import pytest

torch_pytree = pytest.importorskip("torch.utils._pytree")


def test_pickle_form_follows_install_state():
    import cpytree

    if cpytree.ENGINE != "cpp":
        pytest.skip("needs the C++ engine")
    spec = cpytree.tree_structure({"a": [1, (2, None)]})
    cpytree.install()
    try:
        assert type(pickle.loads(pickle.dumps(spec))) is torch_pytree.TreeSpec
    finally:
        cpytree.uninstall()
    loaded = pickle.loads(pickle.dumps(spec))
    assert type(loaded) is cpytree.TreeSpec
    assert loaded is spec  # interned again
