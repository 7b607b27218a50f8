"""The simulator's parts on their own: the shared pod informer against the API
server stand-in, node templates, the simulated stats and probes, and how requests
are sorted into lanes. The whole simulator runs against a real kube-apiserver in
tests/integration/test_simulate.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Quantity
from kubelet_kit.clock import RealClock
from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.prober import ProbeKind
from kubelet_kit.prober.probers import ProbeStatus
from kubelet_kit.simulate import (
    MEMORY_ANNOTATION,
    PROBE_FAILURES_ANNOTATION,
    NodeTemplate,
    SharedPodInformer,
    SimulatedProber,
    SimulatedStats,
)
from kubelet_kit.simulate.fleet import _lane, _verb
from kubelet_kit.testing import FakeRuntime
from kubelet_kit.testing.builders import make_pod

from .apiserver_standin import StandInAPIServer

pytestmark = pytest.mark.timeout(60)


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


class Follower:
    """Reads one node's snapshots into a list as they come."""

    def __init__(self, informer: SharedPodInformer, node: str) -> None:
        self.snapshots: list[SourceSnapshot] = []
        self._task = asyncio.create_task(self._read(informer, node))

    async def _read(self, informer: SharedPodInformer, node: str) -> None:
        async for snap in informer.source(node).snapshots():
            self.snapshots.append(snap)

    def names(self) -> list[str]:
        return [p.name for p in self.snapshots[-1].pods] if self.snapshots else []

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def informer(api_client: Any) -> AsyncIterator[SharedPodInformer]:
    shared = SharedPodInformer(api_client, wanted={"node-a", "node-b"}.__contains__)
    task = asyncio.create_task(shared.run())
    try:
        yield shared
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_one_watch_hands_each_node_its_own_pods(
    standin: StandInAPIServer, informer: SharedPodInformer
) -> None:
    standin.put("pods", _pod("a1", "node-a"))
    standin.put("pods", _pod("b1", "node-b"))
    standin.put("pods", _pod("c1", "node-c"))  # a node not simulated here
    a, b = Follower(informer, "node-a"), Follower(informer, "node-b")
    try:
        await _until(lambda: a.names() == ["a1"] and b.names() == ["b1"])
        seen_b = len(b.snapshots)

        # A new pod of node-a reaches node-a only.
        standin.put("pods", _pod("a2", "node-a"))
        await _until(lambda: sorted(a.names()) == ["a1", "a2"])
        await asyncio.sleep(0.2)
        assert len(b.snapshots) == seen_b

        # A deleted pod leaves its node's snapshot.
        standin.remove("pods", "default", "a1")
        await _until(lambda: a.names() == ["a2"])

        # The other node's pods are not kept at all.
        assert all(
            (o.get("spec") or {}).get("nodeName") != "node-c"
            for o in informer.watch.objects.values()
        )
        assert informer.objects_of("node-c") == {}
        # One list and one watch for all of them.
        watches = standin.count("GET", "/api/v1/pods", query="watch=")
        assert watches == 1
        assert standin.count("GET", "/api/v1/pods") == 1 + watches
    finally:
        await a.close()
        await b.close()


async def test_a_node_asking_after_the_list_gets_its_pods_at_once(
    standin: StandInAPIServer, informer: SharedPodInformer
) -> None:
    standin.put("pods", _pod("b1", "node-b"))
    await asyncio.wait_for(informer.synced.wait(), 10)
    late = Follower(informer, "node-b")
    try:
        await _until(lambda: late.names() == ["b1"])
    finally:
        await late.close()


