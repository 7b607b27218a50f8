#!/usr/bin/env python3
"""The tail of a big container log, as ``/containerLogs?tailLines=10`` reads it.

Writes a CRI log of ``--size-mib`` MiB (default 64) of ~100-byte records to a
temporary directory, then takes its last 10 lines two ways:

* **tail**: :func:`kubelet_kit.server.logs.stream_log` with ``tail_lines=10``,
  which finds the tail by reading backwards from the end;
* **baseline**: reading the whole file and keeping its last 10 lines (what
  the log server did before), parsed the same way.

Reported for each: wall time (median of ``--repeat`` runs after a warm-up), the
peak of Python allocations during one run (``tracemalloc``, measured in a run of
its own so it does not slow the timed runs), and the bytes read from files
(``rchar`` of ``/proc/self/io``; absent off Linux); and the ratios tail over
baseline. The file is in the page cache after the first run, so the times are
those of a warm cache: a cold disk makes the baseline slower still.

Usage::

    python benchmarks/logs.py [--size-mib 64] [--repeat 5] [--json]

``--json`` prints one JSON object: ``tail_ms``, ``baseline_ms``, ``ratio_time``,
``tail_peak_kib``, ``baseline_peak_kib``, ``ratio_peak``, ``tail_read_kib``,
``baseline_read_kib`` (None without ``/proc/self/io``), ``size_mib``, ``repeat``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubelet_kit.container.logs import LogRecord, LogStream, parse_line  # noqa: E402
from kubelet_kit.server.logs import LogOptions, stream_log  # noqa: E402
from kubelet_kit.testing import FakeClock  # noqa: E402

TAIL = 10
T0 = 1_700_000_000 * 1_000_000_000


def write_log(path: Path, size: int) -> None:
    """A CRI log of ``size`` bytes or a little more, of stdout records of about 100."""
    batch = 10_000
    i = 0
    with open(path, "wb") as f:
        while f.tell() < size:
            f.write(
                b"".join(
                    LogRecord(
                        T0 + n, LogStream.STDOUT, False, b"line %09d " % n + b"x" * 45
                    ).encode()
                    for n in range(i, i + batch)
                )
            )
            i += batch


def tail(path: Path) -> bytes:
    """The last lines through the log server's reader."""

    async def running() -> bool:
        return False

    async def read() -> bytes:
        out = b""
        async for chunk in stream_log(
            path, LogOptions(tail_lines=TAIL), clock=FakeClock(), running=running
        ):
            out += chunk
        return out

    return asyncio.run(read())


def baseline(path: Path) -> bytes:
    """The last lines of the whole file read into memory."""
    with open(path, "rb") as f:
        lines = f.readlines()
    return b"".join(parse_line(raw).content for raw in lines[-TAIL:])


def bytes_read() -> int | None:
    """Bytes this process has read from files so far (None: not known here)."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def measure(fn: Callable[[], bytes], repeat: int) -> tuple[float, float, float | None]:
    """Median wall ms, peak traced KiB and KiB read, for one way of taking the tail."""
    fn()  # warm-up: page cache, imports, the thread pool
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    before = bytes_read()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    after = bytes_read()
    read = None if before is None or after is None else (after - before) / 1024
    return statistics.median(times), peak / 1024, read


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64, help="size of the log")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per figure (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "0.log"
        write_log(path, args.size_mib << 20)
        assert tail(path) == baseline(path)
        tail_ms, tail_peak, tail_read = measure(lambda: tail(path), args.repeat)
        base_ms, base_peak, base_read = measure(lambda: baseline(path), args.repeat)

    result = {
        "tail_ms": round(tail_ms, 3),
        "baseline_ms": round(base_ms, 3),
        "ratio_time": round(tail_ms / base_ms, 5),
        "tail_peak_kib": round(tail_peak, 1),
        "baseline_peak_kib": round(base_peak, 1),
        "ratio_peak": round(tail_peak / base_peak, 5),
        "tail_read_kib": None if tail_read is None else round(tail_read, 1),
        "baseline_read_kib": None if base_read is None else round(base_read, 1),
        "size_mib": args.size_mib,
        "repeat": args.repeat,
    }
    if args.json:
        print(json.dumps(result))
    else:

        def kib(value: float | None) -> str:
            return "n/a" if value is None else f"{value:,.0f} KiB"

        print(f"last {TAIL} lines of a {args.size_mib} MiB CRI log (median of {args.repeat})")
        print(
            f"  tail (stream_log):   {tail_ms:9.2f} ms  peak {tail_peak:>10,.0f} KiB  "
            f"read {kib(tail_read)}"
        )
        print(
            f"  baseline (whole):    {base_ms:9.2f} ms  peak {base_peak:>10,.0f} KiB  "
            f"read {kib(base_read)}"
        )
        print(
            f"  ratio tail/baseline: time {tail_ms / base_ms:.4f}, "
            f"peak memory {tail_peak / base_peak:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
