"""The simulator at small scale against a real kube-apiserver 1.20.2: ten nodes
register and stay Ready on their Leases, the pods bound to them run as their
commands say and their statuses and events reach the API server, probes and
faults behave as documented, and the nodes leave when stopped.

Pods are bound by the test (``spec.nodeName``), as no scheduler runs here.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubelet_kit.cluster import connect
from kubelet_kit.simulate import PROBE_FAILURES_ANNOTATION, NodeTemplate, Simulator

from .kube_apiserver import KubeAPIServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

NODES = 10


def _pod(name: str, node: str, command: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "registry.example/app:1"}
    if command is not None:
        container["command"] = command
    container.update(extra.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **extra.pop("metadata", {})},
        "spec": {
            "nodeName": node,
            "restartPolicy": extra.pop("restart_policy", "Always"),
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
        },
    }


class Cluster:
    """The test's view of the API server: kubectl as the admin."""

    def __init__(self, apiserver: KubeAPIServer) -> None:
        self.apiserver = apiserver

    def get(self, path: str) -> dict[str, Any] | None:
        return self.apiserver.get_json(path)

    def create(self, obj: dict[str, Any]) -> None:
        done = self.apiserver.kubectl("create", "-f", "-", input=json.dumps(obj))
        assert done.rc == 0, str(done)

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.get(f"/api/v1/namespaces/default/pods/{name}")

    async def until(self, what: str, check: Any, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = await asyncio.to_thread(check)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g}s: {what}")
            await asyncio.sleep(0.5)


