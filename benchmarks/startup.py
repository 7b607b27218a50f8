#!/usr/bin/env python3
"""Start-up cost: how long a fresh process takes to import kubelet-kit or run its CLI.

Each command runs ``--runs`` times (default 10) as a new process, one after the
other, and its wall time is taken from spawn to exit. Reported per command: min,
median and max in ms, the ratio of the median to the ``python -c pass`` baseline
(the interpreter's own start-up, measured the same way in the same run), and
whether the median meets its target:

* ``import kubelet_kit``: <= 120 ms
* ``import kubelet_kit.pleg``: <= 150 ms
* ``import kubelet_kit.kubelet`` and ``import kubelet_kit.agent`` (the composer
  and its wiring root): <= 350 ms
* ``kubelet-kit --version``: <= 150 ms
* ``kubelet-kit validate examples/pods``: <= 350 ms

The interpreter is ``sys.executable``. The CLI is the ``kubelet-kit`` console
script found on PATH or beside the interpreter; without one it is run as
``python -m kubelet_kit.cli`` (the report says which). Commands run from the
repository root so the checkout is what is imported.

Usage::

    python benchmarks/startup.py [--runs 10] [--json]

``--json`` prints one JSON object: ``runs``, ``cli`` (the CLI command used),
``baseline`` (``min_ms``, ``median_ms``, ``max_ms``) and ``commands``, a mapping
from each command's key (``import_kubelet_kit``, ``import_pleg``,
``import_kubelet``, ``import_agent``, ``cli_version``, ``cli_validate``) to its
``argv``, ``min_ms``, ``median_ms``, ``max_ms``, ``ratio`` (median over the
baseline median), ``target_ms`` and ``met``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cli_command() -> tuple[list[str], str]:
    """The argv prefix that runs the CLI, and a note saying where it came from."""
    found = shutil.which("kubelet-kit")
    if found:
        return [found], f"kubelet-kit on PATH ({found})"
    beside = Path(sys.executable).parent / "kubelet-kit"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)], f"console script beside the interpreter ({beside})"
    return ([sys.executable, "-m", "kubelet_kit.cli"],
            "python -m kubelet_kit.cli (no console script)")


def commands(cli: list[str]) -> dict[str, tuple[list[str], float]]:
    """Each measured command by key: its argv and its target median in ms."""
    py = sys.executable
    return {
        "import_kubelet_kit": ([py, "-c", "import kubelet_kit"], 120.0),
        "import_pleg": ([py, "-c", "import kubelet_kit.pleg"], 150.0),
        "import_kubelet": ([py, "-c", "import kubelet_kit.kubelet"], 350.0),
        "import_agent": ([py, "-c", "import kubelet_kit.agent"], 350.0),
        "cli_version": ([*cli, "--version"], 150.0),
        "cli_validate": ([*cli, "validate", "examples/pods"], 350.0),
    }


def time_runs(argv: list[str], runs: int) -> list[float]:
    """Wall times in ms of ``runs`` fresh processes of ``argv``; a failing run is an error."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False)
        elapsed = (time.perf_counter() - start) * 1000.0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace').strip()}")
        times.append(elapsed)
    return times


def summary(times: list[float]) -> dict[str, float]:
    """Min, median and max of ``times``, rounded to 0.1 ms."""
    return {"min_ms": round(min(times), 1), "median_ms": round(statistics.median(times), 1),
            "max_ms": round(max(times), 1)}


def measure(runs: int) -> dict[str, Any]:
    """Run the baseline and every command ``runs`` times and gather the figures."""
    cli, cli_note = cli_command()
    # One untimed run of each first, so the page cache and the bytecode caches are
    # warm for all of them alike and the first timed run is not an outlier.
    table = commands(cli)
    subprocess.run([sys.executable, "-c", "pass"], cwd=ROOT, check=False)
    for argv, _ in table.values():
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    baseline = summary(time_runs([sys.executable, "-c", "pass"], runs))
    result: dict[str, Any] = {"runs": runs, "cli": cli_note, "python": sys.executable,
                              "baseline": baseline, "commands": {}}
    for key, (argv, target) in table.items():
        figures = summary(time_runs(argv, runs))
        result["commands"][key] = {
            "argv": argv,
            **figures,
            "ratio": round(figures["median_ms"] / baseline["median_ms"], 2),
            "target_ms": target,
            "met": figures["median_ms"] <= target,
        }
    return result


def report(result: dict[str, Any]) -> str:
    """The human-readable report of ``measure``'s figures."""
    lines = [
        f"python: {result['python']}",
        f"cli: {result['cli']}",
        f"runs: {result['runs']} fresh processes per command; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        f"{'command':<24} {'min':>8} {'median':>8} {'max':>8} {'ratio':>6} {'target':>8}  met",
    ]
    b = result["baseline"]
    lines.append(f"{'python -c pass':<24} {b['min_ms']:>8.1f} {b['median_ms']:>8.1f} "
                 f"{b['max_ms']:>8.1f} {'1.00':>6} {'':>8}")
    for key, c in result["commands"].items():
        lines.append(f"{key:<24} {c['min_ms']:>8.1f} {c['median_ms']:>8.1f} {c['max_ms']:>8.1f} "
                     f"{c['ratio']:>6.2f} {c['target_ms']:>8.0f}  {'yes' if c['met'] else 'NO'}")
    lines.append("")
    lines.append("times in ms, wall clock from spawn to exit; ratio = median / baseline median")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, measure, and print the report or the JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    result = measure(args.runs)
    if args.json:
        print(json.dumps(result))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
