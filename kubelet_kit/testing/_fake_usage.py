"""Resource usage (the CRI's stats) of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` reporting container and
sandbox stats: the usage a test sets per container (``set_stats``, zero
otherwise), and the CRI calls returning it, one container, a filtered list, or
summed over a sandbox.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerState,
    ContainerStats,
    PodSandboxStats,
)
from kubelet_kit.testing._fake_base import _FakeRuntimeBase
from kubelet_kit.testing._fake_records import _Container


class _UsagePart(_FakeRuntimeBase):
    """``set_stats`` and ``container_stats``, ``list_container_stats``,
    ``pod_sandbox_stats``."""

    def set_stats(
        self,
        container_id: str,
        *,
        cpu_ns: int | None = None,
        memory_working_set: int | None = None,
        memory_usage: int | None = None,
        writable_layer_bytes: int | None = None,
        writable_layer_inodes: int | None = None,
    ) -> None:
        """Set the resource usage reported for a container (unset fields keep theirs).

        Raises:
            NotFoundError: no such container.
        """
        c = self._container(container_id)
        if cpu_ns is not None:
            c.cpu_ns = cpu_ns
        if memory_working_set is not None:
            c.memory_working_set = memory_working_set
        if memory_usage is not None:
            c.memory_usage = memory_usage
        if writable_layer_bytes is not None:
            c.writable_layer_bytes = writable_layer_bytes
        if writable_layer_inodes is not None:
            c.writable_layer_inodes = writable_layer_inodes

    async def container_stats(self, container_id: str) -> ContainerStats:
        """The stats set by :meth:`set_stats` (zero otherwise). NotFoundError if unknown."""
        await self._enter("container_stats", (container_id,))
        return self._c_stats(self._container(container_id))

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Stats of every container matching ``filter``."""
        await self._enter("list_container_stats", (filter,))
        return [
            self._c_stats(c)
            for c in self._candidates(self._containers, self._containers_by_pod, filter)
            if filter is None or filter.matches(self._c_info(c))
        ]

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Sums of the sandbox's containers' stats; ``process_count`` is the number of
        running containers. NotFoundError if unknown."""
        await self._enter("pod_sandbox_stats", (pod_sandbox_id,))
        sb = self._sandbox(pod_sandbox_id)
        members = list(self._containers_by_sandbox.get(sb.id, {}).values())
        return PodSandboxStats(
            pod_sandbox_id=sb.id,
            timestamp=self.clock.now(),
            cpu_usage_core_nanoseconds=sum(c.cpu_ns for c in members),
            memory_working_set_bytes=sum(c.memory_working_set for c in members),
            process_count=sum(1 for c in members if c.state == ContainerState.RUNNING),
            containers=tuple(self._c_stats(c) for c in members),
        )

    def _c_stats(self, c: _Container) -> ContainerStats:
        return ContainerStats(
            container_id=c.id,
            timestamp=self.clock.now(),
            cpu_usage_core_nanoseconds=c.cpu_ns,
            memory_working_set_bytes=c.memory_working_set,
            memory_usage_bytes=c.memory_usage,
            writable_layer_bytes=c.writable_layer_bytes,
            writable_layer_inodes=c.writable_layer_inodes,
        )