def _condition(obj: dict[str, Any] | None, kind: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return str(c.get("status", ""))
    return ""


@pytest.fixture
async def sim(kube_apiserver: KubeAPIServer) -> AsyncIterator[tuple[Simulator, Cluster]]:
    client = await connect(kube_apiserver.admin_kubeconfig, qps=-1)
    prefix = f"sim-{uuid.uuid4().hex[:6]}-"
    template = NodeTemplate(labels={"simulated": "true"}).with_resources(
        cpu="8", memory="32Gi", max_pods=30
    )
    simulator = Simulator(
        client, nodes=NODES, prefix=prefix, template=template, start_spread=1.0, seed=1
    )
    try:
        async with simulator:
            await simulator.wait_registered(timeout=60)
            yield simulator, Cluster(kube_apiserver)
    finally:
        await client.close()


async def test_nodes_register_ready_with_leases_and_leave_when_stopped(
    kube_apiserver: KubeAPIServer,
) -> None:
    client = await connect(kube_apiserver.admin_kubeconfig, qps=-1)
    cluster = Cluster(kube_apiserver)
    prefix = f"leave-{uuid.uuid4().hex[:6]}-"
    template = NodeTemplate(labels={"team": "sim"}).with_resources(cpu="6", memory="12Gi")
    try:
        async with Simulator(client, nodes=3, prefix=prefix, template=template) as simulator:
            await simulator.wait_registered(timeout=60)
            for name in simulator.node_names:
                node = await cluster.until(
                    f"{name} Ready",
                    lambda n=name: (
                        (o := cluster.get(f"/api/v1/nodes/{n}"))
                        and _condition(o, "Ready") == "True"
                        and o
                    ),
                )
                assert node["metadata"]["labels"]["team"] == "sim"
                assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
                assert node["status"]["capacity"]["cpu"] == "6"
                assert node["status"]["capacity"]["memory"] == "12Gi"
                assert node["status"]["capacity"]["pods"] == "110"
                assert node["status"]["addresses"][0]["type"] == "InternalIP"
                lease = cluster.get(
                    f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
                )
                assert lease is not None and lease["spec"]["holderIdentity"] == name
            addresses = {
                cluster.get(f"/api/v1/nodes/{n}")["status"]["addresses"][0]["address"]  # type: ignore[index]
                for n in simulator.node_names
            }
            assert len(addresses) == 3  # each node its own InternalIP
        # Stopped: the nodes left (Node and Lease deleted).
        for name in simulator.node_names:
            assert cluster.get(f"/api/v1/nodes/{name}") is None
            assert (
                cluster.get(
                    f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
                )
                is None
            )
    finally:
        await client.close()


async def test_bound_pods_run_as_their_commands_say(sim: tuple[Simulator, Cluster]) -> None:
    simulator, cluster = sim
    tag = uuid.uuid4().hex[:6]
    names = []
    # One long-running pod on every node, plus pods that exit 0 and 3 (never restarted).
    for i, node in enumerate(simulator.node_names):
        names.append(f"run-{tag}-{i}")
        cluster.create(_pod(names[-1], node))
    cluster.create(
        _pod(
            f"done-{tag}",
            simulator.node_names[0],
            ["sh", "-c", "sleep 1; exit 0"],
            restart_policy="Never",
        )
    )
    cluster.create(
        _pod(f"fail-{tag}", simulator.node_names[1], ["sh", "-c", "exit 3"], restart_policy="Never")
    )

    for name in names:
        pod = await cluster.until(
            f"{name} Running",
            lambda n=name: (p := cluster.pod(n)) and p["status"].get("phase") == "Running" and p,
        )
        assert pod["status"]["podIP"]
        assert pod["status"]["hostIP"].startswith("10.64.")
        assert _condition(pod, "Ready") == "True"
        (cs,) = pod["status"]["containerStatuses"]
        assert cs["ready"] is True and "running" in cs["state"]
    done = await cluster.until(
        "done Succeeded",
        lambda: (p := cluster.pod(f"done-{tag}")) and p["status"].get("phase") == "Succeeded" and p,
    )
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    failed = await cluster.until(
        "fail Failed",
        lambda: (p := cluster.pod(f"fail-{tag}")) and p["status"].get("phase") == "Failed" and p,
    )
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"

    # Events as a kubelet posts them, from the node that ran the pod.
    def started() -> list[dict[str, Any]]:
        events = (
            cluster.get(
                f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name={names[0]}"
            )
            or {}
        )
        return [e for e in events.get("items") or () if e.get("reason") == "Started"]

    (event,) = await cluster.until("a Started event", started)
    assert event["source"]["host"] == simulator.node_names[0]
    assert event["source"]["component"] == "kubelet"

    # A pod deleted through the API is stopped by its node and removed for good.
    done = cluster.apiserver.kubectl("delete", "pod", names[2], "--wait=false")
    assert done.rc == 0, str(done)
    await cluster.until(f"{names[2]} gone", lambda: cluster.pod(names[2]) is None)
    report = simulator.report()
    assert report.registered == NODES
    assert report.requests.get("watch", 0) <= 3  # one shared pod watch, not one per node


async def test_network_probes_follow_the_annotation_and_exec_probes_run(
    sim: tuple[Simulator, Cluster],
) -> None:
    simulator, cluster = sim
    tag = uuid.uuid4().hex[:6]
    http = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1}
    cluster.create(_pod(f"ok-{tag}", simulator.node_names[2], container={"readinessProbe": http}))
    cluster.create(
        _pod(
            f"unready-{tag}",
            simulator.node_names[3],
            container={"readinessProbe": http},
            metadata={"annotations": {PROBE_FAILURES_ANNOTATION: "app/readiness"}},
        )
    )
    exec_probe = {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1}
    cluster.create(
        _pod(
            f"exec-{tag}",
            simulator.node_names[4],
            ["sh", "-c", "sleep 3; touch /tmp/healthy; sleep 3600"],
            container={"readinessProbe": exec_probe},
        )
    )
    await cluster.until(
        "the HTTP-probed pod Ready", lambda: _condition(cluster.pod(f"ok-{tag}"), "Ready") == "True"
    )
    await cluster.until(
        "the exec-probed pod Ready once the file exists",
        lambda: _condition(cluster.pod(f"exec-{tag}"), "Ready") == "True",
    )
    unready = await cluster.until(
        "the failing pod Running",
        lambda: (
            (p := cluster.pod(f"unready-{tag}")) and p["status"].get("phase") == "Running" and p
        ),
    )
    await asyncio.sleep(3)
    unready = cluster.pod(f"unready-{tag}")
    assert _condition(unready, "Ready") == "False"
    assert _condition(unready, "ContainersReady") == "False"


async def test_killed_sandboxes_come_back(sim: tuple[Simulator, Cluster]) -> None:
    simulator, cluster = sim
    tag = uuid.uuid4().hex[:6]
    node = simulator.nodes[5]
    cluster.create(_pod(f"victim-{tag}", node.name))
    await cluster.until(
        "victim Running",
        lambda: (p := cluster.pod(f"victim-{tag}")) and p["status"].get("phase") == "Running",
    )
    assert await node.lose_pods() == 1

    def restarted() -> bool:
        pod = cluster.pod(f"victim-{tag}") or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        return statuses[0].get("restartCount", 0) >= 1 and "running" in statuses[0].get("state", {})

    # The new sandbox's IP replaces the old one in the API (a merge would hold
    # both, which the API server refuses).
    await cluster.until("victim restarted in a new sandbox", restarted)
