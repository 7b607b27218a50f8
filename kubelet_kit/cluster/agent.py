"""ClusterNode: a Kubelet joined to a Kubernetes API server as a Node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubelet_kit.cluster.events import EventSink
from kubelet_kit.cluster.lease import LeaseController
from kubelet_kit.cluster.mirror import MirrorPods
from kubelet_kit.cluster.node import NodeController
from kubelet_kit.cluster.podstatus import PodStatusSync

if TYPE_CHECKING:
    from kubelet_kit.node.kubelet import KubeletCore as Kubelet

__all__ = ["ClusterNode"]


class ClusterNode:
    """Runs the cluster side of a node beside its Kubelet: the Node and its status,
    the Lease, pod statuses and final deletes, events and mirror pods.

    The Kubelet itself takes its pods from an
    :class:`~kubelet_kit.config.apiserver.APIServerSource` among its sources and
    runs on its own; this object only reports. Losing the API server stops
    nothing: each part retries on its period and catches up when it returns.

    Args:
        kubelet: The agent.
        api_client: A ``kubernetes_asyncio`` ApiClient (see :func:`connect`).
        node_status: Returns the v1 NodeStatus dict; default the
            :class:`~kubelet_kit.node.nodestatus.NodeStatusProvider` of ``kubelet``.
        labels: Extra node labels.
        taints: Taints to register with.
        lease_duration: nodeLeaseDurationSeconds.
        node_status_update_frequency: nodeStatusUpdateFrequency (seconds).
        node_status_report_frequency: nodeStatusReportFrequency (seconds).
    """

    def __init__(
        self,
        kubelet: Kubelet,
        api_client: Any,
        *,
        node_status: Callable[[], Awaitable[Mapping[str, Any]]] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        lease_duration: int = 40,
        node_status_update_frequency: float = 10.0,
        node_status_report_frequency: float = 300.0,
    ) -> None:
        clock = kubelet.clock
        if node_status is None:
            from kubelet_kit.node.nodestatus import NodeStatusProvider

            provider = NodeStatusProvider(kubelet)

            async def node_status() -> Mapping[str, Any]:
                return (await provider.status()).to_dict()

        self.node = NodeController(
            api_client,
            kubelet.node_name,
            node_status,
            clock=clock,
            labels=labels,
            taints=taints,
            node_status_update_frequency=node_status_update_frequency,
            node_status_report_frequency=node_status_report_frequency,
        )
        self.lease = LeaseController(
            api_client,
            kubelet.node_name,
            clock=clock,
            lease_duration=lease_duration,
            node_uid=lambda: self.node.node_uid,
        )
        self.mirrors = MirrorPods(api_client, kubelet, lambda: self.node.node_uid, clock=clock)
        self.pod_status = PodStatusSync(
            api_client, kubelet, clock=clock, mirror_of=self.mirrors.mirror_of
        )
        self.events = EventSink(
            api_client, lambda: kubelet.events.events(), kubelet.node_name, clock=clock
        )
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """Run every part until :meth:`stop`. Raises if a part fails unexpectedly."""
        self._stop.clear()
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(self.node.run(), name="node-status"),
                tg.create_task(self.lease.run(), name="node-lease"),
                tg.create_task(self.pod_status.run(), name="pod-status-sync"),
                tg.create_task(self.events.run(), name="events"),
                tg.create_task(self.mirrors.run(), name="mirror-pods"),
            ]
            await self._stop.wait()
            for task in tasks:
                task.cancel()

    def stop(self) -> None:
        """Ask :meth:`run` to return. Idempotent."""
        self._stop.set()

    async def __aenter__(self) -> ClusterNode:
        self._task = asyncio.create_task(self.run(), name="cluster-node")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
