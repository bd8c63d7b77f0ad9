"""The Dynamo suite and the runtime section, as `make bench` runs them.

    python benchmarks/dynamo_suite.py [--quick] [--sizes 10,100,1000] [--no-runtime]
                                      [case ...]

Compiles every case of `cpytree.harness.studies.dynamo_cases` (or the named cases)
with and without `cpytree.install()`, each mode in a fresh process, and
prints per case: Dynamo's bytecodes (torch, cpytree and the ratio), guards,
graphs, graph breaks, whether the FX graphs and outputs are the same, and the
compile wall time (see `cpytree.harness.studies.dynamo_study`). Then, unless
`--no-runtime`, the per-call time of eager torch paths that call pytree
(export's module, vmap, grad, checkpoint) with and without install()
(`cpytree.harness.studies.runtime_bench`). Needs torch; exits 0 with a notice when it
is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import cpytree.harness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="sizes 10,100; one runtime process")
    p.add_argument("--sizes", help="leaf counts of the suite (default 10,100,1000)")
    p.add_argument("--no-runtime", action="store_true", help="no runtime section")
    p.add_argument("cases", nargs="*", help="case names (default: the whole suite)")
    args = p.parse_args(argv)

    from cpytree.harness.studies import dynamo_study, runtime_bench
    from cpytree.harness.studies.modes import Unavailable, check_available

    try:
        check_available()
    except Unavailable as exc:
        print(f"dynamo suite skipped: {exc}")
        return 0
    if args.sizes:
        sizes = tuple(int(x) for x in args.sizes.split(","))
    else:
        sizes = (10, 100) if args.quick else (10, 100, 1000)
    t0 = time.monotonic()
    study = dynamo_study.run(cases=args.cases or None, sizes=sizes)
    print(dynamo_study.terminal(study))
    print(f"({time.monotonic() - t0:.0f} s)", flush=True)
    if not args.no_runtime:
        t0 = time.monotonic()
        rt = runtime_bench.run(reps=1 if args.quick else 3, quick=args.quick)
        print()
        print(runtime_bench.terminal(rt))
        print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
