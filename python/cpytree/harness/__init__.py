"""The cpytree profiling harness: what pytree work costs, per backend and in torch.compile.

Run it as `cpytree-harness` or `python -m cpytree.harness` (see `cli`):

* no arguments: every op on PT2-shaped embedded workloads for every installed
  pytree backend, and the scaling curve from 10 to 1,000,000 nodes;
* `--tree module:callable`: the same on your own pytree or model state dict;
* `--compile`: torch.compile of a small torch.nn zoo with and without
  `cpytree.install()`, each compile in a fresh process.

Each writes a report directory (report.md, results.json, PNG plots).

Two wings and what they share:

* `ops/`: every op on every workload for every backend, the scaling curve
  and `--tree` (needs nothing beyond cpytree);
* `studies/`: the torch studies (`--compile`, the Dynamo suite, `--runtime`),
  each measurement in a fresh child process;
* shared: `cli` (the command line), `child` (spawning and serving measuring
  children), `usercode` (`module:callable` of `--tree` and `--model`),
  `progress` (the bar), `report` and `plots` (the report directory).

Importing this package imports no backend; `ops.backends.discover()` does.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv=None):  # type: ignore[no-untyped-def]
    """Entry point; see `cpytree.harness.cli.main`."""
    from .cli import main as _main

    return _main(argv)
