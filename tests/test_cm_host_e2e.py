"""End to end on this machine: the agent, HostProcessRuntime and real v1 pod cgroups.

Real time and real processes (bounded waits). The pod cgroup is made with the pod's
limits before the sandbox and removed after the pod is gone, and the workload
itself runs inside it, as HostProcessRuntime puts each container's process into
the sandbox's ``cgroup_parent``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hostproc import limited_pod_manifest, pids_with
from realtime import wait_until

from kubelet_kit.api import Quantity
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.config import FileSource
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts

NODE = "cm-node"
Q = Quantity.parse


def _real_v1() -> bool:
    try:
        from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts
    except ImportError:  # pragma: no cover
        return False
    mounts = discover_v1_mounts()
    return os.geteuid() == 0 and all(c in mounts for c in ("cpu", "memory", "cpuset", "pids"))


class Node:
    def __init__(self, tmp: Path) -> None:
        from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver

        self.tmp = tmp
        self.manifests = tmp / "manifests"
        self.manifests.mkdir()
        self.token = secrets.token_hex(6)
        self.root = f"/kubelet-kit-test-{self.token}"
        self.driver = CgroupV1Driver()
        self.cm = CgroupContainerManager(
            KubeletConfiguration(cgroup_root=self.root, pod_pids_limit=64),
            driver=self.driver,
            capacity={
                "cpu": Q("2"),
                "memory": Q("4Gi"),
                "ephemeral-storage": Q("10Gi"),
                "pods": Q("10"),
            },
        )
        self.runtime = HostProcessRuntime(tmp / "runtime", kill_timeout=5)
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.runtime,
                sources=[FileSource(self.manifests, node_name=NODE, check_frequency=0.3)],
                node_name=NODE,
                root_dir=tmp / "state",
                pod_logs_dir=tmp / "logs",
                container_manager=self.cm,
            )
        )
        self.task: asyncio.Task[None] | None = None

    def phase(self, name: str) -> str:
        for pod in self.kubelet.pods():
            if pod.metadata.name == f"{name}-{NODE}":
                status = self.kubelet.pod_status(pod.metadata.uid)
                return status.phase if status else ""
        return ""

    def pod(self, name: str) -> Any:
        return next(p for p in self.kubelet.pods() if p.metadata.name == f"{name}-{NODE}")


@pytest.fixture
async def node(tmp_path: Path, require_real: Callable[[bool, str], None]) -> AsyncIterator[Node]:
    require_real(_real_v1(), "root and the cgroup v1 controllers")
    n = Node(tmp_path)
    n.task = asyncio.create_task(n.kubelet.run())
    try:
        yield n
    finally:
        n.kubelet.stop()
        await asyncio.wait_for(n.task, 30)
        for container in await n.runtime.list_containers():
            await n.runtime.stop_container(container.id, 0)
        for sandbox in await n.runtime.list_pod_sandboxes():
            await n.runtime.remove_pod_sandbox(sandbox.id)
        await n.driver.remove(n.root)
        for mount in n.driver.mounts.values():
            assert not os.path.exists(mount + n.root)


async def _run_pod(node: Node) -> str:
    (node.manifests / "limited.yaml").write_text(limited_pod_manifest(node.token))
    await wait_until(lambda: node.phase("limited") == "Running", what="pod Running")
    return node.cm.pod_cgroup_path(node.pod("limited"))


async def test_pod_cgroup_made_with_limits_and_removed_after_deletion(node: Node) -> None:
    path = await _run_pod(node)
    assert path.startswith(f"{node.root}/kubepods/burstable/pod")
    m = node.driver.mounts
    assert Path(m["cpu"] + path, "cpu.shares").read_text().strip() == "256"
    assert Path(m["cpu"] + path, "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert Path(m["memory"] + path, "memory.limit_in_bytes").read_text().strip() == str(128 << 20)
    assert Path(m["pids"] + path, "pids.max").read_text().strip() == "64"
    assert pids_with(node.token), "the workload is running"
    (node.manifests / "limited.yaml").unlink()
    await wait_until(lambda: not os.path.exists(m["memory"] + path), what="pod cgroup removed")
    await wait_until(lambda: not pids_with(node.token), what="workload stopped")
    for mount in m.values():
        assert not os.path.exists(mount + path)


async def test_the_workload_lands_in_its_pod_cgroup(node: Node) -> None:
    path = await _run_pod(node)
    pids = pids_with(node.token)
    assert pids
    with open(f"/proc/{pids[0]}/cgroup", encoding="ascii") as f:
        lines = f.read().splitlines()
    memory = next(line.split(":", 2)[2] for line in lines if line.split(":", 2)[1] == "memory")
    assert memory == path or memory.startswith(path + "/"), lines
