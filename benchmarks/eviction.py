#!/usr/bin/env python3
"""Eviction ranking and one full synchronize round, on generated pods.

Measures:

* ``rank_10000_ms``: ranking 10,000 pods for memory pressure (usage over
  requests, priority, usage minus requests) as the manager does every round, with
  its :class:`RequestCache` of the pods' requests warm (the same pod objects are
  ranked each round); the target is under 50 ms;
* ``rank_10000_cold_ms``: the same without a cache: every pod's request computed
  from its spec;
* ``rank_disk_10000_ms``: the same pods ranked for nodefs pressure (rootfs, logs
  and emptyDir usage);
* ``synchronize_1000_ms``: one :meth:`ThresholdEvictionManager.synchronize` round
  with 1,000 active pods under a hard ``memory.available`` threshold: stats from a
  FakeStatsProvider, observations, thresholds, conditions, ranking, the eviction
  message and the (no-op) kill.

Each figure is the median of ``--repeat`` runs after one warm-up run (the minimum
is printed too). Pods have 1 to 3 containers, a mix of BestEffort, Burstable and
Guaranteed resources, priorities in -10..10, and varied usage.

Usage::

    python benchmarks/eviction.py [--repeat 15] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubelet_kit.api import (  # noqa: E402
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Volume,
)
from kubelet_kit.eviction import (  # noqa: E402
    ContainerUsage,
    PodUsage,
    ThresholdEvictionManager,
    VolumeUsage,
    parse_threshold_config,
    rank_for_signal,
    rank_memory_pressure,
)
from kubelet_kit.eviction.ranking import RequestCache  # noqa: E402
from kubelet_kit.testing import FakeClock  # noqa: E402
from kubelet_kit.testing.fake_stats import FakeStatsProvider  # noqa: E402

MI = 1024 * 1024


def make_pods(n: int, seed: int = 1) -> tuple[list[Pod], dict[str, PodUsage]]:
    """``n`` varied pods and their usage, by uid."""
    rnd = random.Random(seed)
    pods, stats = [], {}
    for i in range(n):
        containers = []
        usage = []
        for j in range(rnd.randint(1, 3)):
            kind = rnd.choice(("best-effort", "burstable", "guaranteed"))
            mem = f"{rnd.choice((64, 128, 256, 512))}Mi"
            if kind == "best-effort":
                res = ResourceRequirements()
            elif kind == "burstable":
                res = ResourceRequirements(requests={"memory": Quantity.parse(mem)})
            else:
                q = Quantity.parse(mem)
                res = ResourceRequirements(
                    requests={"memory": q, "cpu": Quantity.parse("100m")},
                    limits={"memory": q, "cpu": Quantity.parse("100m")},
                )
            containers.append(Container(name=f"c{j}", image="busybox:1.36", resources=res))
            usage.append(
                ContainerUsage(
                    f"c{j}",
                    memory_working_set_bytes=rnd.randint(1, 600) * MI,
                    rootfs_used_bytes=rnd.randint(0, 100) * MI,
                    logs_used_bytes=rnd.randint(0, 50) * MI,
                )
            )
        uid = f"uid-{i}"
        pods.append(
            Pod(
                metadata=ObjectMeta(name=f"pod-{i}", uid=uid),
                spec=PodSpec(
                    priority=rnd.randint(-10, 10),
                    containers=tuple(containers),
                    volumes=(Volume(name="scratch", empty_dir=EmptyDirVolumeSource()),),
                ),
            )
        )
        if rnd.random() < 0.99:  # a few pods have no stats yet
            stats[uid] = PodUsage(
                uid,
                memory_working_set_bytes=sum(u.memory_working_set_bytes or 0 for u in usage),
                containers=tuple(usage),
                volumes={"scratch": VolumeUsage(rnd.randint(0, 200) * MI, rnd.randint(0, 999))},
            )
    return pods, stats


def measure(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, min) milliseconds of ``fn`` over ``repeat`` runs after a warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


async def synchronize_times(repeat: int) -> list[float]:
    pods, usage = make_pods(1000, seed=2)
    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    stats.pods.update(usage)
    stats.set_memory(available="100Mi", capacity="64Gi")
    manager = ThresholdEvictionManager(
        stats=stats,
        clock=clock,
        thresholds=parse_threshold_config(eviction_hard={"memory.available": "500Mi"}),
    )
    evicted: list[str] = []

    async def kill_pod(pod: Pod, grace: float, reason: str, message: str) -> None:
        evicted.append(pod.name)

    times = []
    for i in range(repeat + 1):
        clock.advance(10)  # fresh stats every round, as in the real loop
        start = time.perf_counter()
        await manager.synchronize(kill_pod, lambda: pods)
        if i:
            times.append((time.perf_counter() - start) * 1000)
    assert len(evicted) == repeat + 1, "every round evicts one pod"
    return times


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    pods, stats = make_pods(10_000)
    cold_med, cold_min = measure(lambda: rank_memory_pressure(pods, stats), args.repeat)
    cache = RequestCache()
    rank_med, rank_min = measure(
        lambda: rank_memory_pressure(pods, stats, cache=cache), args.repeat
    )
    disk_rank = rank_for_signal("nodefs.available", False)
    assert disk_rank is not None
    disk_med, disk_min = measure(lambda: disk_rank(pods, stats, cache=cache), args.repeat)
    sync = asyncio.run(synchronize_times(args.repeat))
    sync_med, sync_min = statistics.median(sync), min(sync)

    result = {
        "rank_10000_ms": round(rank_med, 3),
        "rank_10000_min_ms": round(rank_min, 3),
        "rank_10000_cold_ms": round(cold_med, 3),
        "rank_10000_cold_min_ms": round(cold_min, 3),
        "rank_disk_10000_ms": round(disk_med, 3),
        "rank_disk_10000_min_ms": round(disk_min, 3),
        "synchronize_1000_ms": round(sync_med, 3),
        "synchronize_1000_min_ms": round(sync_min, 3),
        "repeat": args.repeat,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"rank 10,000 pods (memory):  {rank_med:8.2f} ms median, {rank_min:8.2f} ms best "
            f"(target < 50 ms)"
        )
        print(f"  without a RequestCache:   {cold_med:8.2f} ms median, {cold_min:8.2f} ms best")
        print(f"rank 10,000 pods (nodefs):  {disk_med:8.2f} ms median, {disk_min:8.2f} ms best")
        print(f"synchronize, 1,000 pods:    {sync_med:8.2f} ms median, {sync_min:8.2f} ms best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
