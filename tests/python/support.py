"""Helpers shared by the test modules (no tests here)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

# What some tests need from the operating system, asked of the system itself
# (not of its name): the tests that read procfs or set resource limits skip,
# with these reasons, where it is absent (macOS and Windows have no procfs;
# Windows has no `resource` module).
HAS_PROCFS = os.path.exists("/proc/self/statm") and os.path.exists("/proc/self/status")
NO_PROCFS = "reads this process's memory from /proc/self (procfs), which this system has not"
try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]
HAS_RLIMIT_AS = resource is not None and hasattr(resource, "RLIMIT_AS")
NO_RLIMIT_AS = "caps the address space with resource.RLIMIT_AS, which this system has not"


def rss_bytes() -> int | None:
    """This process's resident set size (procfs), or None without procfs."""
    if not HAS_PROCFS:
        return None
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# A free-threaded CPython (3.13t): no GIL.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def engine_active() -> bool:
    """Whether ``cpytree``'s functions are the C++ engine's (not the fallback)."""
    import cpytree
    import cpytree._reference as ref

    return cpytree.tree_flatten is not ref.tree_flatten


def assert_same_objects(actual: list, expected: list) -> None:
    """``actual`` and ``expected`` hold the same objects, in the same order."""
    assert type(actual) is list, f"expected a list, got {type(actual)}"
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a is e, f"item {i}: {a!r} is not {e!r}"


def catch(fn: Callable[[], Any]) -> BaseException | None:
    """The exception ``fn()`` raises, or None."""
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the caller inspects it
        return exc
    return None


def run_isolated(impl_name: str, scenario: str, timeout: float = 300.0) -> dict[str, dict]:
    """Run ``_hostile.py <impl_name> <scenario>`` in a fresh interpreter.

    Hostile inputs (100,000-deep trees, cycles, mutation during traversal) can
    crash a broken engine; a crash must fail the tests that exercise it, not
    abort the whole session. Returns ``{op: record}`` for every operation the
    child finished; the special key ``"__process__"`` holds the exit status
    and the name of the operation running when the child died, if it did.
    """
    env = dict(os.environ)
    # The child must import the very same cpytree: give it this sys.path.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "_hostile.py"), impl_name, scenario],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    results: dict[str, dict] = {}
    running = None
    header: dict = {}
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("event") == "header":
            header = rec
        elif rec.get("event") == "start":
            running = rec["op"]
        elif rec.get("event") == "done":
            results[rec["op"]] = rec
            running = None
    results["__process__"] = {
        "returncode": proc.returncode,
        "running": running,
        "stderr": proc.stderr[-4000:],
        "header": header,
    }
    return results


def start_and_join(threads: list[Any], timeout: float) -> None:
    """Start and join `threads` with a tiny switch interval (more interleavings); none may hang."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads), "a worker hung"


@contextlib.contextmanager
def installed(**kwargs: Any):
    """cpytree.install(**kwargs) for the duration of a `with` block; yields install's status()."""
    import cpytree
    from cpytree import _torch

    cpytree.install(**kwargs)
    try:
        yield _torch.status()
    finally:
        cpytree.uninstall()


def builtin_container_strategies(children: Any, keys: Any, maxlens: Any) -> list[Any]:
    """Hypothesis strategies of every builtin container kind over `children`.

    list, tuple, dict, OrderedDict and defaultdict(list) with `keys`, and
    deques with a maxlen drawn from `maxlens`; callers add their own node types.
    """
    from collections import OrderedDict, defaultdict, deque

    from hypothesis import strategies as st

    return [
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
        st.dictionaries(keys, children, max_size=3).map(OrderedDict),
        st.dictionaries(keys, children, max_size=3).map(lambda d: defaultdict(list, d)),
        st.tuples(st.lists(children, max_size=3), maxlens).map(
            lambda pair: deque(pair[0], maxlen=pair[1])
        ),
    ]


class Serial:
    """Distinct numbers for threads: `next(serial)`. A shared
    `iter(range(n))` is not thread-safe on free-threaded 3.13 (ThreadSanitizer
    reports CPython's rangeiter_next, and two threads may get one number)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0

    def __next__(self) -> int:
        with self._lock:
            n, self._next = self._next, self._next + 1
        return n
