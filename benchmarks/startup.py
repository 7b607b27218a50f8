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

Then a large manifest directory (``--manifest-mb``, default 10 MB in 1 MB files of
pods shaped like ``examples/pods/web.yaml``; 0 skips it): ``kubelet-kit validate
DIR`` once, its wall time, CPU time, MB/s and peak RSS; and the YAML parse alone
(``parse_documents`` over the first 1 MB file) with libyaml's C loader, which
manifests are read with when PyYAML has it, and with the pure-Python fallback,
in MB/s of CPU time, and their ratio.

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
baseline median), ``target_ms`` and ``met``; and ``manifests`` (absent with
``--manifest-mb 0``): ``mb``, ``pods``, ``validate_wall_s``, ``validate_cpu_s``,
``validate_mb_per_s`` (of wall time), ``validate_peak_rss_mb``, ``parse_c_mb_per_s``
(None without the C loader), ``parse_pure_mb_per_s`` and ``parse_ratio`` (C over
pure).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: The children's environment: this one without PYTHONDONTWRITEBYTECODE, so that the
#: warm-up run writes the bytecode caches and the timed runs read them, as after a
#: ``pip install`` (which compiles them); with it set, every run would compile every
#: module from source and time the compiler instead.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli_command() -> tuple[list[str], str]:
    """The argv prefix that runs the CLI, and a note saying where it came from."""
    found = shutil.which("kubelet-kit")
    if found:
        return [found], f"kubelet-kit on PATH ({found})"
    beside = Path(sys.executable).parent / "kubelet-kit"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)], f"console script beside the interpreter ({beside})"
    return (
        [sys.executable, "-m", "kubelet_kit.cli"],
        "python -m kubelet_kit.cli (no console script)",
    )


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
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            env=CHILD_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        elapsed = (time.perf_counter() - start) * 1000.0
        if proc.returncode != 0:
            raise SystemExit(
                f"{' '.join(argv)} exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace').strip()}"
            )
        times.append(elapsed)
    return times


def summary(times: list[float]) -> dict[str, float]:
    """Min, median and max of ``times``, rounded to 0.1 ms."""
    return {
        "min_ms": round(min(times), 1),
        "median_ms": round(statistics.median(times), 1),
        "max_ms": round(max(times), 1),
    }


