"""Run torch's own test files twice, cpytree off and on, and diff the outcomes per test.

    python scripts/torch_suite_ab.py --python VENV/bin/python [-k EXPR] [--timeout S] \
        [--out DIR] TEST_FILE [TEST_FILE ...]

torch's tests are not in its wheels: the files come from a checkout of torch's
`test/` tree kept outside this repository (a file's tree root is its nearest
ancestor folder named `test`; pytest runs from the folder that holds it, so
`test/...` sibling imports and torch's own sys.path habits keep working).

Each file runs in two fresh processes of `--python`, as
`python -m pytest -p no:cacheprovider -q FILE --junitxml=OUT/NAME.MODE.xml`:
  off  CPYTREE_INSTALL=0, torch alone;
  on   CPYTREE_INSTALL unset, cpytree swapped in at `import torch`.
Both with CUDA_VISIBLE_DEVICES=, PYTORCH_TEST_WITH_SLOW=0, a fresh inductor cache
folder of their own (TORCHINDUCTOR_CACHE_DIR, so "on" never reuses what "off"
compiled) and each `--env KEY=VALUE` (e.g. PYTORCH_TEST_WITH_DYNAMO=1). Before the runs,
`import torch, cpytree; cpytree.is_installed()` is asked in each mode's
environment: "on" must say True and "off" False, or nothing runs (exit 2).

Prints, per file, the counts per mode (passed/failed/error/skipped) and every
test whose outcome differs, and writes the same as OUT/summary.md (with the
traceback tails of regressions). Exit 1 iff some test passed with cpytree off
and failed or errored with it on (or is missing from an "on" run that crashed
or timed out); 0 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

MODES = ("off", "on")
OUTCOMES = ("passed", "failed", "error", "skipped")
# Outcomes of the "on" run that make a test passing in the "off" run a regression.
BAD_ON = ("failed", "error", "missing")
# Seconds a run gets to write its junit file after SIGINT at the timeout.
GRACE_S = 30.0
CHECK_CODE = (
    "import torch, cpytree; "
    "print(torch.__version__, getattr(cpytree, '__version__', '?'), cpytree.is_installed())"
)


@dataclasses.dataclass
class Case:
    """One test's outcome in one run: first line of the message, tail of the traceback."""

    outcome: str
    message: str = ""
    detail: str = ""


@dataclasses.dataclass
class Run:
    """One pytest process over one file in one mode."""

    mode: str
    returncode: int | None  # None: killed at the timeout
    seconds: float
    junit: Path
    log: Path
    cases: dict[str, Case]

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(OUTCOMES, 0)
        for case in self.cases.values():
            c[case.outcome] += 1
        return c

    def status(self) -> str:
        if self.returncode is None:
            return "TIMEOUT"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exit {self.returncode}"

    def complete(self) -> bool:
        """True if pytest finished on its own (a crash or a timeout leaves tests missing)."""
        return self.returncode is not None and self.returncode in (0, 1, 5)


@dataclasses.dataclass
class Diff:
    test: str
    off: Case
    on: Case

    def regression(self) -> bool:
        return self.off.outcome == "passed" and self.on.outcome in BAD_ON


