"""The kubelet-managed /etc/hosts and termination messages on a real containerd.

Both are the kubelet's, not the runtime's: the pod sync writes the files in the
pod's directory and hands them to containerd as plain mounts in the container
config, and reads the termination message back from the mount containerd
reports. Kubelet rules checked (1.20): ``makeMounts``/``makeHostsMount``
(kubelet_pods.go) and the termination-message mount and read
(kuberuntime_container.go).

A pod on its own network needs an address: it runs in a private containerd whose
CNI is the project's example plugin (``static_containerd``, as in
test_cni_containerd); the host-network pod runs in the session's containerd.
Real clock, bounded waits; every sandbox made is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Pod, PodStatus, load_pod
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.volume import ReconcilingVolumeManager

from .containerd import BUSYBOX_IMAGE, Containerd
from .test_cni_containerd import ADDRESSES, StaticNet, _network_ready
from .test_cni_containerd import static_containerd as static_containerd  # the fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

NODE = "files-node"


def _pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> Pod:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "containers": containers,
                **spec,
            },
        },
        source="test",
        node_name=NODE,
    )


def _sh(name: str, script: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX_IMAGE, "command": ["sh", "-c", script], **more}


class Agent:
    """A Kubelet over a CRIRuntime of one containerd, run in a task."""

    def __init__(self, containerd: Containerd, tmp: Path) -> None:
        self.cri = CRIRuntime(containerd.endpoint, timeout=60, backoff_initial=0.05)
        self.root = tmp / "state"
        self.logs = tmp / "pod-logs"
        self.source = ProgrammaticSource()
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.cri,
                sources=[self.source],
                volume_manager=ReconcilingVolumeManager(self.root),
                node_name=NODE,
                root_dir=self.root,
                pod_logs_dir=self.logs,
                housekeeping_period=1.0,
            )
        )
        self.task: asyncio.Task[None] | None = None

    def log(self, pod: Pod, container: str) -> str:
        path = self.logs / f"default_{pod.name}_{pod.uid}" / container / "0.log"
        return join_output(read_log(path)).decode() if path.exists() else ""

    def status(self, pod: Pod) -> PodStatus:
        return self.kubelet.pod_status(pod.uid) or PodStatus()

    async def all_exited(self, pod: Pod, count: int, within: float = 60.0) -> PodStatus:
        deadline = time.monotonic() + within
        while True:
            if self.task is not None and self.task.done():
                self.task.result()
                raise AssertionError("the agent stopped by itself")
            statuses = self.status(pod).container_statuses
            if len(statuses) == count and all(s.state.terminated for s in statuses):
                return self.status(pod)
            assert time.monotonic() < deadline, f"containers not exited: {statuses}"
            await asyncio.sleep(0.1)

    async def gone(self, pod: Pod, within: float = 60.0) -> None:
        """Remove the pod from the source and wait until containerd has none of it."""
        self.source.remove(pod.uid)
        deadline = time.monotonic() + within
        while [s for s in await self.cri.list_pod_sandboxes() if s.metadata.uid == pod.uid]:
            assert time.monotonic() < deadline, "the pod's sandbox was not removed"
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def _running(containerd: Containerd, tmp: Path) -> AsyncIterator[Agent]:
    agent = Agent(containerd, tmp)
    agent.task = asyncio.create_task(agent.kubelet.run(), name="kubelet")
    try:
        yield agent
    finally:
        for pod in agent.source.pods():
            agent.source.remove(pod.uid)
        agent.kubelet.stop()
        await asyncio.wait_for(agent.task, 60)
        for sandbox in await agent.cri.list_pod_sandboxes():
            await agent.cri.stop_pod_sandbox(sandbox.id)
            await agent.cri.remove_pod_sandbox(sandbox.id)
        await agent.cri.close()


@pytest.fixture
async def cni_agent(static_containerd: StaticNet, tmp_path: Path) -> AsyncIterator[Agent]:
    async with CRIRuntime(static_containerd.containerd.endpoint, timeout=60) as rt:
        await _network_ready(rt)
    async with _running(static_containerd.containerd, tmp_path) as agent:
        yield agent


@pytest.fixture
async def host_agent(containerd: Containerd, tmp_path: Path) -> AsyncIterator[Agent]:
    async with _running(containerd, tmp_path) as agent:
        yield agent


async def test_pod_network_hosts_file_and_termination_messages(cni_agent: Agent) -> None:
    agent = cni_agent
    own_hosts = agent.root.parent / "own-hosts"
    own_hosts.write_text("# my own hosts file\n")
    pod = _pod(
        "files",
        [
            _sh("hosts", "cat /etc/hosts"),
            _sh(
                "own", "cat /etc/hosts", volumeMounts=[{"name": "hosts", "mountPath": "/etc/hosts"}]
            ),
            _sh(
                "writer",
                "printf 'written by uid %s' $(id -u) > /dev/termination-log",
                securityContext={"runAsUser": 1000},
            ),
            _sh(
                "failer",
                "echo first; echo second; exit 2",
                terminationMessagePolicy="FallbackToLogsOnError",
            ),
        ],
        hostname="web",
        subdomain="sub",
        hostAliases=[{"ip": "10.9.8.7", "hostnames": ["alias-a"]}],
        volumes=[{"name": "hosts", "hostPath": {"path": str(own_hosts), "type": "File"}}],
    )
    agent.source.add(pod)
    status = await agent.all_exited(pod, 4)
    pod_ip = ADDRESSES[0].split("/")[0]

    hosts = agent.log(pod, "hosts")
    assert hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    # No cluster domain is configured: the domain ends in "svc.", as the kubelet's.
    assert f"\n{pod_ip}\tweb.sub.default.svc.\tweb\n" in hosts
    assert hosts.endswith("\n# Entries added by HostAliases.\n10.9.8.7\talias-a\n")
    assert agent.log(pod, "own") == "# my own hosts file\n"

    by_name = {s.name: s.state.terminated for s in status.container_statuses}
    writer, failer = by_name["writer"], by_name["failer"]
    assert writer is not None and (writer.exit_code, writer.message) == (0, "written by uid 1000")
    assert failer is not None and (failer.exit_code, failer.message) == (2, "first\nsecond\n")

    pod_dir = agent.root / "pods" / pod.uid
    assert (pod_dir / "etc-hosts").is_file()
    await agent.gone(pod)
    deadline = time.monotonic() + 30
    while pod_dir.exists():
        left = list(pod_dir.rglob("*"))
        assert time.monotonic() < deadline, f"left in the pod's directory: {left}"
        await asyncio.sleep(0.2)


async def test_host_network_pod_sees_the_nodes_hosts_file(host_agent: Agent) -> None:
    agent = host_agent
    pod = _pod("hostnet", [_sh("hosts", "cat /etc/hosts")], hostNetwork=True)
    agent.source.add(pod)
    await agent.all_exited(pod, 1)
    hosts = agent.log(pod, "hosts")
    assert hosts == (
        "# Kubernetes-managed hosts file (host network).\n" + Path("/etc/hosts").read_text()
    )
    assert "# Kubernetes-managed hosts file." not in hosts