def measure(runs: int) -> dict[str, Any]:
    """Run the baseline and every command ``runs`` times and gather the figures."""
    cli, cli_note = cli_command()
    # One untimed run of each first, so the page cache and the bytecode caches are
    # warm for all of them alike and the first timed run is not an outlier.
    table = commands(cli)
    subprocess.run([sys.executable, "-c", "pass"], cwd=ROOT, env=CHILD_ENV, check=False)
    for argv, _ in table.values():
        subprocess.run(
            argv,
            cwd=ROOT,
            env=CHILD_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    baseline = summary(time_runs([sys.executable, "-c", "pass"], runs))
    result: dict[str, Any] = {
        "runs": runs,
        "cli": cli_note,
        "python": sys.executable,
        "baseline": baseline,
        "commands": {},
    }
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


#: One pod of the large manifest directory: the shape of examples/pods/web.yaml,
#: a name per pod so that every pod is distinct.
_POD = """apiVersion: v1
kind: Pod
metadata:
  name: web-{i}
  labels: {{app: web, index: "{i}"}}
spec:
  containers:
  - name: web
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "sleep 3600"]
    env:
    - {{name: MODE, value: serve}}
    ports:
    - {{containerPort: 8080, name: http}}
    resources:
      requests: {{cpu: 100m, memory: 64Mi}}
      limits: {{cpu: 200m, memory: 128Mi}}
    readinessProbe:
      httpGet: {{path: /healthz, port: 8080}}
      periodSeconds: 5
"""

#: Parses one file's text with one loader in a fresh process and prints the CPU
#: seconds it took ("pure" forces the fallback loader).
_PARSE = """
import sys, time
from kubelet_kit.api import loading
if sys.argv[2] == "pure":
    loading._yaml_loader = lambda: loading._ManifestLoader
elif loading._c_loader() is None:
    print("none"); raise SystemExit
text = open(sys.argv[1], encoding="utf-8").read()
start = time.process_time()
loading.parse_documents(text)
print(time.process_time() - start)
"""


def write_manifests(directory: Path, megabytes: int) -> int:
    """Fill ``directory`` with ``megabytes`` files of about 1 MB of pods; the count."""
    count = 0
    for f in range(megabytes):
        docs: list[str] = []
        size = 0
        while size < 1_000_000:
            docs.append(_POD.format(i=count))
            size += len(docs[-1]) + 4
            count += 1
        (directory / f"pods-{f:03d}.yaml").write_text("---\n".join(docs))
    return count


def measure_manifests(cli: list[str], megabytes: int) -> dict[str, Any]:
    """The large-directory figures (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        pods = write_manifests(directory, megabytes)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            [*cli, "validate", str(directory)],
            cwd=ROOT,
            env=CHILD_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(
                f"validate of the manifest directory exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace').strip()[:500]}"
            )
        first = str(directory / "pods-000.yaml")
        size_mb = (directory / "pods-000.yaml").stat().st_size / 1e6
        rates: dict[str, float | None] = {}
        for loader in ("c", "pure"):
            out = subprocess.run(
                [sys.executable, "-c", _PARSE, first, loader],
                cwd=ROOT,
                env=CHILD_ENV,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            rates[loader] = None if out == "none" else round(size_mb / float(out), 2)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    c_rate, pure_rate = rates["c"], rates["pure"]
    return {
        "mb": megabytes,
        "pods": pods,
        "validate_wall_s": round(wall, 2),
        "validate_cpu_s": round(cpu, 2),
        "validate_mb_per_s": round(megabytes / wall, 2),
        # ru_maxrss of children is the largest child so far: the parse runs come after
        "validate_peak_rss_mb": round(after.ru_maxrss / 1024, 1),
        "parse_c_mb_per_s": c_rate,
        "parse_pure_mb_per_s": pure_rate,
        "parse_ratio": round(c_rate / pure_rate, 1) if c_rate and pure_rate else None,
    }


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
    lines.append(
        f"{'python -c pass':<24} {b['min_ms']:>8.1f} {b['median_ms']:>8.1f} "
        f"{b['max_ms']:>8.1f} {'1.00':>6} {'':>8}"
    )
    for key, c in result["commands"].items():
        lines.append(
            f"{key:<24} {c['min_ms']:>8.1f} {c['median_ms']:>8.1f} {c['max_ms']:>8.1f} "
            f"{c['ratio']:>6.2f} {c['target_ms']:>8.0f}  {'yes' if c['met'] else 'NO'}"
        )
    lines.append("")
    lines.append("times in ms, wall clock from spawn to exit; ratio = median / baseline median")
    m = result.get("manifests")
    if m:
        c_rate = m["parse_c_mb_per_s"]
        lines += [
            "",
            f"manifest directory: {m['mb']} MB, {m['pods']} pods",
            f"  kubelet-kit validate DIR: {m['validate_wall_s']} s wall, "
            f"{m['validate_cpu_s']} s CPU, {m['validate_mb_per_s']} MB/s, "
            f"peak RSS {m['validate_peak_rss_mb']} MB",
            f"  YAML parse of 1 MB: C loader {c_rate if c_rate else 'absent'} MB/s, "
            f"pure Python {m['parse_pure_mb_per_s']} MB/s"
            + (f", ratio {m['parse_ratio']}" if m["parse_ratio"] else ""),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, measure, and print the report or the JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--manifest-mb",
        type=int,
        default=10,
        help="size of the large manifest directory in MB (0 skips it)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.manifest_mb < 0:
        parser.error("--manifest-mb must not be negative")
    result = measure(args.runs)
    if args.manifest_mb:
        result["manifests"] = measure_manifests(cli_command()[0], args.manifest_mb)
    if args.json:
        print(json.dumps(result))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
