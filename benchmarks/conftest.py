"""Setup of the pytest-benchmark suite.

Makes `cpytree.harness` importable from a source checkout (the benchmarks use
the harness's workloads and backends), and reports which backends are missing
in the session header.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The "torch.utils._pytree" backend is torch's own Python code: an installed
# cpytree's autoload (install() at `import torch`) is off here and in children.
os.environ["CPYTREE_INSTALL"] = "0"

try:
    import cpytree.harness.ops.workloads  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def pytest_report_header(config):  # type: ignore[no-untyped-def]
    from cpytree.harness.ops import backends

    lines = []
    for b in backends.discover():
        state = b.note if b.available else f"MISSING ({b.reason})"
        lines.append(f"  {b.name:<18} {state}".rstrip())
    return ["pytree backends:", *lines]