def mode_env(mode: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTORCH_TEST_WITH_SLOW"] = "0"
    env.update(extra or {})
    env.pop("CPYTREE_INSTALL", None)
    if mode == "off":
        env["CPYTREE_INSTALL"] = "0"
    return env


def tree_root(path: Path) -> Path:
    """The nearest ancestor named `test` (torch's layout), else the file's own folder."""
    for parent in path.parents:
        if parent.name == "test":
            return parent
    return path.parent


def run_name(path: Path) -> str:
    rel = path.relative_to(tree_root(path).parent)
    return ".".join(rel.with_suffix("").parts)


def check_install(python: str, cwd: Path, extra: dict[str, str]) -> dict[str, str]:
    """What `cpytree.is_installed()` says in each mode's environment (the last stdout line)."""
    said = {}
    for mode in MODES:
        p = subprocess.run(
            [python, "-c", CHECK_CODE],
            cwd=cwd,
            env=mode_env(mode, extra),
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = p.stdout.strip().splitlines()
        said[mode] = lines[-1] if p.returncode == 0 and lines else f"error: {p.stderr[-300:]}"
    return said


def run_pytest(
    python: str,
    path: Path,
    mode: str,
    expr: str | None,
    timeout: float,
    out: Path,
    extra: dict[str, str],
) -> Run:
    cwd = tree_root(path).parent
    name = run_name(path)
    junit = out / f"{name}.{mode}.xml"
    log = out / f"{name}.{mode}.log"
    junit.unlink(missing_ok=True)
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(path.relative_to(cwd))]
    if expr:
        cmd += ["-k", expr]
    cmd.append(f"--junitxml={junit}")
    start = time.monotonic()
    with log.open("w") as f, tempfile.TemporaryDirectory(prefix="torch-suite-ab-") as cache:
        env = mode_env(mode, extra)
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
        f.write(f"# cwd={cwd} mode={mode}\n# {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        returncode: int | None
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGINT first: pytest then still writes the junit file of what ran.
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            returncode = None
    seconds = time.monotonic() - start
    return Run(mode, returncode, seconds, junit, log, parse_junit(junit))


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def parse_junit(path: Path) -> dict[str, Case]:
    """Test id (classname::name) -> outcome; a test reported twice keeps its worst outcome."""
    if not path.exists():
        return {}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return {}
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    cases: dict[str, Case] = {}
    for tc in root.iter("testcase"):
        test = f"{tc.get('classname', '')}::{tc.get('name', '')}"
        case = Case("passed")
        for tag in ("error", "failure", "skipped"):
            el = tc.find(tag)
            if el is not None:
                outcome = "failed" if tag == "failure" else tag
                text = el.text or ""
                case = Case(outcome, _first_line(el.get("message", "") or text), _tail(text))
                break
        old = cases.get(test)
        if old is None or rank[case.outcome] > rank[old.outcome]:
            cases[test] = case
    return cases


def diff(off: Run, on: Run) -> list[Diff]:
    out = []
    for test in sorted(set(off.cases) | set(on.cases)):
        a = off.cases.get(test, Case("missing"))
        b = on.cases.get(test, Case("missing"))
        if a.outcome == b.outcome:
            continue
        # A test absent from an incomplete "off" run says nothing about cpytree.
        if a.outcome == "missing" and not off.complete():
            continue
        out.append(Diff(test, a, b))
    return out


def report(path: Path, runs: dict[str, Run], diffs: list[Diff], md: list[str]) -> None:
    print(f"\n== {path}")
    md.append(f"## `{path}`\n")
    md.append("| mode | passed | failed | error | skipped | pytest | seconds |")
    md.append("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for mode in MODES:
        r = runs[mode]
        c = r.counts()
        counts = " ".join(f"{k}={c[k]}" for k in OUTCOMES)
        print(f"  {mode:3}  {counts}  ({r.status()}, {r.seconds:.0f} s)")
        cells = " | ".join(str(c[k]) for k in OUTCOMES)
        md.append(f"| {mode} | {cells} | {r.status()} | {r.seconds:.0f} |")
    md.append("")
    if not diffs:
        print("  no test differs")
        md.append("No test differs.\n")
        return
    print(f"  {len(diffs)} differ (off -> on):")
    md.append(f"{len(diffs)} differ (off -> on):\n")
    for d in diffs:
        flag = "REGRESSION " if d.regression() else ""
        why = d.on.message if d.on.outcome != "passed" else d.off.message
        print(f"  {flag}{d.test}: {d.off.outcome} -> {d.on.outcome}  {why}")
        md.append(f"- {flag}`{d.test}`: {d.off.outcome} -> {d.on.outcome}: {why}")
        if d.regression() and d.on.detail:
            md.append("\n  ```\n" + "\n".join("  " + x for x in d.on.detail.splitlines()))
            md.append("  ```")
    md.append("")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--python", required=True, help="python of a venv with torch, pytest, cpytree")
    ap.add_argument("files", nargs="+", type=Path, help="torch test files (inside a test/ tree)")
    ap.add_argument("-k", dest="expr", default=None, help="pytest -k expression for every file")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run")
    ap.add_argument("--out", type=Path, default=Path("torch-suite-ab"), help="output folder")
    ap.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra env, both modes"
    )
    args = ap.parse_args(argv)
    extra = {}
    for kv in args.env:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            ap.error(f"--env wants KEY=VALUE, got {kv!r}")
        extra[key] = value

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = [f.resolve() for f in args.files]
    for f in files:
        if not f.is_file():
            ap.error(f"no such file: {f}")

    said = check_install(args.python, tree_root(files[0]).parent, extra)
    md = [
        "# torch's test files, cpytree off and on\n",
        f"- python: `{args.python}`",
        f"- -k: `{args.expr}`" if args.expr else "- -k: (none)",
        f"- timeout per run: {args.timeout:.0f} s",
        f"- extra env: `{' '.join(args.env)}`" if args.env else "- extra env: (none)",
    ]
    md += [f"- {m}: `torch cpytree is_installed()` -> `{said[m]}`" for m in MODES]
    md.append("")
    for m in MODES:
        print(f"{m}: torch, cpytree version, is_installed() = {said[m]}")
    if not (said["on"].endswith(" True") and said["off"].endswith(" False")):
        msg = "install check failed: 'on' must be installed and 'off' must not"
        print(msg, file=sys.stderr)
        md.append(f"**{msg}**\n")
        (out / "summary.md").write_text("\n".join(md) + "\n")
        return 2

    regressions = 0
    for f in files:
        runs = {
            m: run_pytest(args.python, f, m, args.expr, args.timeout, out, extra) for m in MODES
        }
        diffs = diff(runs["off"], runs["on"])
        regressions += sum(d.regression() for d in diffs)
        report(f, runs, diffs, md)
    verdict = f"{regressions} regression(s): passed with cpytree off, failed/errored with it on"
    print(f"\n{verdict}")
    md.append(f"**{verdict}**")
    (out / "summary.md").write_text("\n".join(md) + "\n")
    print(f"summary: {out / 'summary.md'}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
