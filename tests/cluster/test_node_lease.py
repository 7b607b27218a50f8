"""Node registration, node status and the Lease against the API server stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kubelet_kit.cluster import LEASE_NAMESPACE, LeaseController, NodeController, status_changed
from kubelet_kit.testing import FakeClock

from .apiserver_standin import StandInAPIServer
from .helpers import eventually


class Status:
    """A node status that tests change."""

    def __init__(self) -> None:
        self.value: dict[str, Any] = {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "7Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                }
            ],
            "nodeInfo": {"kubeletVersion": "v0.1.0+kubelet-kit"},
        }

    async def __call__(self) -> dict[str, Any]:
        return self.value


def status_patches(standin: StandInAPIServer) -> int:
    return standin.count("PATCH", "/api/v1/nodes/node-1/status")


async def test_registers_the_node_with_labels_taints_and_status(
    standin: StandInAPIServer, api_client: Any
) -> None:
    taint = {"key": "edge", "value": "true", "effect": "NoSchedule"}
    node = NodeController(api_client, "node-1", Status(), labels={"zone": "a"}, taints=[taint])
    assert await node.register()
    stored = standin.get("nodes", "", "node-1")
    assert stored is not None
    assert stored["metadata"]["labels"]["kubernetes.io/hostname"] == "node-1"
    assert stored["metadata"]["labels"]["zone"] == "a"
    assert stored["metadata"]["labels"]["kubernetes.io/os"] == "linux"
    assert stored["metadata"]["labels"]["beta.kubernetes.io/os"] == "linux"
    assert (
        stored["metadata"]["labels"]["beta.kubernetes.io/arch"]
        == stored["metadata"]["labels"]["kubernetes.io/arch"]
    )
    assert stored["spec"]["taints"] == [taint]
    assert stored["status"]["allocatable"]["memory"] == "7Gi"
    assert node.node_uid == stored["metadata"]["uid"]


async def test_an_existing_node_is_adopted_and_its_labels_updated(
    standin: StandInAPIServer, api_client: Any
) -> None:
    existing = standin.put(
        "nodes",
        {
            "metadata": {
                "name": "node-1",
                "labels": {"custom": "kept", "kubernetes.io/hostname": "old-name"},
            }
        },
    )
    node = NodeController(api_client, "node-1", Status(), labels={"zone": "b"})
    assert await node.register()
    stored = standin.get("nodes", "", "node-1")
    assert stored is not None
    assert stored["metadata"]["uid"] == existing["metadata"]["uid"]
    assert stored["metadata"]["labels"]["custom"] == "kept"
    assert stored["metadata"]["labels"]["kubernetes.io/hostname"] == "node-1"
    assert "zone" not in stored["metadata"]["labels"]  # extra labels: registration only
    assert standin.count("PUT", "/api/v1/nodes/node-1") == 1


async def test_status_is_sent_when_changed_or_at_the_report_frequency(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    status = Status()
    node = NodeController(api_client, "node-1", status, clock=clock)
    assert await node.register()
    assert await node.update_status()  # first report: always
    assert status_patches(standin) == 1
    # Only the heartbeat moved: nothing to send before the report frequency.
    status.value["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    clock.advance(10)
    assert await node.update_status()
    assert status_patches(standin) == 1
    status.value["allocatable"]["pods"] = "100"
    assert await node.update_status()
    assert status_patches(standin) == 2
    stored = standin.get("nodes", "", "node-1")
    assert stored is not None and stored["status"]["allocatable"]["pods"] == "100"
    clock.advance(300)
    assert await node.update_status()
    assert status_patches(standin) == 3


async def test_a_conflict_is_retried_after_reading_the_node_again(
    standin: StandInAPIServer, api_client: Any
) -> None:
    status = Status()
    node = NodeController(api_client, "node-1", status)
    assert await node.register()
    # Someone else writes the Node: our copy's resourceVersion is stale now.
    other = standin.get("nodes", "", "node-1")
    assert other is not None
    other["metadata"]["labels"]["touched"] = "yes"
    standin.put("nodes", other)
    status.value["allocatable"]["pods"] = "50"
    assert await node.update_status()
    assert status_patches(standin) == 2  # 409, then success after the re-read
    assert standin.count("GET", "/api/v1/nodes/node-1") == 1
    stored = standin.get("nodes", "", "node-1")
    assert stored is not None and stored["status"]["allocatable"]["pods"] == "50"
    assert stored["metadata"]["labels"]["touched"] == "yes"


async def test_a_deleted_node_is_registered_again(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    node = NodeController(api_client, "node-1", Status(), clock=clock)
    task = asyncio.create_task(node.run())
    try:
        await eventually(
            lambda: standin.get("nodes", "", "node-1") is not None, clock=clock, what="registered"
        )
        first = node.node_uid
        standin.remove("nodes", "", "node-1")
        await eventually(
            lambda: standin.get("nodes", "", "node-1") is not None,
            clock=clock,
            what="registered again",
        )
        await eventually(lambda: node.node_uid not in (None, first), clock=clock)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_status_changed_ignores_heartbeat_times_only() -> None:
    base = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    beat = {"conditions": [{**base["conditions"][0], "lastHeartbeatTime": "2026-01-01T00:01:00Z"}]}
    flip = {"conditions": [{**base["conditions"][0], "status": "False"}]}
    assert status_changed(None, base)
    assert not status_changed(base, beat)
    assert status_changed(base, flip)


async def test_the_lease_is_created_and_renewed_every_ten_seconds(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    lease = LeaseController(api_client, "node-1", clock=clock, node_uid=lambda: "node-uid")
    assert lease.renew_interval == 10.0
    task = asyncio.create_task(lease.run())
    try:
        await eventually(lambda: lease.renewals == 1, what="created")
        stored = standin.get("leases", LEASE_NAMESPACE, "node-1")
        assert stored is not None
        assert stored["spec"]["holderIdentity"] == "node-1"
        assert stored["spec"]["leaseDurationSeconds"] == 40
        assert stored["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "node-uid"}
        ]
        first = stored["spec"]["renewTime"]
        clock.advance(9.9)
        await asyncio.sleep(0.05)
        assert lease.renewals == 1  # not before its period
        clock.advance(0.1)
        await eventually(lambda: lease.renewals == 2, what="renewed")
        stored = standin.get("leases", LEASE_NAMESPACE, "node-1")
        assert stored is not None and stored["spec"]["renewTime"] > first
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_lease_changed_by_another_writer_is_read_again(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    lease = LeaseController(api_client, "node-1", clock=clock)
    assert await lease.renew()
    stored = standin.get("leases", LEASE_NAMESPACE, "node-1")
    assert stored is not None
    stored["metadata"]["labels"] = {"by": "other"}
    standin.put("leases", stored)
    clock.advance(10)
    assert await lease.renew()
    assert (
        standin.count(
            "PUT", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/node-1"
        )
        == 2
    )  # 409, then success
    stored = standin.get("leases", LEASE_NAMESPACE, "node-1")
    assert stored is not None and stored["metadata"]["labels"] == {"by": "other"}
    assert lease.renewals == 2


async def test_lease_renewal_fails_quietly_while_the_server_is_away(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    lease = LeaseController(api_client, "node-1", clock=clock)
    assert await lease.renew()
    await standin.stop()
    assert not await lease.renew()
    await standin.start()
    assert await lease.renew()
    assert lease.renewals == 2


async def test_registration_retries_after_100ms_doubling(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    failures = {"n": 3}

    def refuse(request: web.Request) -> web.Response | None:
        if request.method == "POST" and request.path == "/api/v1/nodes" and failures["n"]:
            failures["n"] -= 1
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        return None

    standin.add_hook(refuse)
    node = NodeController(api_client, "node-1", Status(), clock=clock)
    task = asyncio.create_task(node.run())
    try:
        delays = []
        for _ in range(3):
            await eventually(lambda: clock.next_deadline() is not None, what="retry wait")
            deadline = clock.next_deadline()
            assert deadline is not None
            delays.append(round(deadline - clock.monotonic(), 3))
            clock.advance(deadline - clock.monotonic())
        assert delays == [0.1, 0.2, 0.4]
        await eventually(lambda: node.registered, what="registered after retries")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
