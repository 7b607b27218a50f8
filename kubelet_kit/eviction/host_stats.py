"""HostStatsProvider: the eviction signals measured on this Linux machine.

Node memory (``memory.available``)
    As the kubelet (through cAdvisor): capacity is ``MemTotal`` of
    ``/proc/meminfo``; the working set is the root memory cgroup's usage minus
    its inactive file pages (cgroup v1: ``memory.usage_in_bytes`` and
    ``total_inactive_file`` of ``memory.stat`` under the v1 memory mount, by
    default ``/sys/fs/cgroup/memory``); available = capacity - working set.
    Where the root cgroup shows no usage (a cgroup v2 host, whose root has no
    ``memory.current``), the working set is ``MemTotal - MemAvailable``: the
    kernel's own estimate, the closest a root-less reading gets.

Pods' memory (``allocatableMemory.available``)
    From the pods' cgroup (``pods_cgroup``, e.g. ``kubepods``), when given: its
    working set as above, available = its memory limit - working set.

Each pod's memory and processes
    From its cgroup when ``pod_cgroup(pod)`` names one (the ContainerManager knows
    where it put the pod); otherwise from the runtime's ``pod_sandbox_stats``.

Filesystems (``nodefs.*``, ``imagefs.*``)
    ``os.statvfs`` of the kubelet's root directory and of the image directory:
    available = ``f_bavail * f_frsize``, capacity = ``f_blocks * f_frsize``, inodes
    free = ``f_ffree`` of ``f_files``. Images are on a dedicated filesystem when
    the two paths are on different devices.

Each pod's disk use
    Containers' writable layers from the runtime's ``container_stats``, their log
    files by size, and the pod's local volumes by walking the directories
    ``pod_volume_dirs(pod)`` names (allocated blocks, as ``du``).

PIDs (``pid.available``)
    The limit is the smaller of ``/proc/sys/kernel/pid_max`` and
    ``threads-max``; the count is the kernel's number of scheduling entities
    (the total of ``/proc/loadavg``, what ``sysinfo`` reports), as the kubelet.

Every file read runs in a thread; nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import attrs

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ImageFsReporter,
    PodSandboxFilter,
    RuntimeCore,
    StatsRuntime,
)
from kubelet_kit.container.optional import IMAGE_FS, STATS, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError
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

log = logging.getLogger(__name__)

__all__ = [
    "HostStatsProvider",
    "cgroup_memory_working_set",
    "directory_usage",
    "fs_stats",
    "image_fs_dir",
    "read_meminfo",
]

_UNLIMITED = 1 << 62


def read_meminfo(path: str | os.PathLike[str] = "/proc/meminfo") -> dict[str, int]:
    """``/proc/meminfo`` as bytes by field name."""
    out: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            value = int(parts[0])
            out[name] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return _UNLIMITED
    return int(text) if text.lstrip("-").isdigit() else None


def _memory_stat(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    return out


def cgroup_memory_working_set(cgroup_dir: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(working set, limit) of a memory cgroup directory, v1 or v2; None when it
    shows no usage. The limit is 2**62 when unlimited."""
    d = Path(cgroup_dir)
    usage = _read_int(d / "memory.usage_in_bytes")
    if usage is not None:  # cgroup v1
        inactive = _memory_stat(d / "memory.stat").get("total_inactive_file", 0)
        limit = _read_int(d / "memory.limit_in_bytes") or _UNLIMITED
    else:
        usage = _read_int(d / "memory.current")
        if usage is None:
            return None
        inactive = _memory_stat(d / "memory.stat").get("inactive_file", 0)
        limit = _read_int(d / "memory.max") or _UNLIMITED
    return max(0, usage - inactive), limit


def _cgroup_process_count(cgroup_dir: Path) -> int | None:
    for name in ("cgroup.procs", "tasks"):
        try:
            return sum(1 for line in (cgroup_dir / name).read_text().splitlines() if line)
        except OSError:
            continue
    return None


def fs_stats(path: str | os.PathLike[str]) -> FsStats:
    """Bytes and inodes of the filesystem holding ``path``."""
    st = os.statvfs(path)
    return FsStats(
        available_bytes=st.f_bavail * st.f_frsize,
        capacity_bytes=st.f_blocks * st.f_frsize,
        inodes_free=st.f_ffree,
        inodes=st.f_files,
    )


