"""StubContainerManager: for machines (or tests) where the agent manages no cgroups."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kubelet_kit.api.admission import AdmitResult

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod, Quantity
    from kubelet_kit.container import LinuxContainerResources

__all__ = ["StubContainerManager"]


def _memory_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class StubContainerManager:
    """A ContainerManager that creates no cgroups and admits every pod up to
    ``max_pods``. Capacity is read from the machine (CPUs, /proc/meminfo).

    Args:
        max_pods: The kubelet's maxPods (default 110).
    """

    def __init__(self, *, max_pods: int = 110) -> None:
        from kubelet_kit.api import Quantity

        self.max_pods = max_pods
        self._capacity: dict[str, Quantity] = {
            "cpu": Quantity.parse(str(os.cpu_count() or 1)),
            "memory": Quantity.parse(str(_memory_bytes())),
            "pods": Quantity.parse(str(max_pods)),
        }

    async def start(self) -> None:
        """Nothing to create."""

    async def stop(self) -> None:
        """Nothing to release."""

    def node_capacity(self) -> Mapping[str, Quantity]:
        """CPUs and memory of the machine, and ``pods``."""
        return dict(self._capacity)

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """Same as capacity: nothing is reserved."""
        return dict(self._capacity)

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Refuse only when the node already runs ``max_pods`` pods."""
        if len(active_pods) >= self.max_pods:
            return AdmitResult.refuse(
                "OutOfpods", f"Node didn't have enough resource: pods, limit: {self.max_pods}"
            )
        return AdmitResult.ok()

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """No cgroup: returns ""."""
        return ""

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """Nothing to remove."""

    def container_resources(
        self, pod: Pod, container: Container
    ) -> LinuxContainerResources | None:
        """None: the runtime decides."""
        return None

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """No cgroups: nothing removed."""
        return []
