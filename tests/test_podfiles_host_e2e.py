"""End to end on the embedded runtime (HostProcessRuntime, as root, so mounts are
applied in mount namespaces): the kubelet-managed /etc/hosts and termination
messages, both made by the pod sync and handed over as plain mounts.

Kubelet rules checked (1.20): ``makeMounts``/``makeHostsMount`` (kubelet_pods.go:
the managed hosts file with the pod's IP, none for a container mounting its own
/etc/hosts, the node's file for a host-network pod) and the termination message
(kuberuntime_container.go: a world-writable file a non-root container writes,
the log's tail for FallbackToLogsOnError); the pod's directory goes with the pod.

The termination file is mounted at /dev/termination-log: the host runtime shares
the host's root file system, so (as runc would in a rootfs) the empty mount
target is created in the host's /dev. Real time, bounded waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from realtime import wait_until

from kubelet_kit.api import Pod, PodStatus, load_pod
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.volume import ReconcilingVolumeManager, mounter

pytestmark = pytest.mark.timeout(90)

NODE = "files-node"
RequireReal = Callable[[bool, str], None]


def _pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> Pod:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": containers,
                **spec,
            },
        },
        source="test",
        node_name=NODE,
    )


def _sh(name: str, script: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **more}


class Agent:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "state"
        self.logs = tmp / "logs"
        self.source = ProgrammaticSource()
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=HostProcessRuntime(self.root / "runtime"),
                sources=[self.source],
                volume_manager=ReconcilingVolumeManager(self.root),
                node_name=NODE,
                root_dir=self.root,
                pod_logs_dir=self.logs,
            )
        )
        self.task: asyncio.Task[None] | None = None

    def log(self, pod: Pod, container: str) -> str:
        path = self.logs / f"default_{pod.name}_{pod.uid}" / container / "0.log"
        return join_output(read_log(path)).decode() if path.exists() else ""

    def status(self, pod: Pod) -> PodStatus:
        return self.kubelet.pod_status(pod.uid) or PodStatus()

    def terminated(self, pod: Pod, count: int) -> bool:
        statuses = self.status(pod).container_statuses
        return len(statuses) == count and all(s.state.terminated for s in statuses)


@pytest.fixture
async def agent(tmp_path: Path, require_real: RequireReal) -> AsyncIterator[Agent]:
    require_real(mounter.can_mount(), "root (CAP_SYS_ADMIN) for mount namespaces")
    a = Agent(tmp_path)
    a.task = asyncio.create_task(a.kubelet.run())
    try:
        yield a
    finally:
        a.kubelet.stop()
        await asyncio.wait_for(a.task, 30)
        runtime = HostProcessRuntime(a.root / "runtime")
        for c in await runtime.list_containers():
            await runtime.stop_container(c.id, 0)
        for s in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(s.id)
        for m in mounter.mount_points_under(tmp_path):  # only ever our own
            mounter.unmount(m, detach=True)


async def test_managed_etc_hosts_and_termination_messages(agent: Agent) -> None:
    own_hosts = agent.tmp / "own-hosts"
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
        hostAliases=[{"ip": "10.9.8.7", "hostnames": ["alias-a", "alias-b"]}],
        volumes=[{"name": "hosts", "hostPath": {"path": str(own_hosts), "type": "File"}}],
    )
    agent.source.add(pod)
    await wait_until(lambda: agent.terminated(pod, 4), "every container to exit")
    status = agent.status(pod)
    # The pod has ended (failer), so its status no longer shows the IP: ask the runtime.
    [sandbox] = await agent.kubelet.runtime.list_pod_sandboxes()
    pod_ip = (await agent.kubelet.runtime.pod_sandbox_status(sandbox.id)).ip
    assert pod_ip

    hosts = agent.log(pod, "hosts")
    assert hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert f"\n{pod_ip}\tfiles\n" in hosts
    assert hosts.endswith("\n# Entries added by HostAliases.\n10.9.8.7\talias-a\talias-b\n")
    assert agent.log(pod, "own") == "# my own hosts file\n"

    by_name = {s.name: s.state.terminated for s in status.container_statuses}
    writer, failer = by_name["writer"], by_name["failer"]
    assert writer is not None and (writer.exit_code, writer.message) == (0, "written by uid 1000")
    assert failer is not None and (failer.exit_code, failer.message) == (2, "first\nsecond\n")
    assert by_name["hosts"] is not None and by_name["hosts"].message == ""

    pod_dir = agent.root / "pods" / pod.uid
    assert (pod_dir / "etc-hosts").is_file()
    assert sorted(p.name for p in (pod_dir / "containers").iterdir()) == [
        "failer",
        "hosts",
        "own",
        "writer",
    ]
    agent.source.remove(pod.uid)
    await wait_until(lambda: not pod_dir.exists(), "the pod's directory to go")


async def test_host_network_pod_sees_the_nodes_hosts_file(agent: Agent) -> None:
    pod = _pod("hostnet", [_sh("hosts", "cat /etc/hosts")], hostNetwork=True)
    agent.source.add(pod)
    await wait_until(lambda: agent.terminated(pod, 1), "the container to exit")
    hosts = agent.log(pod, "hosts")
    assert hosts == (
        "# Kubernetes-managed hosts file (host network).\n" + Path("/etc/hosts").read_text()
    )
    assert "# Kubernetes-managed hosts file." not in hosts
