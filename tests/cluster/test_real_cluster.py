"""The scripted run against a REAL Kubernetes cluster (kind, k3s, minikube, ...).

Skipped unless ``KUBELET_KIT_REAL_CLUSTER`` names a kubeconfig with rights to
create nodes, leases, pods and events (an admin kubeconfig, or a node identity
``system:node:<name>`` whose name matches the node below). See docs/cluster.md.

It joins the cluster as a new Node named ``kubelet-kit-check-<random>`` (pods run
on a FakeRuntime, so nothing runs on this machine), binds a pod to it, waits for
the pod to be Running and Ready on the API server, checks the Node, the Lease
and the events, deletes the pod gracefully and waits until it is gone, and
finally deletes the Node. All waits use real time and are bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.cluster import LEASE_NAMESPACE, ClusterNode, connect
from kubelet_kit.config.apiserver import APIServerSource
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.node.nodestatus import NodeStatusProvider
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.testing.fake_runtime import FakeRuntime

KUBECONFIG = os.environ.get("KUBELET_KIT_REAL_CLUSTER", "")

pytestmark = pytest.mark.skipif(not KUBECONFIG, reason="KUBELET_KIT_REAL_CLUSTER is not set")


async def until(check: Any, what: str, timeout: float = 120.0) -> Any:
    """Poll ``check()`` (a coroutine function) once a second until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g}s")
        await asyncio.sleep(1.0)


@pytest.mark.timeout(600)
async def test_join_a_real_cluster(tmp_path: Path) -> None:
    from kubernetes_asyncio import client as k8s
    from kubernetes_asyncio.client.exceptions import ApiException

    node_name = f"kubelet-kit-check-{uuid.uuid4().hex[:6]}"
    api_client = await connect(KUBECONFIG)
    core = k8s.CoreV1Api(api_client)
    runtime = FakeRuntime()
    runtime.add_image("busybox")
    kubelet = Kubelet(
        **stub_parts(
            runtime=runtime,
            node_name=node_name,
            root_dir=tmp_path,
            pod_logs_dir=tmp_path / "logs",
            sources=[APIServerSource(api_client, node_name)],
        )
    )
    provider = NodeStatusProvider(kubelet, addresses=lambda: ["127.0.0.1"])

    async def node_status() -> Any:
        return (await provider.status()).to_dict()

    node = ClusterNode(
        kubelet,
        api_client,
        node_status=node_status,
        taints=[{"key": "kubelet-kit.io/check", "effect": "NoSchedule"}],
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{node_name}-web", "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "terminationGracePeriodSeconds": 5,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "main", "image": "busybox", "command": ["sh", "-c", "sleep infinity"]}
            ],
        },
    }
    try:
        async with kubelet, node:

            async def registered() -> Any:
                try:
                    return await core.read_node(node_name)
                except ApiException:
                    return None

            got = await until(registered, "node registered")
            assert got.metadata.labels["kubernetes.io/hostname"] == node_name
            await core.create_namespaced_pod("default", pod)

            async def running() -> bool:
                p = await core.read_namespaced_pod(pod["metadata"]["name"], "default")
                if p.status is None:
                    return False
                ready = {c.type: c.status for c in p.status.conditions or ()}
                return bool(p.status.phase == "Running" and ready.get("Ready") == "True")

            await until(running, "pod Running and Ready")
            lease = await k8s.CoordinationV1Api(api_client).read_namespaced_lease(
                node_name, LEASE_NAMESPACE
            )
            assert lease.spec.holder_identity == node_name
            assert lease.spec.lease_duration_seconds == 40
            first_renew = lease.spec.renew_time

            async def renewed() -> bool:
                again = await k8s.CoordinationV1Api(api_client).read_namespaced_lease(
                    node_name, LEASE_NAMESPACE
                )
                return bool(again.spec.renew_time > first_renew)

            await until(renewed, "lease renewed", timeout=30)

            async def started_event() -> bool:
                events = await core.list_namespaced_event(
                    "default", field_selector=f"involvedObject.name={pod['metadata']['name']}"
                )
                return any(e.reason == "Started" for e in events.items)

            await until(started_event, "Started event")

            await core.delete_namespaced_pod(pod["metadata"]["name"], "default")

            async def gone() -> bool:
                try:
                    await core.read_namespaced_pod(pod["metadata"]["name"], "default")
                except ApiException as exc:
                    return exc.status == 404
                return False

            await until(gone, "pod deleted for good")
    finally:
        for call in (
            lambda: core.delete_namespaced_pod(
                pod["metadata"]["name"], "default", grace_period_seconds=0
            ),
            lambda: core.delete_node(node_name),
        ):
            with contextlib.suppress(ApiException):
                await call()
        await api_client.close()
