"""Inside a pure cgroup v2 VM: the container manager with MemoryQoS makes the pod
cgroups of a Guaranteed, a Burstable and a BestEffort pod, and the kernel's own
files show the memory protection at container, pod and QoS level.

Container cgroups are the runtime's to make; here each is made under its pod
cgroup with exactly the ``unified`` files the manager hands the runtime, as runc
writes them, so that the kernel's reading of those values is shown too.

Prints ``key=value`` lines for tests/vm/test_memory_qos_vm.py; exits 0 even when a
check there would fail, so the test shows every value.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

CGROUP = Path("/sys/fs/cgroup")
#: What the pods ask for (requests, limits) per container; the test reads the same.
PODS = {
    "guaranteed": {"app": ({"cpu": "100m", "memory": "64Mi"}, {"cpu": "100m", "memory": "64Mi"})},
    "burstable": {
        "app": ({"memory": "32Mi"}, {"memory": "96Mi"}),
        "side": ({"memory": "50M"}, {}),
    },
    "besteffort": {"app": ({}, {})},
}
SYSTEM_RESERVED = {"memory": "64Mi"}


def show(key: str, value: object) -> None:
    print(f"{key}={value}", flush=True)


def kernel(cgroup: str, name: str) -> str:
    return (CGROUP / cgroup.strip("/") / name).read_text().strip()


def make_pod(name: str) -> Any:
    from kubelet_kit.api import load_pod

    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"{name}-uid"},
            "spec": {
                "containers": [
                    {
                        "name": ctr,
                        "image": "busybox",
                        "resources": {"requests": req, "limits": lim},
                    }
                    for ctr, (req, lim) in PODS[name].items()
                ]
            },
        }
    )


def show_tiers(manager: Any, when: str) -> None:
    kubepods = manager.kubepods_path()
    show(f"{when}.kubepods.memory.min", kernel(kubepods, "memory.min"))
    show(f"{when}.burstable.memory.min", kernel(kubepods + "/burstable", "memory.min"))
    show(f"{when}.besteffort.memory.min", kernel(kubepods + "/besteffort", "memory.min"))


async def run() -> None:
    start = time.monotonic()
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.cm.helpers import ResourceConfig
    from kubelet_kit.cm.manager import CgroupContainerManager

    show("import_seconds", f"{time.monotonic() - start:.2f}")
    show("page_size", os.sysconf("SC_PAGE_SIZE"))
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    show("meminfo.MemTotal", int(meminfo[1]) * 1024)

    manager = CgroupContainerManager(
        KubeletConfiguration(feature_gates={"MemoryQoS": True}, system_reserved=SYSTEM_RESERVED)
    )
    await manager.start()
    show("driver", type(manager.driver).__name__)
    show("memory_qos_enforced", manager.memory_qos_enforced())
    show("capacity.memory", manager.node_capacity()["memory"].value())
    show_tiers(manager, "start")

    pods = {name: make_pod(name) for name in PODS}
    paths: dict[str, str] = {}
    for name, pod in pods.items():
        path = await manager.ensure_pod_cgroup(pod)
        paths[name] = path
        show(f"pod.{name}.path", path)
        show(f"pod.{name}.memory.min", kernel(path, "memory.min"))
        show(f"pod.{name}.memory.max", kernel(path, "memory.max"))
    show_tiers(manager, "admitted")

    # Container cgroups, with what the manager hands the runtime.
    for name, pod in pods.items():
        for ctr in pod.spec.containers:
            res = manager.container_resources(pod, ctr)
            assert res is not None
            unified = dict(res.unified)
            show(
                f"cm.{name}.{ctr.name}.unified",
                " ".join(f"{k}:{v}" for k, v in sorted(unified.items())),
            )
            path = f"{paths[name]}/{ctr.name}"
            limit = res.memory_limit_in_bytes or None
            await manager.driver.create(path, ResourceConfig(memory=limit, unified=unified))
            for file in ("memory.min", "memory.high", "memory.max"):
                show(f"kernel.{name}.{ctr.name}.{file}", kernel(path, file))

    # A process in the Burstable pod's container is killed when its pod goes.
    sleeper = subprocess.Popen(["sleep", "300"])
    await manager.driver.add_process(f"{paths['burstable']}/app", sleeper.pid)
    show("sleeper.cgroup", Path(f"/proc/{sleeper.pid}/cgroup").read_text().strip())
    await manager.remove_pod_cgroup(pods["burstable"])
    show("sleeper.exit", sleeper.wait(timeout=30))
    show("burstable.pod.exists", (CGROUP / paths["burstable"].strip("/")).exists())
    show_tiers(manager, "burstable_removed")

    await manager.remove_pod_cgroup(pods["guaranteed"])
    show_tiers(manager, "guaranteed_removed")
    removed = await manager.remove_orphaned_pod_cgroups([])
    show("orphans_removed", " ".join(sorted(removed)))
    show_tiers(manager, "all_removed")
    show("seconds", f"{time.monotonic() - start:.2f}")


if __name__ == "__main__":
    asyncio.run(run())
