"""The kubelet's order of eviction, as pure functions (``helpers.go`` rank*).

* Memory: pods using more than their memory request first, then lower priority
  first, then larger ``usage - request`` first.
* Disk (bytes or inodes): the same with the pod's disk usage and its
  ephemeral-storage request. Which usage counts depends on the signal and on
  whether images live on a separate filesystem (:func:`disk_measures`).
* PID: lower priority first, then more processes first.

Pods with no stats go first (the kubelet cannot tell they are harmless).

Each comparison of upstream's multi-key sort becomes one key tuple computed once
per pod, so ranking 10,000 pods is a single ``sorted`` call. Python's sort is
stable: pods that compare equal keep the order they were given in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from kubelet_kit.api import Pod, Quantity
from kubelet_kit.api.resources import POD_LEVEL_RESOURCES
from kubelet_kit.eviction.stats import PodUsage
from kubelet_kit.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_INODES,
    RESOURCE_MEMORY,
)

__all__ = [
    "FS_LOCAL_VOLUMES",
    "FS_LOGS",
    "FS_ROOT",
    "RankFunc",
    "disk_measures",
    "local_volume_names",
    "pod_disk_usage",
    "pod_priority",
    "pod_request",
    "rank_disk_pressure",
    "rank_for_signal",
    "rank_memory_pressure",
    "rank_pid_pressure",
]

#: What a disk ranking counts of a pod: containers' writable layers, their logs,
#: and the pod's local volumes (upstream fsStatsRoot, fsStatsLogs,
#: fsStatsLocalVolumeSource).
FS_ROOT: Final = "root"
FS_LOGS: Final = "logs"
FS_LOCAL_VOLUMES: Final = "localVolumeSource"

#: ``rank(pods, stats_by_uid) -> pods in eviction order``.
RankFunc = Callable[[Sequence[Pod], Mapping[str, PodUsage]], list[Pod]]


def pod_priority(pod: Pod) -> int:
    """``spec.priority``, 0 when unset (upstream ``PodPriority``)."""
    return pod.spec.priority if pod.spec.priority is not None else 0


def _units(qty: Quantity | None) -> int:
    # Quantity.value() rounds away from zero; reading the exact amount directly is
    # several times faster, which matters when ranking thousands of pods.
    if qty is None:
        return 0
    amount = qty.amount
    whole = int(amount)
    if whole == amount:
        return whole
    return whole + 1 if amount > 0 else whole - 1


def pod_request(pod: Pod, resource: str) -> int:
    """The pod's effective request of ``resource`` in whole units, 0 if none.

    The same rules as :func:`kubelet_kit.api.pod_requests` (app containers add up,
    sidecars run beside everything after them, the largest init-time need wins,
    pod-level ``spec.resources`` replace the containers' cpu and memory, overhead
    is added), for one resource and in integers.
    """
    spec = pod.spec
    if spec.resources is not None and resource in POD_LEVEL_RESOURCES:
        pod_level = spec.resources.requests.get(resource)
        if pod_level is not None:
            return _units(pod_level) + _units(spec.overhead.get(resource))
    total = 0
    for c in spec.containers:
        requests = c.resources.requests
        if requests:
            qty = requests.get(resource)
            if qty is not None:
                total += _units(qty)
    if spec.init_containers:
        sidecars = init_need = 0
        for c in spec.init_containers:
            own = _units(c.resources.requests.get(resource))
            if c.is_sidecar:
                total += own
                sidecars += own
                need = sidecars
            else:
                need = own + sidecars
            init_need = max(init_need, need)
        total = max(total, init_need)
    if spec.overhead:
        total += _units(spec.overhead.get(resource))
    return total


def local_volume_names(pod: Pod) -> list[str]:
    """Volumes whose data lives on the node's disk: hostPath, emptyDir not backed
    by memory, configMap, downwardAPI (upstream ``localVolumeNames``)."""
    names = []
    for v in pod.spec.volumes:
        if (
            v.host_path is not None
            or (v.empty_dir is not None and v.empty_dir.medium != "Memory")
            or v.config_map is not None
            or v.downward_api is not None
            or "gitRepo" in v.extra
        ):
            names.append(v.name)
    return names


def pod_disk_usage(pod: Pod, usage: PodUsage, measure: Collection[str]) -> tuple[int, int]:
    """(bytes, inodes) the pod uses on disk, counting only what ``measure`` names."""
    used = inodes = 0
    for c in usage.containers:
        if FS_ROOT in measure:
            used += c.rootfs_used_bytes or 0
            inodes += c.rootfs_inodes_used or 0
        if FS_LOGS in measure:
            used += c.logs_used_bytes or 0
            inodes += c.logs_inodes_used or 0
    if FS_LOCAL_VOLUMES in measure:
        for name in local_volume_names(pod):
            vol = usage.volumes.get(name)
            if vol is not None:
                used += vol.used_bytes
                inodes += vol.inodes_used
    return used, inodes


def rank_memory_pressure(pods: Sequence[Pod], stats: Mapping[str, PodUsage]) -> list[Pod]:
    """Pods in the order to evict them under memory pressure."""

    get = stats.get

    def key(pod: Pod) -> tuple[int, int, int, int]:
        usage = get(pod.metadata.uid)
        priority = pod.spec.priority or 0
        if usage is None:
            return (0, 0, priority, 0)
        used = usage.memory_working_set_bytes or 0
        request = pod_request(pod, RESOURCE_MEMORY)
        return (1, 0 if used > request else 1, priority, request - used)

    return sorted(pods, key=key)


def rank_pid_pressure(pods: Sequence[Pod], stats: Mapping[str, PodUsage]) -> list[Pod]:
    """Pods in the order to evict them under PID pressure."""

    def key(pod: Pod) -> tuple[int, int, int]:
        usage = stats.get(pod.metadata.uid)
        if usage is None:
            return (pod_priority(pod), 0, 0)
        return (pod_priority(pod), 1, -(usage.process_count or 0))

    return sorted(pods, key=key)


def rank_disk_pressure(
    pods: Sequence[Pod],
    stats: Mapping[str, PodUsage],
    *,
    measure: Collection[str],
    resource: str = RESOURCE_EPHEMERAL_STORAGE,
) -> list[Pod]:
    """Pods in the order to evict them under disk pressure.

    Args:
        pods: The candidates.
        stats: Their usage by uid.
        measure: What counts (:data:`FS_ROOT`, :data:`FS_LOGS`, :data:`FS_LOCAL_VOLUMES`).
        resource: ``ephemeral-storage`` (bytes) or ``inodes``.
    """

    def key(pod: Pod) -> tuple[int, int, int, int]:
        usage = stats.get(pod.metadata.uid)
        if usage is None:
            return (0, 0, pod_priority(pod), 0)
        used_bytes, used_inodes = pod_disk_usage(pod, usage, measure)
        used = used_inodes if resource == RESOURCE_INODES else used_bytes
        # "Exceeds its request" compares against the request of the resource
        # itself (pods never request inodes: any use exceeds), but the amount
        # over request always subtracts the ephemeral-storage request, inodes
        # included: that is upstream's arithmetic, kept so the order matches.
        exceeds = used > pod_request(pod, resource)
        over = used - pod_request(pod, RESOURCE_EPHEMERAL_STORAGE)
        return (1, 0 if exceeds else 1, pod_priority(pod), -over)

    return sorted(pods, key=key)


def disk_measures(signal: str, dedicated_image_fs: bool) -> frozenset[str]:
    """What a pod's disk usage counts for ``signal``: everything when images share
    the node's filesystem; with a separate imagefs, logs and local volumes for
    nodefs signals and writable layers for imagefs signals."""
    if not dedicated_image_fs:
        return frozenset({FS_ROOT, FS_LOGS, FS_LOCAL_VOLUMES})
    if signal in (NODEFS_AVAILABLE, NODEFS_INODES_FREE):
        return frozenset({FS_LOGS, FS_LOCAL_VOLUMES})
    return frozenset({FS_ROOT})


def rank_for_signal(signal: str, dedicated_image_fs: bool) -> RankFunc | None:
    """The ranking for ``signal`` (upstream ``buildSignalToRankFunc``), or None."""
    if signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE):
        return rank_memory_pressure
    if signal == PID_AVAILABLE:
        return rank_pid_pressure
    if signal in (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE):
        measure = disk_measures(signal, dedicated_image_fs)
        resource = (
            RESOURCE_INODES
            if signal in (NODEFS_INODES_FREE, IMAGEFS_INODES_FREE)
            else RESOURCE_EPHEMERAL_STORAGE
        )

        def rank(pods: Sequence[Pod], stats: Mapping[str, PodUsage]) -> list[Pod]:
            return rank_disk_pressure(pods, stats, measure=measure, resource=resource)

        return rank
    return None
