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

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Final, Protocol

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
    "RequestCache",
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


class RankFunc(Protocol):
    """``rank(pods, stats_by_uid, cache=None) -> pods in eviction order``."""

    def __call__(
        self,
        pods: Sequence[Pod],
        stats: Mapping[str, PodUsage],
        *,
        cache: RequestCache | None = ...,
    ) -> list[Pod]:
        """Order ``pods``; never blocks, raises nothing."""
        ...


def pod_priority(pod: Pod) -> int:
    """``spec.priority``, 0 when unset (upstream ``PodPriority``)."""
    return pod.spec.priority if pod.spec.priority is not None else 0


def _units(qty: Quantity | None) -> int:
    # Requests are never negative (API validation), so rounding up is
    # Quantity.value()'s "away from zero"; reading the exact amount directly is
    # several times faster, which matters when ranking thousands of pods.
    return 0 if qty is None else math.ceil(qty.amount)


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
        qty = c.resources.requests.get(resource)
        if qty is not None:
            total += math.ceil(qty.amount)
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


class RequestCache:
    """Pods' requests, remembered between rankings of the same pod objects.

    The manager ranks the same (immutable) pod objects every round; computing
    each pod's request from its spec is most of a ranking's cost, so it is kept
    here keyed by the pod object's identity. The cache holds the pods it knows
    (so an identity is never reused while cached) and :meth:`retain` drops the
    pods no longer active, which bounds it by the node's pods.
    """

    def __init__(self) -> None:
        self._by_resource: dict[str, dict[int, tuple[Pod, int]]] = {}

    def table(self, resource: str) -> dict[int, tuple[Pod, int]]:
        """The raw ``id(pod) -> (pod, request)`` table of one resource (for hot loops)."""
        table = self._by_resource.get(resource)
        if table is None:
            table = self._by_resource[resource] = {}
        return table

    def request(self, pod: Pod, resource: str) -> int:
        """:func:`pod_request`, computed once per pod object and resource."""
        table = self.table(resource)
        entry = table.get(id(pod))
        if entry is not None and entry[0] is pod:
            return entry[1]
        value = pod_request(pod, resource)
        table[id(pod)] = (pod, value)
        return value

    def retain(self, pods: Sequence[Pod]) -> None:
        """Forget every pod object not in ``pods``."""
        keep = {id(p) for p in pods}
        for resource, table in self._by_resource.items():
            self._by_resource[resource] = {k: v for k, v in table.items() if k in keep}

    def __len__(self) -> int:
        return len({k for table in self._by_resource.values() for k in table})


# Sort keys are packed into one integer per pod (comparing ints is several times
# cheaper than comparing tuples): fields from most to least significant, each
# offset to be non-negative and given a fixed width.
_PRIO_OFFSET: Final = 1 << 31
_VALUE_BITS: Final = 66
_VALUE_OFFSET: Final = 1 << 65
_VALUE_MAX: Final = (1 << 65) - 1


def _pack(flags: int, priority: int, value: int) -> int:
    value = max(-_VALUE_MAX, min(_VALUE_MAX, value))
    return (((flags << 33) | (priority + _PRIO_OFFSET)) << _VALUE_BITS) | (value + _VALUE_OFFSET)


def _order(pods: Sequence[Pod], keys: list[int]) -> list[Pod]:
    # Sorting indexes by a precomputed key list never compares pods and keeps
    # equal pods in their given order.
    return [pods[i] for i in sorted(range(len(pods)), key=keys.__getitem__)]


def rank_memory_pressure(
    pods: Sequence[Pod], stats: Mapping[str, PodUsage], *, cache: RequestCache | None = None
) -> list[Pod]:
    """Pods in the order to evict them under memory pressure.

    Args:
        pods: The candidates.
        stats: Their usage by uid.
        cache: Remembers requests between rankings of the same pod objects.
    """
    # The hot loop of a ranking: the packing and the cache lookup are inlined.
    get = stats.get
    table = (cache if cache is not None else RequestCache()).table(RESOURCE_MEMORY)
    cached = table.get
    keys: list[int] = []
    append = keys.append
    prio_offset, value_bits, value_offset, value_max = (
        _PRIO_OFFSET,
        _VALUE_BITS,
        _VALUE_OFFSET,
        _VALUE_MAX,
    )
    for pod in pods:
        usage = get(pod.metadata.uid)
        priority = (pod.spec.priority or 0) + prio_offset
        if usage is None:
            append(priority << value_bits)
            continue
        entry = cached(id(pod))
        if entry is not None and entry[0] is pod:
            request = entry[1]
        else:
            request = pod_request(pod, RESOURCE_MEMORY)
            table[id(pod)] = (pod, request)
        used = usage.memory_working_set_bytes or 0
        flags = 2 if used > request else 3
        value = request - used
        if not -value_max <= value <= value_max:
            value = value_max if value > 0 else -value_max
        append((((flags << 33) | priority) << value_bits) | (value + value_offset))
    return _order(pods, keys)


