"""A whole agent in cluster mode: the real Kubelet (on a FakeRuntime and a
FakeClock) with the API server pod source and a ClusterNode, against the API
server stand-in through kubernetes_asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.cluster import LEASE_NAMESPACE, APIConfigSource, ClusterNode
from kubelet_kit.config import FileSource
from kubelet_kit.config.apiserver import APIServerSource
from kubelet_kit.container import ContainerFilter, ContainerState, labels
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.node.nodestatus import NodeStatusProvider
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.testing.fake_runtime import FakeRuntime

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object


class Agent:
    """Kubelet + ClusterNode wired for a test."""

    def __init__(self, api_client: Any, root: Path, *, extra_sources: tuple[Any, ...] = ()) -> None:
        self.clock = FakeClock()
        self.runtime = FakeRuntime(self.clock)
        self.runtime.add_image("busybox")
        self.source = APIServerSource(api_client, "node-1", clock=self.clock)
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.runtime,
                clock=self.clock,
                node_name="node-1",
                sources=[self.source, *extra_sources],
                root_dir=root,
                pod_logs_dir=root / "logs",
            )
        )
        provider = NodeStatusProvider(self.kubelet, addresses=lambda: ["127.0.0.1"])

        async def node_status() -> Mapping[str, Any]:
            return (await provider.status()).to_dict()

        self.node = ClusterNode(
            self.kubelet, api_client, node_status=node_status, labels={"kubelet-kit.io/test": "yes"}
        )

    async def running(self, pod_uid: str) -> list[str]:
        found = await self.runtime.list_containers(
            ContainerFilter(state=ContainerState.RUNNING, label_selector={labels.POD_UID: pod_uid})
        )
        return [c.metadata.name for c in found]


@contextlib.asynccontextmanager
async def running_agent(api_client: Any, root: Path, **options: Any) -> AsyncIterator[Agent]:
    agent = Agent(api_client, root, **options)
    async with agent.kubelet, agent.node:
        await agent.clock.settle()
        yield agent


def pod_status(standin: StandInAPIServer, name: str) -> dict[str, Any]:
    obj = standin.get("pods", "default", name)
    return (obj or {}).get("status") or {}


def lease_renew_time(standin: StandInAPIServer) -> str:
    lease = standin.get("leases", LEASE_NAMESPACE, "node-1")
    return str((lease or {}).get("spec", {}).get("renewTime", ""))


async def test_a_bound_pod_runs_and_the_node_reports_back(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    created = standin.put("pods", pod_object("web"))
    standin.put("pods", pod_object("elsewhere", node="node-2"))
    async with running_agent(api_client, tmp_path) as agent:
        clock = agent.clock
        await eventually(
            lambda: pod_status(standin, "web").get("phase") == "Running",
            clock=clock,
            what="web Running on the server",
        )
        status = pod_status(standin, "web")
        assert status["containerStatuses"][0]["state"]["running"]["startedAt"]
        ready = {c["type"]: c["status"] for c in status["conditions"]}
        assert ready["Ready"] == "True" and ready["ContainersReady"] == "True"
        # The scheduler's pods for other nodes are not ours.
        assert [p.name for p in agent.kubelet.pods()] == ["web"]
        assert "phase" not in pod_status(standin, "elsewhere")

        node = standin.get("nodes", "", "node-1")
        assert node is not None
        assert node["metadata"]["labels"]["kubelet-kit.io/test"] == "yes"
        assert {c["type"] for c in node["status"]["conditions"]} >= {"Ready", "MemoryPressure"}
        assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.1"}

        # Events reach the server with the kubelet's reasons, about the pod.
        def reasons() -> set[str]:
            return {e["reason"] for (r, _, _), e in standin.objects.items() if r == "events"}

        await eventually(
            lambda: {"Pulled", "Created", "Started"} <= reasons(),
            clock=clock,
            what="events written",
        )
        assert "Scheduled" not in reasons()  # the scheduler's, never a node's
        event = next(
            e
            for (r, _, _), e in standin.objects.items()
            if r == "events" and e["reason"] == "Started"
        )
        assert event["involvedObject"]["uid"] == created["metadata"]["uid"]
        assert event["source"] == {"component": "kubelet", "host": "node-1"}

        # The lease is renewed every 10 s of agent time.
        before = agent.node.lease.renewals
        await clock.run_for(10)
        await eventually(
            lambda: agent.node.lease.renewals > before, clock=clock, what="lease renewed"
        )
        # Once the Node is known the Lease is owned by it (for garbage collection).
        lease = standin.get("leases", LEASE_NAMESPACE, "node-1")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "node-1"
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


async def test_graceful_deletion_ends_with_a_zero_grace_delete_with_uid_precondition(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    created = standin.put("pods", pod_object("web", grace=20))
    uid = created["metadata"]["uid"]
    async with running_agent(api_client, tmp_path) as agent:
        await eventually(
            lambda: pod_status(standin, "web").get("phase") == "Running",
            clock=agent.clock,
            what="web Running",
        )
        from kubernetes_asyncio import client as k8s

        # A user deletes the pod with a shorter grace period: the server only marks
        # it, and the agent stops its containers within that period.
        await k8s.CoreV1Api(api_client).delete_namespaced_pod(
            "web", "default", grace_period_seconds=8
        )
        marked = standin.get("pods", "default", "web")
        assert marked is not None and marked["metadata"]["deletionGracePeriodSeconds"] == 8
        await eventually(
            lambda: standin.get("pods", "default", "web") is None,
            clock=agent.clock,
            what="pod deleted for good",
        )
        assert await agent.running(uid) == []
        stops = agent.runtime.calls_to("stop_container")
        assert stops and stops[-1].kwargs["timeout"] == 8
        deletes = [
            b
            for m, p, b in standin.bodies
            if m == "DELETE" and p == "/api/v1/namespaces/default/pods/web"
        ]
        assert deletes[-1]["gracePeriodSeconds"] == 0
        assert deletes[-1]["preconditions"] == {"uid": uid}
        # Its containers were stopped before the final delete was sent.
        patches = [
            b
            for m, p, b in standin.bodies
            if m == "PATCH" and p == "/api/v1/namespaces/default/pods/web/status"
        ]
        assert patches and patches[-1]["metadata"] == {"uid": uid}
        states = [c["state"] for c in patches[-1]["status"]["containerStatuses"]]
        assert all("terminated" in s for s in states)


async def test_losing_the_api_server_loses_nothing(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    standin.put("pods", pod_object("web"))
    job = standin.put("pods", pod_object("job", command="sleep 60; exit 0", restart="Never"))
    async with running_agent(api_client, tmp_path) as agent:
        clock = agent.clock
        await eventually(
            lambda: (
                pod_status(standin, "job").get("phase") == "Running"
                and pod_status(standin, "web").get("phase") == "Running"
            ),
            clock=clock,
            what="both Running",
        )
        starts = len(agent.runtime.calls_to("start_container"))
        renewed_before = lease_renew_time(standin)

        await standin.stop()
        await clock.run_for(90)  # the job finishes while the server is away
        await eventually(
            lambda: (
                agent.kubelet.pod_status(job["metadata"]["uid"]) is not None
                and agent.kubelet.pod_status(job["metadata"]["uid"]).phase  # type: ignore[union-attr]
                == "Succeeded"
            ),
            clock=clock,
            what="job Succeeded locally",
        )
        renewals = agent.node.lease.renewals
        await clock.run_for(30)
        assert agent.node.lease.renewals == renewals  # nothing accepted while away
        # Pods kept running: nothing stopped, nothing started again.
        assert sorted(p.name for p in agent.kubelet.pods()) == ["job", "web"]
        assert len(agent.runtime.calls_to("start_container")) == starts
        assert pod_status(standin, "job")["phase"] == "Running"  # the server's stale view

        await standin.start()
        await eventually(
            lambda: pod_status(standin, "job").get("phase") == "Succeeded",
            clock=clock,
            what="status caught up",
        )
        await eventually(
            lambda: (
                lease_renew_time(standin) > renewed_before and agent.node.lease.renewals > renewals
            ),
            clock=clock,
            what="lease renewed again",
        )
        node = standin.get("nodes", "", "node-1")
        assert node is not None
        assert pod_status(standin, "web")["phase"] == "Running"
        assert len(agent.runtime.calls_to("start_container")) == starts
        # The pod source watches again and sees new pods.
        standin.put("pods", pod_object("after"))
        await eventually(
            lambda: pod_status(standin, "after").get("phase") == "Running",
            clock=clock,
            what="new pod after the outage",
        )


async def test_static_pods_get_mirror_pods_that_carry_their_status(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "static.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static\n  namespace: default\n"
        "spec:\n  containers:\n  - name: main\n    image: busybox\n"
        "    command: [sh, -c, sleep infinity]\n"
    )
    root = tmp_path / "root"
    clock_holder: list[FakeClock] = []
    file_source = FileSource(manifests, node_name="node-1")
    async with running_agent(api_client, root, extra_sources=(file_source,)) as agent:
        clock_holder.append(agent.clock)
        file_source._clock = agent.clock  # the source's checks on the agent's clock

        def mirror() -> dict[str, Any] | None:
            return standin.get("pods", "default", "static-node-1")

        await eventually(lambda: mirror() is not None, clock=agent.clock, what="mirror pod created")
        obj = mirror()
        assert obj is not None
        static = next(p for p in agent.kubelet.pods() if p.name == "static-node-1")
        assert (
            obj["metadata"]["annotations"]["kubernetes.io/config.mirror"]
            == static.metadata.annotations["kubernetes.io/config.hash"]
        )
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "Node"
        await eventually(
            lambda: (mirror() or {}).get("status", {}).get("phase") == "Running",
            clock=agent.clock,
            what="status on the mirror pod",
        )
        # The mirror is not run as a second pod.
        assert [p.name for p in agent.kubelet.pods()] == ["static-node-1"]
        assert len(agent.runtime.calls_to("run_pod_sandbox")) == 1
        # A deleted mirror pod is made again.
        standin.remove("pods", "default", "static-node-1")
        await eventually(
            lambda: mirror() is not None, clock=agent.clock, what="mirror pod made again"
        )


async def test_configmaps_and_secrets_come_from_the_api_server(
    standin: StandInAPIServer, api_client: Any
) -> None:
    standin.put(
        "configmaps",
        {
            "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"a": "1"},
            "binaryData": {"b": "AAE="},
        },
    )
    standin.put(
        "secrets",
        {"metadata": {"name": "tok", "namespace": "default"}, "data": {"token": "c2VjcmV0"}},
    )
    source = APIConfigSource(api_client)
    assert await asyncio.to_thread(source.get_config_map, "default", "cfg") == {
        "a": b"1",
        "b": b"\x00\x01",
    }
    assert await asyncio.to_thread(source.get_secret, "default", "tok") == {"token": b"secret"}
    assert await asyncio.to_thread(source, "Secret", "default", "tok") == {"token": "secret"}
    assert await asyncio.to_thread(source.get_secret, "default", "missing") is None
    await standin.stop()
    # The server is away: the last data read stays; what was never read fails, named.
    assert await asyncio.to_thread(source.get_secret, "default", "tok") == {"token": b"secret"}
    with pytest.raises(ConfigurationError, match="ConfigMap default/other"):
        await asyncio.to_thread(source.get_config_map, "default", "other")
    await asyncio.to_thread(source.close)
    await asyncio.to_thread(source.close)  # idempotent


async def test_close_ends_the_reads_still_in_flight(api_client: Any) -> None:
    source = APIConfigSource(api_client, loop_timeout=0.1)
    ended = threading.Event()

    async def hanging_read(kind: str, namespace: str, name: str) -> None:
        try:
            await asyncio.sleep(3600)  # a server that never answers
        finally:
            ended.set()

    source._read = hanging_read  # type: ignore[method-assign,assignment]
    # On the event loop the caller stops waiting after loop_timeout; the read goes on.
    with pytest.raises(ConfigurationError, match="no answer"):
        source.get_config_map("default", "cfg")
    assert not ended.is_set()
    await asyncio.to_thread(source.close)
    assert ended.is_set()  # cancelled and ended, not dropped with the loop


async def test_config_lookups_on_the_event_loop_never_hold_it_for_long(
    standin: StandInAPIServer, api_client: Any
) -> None:
    standin.put(
        "configmaps", {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}
    )
    source = APIConfigSource(api_client, loop_timeout=0.3)
    try:
        # Called on this loop, which also serves the stand-in: no answer can come
        # while we wait, and the wait is short and named.
        with pytest.raises(ConfigurationError, match="ConfigMap default/cfg: no answer"):
            source.get_config_map("default", "cfg")
        assert await asyncio.to_thread(source.get_config_map, "default", "cfg") == {"a": b"1"}
        cfg = standin.get("configmaps", "default", "cfg")
        assert cfg is not None
        cfg["data"] = {"a": "2"}
        standin.put("configmaps", cfg)
        # Once read, a call on the loop answers at once from the last value and
        # refreshes it in the background.
        assert source.get_config_map("default", "cfg") == {"a": b"1"}
        await eventually(
            lambda: source.get_config_map("default", "cfg") == {"a": b"2"},
            what="refreshed in the background",
        )
    finally:
        await asyncio.to_thread(source.close)
