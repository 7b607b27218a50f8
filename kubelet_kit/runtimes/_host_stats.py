"""The usage stats of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

A running container's CPU time is the utime + stime of its process group and
descendants, its memory working set and usage their summed resident memory, all
read from /proc (see :mod:`kubelet_kit.runtimes._host_procs`); a sandbox's
usage is the sum over its containers.
"""

from __future__ import annotations

import asyncio

from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerState,
    ContainerStats,
    PodSandboxStats,
)
from kubelet_kit.runtimes._host_base import _HostRuntimeBase
from kubelet_kit.runtimes._host_procs import _Proc, _scan_procs, _tree_usage
from kubelet_kit.runtimes._host_records import _ContainerRecord


class _HostStats(_HostRuntimeBase):
    """Container and sandbox usage from /proc."""

    def _stats(self, rec: _ContainerRecord, procs: list[_Proc]) -> tuple[ContainerStats, int]:
        obs = self._observe(rec.id)
        now = self._clock.now()
        if obs.state is not ContainerState.RUNNING or obs.pid <= 0:
            return ContainerStats(container_id=rec.id, timestamp=now), 0
        cpu, rss, count = _tree_usage(obs.pid, procs)
        return ContainerStats(
            container_id=rec.id,
            timestamp=now,
            cpu_usage_core_nanoseconds=cpu,
            memory_working_set_bytes=rss,
            memory_usage_bytes=rss,
        ), count

    async def container_stats(self, container_id: str) -> ContainerStats:
        """Usage of one container from /proc; usage fields are None unless it runs.
        Raises NotFoundError."""
        rec = self._load_container(container_id)
        return self._stats(rec, await asyncio.to_thread(_scan_procs))[0]

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Usage of every container matching ``filter``. Raises nothing."""
        infos = await self.list_containers(filter)
        wanted = {i.id for i in infos}
        procs = await asyncio.to_thread(_scan_procs)
        return [self._stats(r, procs)[0] for r in self._container_records() if r.id in wanted]

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Summed usage of the sandbox's running containers. Raises NotFoundError."""
        self._load_sandbox(pod_sandbox_id)
        procs = await asyncio.to_thread(_scan_procs)
        stats, count = [], 0
        for rec in self._container_records():
            if rec.pod_sandbox_id == pod_sandbox_id:
                s, n = self._stats(rec, procs)
                stats.append(s)
                count += n
        return PodSandboxStats(
            pod_sandbox_id=pod_sandbox_id,
            timestamp=self._clock.now(),
            cpu_usage_core_nanoseconds=sum(s.cpu_usage_core_nanoseconds or 0 for s in stats),
            memory_working_set_bytes=sum(s.memory_working_set_bytes or 0 for s in stats),
            process_count=count,
            containers=tuple(stats),
        )
