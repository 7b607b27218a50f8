"""FakeStatsProvider: node and pod usage a test sets by hand.

A test of an eviction policy sets what the node "measures" and lets the manager
decide::

    stats = FakeStatsProvider(clock=clock)
    stats.set_memory(available="50Mi", capacity="2Gi")
    stats.set_pod(pod, memory="300Mi")
    evicted = await manager.synchronize(kill_pod, lambda: [pod])

Amounts are ints (bytes, inodes, processes) or quantity strings (``"50Mi"``).
Each :meth:`summary` is stamped with the clock's wall time (0 without a clock,
meaning "always fresh"). ``on_summary(callback)`` runs a callback before each
summary is built, so the numbers can follow other fakes (e.g. an imagefs that
frees space as a FakeRuntime's images are removed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from kubelet_kit.api import Quantity
from kubelet_kit.eviction.stats import (
    ContainerUsage,
    FsStats,
    MemoryStats,
    NodeSummary,
    PodUsage,
    VolumeUsage,
)

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.clock import Clock

__all__ = ["Amount", "FakeStatsProvider", "StatsCall"]

#: An amount: an int, or a quantity string such as ``"100Mi"``.
Amount = int | str


def _n(value: Amount | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    return Quantity.parse(value).value()


@attrs.frozen
class StatsCall:
    """One call to :meth:`FakeStatsProvider.summary`: the pod uids it was asked for."""

    method: str
    pod_uids: tuple[str, ...]


class FakeStatsProvider:
    """A :class:`~kubelet_kit.eviction.StatsProvider` whose numbers a test sets.

    Starts with a roomy node (8Gi memory, 100Gi nodefs with a million inodes on
    the same filesystem as images, pid_max 4194304 with 100 processes) and no pod
    stats.

    Args:
        clock: Stamps summaries with its ``now()``; without one every summary has
            time 0 (treated as fresh by the manager).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock = clock
        self.memory: MemoryStats | None = MemoryStats(8 << 30, 0)
        self.allocatable_memory: MemoryStats | None = None
        self.nodefs: FsStats | None = FsStats(100 << 30, 100 << 30, 1_000_000, 1_000_000)
        self.imagefs: FsStats | None = None
        self.max_pid: int | None = 4_194_304
        self.process_count: int | None = 100
        self.pods: dict[str, PodUsage] = {}
        self.calls: list[StatsCall] = []
        self._errors: list[tuple[str, BaseException, int]] = []
        self._hooks: list[Callable[[FakeStatsProvider], None]] = []

    # -- setting numbers --------------------------------------------------------

    def set_memory(self, *, available: Amount, capacity: Amount) -> None:
        """Node memory: ``memory.available`` is ``available`` of ``capacity``."""
        a, c = _n(available), _n(capacity)
        assert a is not None and c is not None
        self.memory = MemoryStats(available_bytes=a, working_set_bytes=c - a)

    def set_allocatable_memory(self, *, available: Amount, capacity: Amount) -> None:
        """The pods' cgroup memory (``allocatableMemory.available``)."""
        a, c = _n(available), _n(capacity)
        assert a is not None and c is not None
        self.allocatable_memory = MemoryStats(available_bytes=a, working_set_bytes=c - a)

    def set_nodefs(
        self,
        *,
        available: Amount | None = None,
        capacity: Amount | None = None,
        inodes_free: Amount | None = None,
        inodes: Amount | None = None,
    ) -> None:
        """Change the node filesystem; arguments left None keep their value."""
        self.nodefs = self._fs(self.nodefs, available, capacity, inodes_free, inodes)

    def set_imagefs(
        self,
        *,
        available: Amount | None = None,
        capacity: Amount | None = None,
        inodes_free: Amount | None = None,
        inodes: Amount | None = None,
    ) -> None:
        """Give images a dedicated filesystem with these numbers (arguments left
        None keep their value, starting from a copy of nodefs)."""
        base = self.imagefs if self.imagefs is not None else self.nodefs
        self.imagefs = self._fs(base, available, capacity, inodes_free, inodes)

    @staticmethod
    def _fs(
        base: FsStats | None,
        available: Amount | None,
        capacity: Amount | None,
        inodes_free: Amount | None,
        inodes: Amount | None,
    ) -> FsStats:
        b = base or FsStats()
        return FsStats(
            available_bytes=_n(available) if available is not None else b.available_bytes,
            capacity_bytes=_n(capacity) if capacity is not None else b.capacity_bytes,
            inodes_free=_n(inodes_free) if inodes_free is not None else b.inodes_free,
            inodes=_n(inodes) if inodes is not None else b.inodes,
        )

    def set_pids(self, *, max_pid: int, running: int) -> None:
        """``pid.available`` is ``max_pid - running``."""
        self.max_pid = max_pid
        self.process_count = running

    def set_pod(
        self,
        pod: Pod | str,
        *,
        memory: Amount | None = None,
        processes: int | None = None,
        containers: Sequence[ContainerUsage] | None = None,
        volumes: Mapping[str, Amount] | None = None,
        volume_inodes: Mapping[str, int] | None = None,
    ) -> PodUsage:
        """Set one pod's usage (by pod or uid); returns what was stored.

        ``containers`` default to one entry per container of the pod, each given
        an equal share of ``memory`` (so eviction messages name them).
        """
        uid = pod if isinstance(pod, str) else pod.uid
        mem = _n(memory)
        if containers is None:
            containers = ()
            if not isinstance(pod, str):
                names = [c.name for c in pod.spec.containers]
                share = mem // len(names) if mem is not None and names else None
                containers = tuple(
                    ContainerUsage(name=n, memory_working_set_bytes=share) for n in names
                )
        vols = {
            name: VolumeUsage(_n(used) or 0, (volume_inodes or {}).get(name, 0))
            for name, used in (volumes or {}).items()
        }
        for name, count in (volume_inodes or {}).items():
            if name not in vols:
                vols[name] = VolumeUsage(0, count)
        usage = PodUsage(
            uid=uid,
            memory_working_set_bytes=mem,
            process_count=processes,
            containers=tuple(containers),
            volumes=vols,
        )
        self.pods[uid] = usage
        return usage

    def remove_pod(self, pod: Pod | str) -> None:
        """Forget a pod's stats (it is then ranked as having none)."""
        self.pods.pop(pod if isinstance(pod, str) else pod.uid, None)

    def on_summary(self, callback: Callable[[FakeStatsProvider], None]) -> None:
        """Run ``callback(self)`` before each summary is built."""
        self._hooks.append(callback)

    def inject_error(self, method: str, exc: BaseException, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` (only ``"summary"``) raise ``exc``.

        Raises:
            ValueError: ``method`` is not a StatsProvider method.
        """
        if method != "summary":
            raise ValueError(f"inject_error: FakeStatsProvider has no method {method!r}")
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._errors.append((method, exc, times))

    # -- StatsProvider ------------------------------------------------------------

    async def summary(self, pods: Sequence[Pod]) -> NodeSummary:
        """The numbers set, with the stats of those of ``pods`` that have any.

        Raises whatever :meth:`inject_error` queued.
        """
        self.calls.append(StatsCall("summary", tuple(p.uid for p in pods)))
        if self._errors:
            method, exc, times = self._errors[0]
            if times <= 1:
                self._errors.pop(0)
            else:
                self._errors[0] = (method, exc, times - 1)
            raise exc.with_traceback(None)
        for hook in self._hooks:
            hook(self)
        return NodeSummary(
            time=self.clock.now() if self.clock is not None else 0.0,
            memory=self.memory,
            allocatable_memory=self.allocatable_memory,
            nodefs=self.nodefs,
            imagefs=self.imagefs if self.imagefs is not None else self.nodefs,
            dedicated_image_fs=self.imagefs is not None,
            max_pid=self.max_pid,
            process_count=self.process_count,
            pods=tuple(self.pods[p.uid] for p in pods if p.uid in self.pods),
        )