def directory_usage(path: str | os.PathLike[str]) -> VolumeUsage:
    """Allocated bytes and inodes under ``path`` (like ``du``; symlinks not
    followed, vanished entries skipped)."""
    used = inodes = 0
    stack = [os.fspath(path)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            used += st.st_blocks * 512
            inodes += 1
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return VolumeUsage(used_bytes=used, inodes_used=inodes)


async def image_fs_dir(runtime: RuntimeCore | None, fallback: Path) -> Path:
    """Where ``runtime`` keeps its images (its first image filesystem, when it
    offers ``image_fs`` (:class:`~kubelet_kit.container.ImageFsReporter`) and the
    directory exists here), else ``fallback``. A runtime error also gives ``fallback``."""
    if runtime is not None and IMAGE_FS in runtime_capabilities(runtime):
        try:
            filesystems = await cast(ImageFsReporter, runtime).image_fs_info()
        except ContainerRuntimeError:
            filesystems = []
        if filesystems and os.path.isdir(filesystems[0].mountpoint):
            return Path(filesystems[0].mountpoint)
    return fallback


class HostStatsProvider:
    """A :class:`~kubelet_kit.eviction.StatsProvider` reading this machine.

    Args:
        root_dir: The kubelet's root directory; its filesystem is nodefs.
        image_dir: Where images and writable layers live (imagefs); when None,
            where the runtime says (:class:`~kubelet_kit.container.ImageFsReporter`,
            such as a CRI runtime), else ``root_dir``.
        runtime: Gives containers' writable layers and logs, and pods' usage when
            no cgroup is known. Without one, or when it does not offer ``stats``
            (said once in the log), pods are measured from cgroups and volumes only.
        pod_cgroup: ``pod -> cgroup directory`` (absolute, in the memory
            hierarchy) or None when unknown.
        pods_cgroup: The cgroup directory holding every pod, for
            ``allocatableMemory.available``.
        pod_volume_dirs: ``pod -> {volume name: host directory}`` of its volumes.
        memory_cgroup_root: The root memory cgroup (``/sys/fs/cgroup/memory`` on
            cgroup v1 machines).
        proc: Where procfs is mounted.
        clock: Time stamps of the summaries.
    """

    def __init__(
        self,
        *,
        root_dir: str | os.PathLike[str] = "/var/lib/kubelet",
        image_dir: str | os.PathLike[str] | None = None,
        runtime: RuntimeCore | None = None,
        pod_cgroup: Callable[[Pod], str | None] | None = None,
        pods_cgroup: str | os.PathLike[str] | None = None,
        pod_volume_dirs: Callable[[Pod], Mapping[str, str]] | None = None,
        memory_cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup/memory",
        proc: str | os.PathLike[str] = "/proc",
        clock: Clock | None = None,
    ) -> None:
        self.root_dir = Path(root_dir)
        self.image_dir = Path(image_dir) if image_dir is not None else self.root_dir
        # Without a given image_dir, a runtime that says where its images are wins.
        self._image_dir_given = image_dir is not None
        self.runtime = runtime
        self._said_no_stats = False
        self.pod_cgroup = pod_cgroup
        self.pods_cgroup = Path(pods_cgroup) if pods_cgroup is not None else None
        self.pod_volume_dirs = pod_volume_dirs
        self.memory_cgroup_root = Path(memory_cgroup_root)
        self.proc = Path(proc)
        self.clock: Clock = clock if clock is not None else RealClock()

    async def summary(self, pods: Sequence[Pod]) -> NodeSummary:
        """Measure the node and ``pods``. Raises OSError when procfs or the
        filesystems cannot be read."""
        image_dir = self.image_dir
        if not self._image_dir_given:
            image_dir = await image_fs_dir(self.runtime, self.image_dir)
        node = await asyncio.to_thread(self._node, image_dir)
        usages = []
        for pod in pods:
            usage = await self._pod(pod)
            if usage is not None:
                usages.append(usage)
        return attrs.evolve(node, time=self.clock.now(), pods=tuple(usages))

    # -- node ------------------------------------------------------------------

    def _node(self, image_dir: Path) -> NodeSummary:
        meminfo = read_meminfo(self.proc / "meminfo")
        total = meminfo.get("MemTotal", 0)
        root = cgroup_memory_working_set(self.memory_cgroup_root)
        if root is not None and root[0] > 0:
            working_set = min(root[0], total)
        else:
            working_set = max(0, total - meminfo.get("MemAvailable", total))
        memory = MemoryStats(available_bytes=total - working_set, working_set_bytes=working_set)
        allocatable = None
        if self.pods_cgroup is not None:
            pods = cgroup_memory_working_set(self.pods_cgroup)
            if pods is not None:
                limit = min(pods[1], total)
                allocatable = MemoryStats(
                    available_bytes=max(0, limit - pods[0]), working_set_bytes=pods[0]
                )
        nodefs = fs_stats(self.root_dir)
        imagefs = fs_stats(image_dir)
        dedicated = os.stat(self.root_dir).st_dev != os.stat(image_dir).st_dev
        max_pid = _read_int(self.proc / "sys/kernel/pid_max")
        threads_max = _read_int(self.proc / "sys/kernel/threads-max")
        if max_pid is not None and threads_max is not None:
            max_pid = min(max_pid, threads_max)
        loadavg = (self.proc / "loadavg").read_text().split()
        count = int(loadavg[3].partition("/")[2]) if len(loadavg) > 3 else None
        return NodeSummary(
            memory=memory,
            allocatable_memory=allocatable,
            nodefs=nodefs,
            imagefs=imagefs,
            dedicated_image_fs=dedicated,
            max_pid=max_pid,
            process_count=count,
        )

    # -- pods ------------------------------------------------------------------

    async def _pod(self, pod: Pod) -> PodUsage | None:
        memory: int | None = None
        processes: int | None = None
        cgroup = self.pod_cgroup(pod) if self.pod_cgroup is not None else None
        if cgroup is not None:
            ws = await asyncio.to_thread(cgroup_memory_working_set, cgroup)
            memory = ws[0] if ws is not None else None
            processes = await asyncio.to_thread(_cgroup_process_count, Path(cgroup))
        containers: list[ContainerUsage] = []
        if self._stats_runtime() is not None:
            try:
                containers, sb_memory, sb_procs = await self._runtime_usage(pod)
            except ContainerRuntimeError:
                containers, sb_memory, sb_procs = [], None, None
            memory = memory if memory is not None else sb_memory
            processes = processes if processes is not None else sb_procs
        volumes: dict[str, VolumeUsage] = {}
        if self.pod_volume_dirs is not None:
            for name, path in self.pod_volume_dirs(pod).items():
                volumes[name] = await asyncio.to_thread(directory_usage, path)
        if memory is None and processes is None and not containers and not volumes:
            return None
        return PodUsage(
            uid=pod.uid,
            memory_working_set_bytes=memory,
            process_count=processes,
            containers=tuple(containers),
            volumes=volumes,
        )

    def _stats_runtime(self) -> StatsRuntime | None:
        """The runtime when it measures its containers (if not, said once in the log)."""
        if self.runtime is None:
            return None
        if STATS in runtime_capabilities(self.runtime):
            return cast(StatsRuntime, self.runtime)
        if not self._said_no_stats:
            self._said_no_stats = True
            log.info(
                "pods are measured without the runtime's figures: %s",
                not_offered(self.runtime, STATS),
            )
        return None

    async def _runtime_usage(self, pod: Pod) -> tuple[list[ContainerUsage], int | None, int | None]:
        assert self.runtime is not None
        stats = cast(StatsRuntime, self.runtime)
        selector = {labels.POD_UID: pod.uid}
        memory: int | None = None
        processes: int | None = None
        for sandbox in await self.runtime.list_pod_sandboxes(
            PodSandboxFilter(label_selector=selector)
        ):
            try:
                s = await stats.pod_sandbox_stats(sandbox.id)
            except ContainerRuntimeError:
                continue
            if s.memory_working_set_bytes is not None:
                memory = (memory or 0) + s.memory_working_set_bytes
            if s.process_count is not None:
                processes = (processes or 0) + s.process_count
        containers = []
        for info in await self.runtime.list_containers(ContainerFilter(label_selector=selector)):
            try:
                cs = await stats.container_stats(info.id)
                status = await self.runtime.container_status(info.id)
            except ContainerRuntimeError:
                continue
            logs_bytes = logs_inodes = None
            if status.log_path:
                with contextlib.suppress(OSError):
                    st = await asyncio.to_thread(os.stat, status.log_path)
                    logs_bytes, logs_inodes = st.st_blocks * 512, 1
            containers.append(
                ContainerUsage(
                    name=info.metadata.name,
                    memory_working_set_bytes=cs.memory_working_set_bytes,
                    rootfs_used_bytes=cs.writable_layer_bytes,
                    rootfs_inodes_used=cs.writable_layer_inodes,
                    logs_used_bytes=logs_bytes,
                    logs_inodes_used=logs_inodes,
                )
            )
        return containers, memory, processes