def test_a_node_template_reads_a_node_object(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Node\nmetadata:\n  labels: {pool: edge}\n"
        "spec:\n  taints: [{key: dedicated, value: edge, effect: NoSchedule}]\n"
        "status:\n  capacity: {cpu: '8', memory: 32Gi, pods: '50', nvidia.com/gpu: '1'}\n"
    )
    template = NodeTemplate.from_file(path)
    assert template.labels == {"pool": "edge"}
    assert template.taints[0]["key"] == "dedicated"
    assert template.max_pods == 50
    assert template.capacity["cpu"] == Quantity.parse("8")
    assert template.capacity["nvidia.com/gpu"] == Quantity.parse("1")
    assert "ephemeral-storage" in template.capacity  # the default kept
    smaller = template.with_resources(cpu="2", max_pods=10)
    assert smaller.capacity["cpu"] == Quantity.parse("2") and smaller.max_pods == 10
    assert smaller.capacity["memory"] == Quantity.parse("32Gi")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("status: {capacity: {cpu: four}}", "status.capacity.cpu"),
        ("metadata: {labels: [a]}", "metadata.labels"),
        ("spec: {taints: [{value: x}]}", "spec.taints"),
        ("status: []", "status"),
    ],
)
def test_a_bad_node_template_is_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as err:
        NodeTemplate.from_file(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_a_template_file_must_hold_one_node(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("metadata: {}\n---\nmetadata: {}\n")
    with pytest.raises(ConfigurationError, match="want one Node object, found 2"):
        NodeTemplate.from_file(path)
    with pytest.raises(ConfigurationError, match=r"missing\.yaml"):
        NodeTemplate.from_file(tmp_path / "missing.yaml")


async def test_simulated_stats_charge_pods_their_requests_or_annotation() -> None:
    template = NodeTemplate().with_resources(memory="1Gi")
    stats = SimulatedStats(template, RealClock())
    requested = make_pod("a", requests={"memory": "256Mi"})
    limited = make_pod("b", limits={"memory": "128Mi"})
    annotated = make_pod("c", annotations={MEMORY_ANNOTATION: "512Mi"})
    summary = await stats.summary([requested, limited, annotated])
    used = {u.uid: u.memory_working_set_bytes for u in summary.pods}
    assert used == {requested.uid: 256 * 2**20, limited.uid: 128 * 2**20, annotated.uid: 2**29}
    assert summary.memory is not None
    assert summary.memory.working_set_bytes == 896 * 2**20
    assert summary.memory.available_bytes == 2**30 - 896 * 2**20


async def test_network_probes_succeed_unless_the_annotation_names_them() -> None:
    runtime = FakeRuntime()
    prober = SimulatedProber(runtime, runtime.clock)
    http = {"httpGet": {"path": "/", "port": 80}}
    pod = make_pod(
        "web",
        container_name="web",
        readiness=http,
        liveness=http,
        annotations={PROBE_FAILURES_ANNOTATION: "web/readiness, other/liveness"},
    )
    (container,) = pod.spec.containers
    assert container.readiness_probe is not None and container.liveness_probe is not None
    ready = await prober.probe(
        ProbeKind.READINESS,
        pod,
        container,
        container.readiness_probe,
        pod_ip="10.88.2.1",
        container_id="fake://x",
    )
    live = await prober.probe(
        ProbeKind.LIVENESS,
        pod,
        container,
        container.liveness_probe,
        pod_ip="10.88.2.1",
        container_id="fake://x",
    )
    assert ready.status is ProbeStatus.FAILURE
    assert live.status is ProbeStatus.SUCCESS


@pytest.mark.parametrize(
    ("method", "url", "query", "verb", "lane"),
    [
        ("GET", "/api/v1/pods", [("watch", True)], "watch", "bulk"),
        ("GET", "/api/v1/pods", [], "list", "bulk"),
        ("GET", "/api/v1/nodes/n1", [], "get", "heartbeat"),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            [],
            "update",
            "heartbeat",
        ),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status", [], "patch", "bulk"),
        ("POST", "/api/v1/namespaces/default/events", [], "create", "events"),
        ("DELETE", "/api/v1/namespaces/default/pods/p", [], "delete", "bulk"),
    ],
)
def test_requests_are_counted_by_verb_and_sorted_into_lanes(
    method: str, url: str, query: list[tuple[str, Any]], verb: str, lane: str
) -> None:
    assert _verb(method, "https://127.0.0.1:6443" + url, query) == verb
    assert _lane("https://127.0.0.1:6443" + url) == lane
