"""What the eviction manager measures: the StatsProvider protocol and its values.

The values are the parts of the kubelet's stats summary (``stats/v1alpha1``) that
eviction reads, in bytes, inodes and process counts. ``None`` means "not
measured"; a signal whose numbers are missing is simply not observed.

Node memory follows the kubelet: ``available = capacity - working set`` where
the working set is usage minus inactive file pages, so
``capacity = available + working set``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from kubelet_kit.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    Observation,
)

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = [
    "ContainerUsage",
    "FsStats",
    "MemoryStats",
    "NodeSummary",
    "PodUsage",
    "StatsProvider",
    "VolumeUsage",
    "make_observations",
]


@attrs.frozen
class MemoryStats:
    """Memory of the node or of the pods' cgroup.

    Attributes:
        available_bytes: Capacity minus working set.
        working_set_bytes: Usage minus inactive file pages.
    """

    available_bytes: int | None = None
    working_set_bytes: int | None = None


@attrs.frozen
class FsStats:
    """One filesystem (nodefs or imagefs)."""

    available_bytes: int | None = None
    capacity_bytes: int | None = None
    inodes_free: int | None = None
    inodes: int | None = None


@attrs.frozen
class VolumeUsage:
    """Disk use of one pod volume."""

    used_bytes: int = 0
    inodes_used: int = 0


@attrs.frozen
class ContainerUsage:
    """Usage of one container of a pod.

    Attributes:
        name: The container's name in the pod spec.
        memory_working_set_bytes: Its memory working set.
        rootfs_used_bytes: Its writable layer.
        rootfs_inodes_used: Inodes of its writable layer.
        logs_used_bytes: Its log files.
        logs_inodes_used: Inodes of its log files.
    """

    name: str
    memory_working_set_bytes: int | None = None
    rootfs_used_bytes: int | None = None
    rootfs_inodes_used: int | None = None
    logs_used_bytes: int | None = None
    logs_inodes_used: int | None = None


@attrs.frozen
class PodUsage:
    """Usage of one pod, keyed to it by uid.

    Attributes:
        uid: ``metadata.uid`` of the pod.
        memory_working_set_bytes: The pod's working set (its cgroup's).
        process_count: Processes in the pod.
        containers: Per-container usage.
        volumes: Disk use of its volumes, by volume name.
    """

    uid: str
    memory_working_set_bytes: int | None = None
    process_count: int | None = None
    containers: tuple[ContainerUsage, ...] = ()
    volumes: Mapping[str, VolumeUsage] = attrs.field(factory=dict)


@attrs.frozen
class NodeSummary:
    """One measurement of the node and its pods.

    Attributes:
        time: When it was taken (wall seconds).
        memory: Node memory (``memory.available``).
        allocatable_memory: The pods' cgroup memory (``allocatableMemory.available``).
        nodefs: The filesystem of the kubelet's root directory.
        imagefs: The filesystem holding images and writable layers.
        dedicated_image_fs: True when imagefs is a different filesystem from nodefs.
        max_pid: ``/proc/sys/kernel/pid_max``.
        process_count: Processes running on the node.
        pods: Usage of the pods measured.
    """

    time: float = 0.0
    memory: MemoryStats | None = None
    allocatable_memory: MemoryStats | None = None
    nodefs: FsStats | None = None
    imagefs: FsStats | None = None
    dedicated_image_fs: bool = False
    max_pid: int | None = None
    process_count: int | None = None
    pods: tuple[PodUsage, ...] = ()


@runtime_checkable
class StatsProvider(Protocol):
    """Measures the node and its pods for the eviction manager."""

    async def summary(self, pods: Sequence[Pod]) -> NodeSummary:
        """Measure the node and ``pods`` now.

        Waits on file reads or the runtime (never blocks the loop); idempotent.
        Raises only on a failure to measure the node as a whole (the round is
        then skipped); a pod that cannot be measured is left out of ``pods``.
        """
        ...


def _mem(stats: MemoryStats | None) -> tuple[int, int] | None:
    if stats is None or stats.available_bytes is None or stats.working_set_bytes is None:
        return None
    return stats.available_bytes, stats.available_bytes + stats.working_set_bytes


def make_observations(summary: NodeSummary) -> dict[str, Observation]:
    """The signals a summary shows (upstream ``makeSignalObservations``)."""
    t = summary.time
    out: dict[str, Observation] = {}
    for signal, stats in (
        (MEMORY_AVAILABLE, summary.memory),
        (ALLOCATABLE_MEMORY_AVAILABLE, summary.allocatable_memory),
    ):
        mem = _mem(stats)
        if mem is not None:
            out[signal] = Observation(mem[0], mem[1], t)
    for bytes_signal, inodes_signal, fs in (
        (NODEFS_AVAILABLE, NODEFS_INODES_FREE, summary.nodefs),
        (IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE, summary.imagefs),
    ):
        if fs is None:
            continue
        if fs.available_bytes is not None and fs.capacity_bytes is not None:
            out[bytes_signal] = Observation(fs.available_bytes, fs.capacity_bytes, t)
        if fs.inodes_free is not None and fs.inodes is not None:
            out[inodes_signal] = Observation(fs.inodes_free, fs.inodes, t)
    if summary.max_pid is not None and summary.process_count is not None:
        out[PID_AVAILABLE] = Observation(
            summary.max_pid - summary.process_count, summary.max_pid, t
        )
    return out