def rank_pid_pressure(
    pods: Sequence[Pod], stats: Mapping[str, PodUsage], *, cache: RequestCache | None = None
) -> list[Pod]:
    """Pods in the order to evict them under PID pressure (``cache`` is unused:
    pids are not requested)."""
    get = stats.get
    keys: list[int] = []
    for pod in pods:
        usage = get(pod.metadata.uid)
        priority = pod.spec.priority or 0
        # priority first, then pods without stats, then more processes first
        found = 0 if usage is None else 1
        count = 0 if usage is None else usage.process_count or 0
        head = ((priority + _PRIO_OFFSET) << 1) | found
        keys.append((head << _VALUE_BITS) | (_VALUE_OFFSET - min(count, _VALUE_MAX)))
    return _order(pods, keys)


def rank_disk_pressure(
    pods: Sequence[Pod],
    stats: Mapping[str, PodUsage],
    *,
    measure: Collection[str],
    resource: str = RESOURCE_EPHEMERAL_STORAGE,
    cache: RequestCache | None = None,
) -> list[Pod]:
    """Pods in the order to evict them under disk pressure.

    Args:
        pods: The candidates.
        stats: Their usage by uid.
        measure: What counts (:data:`FS_ROOT`, :data:`FS_LOGS`, :data:`FS_LOCAL_VOLUMES`).
        resource: ``ephemeral-storage`` (bytes) or ``inodes``.
        cache: Remembers requests between rankings of the same pod objects.

    Raises:
        ValueError: ``resource`` is neither.
    """
    if resource not in (RESOURCE_EPHEMERAL_STORAGE, RESOURCE_INODES):
        raise ValueError(f"resource: must be ephemeral-storage or inodes, not {resource!r}")
    get = stats.get
    cache = cache if cache is not None else RequestCache()
    storage_requests = cache.table(RESOURCE_EPHEMERAL_STORAGE)
    inodes = resource == RESOURCE_INODES
    root, logs, volumes = FS_ROOT in measure, FS_LOGS in measure, FS_LOCAL_VOLUMES in measure
    keys: list[int] = []
    for pod in pods:
        usage = get(pod.metadata.uid)
        priority = pod.spec.priority or 0
        if usage is None:
            keys.append(_pack(0, priority, 0))
            continue
        used = 0
        for c in usage.containers:
            if inodes:
                used += ((c.rootfs_inodes_used or 0) if root else 0) + (
                    (c.logs_inodes_used or 0) if logs else 0
                )
            else:
                used += ((c.rootfs_used_bytes or 0) if root else 0) + (
                    (c.logs_used_bytes or 0) if logs else 0
                )
        if volumes and usage.volumes:
            for name in local_volume_names(pod):
                vol = usage.volumes.get(name)
                if vol is not None:
                    used += vol.inodes_used if inodes else vol.used_bytes
        # "Exceeds its request" compares against the request of the resource
        # itself (pods never request inodes: any use exceeds), but the amount
        # over request always subtracts the ephemeral-storage request, inodes
        # included: that is upstream's arithmetic, kept so the order matches.
        storage = _cached_request(storage_requests, pod, RESOURCE_EPHEMERAL_STORAGE)
        own = 0 if inodes else storage
        keys.append(_pack(2 if used > own else 3, priority, storage - used))
    return _order(pods, keys)


def _cached_request(table: dict[int, tuple[Pod, int]], pod: Pod, resource: str) -> int:
    entry = table.get(id(pod))
    if entry is not None and entry[0] is pod:
        return entry[1]
    value = pod_request(pod, resource)
    table[id(pod)] = (pod, value)
    return value


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

        def rank(
            pods: Sequence[Pod], stats: Mapping[str, PodUsage], *, cache: RequestCache | None = None
        ) -> list[Pod]:
            return rank_disk_pressure(pods, stats, measure=measure, resource=resource, cache=cache)

        return rank
    return None
