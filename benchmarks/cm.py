"""Container manager benchmark: per-pod cost of the decisions and of pod cgroups.

What is measured (median of several runs, CPU time of this process):

* ``admit_<n>_us``: one ``admit_pod`` beside ``n`` active pods (summing their
  requests against node allocatable).
* ``container_resources_us``: one ``container_resources`` (shares, quota, memory
  limit, oom_score_adj).
* ``ensure_remove_pod_us``: one ``ensure_pod_cgroup`` plus ``remove_pod_cgroup`` on
  the in-memory FakeCgroupTree, i.e. the manager's and the v2 driver's own work
  without kernel I/O.

Usage: ``python benchmarks/cm.py [--json] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from kubelet_kit.api import Quantity, load_pod
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree


def _pod(i: int) -> Any:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "uid": f"uid-{i}"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "i",
                        "resources": {
                            "requests": {"cpu": "10m", "memory": "10Mi"},
                            "limits": {"cpu": "20m", "memory": "20Mi"},
                        },
                    }
                ]
            },
        }
    )


def _cpu_us(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            fn()
        samples.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 20 if args.quick else 200
    capacity = {
        "cpu": Quantity.parse("64"),
        "memory": Quantity.parse("256Gi"),
        "ephemeral-storage": Quantity.parse("1Ti"),
        "pods": Quantity.parse("1000"),
    }
    tree = FakeCgroupTree()
    mgr = CgroupContainerManager(
        KubeletConfiguration(max_pods=1000),
        driver=CgroupV2Driver(files=tree, clock=FakeClock()),
        capacity=capacity,
    )
    results: dict[str, float] = {}
    new = _pod(-1)
    for n in (10, 100, 500):
        active = [_pod(i) for i in range(n)]
        results[f"admit_{n}_us"] = _cpu_us(lambda a=active: mgr.admit_pod(new, a), repeat)
    results["container_resources_us"] = _cpu_us(
        lambda: mgr.container_resources(new, new.spec.containers[0]), repeat
    )

    async def cycle() -> None:
        await mgr.ensure_pod_cgroup(new)
        await mgr.remove_pod_cgroup(new)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(mgr.start())
        results["ensure_remove_pod_us"] = _cpu_us(lambda: loop.run_until_complete(cycle()), repeat)
    finally:
        loop.close()
    if args.json:
        print(json.dumps({k: round(v, 1) for k, v in results.items()}))
    else:
        for key, value in results.items():
            print(f"{key:28s} {value:10.1f}")


if __name__ == "__main__":
    main()
