"""Probe scheduling benchmark: many TCP probes at a 1 s period on one event loop.

Runs ``--probes`` pods (default 1000), each with one container whose liveness
probe is a TCP connect to a loopback server, under ``ReferenceProbeManager`` on the
real clock, for ``--duration`` seconds (default 10). The server runs in a child
process so that only the prober's work is measured.

Reported:

* scheduling drift: for every probe after a worker's first, how late it started
  compared with the worker's ideal grid (first probe + k * period), p50 and p99
  in milliseconds (target: p99 under 50 ms);
* CPU used by this process over the run, in percent of one core.

After setup the script calls ``gc.freeze()`` as a long-running agent would
(``--no-gc-freeze`` to measure without it): otherwise one full collection walking
every module and pod can pause the loop for 100+ ms on a small machine.

Usage::

    python benchmarks/prober.py [--probes 1000] [--period 1] [--duration 10] [--json]

``--json`` prints one JSON object: ``drift_p50_ms``, ``drift_p99_ms``, ``cpu_pct``
(plus the run's parameters and probe counts).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec, Probe, TCPSocketAction
from kubelet_kit.clock import RealClock
from kubelet_kit.prober import ProbeKind, ProbeOutcome, Prober, ProbeStatus, ReferenceProbeManager
from kubelet_kit.testing import FakeRuntime

# A listener that accepts and closes connections, in its own process; a plain
# blocking accept loop, so that it keeps up with the probes.
SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(4096)
print(s.getsockname()[1], flush=True)
while True:
    conn, _ = s.accept()
    conn.close()
"""


class TimingProber(Prober):
    """A Prober that records when each probe of each container began."""

    def __init__(self, clock: RealClock) -> None:
        super().__init__(FakeRuntime(), clock)
        self.starts: dict[str, list[float]] = defaultdict(list)
        self.failures = 0
        self.failure_messages: dict[str, int] = defaultdict(int)

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        probe: Probe,
        *,
        pod_ip: str,
        container_id: str,
    ) -> ProbeOutcome:
        self.starts[pod.uid].append(time.monotonic())
        outcome = await super().probe(
            kind, pod, container, probe, pod_ip=pod_ip, container_id=container_id
        )
        if outcome.status is not ProbeStatus.SUCCESS:
            self.failures += 1
            # Keep the message without the address, to group them.
            self.failure_messages[outcome.output.split(": ", 1)[-1]] += 1
        return outcome


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def run(
    probes: int, period: float, duration: float, *, gc_freeze: bool = True
) -> dict[str, Any]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        clock = RealClock()
        prober = TimingProber(clock)
        manager = ReferenceProbeManager(prober.runtime, clock, prober=prober)
        probe = Probe(
            tcp_socket=TCPSocketAction(port=port), period_seconds=int(period), timeout_seconds=1
        )
        pods = [
            Pod(
                metadata=ObjectMeta(name=f"bench-{i}", namespace="bench", uid=f"uid-{i}"),
                spec=PodSpec(containers=(Container(name="app", liveness_probe=probe),)),
            )
            for i in range(probes)
        ]
        # Workers are registered now and start with the manager.
        for pod in pods:
            manager.set_pod_ip(pod.uid, "127.0.0.1")
            manager.update_container(pod.uid, "app", f"bench://{pod.uid}", running=True)
            manager.add_pod(pod)
        if gc_freeze:
            # What a long-running agent does once it has started: move everything
            # allocated so far out of the collector's sight, so that a full
            # collection does not walk every module and pod (a pause of 100+ ms
            # on a small machine, which would dominate p99).
            gc.collect()
            gc.freeze()
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.monotonic()
        async with manager:
            await asyncio.sleep(duration)
        wall = time.monotonic() - wall0
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        server.kill()
        server.wait()
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    drifts: list[float] = []
    for starts in prober.starts.values():
        # Each worker keeps to the grid of its first probe; a run is compared with
        # the nearest grid point (a tick skipped because a probe ran long then
        # does not count as a whole period of drift for every later run).
        first = starts[0]
        for t in starts[1:]:
            k = round((t - first) / period)
            drifts.append((t - (first + k * period)) * 1000.0)
    runs = sum(len(s) for s in prober.starts.values())
    return {
        "drift_p50_ms": round(statistics.median(drifts), 3) if drifts else float("nan"),
        "drift_p99_ms": round(percentile(drifts, 0.99), 3),
        "cpu_pct": round(100.0 * cpu / wall, 1),
        "probes": probes,
        "period_s": period,
        "duration_s": round(wall, 2),
        "probe_runs": runs,
        "failed_runs": prober.failures,
        "gc_freeze": gc_freeze,
        "failures": dict(prober.failure_messages),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-gc-freeze", action="store_true", help="leave the setup's objects to the collector"
    )
    args = parser.parse_args()
    result = asyncio.run(
        run(args.probes, args.period, args.duration, gc_freeze=not args.no_gc_freeze)
    )
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['probes']} TCP probes every {result['period_s']:g}s for "
        f"{result['duration_s']:g}s: {result['probe_runs']} runs, "
        f"{result['failed_runs']} failed"
    )
    print(
        f"scheduling drift p50 {result['drift_p50_ms']:.2f} ms, "
        f"p99 {result['drift_p99_ms']:.2f} ms (target p99 < 50 ms)"
    )
    print(f"CPU {result['cpu_pct']:.1f}% of one core")


if __name__ == "__main__":
    main()
