"""StubContainerManager: for machines (or tests) where the agent manages no cgroups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kubelet_kit.api import Quantity
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.cm.capacity import detect_capacity
from kubelet_kit.cm.interfaces import ContainerRunOptions

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod
    from kubelet_kit.cm.devicemanager import DeviceManager
    from kubelet_kit.container import LinuxContainerResources

__all__ = ["StubContainerManager"]


class StubContainerManager:
    """A ContainerManager that creates no cgroups and admits every pod up to
    ``max_pods``. Capacity is read from the machine (usable CPUs, MemTotal, the
    root filesystem) unless given.

    Args:
        max_pods: The kubelet's maxPods (default 110).
        device_manager: Device plugins' extended resources (none by default).
        capacity: The node's capacity to report instead of the machine's
            (``cpu``, ``memory``, ``ephemeral-storage``...; ``pods`` is
            ``max_pods``), for a node that stands for another machine (a
            simulated node, a test).
    """

    def __init__(
        self,
        *,
        max_pods: int = 110,
        device_manager: DeviceManager | None = None,
        capacity: Mapping[str, Quantity] | None = None,
    ) -> None:
        self.max_pods = max_pods
        self.device_manager = device_manager
        self._capacity: dict[str, Quantity] = (
            detect_capacity(max_pods=max_pods)
            if capacity is None
            else {**capacity, "pods": Quantity.from_int(max_pods)}
        )

    async def start(self) -> None:
        """No cgroups to create; starts the device manager, if any."""
        if self.device_manager is not None:
            await self.device_manager.start()

    async def stop(self) -> None:
        """Stops the device manager, if any."""
        if self.device_manager is not None:
            await self.device_manager.stop()

    def node_capacity(self) -> Mapping[str, Quantity]:
        """CPUs and memory of the machine, ``pods``, and device plugins' resources."""
        if self.device_manager is not None:
            return {**self._capacity, **self.device_manager.capacity_quantities()}
        return dict(self._capacity)

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """Same as capacity (nothing is reserved), healthy devices only."""
        if self.device_manager is not None:
            return {**self._capacity, **self.device_manager.allocatable_quantities()}
        return dict(self._capacity)

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Refuse only when the node already runs ``max_pods`` pods (``pod`` itself
        is not counted among ``active_pods``), with the kubelet's ``OutOfpods``
        reason and message."""
        # len() bounds the count from above: the pods are counted one by one
        # only when the bound would refuse (a burst of admissions stays linear).
        if (
            len(active_pods) + 1 > self.max_pods
            and (others := sum(1 for p in active_pods if p.uid != pod.uid)) + 1 > self.max_pods
        ):
            return AdmitResult.refuse(
                "OutOfpods",
                f"Node didn't have enough resource: pods, requested: 1, used: {others}, "
                f"capacity: {self.max_pods}",
            )
        if self.device_manager is not None:
            return self.device_manager.admit(pod)
        return AdmitResult.ok()

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """No cgroup: returns ""."""
        return ""

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """No cgroup; frees the pod's devices."""
        if self.device_manager is not None:
            await self.device_manager.remove_pod(pod.uid)

    def container_resources(self, pod: Pod, container: Container) -> LinuxContainerResources | None:
        """None: the runtime decides."""
        return None

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """No cgroups: nothing removed; frees devices of pods not active."""
        if self.device_manager is not None:
            await self.device_manager.retain_pods(active_pod_uids)
        return []

    async def container_run_options(self, pod: Pod, container: Container) -> ContainerRunOptions:
        """The device manager's envs, mounts and devices; empty without one."""
        if self.device_manager is None:
            return ContainerRunOptions()
        return await self.device_manager.container_run_options(pod, container)
