"""Composer benchmark: pods through the real Kubelet on a zero-latency FakeRuntime.

What is measured (real clock throughout: this is the agent's own speed):

* ``pods_per_s_running``: once the agent runs (``Kubelet.wait_started``; its
  garbage collector prepared as ``kubelet-kit run`` prepares it:
  ``kubelet_kit.runner.prepare_gc``),
  1,000 pods of 2 containers each are added to a ProgrammaticSource in one
  burst; pods divided by the wall time from the first add to the last pod whose
  published status is ``Running``.
* ``pod_p50_ms`` / ``pod_p99_ms``: per pod, wall time from its add to its first
  published ``Running`` status (read from a status subscription, as an
  embedding agent reporting upstream would).
* ``pleg_discard_events``: events the PLEG dropped because its channel (the
  kubelet's 1,000 events) was full, from the start burst to the end of the
  deletion burst (the PLEG's ``kubelet_pleg_discard_events`` counter). Dropped
  events are sent again by a later relist, but every drop is a pod whose
  change waited for it: the target is none.
* ``pods_per_s_deleted``: 3 s later (time for the PLEG's events about the new
  containers, and the syncs they bring, to pass on a fast runtime), the same
  pods are deleted gracefully in one burst (deletion timestamp set, as an API
  server's delete); pods divided by
  the wall time from the first delete to the last pod whose containers are
  stopped (its worker reached TERMINATED). The deletion percentiles are printed
  in the human-readable report, with the process CPU seconds of each burst
  (on a loaded machine, CPU seconds are steadier than wall time).
* ``peak_rss_mb``: the process's peak resident set size after the run
  (``resource.getrusage``), interpreter and imports included.
* ``idle_cpu_pct_100_pods``: a fresh agent runs 100 pods; once they are all
  Running and the start-up work has settled, the process's CPU seconds (user +
  system) over an idle window (20 s by default), divided by the window's wall
  time, in percent of one core. PLEG relists, housekeeping and timers are what
  remains; the periodic resync (syncFrequency, 60 s) falls outside a 20 s window.

Targets: at least 2,000 pods/s to Running with a p99 start latency under 1 s
and no PLEG channel overflow (no discarded event); at least 500 pods/s to
deletion; peak RSS under 150 MB; idle CPU under 2 % of a core.

The agent's state and pod log directories go to a temporary directory under
``/dev/shm`` when it exists (``--root`` to choose another place).

Usage: ``python benchmarks/composer.py [--json] [--quick] [--pods N] [--idle-seconds S]
[--root DIR]``.
With ``--json`` only one JSON object is printed, with the seven keys named above.
The machine's load average is printed with the human-readable report: on a
shared machine, other work inflates wall-clock figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubelet_kit import Kubelet
from kubelet_kit.api import Pod, load_pod
from kubelet_kit.clock import RealClock
from kubelet_kit.cm import StubContainerManager
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.runner import prepare_gc
from kubelet_kit.testing import FakeRuntime
from kubelet_kit.testing.env import stub_parts

TARGET_PODS_PER_S = 2000.0
TARGET_P99_MS = 1000.0
TARGET_DISCARDS = 0
TARGET_DELETED_PER_S = 500.0
TARGET_RSS_MB = 150.0
TARGET_IDLE_CPU_PCT = 2.0
SETTLE_S = 3.0  # seconds between the start burst and the deletion burst
IMAGES = ("registry.example/app:1.0", "registry.example/helper:1.0")


def make_pods(n: int, prefix: str) -> list[Pod]:
    """``n`` pods of two long-running containers each, parsed before timing starts."""
    pods = []
    for i in range(n):
        name = f"{prefix}-{i:05d}"
        pods.append(
            load_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
                    "spec": {
                        "terminationGracePeriodSeconds": 30,
                        "containers": [
                            {"name": "app", "image": IMAGES[0], "command": ["sleep", "infinity"]},
                            {
                                "name": "helper",
                                "image": IMAGES[1],
                                "command": ["sleep", "infinity"],
                            },
                        ],
                    },
                },
                source="benchmark",
            )
        )
    return pods


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[index]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Agent:
    """A Kubelet on a FakeRuntime and the real clock, in a temporary root."""

    def __init__(self, root: Path, max_pods: int) -> None:
        self.clock = RealClock()
        # The fake's call log is bounded, as an agent serving a fake runtime keeps
        # it (``cri-server --runtime fake``): kept whole, each burst's calls and
        # the configs they hold would stay alive for the garbage collector to walk.
        self.runtime = FakeRuntime(self.clock, call_history=1000)
        for image in IMAGES:
            self.runtime.add_image(image, present=True)
        self.source = ProgrammaticSource(clock=self.clock)
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.runtime,
                clock=self.clock,
                sources=[self.source],
                node_name="bench-node",
                root_dir=root,
                pod_logs_dir=root / "logs",
                # The kubelet's default maxPods (110) would refuse most of the burst.
                container_manager=StubContainerManager(max_pods=max_pods),
            )
        )
        self._task: asyncio.Task[None] | None = None

    def pleg_discards(self) -> int:
        """Events the PLEG has dropped so far (``kubelet_pleg_discard_events``);
        0 for a PLEG that exposes no such counter."""
        metrics = getattr(self.kubelet.pleg, "metrics", None)
        counter = getattr(metrics, "discard_events", None)
        return int(getattr(counter, "value", 0))

    async def __aenter__(self) -> Agent:
        self._task = asyncio.create_task(self.kubelet.run(), name="kubelet")
        # The agent's own start (the node's address, the loops) is not the pods'.
        await asyncio.wait_for(self.kubelet.wait_started(), 60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kubelet.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=60)

    async def run_pods(self, pods: list[Pod], timeout: float) -> dict[str, float]:
        """Add ``pods`` in one burst; per uid, seconds from its add to Running."""
        wanted = {p.metadata.uid for p in pods}
        added: dict[str, float] = {}
        running: dict[str, float] = {}
        done = asyncio.Event()
        subscription = self.kubelet.status_manager.subscribe(replay=False)

        async def watch() -> None:
            async for pod, status in subscription:
                uid = pod.metadata.uid
                if status.phase == "Running" and uid in wanted and uid not in running:
                    running[uid] = time.perf_counter()
                    if len(running) == len(wanted):
                        done.set()
                        return

        watcher = asyncio.create_task(watch())
        for pod in pods:
            added[pod.metadata.uid] = time.perf_counter()
            self.source.add(pod)
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except TimeoutError:
            raise SystemExit(
                f"only {len(running)} of {len(pods)} pods Running after {timeout:g}s"
            ) from None
        finally:
            subscription.close()
            watcher.cancel()
        return {uid: running[uid] - added[uid] for uid in wanted} | {
            "_first": min(added.values()),
            "_last": max(running.values()),
        }

    async def delete_pods(self, pods: list[Pod], timeout: float) -> dict[str, float]:
        """Delete ``pods`` gracefully in one burst; per uid, seconds from its delete
        to its containers being stopped."""
        workers = self.kubelet.workers
        deleted: dict[str, float] = {}
        stopped: dict[str, float] = {}

        async def wait_stopped(uid: str) -> None:
            await workers.wait_terminated(uid)
            stopped[uid] = time.perf_counter()

        for pod in pods:
            uid = pod.metadata.uid
            deleted[uid] = time.perf_counter()
            self.source.delete(uid)
        waiters = [asyncio.create_task(wait_stopped(p.metadata.uid)) for p in pods]
        try:
            await asyncio.wait_for(asyncio.gather(*waiters), timeout)
        except TimeoutError:
            raise SystemExit(
                f"only {len(stopped)} of {len(pods)} pods stopped after {timeout:g}s"
            ) from None
        return {uid: stopped[uid] - deleted[uid] for uid in deleted} | {
            "_first": min(deleted.values()),
            "_last": max(stopped.values()),
        }


def _rate(times: dict[str, float]) -> tuple[float, list[float]]:
    first, last = times.pop("_first"), times.pop("_last")
    return len(times) / (last - first), list(times.values())


async def throughput(n: int, root: Path) -> dict[str, Any]:
    """Start ``n`` pods, then delete them; rates and per-pod latencies."""
    async with Agent(root / "burst", max_pods=n) as agent:
        # As ``kubelet-kit run`` does once the agent is built; the pods come after.
        prepare_gc()
        pods = make_pods(n, "burst")
        cpu0 = cpu_seconds()
        discards0 = agent.pleg_discards()
        rate_up, lat_up = _rate(await agent.run_pods(pods, timeout=max(120.0, n * 0.3)))
        cpu1 = cpu_seconds()
        # The PLEG's events for the new containers bring one more sync of each pod
        # within a relist period or two; let that pass so the deletion burst is
        # measured on a settled node, as deletions usually meet one.
        await asyncio.sleep(SETTLE_S)
        cpu_settled = cpu_seconds()
        rate_down, lat_down = _rate(await agent.delete_pods(pods, timeout=max(120.0, n * 0.3)))
        cpu2 = cpu_seconds()
        discards = agent.pleg_discards() - discards0
    return {
        "pods_per_s_running": rate_up,
        "pods_per_s_deleted": rate_down,
        "pod_p50_ms": percentile(lat_up, 0.50) * 1000,
        "pod_p99_ms": percentile(lat_up, 0.99) * 1000,
        "delete_p50_ms": percentile(lat_down, 0.50) * 1000,
        "delete_p99_ms": percentile(lat_down, 0.99) * 1000,
        "cpu_s_running": cpu1 - cpu0,
        "cpu_s_deleted": cpu2 - cpu_settled,
        "pleg_discard_events": discards,
    }


async def idle_cpu(n: int, seconds: float, root: Path) -> float:
    """Percent of one core used by an agent with ``n`` Running pods over ``seconds``."""
    pods = make_pods(n, "idle")
    async with Agent(root / "idle", max_pods=max(n, 110)) as agent:
        await agent.run_pods(pods, timeout=60.0)
        # Let the start-up work (the PLEG noticing the new containers, the first
        # housekeeping rounds) finish before the window opens.
        await asyncio.sleep(3.0)
        gc.collect()
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu1, wall1 = cpu_seconds(), time.perf_counter()
    return 100.0 * (cpu1 - cpu0) / (wall1 - wall0)


def default_root() -> str | None:
    """A RAM-backed directory for the agent's state and log directories when the
    machine has one (``/dev/shm``), else the system's temporary directory.

    The agent makes three log directories per pod (the pod's and one per
    container), as the kubelet does; on a journalled disk each ``mkdir`` can take
    a millisecond, which would measure the disk rather than the agent.
    """
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


async def main_async(
    pods: int, idle_pods: int, idle_seconds: float, root: str | None = None
) -> dict[str, Any]:
    """Run every measurement and return the figures."""
    with tempfile.TemporaryDirectory(prefix="kubelet-kit-bench-", dir=root) as tmp:
        base = Path(tmp)
        results = await throughput(pods, base)
        gc.collect()
        results["idle_cpu_pct_100_pods"] = await idle_cpu(idle_pods, idle_seconds, base)
    # ru_maxrss is in KiB on Linux.
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return results


JSON_KEYS = (
    "pods_per_s_running",
    "pods_per_s_deleted",
    "pod_p50_ms",
    "pod_p99_ms",
    "pleg_discard_events",
    "peak_rss_mb",
    "idle_cpu_pct_100_pods",
)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the benchmark, print the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="200 pods and a 5 s idle window (a smoke run; targets still shown)",
    )
    parser.add_argument("--pods", type=int, default=None, help="pods in the burst (1000)")
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="length of the idle CPU window (20)"
    )
    parser.add_argument(
        "--root",
        default=None,
        help="where the agent's temporary state and logs go "
        "(default /dev/shm when writable, else the temp dir)",
    )
    args = parser.parse_args(argv)
    pods = args.pods or (200 if args.quick else 1000)
    idle_seconds = args.idle_seconds or (5.0 if args.quick else 20.0)
    # Library logging at INFO is what an agent would normally run with, but
    # printing 4,000 lines would measure the terminal: keep warnings only.
    logging.basicConfig(level=logging.WARNING)
    root = args.root or default_root()
    results = asyncio.run(main_async(pods, 100, idle_seconds, root))

    if args.json:
        print(json.dumps({key: round(results[key], 3) for key in JSON_KEYS}))
        return 0

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    load = os.getloadavg()
    print(
        f"Composer benchmark: {pods} pods x 2 containers, FakeRuntime (no latency), "
        f"real clock; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"on {os.cpu_count()} CPUs; state under {root or tempfile.gettempdir()}"
    )
    up, down = results["pods_per_s_running"], results["pods_per_s_deleted"]
    p99, discards = results["pod_p99_ms"], results["pleg_discard_events"]
    print(
        f"  to Running:    {up:8.1f} pods/s  (target >= {TARGET_PODS_PER_S:,g}: "
        f"{verdict(up >= TARGET_PODS_PER_S)})"
    )
    print(
        f"    per pod:     p50 {results['pod_p50_ms']:8.1f} ms   "
        f"p99 {p99:8.1f} ms   (target p99 < {TARGET_P99_MS:,g}: "
        f"{verdict(p99 < TARGET_P99_MS)})"
    )
    print(f"    process CPU: {results['cpu_s_running']:8.2f} s")
    print(
        f"  PLEG overflow: {discards:8d} events discarded (target {TARGET_DISCARDS}: "
        f"{verdict(discards <= TARGET_DISCARDS)})"
    )
    print(
        f"  to deleted:    {down:8.1f} pods/s  (target >= {TARGET_DELETED_PER_S:g}: "
        f"{verdict(down >= TARGET_DELETED_PER_S)})"
    )
    print(
        f"    per pod:     p50 {results['delete_p50_ms']:8.1f} ms   "
        f"p99 {results['delete_p99_ms']:8.1f} ms   "
        f"(process CPU {results['cpu_s_deleted']:.2f} s)"
    )
    rss = results["peak_rss_mb"]
    print(
        f"  peak RSS:      {rss:8.1f} MB      (target < {TARGET_RSS_MB:g}: "
        f"{verdict(rss < TARGET_RSS_MB)})"
    )
    idle = results["idle_cpu_pct_100_pods"]
    print(
        f"  idle CPU:      {idle:8.2f} % of a core with 100 Running pods over "
        f"{idle_seconds:g} s (target < {TARGET_IDLE_CPU_PCT:g}: "
        f"{verdict(idle < TARGET_IDLE_CPU_PCT)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
