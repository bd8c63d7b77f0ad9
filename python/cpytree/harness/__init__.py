"""The cpytree profiling harness: what pytree work costs, per backend and in torch.compile.

Run it as `cpytree-harness` or `python -m cpytree.harness` (see `cli`):

* no arguments: every op on PT2-shaped embedded workloads for every installed
  pytree backend, and the scaling curve from 10 to 1,000,000 nodes;
* `--tree module:callable`: the same on your own pytree or model state dict;
* `--compile`: torch.compile of a small torch.nn zoo with and without
  `cpytree.install()`, each compile in a fresh process.

Each writes a report directory (report.md, results.json, PNG plots).

Modules, one concern each: `workloads` (embedded trees), `backends` (one
interface over every library), `timing` (interleaved rounds), `optable` and
`scaling` (what is timed), `usertree` (--tree), `zoo`, `compile_child` and
`compile_bench` (--compile), `results`, `tables`, `plots` and `report`
(output), `progress` (the bar). Importing this package imports no backend;
`backends.discover()` does.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv=None):  # type: ignore[no-untyped-def]
    """Entry point; see `cpytree.harness.cli.main`."""
    from .cli import main as _main

    return _main(argv)
