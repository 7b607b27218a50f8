"""Inside a VM booted with the cgroup v1 controllers: the container manager, with
its default (v1) driver, makes kubepods, its QoS tiers and three pod cgroups in
every controller hierarchy, a process moved into a pod cgroup shows there in
/proc/PID/cgroup, and removing the pods removes their cgroups everywhere.

Prints ``key=value`` lines for tests/vm/test_cgroup_v1_vm.py; exits 0 even when a
check there would fail, so the test shows every value.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

#: What the pods ask for (requests, limits); the test reads the same.
PODS = {
    "guaranteed": ({"cpu": "250m", "memory": "64Mi"}, {"cpu": "250m", "memory": "64Mi"}),
    "burstable": ({"cpu": "100m", "memory": "32Mi"}, {"cpu": "500m"}),
    "besteffort": ({}, {}),
}
SYSTEM_RESERVED = {"cpu": "100m", "memory": "64Mi"}
POD_PIDS_LIMIT = 100
#: The files shown for each cgroup: (controller, file).
FILES = (
    ("cpu", "cpu.shares"),
    ("cpu", "cpu.cfs_quota_us"),
    ("cpu", "cpu.cfs_period_us"),
    ("memory", "memory.limit_in_bytes"),
    ("pids", "pids.max"),
    ("cpuset", "cpuset.cpus"),
)


def show(key: str, value: object) -> None:
    print(f"{key}={value}", flush=True)


def make_pod(name: str) -> Any:
    from kubelet_kit.api import load_pod

    req, lim = PODS[name]
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"{name}-uid"},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "resources": {"requests": req, "limits": lim},
                    }
                ]
            },
        }
    )


def show_cgroup(mounts: dict[str, str], key: str, cgroup: str) -> None:
    """Where the cgroup exists, and its files."""
    present = sorted(c for c, m in mounts.items() if os.path.isdir(m + cgroup))
    show(f"{key}.in", " ".join(present))
    for controller, name in FILES:
        path = Path(mounts[controller] + cgroup, name)
        show(f"{key}.{name}", path.read_text().strip() if path.exists() else "-")


async def run() -> None:
    mounts_table = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    show("v2_mounts", " ".join(m[1] for m in mounts_table if m[2] == "cgroup2"))
    enabled = [
        line.split()[0]
        for line in Path("/proc/cgroups").read_text().splitlines()[1:]
        if line.split()[3] == "1"
    ]
    show("kernel.controllers", " ".join(sorted(enabled)))
    show("parent.cpuset.cpus", Path("/sys/fs/cgroup/cpuset/cpuset.cpus").read_text().strip())

    start = time.monotonic()
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.cm.manager import CgroupContainerManager

    show("import_seconds", f"{time.monotonic() - start:.2f}")
    manager = CgroupContainerManager(
        KubeletConfiguration(system_reserved=SYSTEM_RESERVED, pod_pids_limit=POD_PIDS_LIMIT)
    )
    await manager.start()
    driver: Any = manager.driver
    show("driver", type(driver).__name__)
    show("uses_cgroupspy", driver.uses_cgroupspy)
    mounts: dict[str, str] = dict(driver.mounts)
    show("driver.controllers", " ".join(sorted(mounts)))
    for controller, mount in sorted(mounts.items()):
        show(f"mount.{controller}", mount)
    capacity = manager.node_capacity()
    show("capacity.cpu", capacity["cpu"].milli_value())
    show("capacity.memory", capacity["memory"].value())

    kubepods = manager.kubepods_path()
    show("kubepods", kubepods)
    show_cgroup(mounts, "kubepods", kubepods)
    for tier in ("burstable", "besteffort"):
        show_cgroup(mounts, tier, f"{kubepods}/{tier}")

    pods = {name: make_pod(name) for name in PODS}
    paths: dict[str, str] = {}
    for name, pod in pods.items():
        paths[name] = await manager.ensure_pod_cgroup(pod)
        show(f"pod.{name}.path", paths[name])
        show_cgroup(mounts, f"pod.{name}", paths[name])
    # The Burstable tier's shares follow its pods' CPU requests.
    show_cgroup(mounts, "burstable.after", f"{kubepods}/burstable")

    # A process moved into the Guaranteed pod's cgroup, in every hierarchy.
    sleeper = subprocess.Popen(["sleep", "300"])
    await driver.add_process(paths["guaranteed"], sleeper.pid)
    for line in Path(f"/proc/{sleeper.pid}/cgroup").read_text().splitlines():
        _, controllers, cgroup = line.split(":", 2)
        show(f"sleeper.cgroup.{controllers or 'unified'}", cgroup)
    show("pod.guaranteed.pids", " ".join(map(str, await driver.pids(paths["guaranteed"]))))
    show("sleeper.pid", sleeper.pid)

    await manager.remove_pod_cgroup(pods["guaranteed"])
    show("sleeper.exit", sleeper.wait(timeout=30))
    await manager.remove_pod_cgroup(pods["burstable"])
    removed = await manager.remove_orphaned_pod_cgroups([])
    show("orphans_removed", " ".join(sorted(removed)))
    for name, path in paths.items():
        left = sorted(c for c, m in mounts.items() if os.path.exists(m + path))
        show(f"pod.{name}.left_in", " ".join(left))
    show_cgroup(mounts, "burstable.end", f"{kubepods}/burstable")
    show("seconds", f"{time.monotonic() - start:.2f}")


if __name__ == "__main__":
    asyncio.run(run())
