"""install() shares torch's registry lock with cpytree's registration code, so
registrations through both sides at once cannot deadlock (they took the two
locks in opposite orders before)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    import cpytree, cpytree._reference as R
    import torch.utils._pytree as tp
    cpytree.install()
    class A: pass
    class B: pass
    def slow_hook(cls, node_def):
        if cls is B:
            time.sleep(0.5)  # holds cpytree's registry lock: hooks run under it
    R._REGISTRATION_HOOKS.insert(0, slow_hook)
    fl = lambda x: ([], None)
    ufl = lambda v, c: None
    tb = threading.Thread(target=lambda: cpytree.register_pytree_node(B, fl, ufl), daemon=True)
    tb.start(); time.sleep(0.1)
    ta = threading.Thread(target=lambda: tp.register_pytree_node(A, fl, ufl), daemon=True)
    ta.start()
    ta.join(20); tb.join(20)
    print("deadlocked" if ta.is_alive() or tb.is_alive() else "ok")
    sys.stdout.flush()
    os._exit(0)
    """
)


def test_concurrent_registrations_through_both_sides_do_not_deadlock():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=180, check=False
    )
    assert out.stdout.strip().splitlines()[-1] == "ok", out.stderr
