"""The ContainerManager protocol: node resources, pod cgroups, admission."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod, Quantity
    from kubelet_kit.api.admission import AdmitResult
    from kubelet_kit.container import LinuxContainerResources

__all__ = ["ContainerManager"]


@runtime_checkable
class ContainerManager(Protocol):
    """Owns the node's resources: capacity, allocatable, cgroups, admission.

    The composer calls :meth:`ensure_pod_cgroup` before a pod's sandbox is made,
    passes :meth:`container_resources` to the runtime for each container, and asks
    :meth:`admit_pod` before accepting a pod.
    """

    async def start(self) -> None:
        """Create and verify the cgroup hierarchy. Idempotent; raises
        ConfigurationError when the node cannot be managed as configured."""

    async def stop(self) -> None:
        """Release what :meth:`start` holds. Idempotent. Pods keep running."""

    def node_capacity(self) -> Mapping[str, Quantity]:
        """The node's total resources (``cpu``, ``memory``, ``pods``, ...). Never blocks."""

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """What pods may use: capacity less reservations. Never blocks."""

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Whether ``pod`` fits beside ``active_pods``. Never blocks."""

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """Create or update the pod's cgroup; returns the cgroup parent to hand the
        runtime ("" when the manager makes none). Idempotent."""

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """Remove the pod's cgroup after its containers are gone. Idempotent."""

    def container_resources(
        self, pod: Pod, container: Container
    ) -> LinuxContainerResources | None:
        """Linux resources for one container (shares, quota, memory limit,
        oom_score_adj, cpuset), or None to let the runtime decide. Never blocks."""

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """Housekeeping: remove the cgroups of pods not in ``active_pod_uids`` (killing
        what still runs in them); returns their uids. Idempotent."""
