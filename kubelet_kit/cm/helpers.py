"""The kubelet's resource conversions, as plain functions.

Ported in meaning from upstream ``pkg/kubelet/cm/helpers_linux.go``,
``pkg/kubelet/qos/policy.go`` and ``kuberuntime_container_linux.go``: milli-CPU to
CFS shares and quota, shares to cgroup v2 weight, the QoS ``oom_score_adj`` policy,
the pod cgroup's resource config, per-container Linux resources, and the QoS
tiers' memory reservations. Nothing here does I/O.

MemoryQoS (cgroup v2 ``memory.min``/``memory.high``) follows the kubelet of v1.27 to
v1.35: every pod and container with a memory request is protected by
``memory.min``, the QoS tiers by the sums of their pods' requests, and containers
whose request differs from their limit are throttled by ``memory.high`` at
``request + memoryThrottlingFactor * (limit or allocatable - request)``. (v1.36
moved the protection behind ``memoryReservationPolicy``, giving Burstable pods
``memory.low`` instead; that policy is not modelled here.)
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Mapping
from typing import Final

import attrs

from kubelet_kit.api import Container, Pod, pod_limits, pod_requests, qos_class
from kubelet_kit.api.kubeletconfig import DEFAULT_MEMORY_THROTTLING_FACTOR
from kubelet_kit.container import LinuxContainerResources

__all__ = [
    "BESTEFFORT_OOM_SCORE_ADJ",
    "DEFAULT_MEMORY_THROTTLING_FACTOR",
    "GUARANTEED_OOM_SCORE_ADJ",
    "KUBELET_OOM_SCORE_ADJ",
    "MAX_SHARES",
    "MIN_QUOTA_PERIOD",
    "MIN_SHARES",
    "QUOTA_PERIOD",
    "SHARES_PER_CPU",
    "ResourceConfig",
    "container_linux_resources",
    "container_memory_qos",
    "cpu_shares_to_weight",
    "cpu_shares_to_weight_log",
    "cpu_weight_to_shares",
    "is_critical_pod",
    "is_node_critical_pod",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "qos_memory_limits",
    "qos_memory_min",
    "qos_oom_score_adj",
    "resource_config_for_pod",
]

MIN_SHARES: Final = 2
MAX_SHARES: Final = 262144
SHARES_PER_CPU: Final = 1024
MILLI_CPU_TO_CPU: Final = 1000
#: CFS period in microseconds (100 ms).
QUOTA_PERIOD: Final = 100000
#: The kernel refuses a CFS quota below 1 ms.
MIN_QUOTA_PERIOD: Final = 1000

KUBELET_OOM_SCORE_ADJ: Final = -999
GUARANTEED_OOM_SCORE_ADJ: Final = -997
BESTEFFORT_OOM_SCORE_ADJ: Final = 1000

#: The machine's page size: the kubelet rounds ``memory.high`` down to it.
PAGE_SIZE: Final = mmap.PAGESIZE
MEMORY_MIN: Final = "memory.min"
MEMORY_HIGH: Final = "memory.high"

#: scheduling.SystemCriticalPriority: pods at or above it are critical.
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
SYSTEM_NODE_CRITICAL: Final = "system-node-critical"
_CONFIG_SOURCE: Final = "kubernetes.io/config.source"
_CONFIG_MIRROR: Final = "kubernetes.io/config.mirror"


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """CFS ``cpu.shares`` for a milli-CPU amount (upstream ``MilliCPUToShares``).

    ``milli * 1024 / 1000`` (integer division), clamped to [2, 262144]; zero or a
    negative amount gives the minimum, 2 (the kernel would read 0 as "default").
    """
    if milli_cpu <= 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU
    return max(MIN_SHARES, min(shares, MAX_SHARES))


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """CFS quota in microseconds for a milli-CPU limit over ``period``.

    Returns 0 ("no quota") for a zero limit; otherwise ``milli * period / 1000``,
    raised to the kernel's minimum of 1000 us (upstream ``MilliCPUToQuota``).
    """
    if milli_cpu == 0:
        return 0
    quota = milli_cpu * period // MILLI_CPU_TO_CPU
    return max(quota, MIN_QUOTA_PERIOD)


def cpu_shares_to_weight(shares: int) -> int:
    """cgroup v2 ``cpu.weight`` for v1 ``cpu.shares``: the linear formula.

    ``1 + (shares - 2) * 9999 / 262142`` maps [2, 262144] onto [1, 10000]; this is
    what the kubelet writes for pod and QoS cgroups and what runc before 1.3.2 and
    libcontainer's ``ConvertCPUSharesToCgroupV2Value`` computed for containers.
    0 stays 0 ("unset"); values outside the range are clamped first.
    """
    if shares == 0:
        return 0
    shares = max(MIN_SHARES, min(shares, MAX_SHARES))
    return 1 + (shares - MIN_SHARES) * 9999 // (MAX_SHARES - MIN_SHARES)


def cpu_weight_to_shares(weight: int) -> int:
    """Inverse of :func:`cpu_shares_to_weight` (lossy), as the kubelet reads back."""
    if weight == 0:
        return 0
    weight = max(1, min(weight, 10000))
    return MIN_SHARES + (weight - 1) * (MAX_SHARES - MIN_SHARES) // 9999


def cpu_shares_to_weight_log(shares: int) -> int:
    """The newer (runc >= 1.3.2, crun) shares-to-weight conversion.

    A quadratic in log2(shares) chosen so 2 -> 1, 1024 -> 100 (the defaults agree)
    and 262144 -> 10000. Containers on a current runtime get this weight; the
    kubelet's own pod cgroups still use :func:`cpu_shares_to_weight`.
    """
    if shares == 0:
        return 0
    if shares <= MIN_SHARES:
        return 1
    if shares >= MAX_SHARES:
        return 10000
    lg = math.log2(shares)
    exponent = (lg * lg + 125 * lg) / 612.0 - 7.0 / 34.0
    return math.ceil(10**exponent)


# ------------------------------------------------------------------ criticality


def _is_static(pod: Pod) -> bool:
    source = pod.metadata.annotations.get(_CONFIG_SOURCE)
    return source is not None and source != "api"


def is_critical_pod(pod: Pod) -> bool:
    """Static, mirror, or priority >= system-critical (upstream ``IsCriticalPod``)."""
    if _is_static(pod) or _CONFIG_MIRROR in pod.metadata.annotations:
        return True
    return pod.spec.priority is not None and pod.spec.priority >= SYSTEM_CRITICAL_PRIORITY


def is_node_critical_pod(pod: Pod) -> bool:
    """Critical and of priority class ``system-node-critical``."""
    return is_critical_pod(pod) and pod.spec.priority_class_name == SYSTEM_NODE_CRITICAL


# ------------------------------------------------------------------ OOM score


def _memory_request(container: Container) -> int:
    qty = container.resources.requests.get("memory")
    return qty.value() if qty is not None else 0


def qos_oom_score_adj(pod: Pod, container: Container, memory_capacity_bytes: int) -> int:
    """The ``oom_score_adj`` the kubelet gives ``container`` (upstream policy.go).

    Node-critical pods and Guaranteed pods get -997, BestEffort 1000. Burstable:
    ``1000 - 1000 * memoryRequest / capacity``, kept within [3, 999] so Burstable
    sits strictly between the other two. A sidecar (restartable init container)
    gets no higher a score than the pod's smallest regular container would.

    Args:
        pod: The pod.
        container: One of its containers.
        memory_capacity_bytes: The node's memory capacity.

    Raises:
        ValueError: ``memory_capacity_bytes`` is not positive.
    """
    if is_node_critical_pod(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod)
    if qos == "Guaranteed":
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == "BestEffort":
        return BESTEFFORT_OOM_SCORE_ADJ
    if memory_capacity_bytes <= 0:
        raise ValueError(f"memory_capacity_bytes: {memory_capacity_bytes} must be positive")
    # Go's int64 division truncates toward zero; requests are never negative.
    adj = 1000 - (1000 * _memory_request(container)) // memory_capacity_bytes
    if container.is_sidecar and any(c.name == container.name for c in pod.spec.init_containers):
        regular = [_memory_request(c) for c in pod.spec.containers]
        smallest = min(regular) if regular else 0
        adj = min(adj, 1000 - (1000 * smallest) // memory_capacity_bytes)
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BESTEFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj


# ------------------------------------------------------------------ resource config


@attrs.frozen(kw_only=True)
class ResourceConfig:
    """Limits for one cgroup; ``None`` leaves a knob untouched (upstream ``ResourceConfig``).

    Attributes:
        cpu_shares: v1 ``cpu.shares`` (the v2 driver converts it to ``cpu.weight``).
        cpu_quota: CFS quota in us; -1 means unlimited.
        cpu_period: CFS period in us.
        memory: Memory limit in bytes; -1 means unlimited.
        pids_limit: Maximum number of tasks; -1 means unlimited.
        cpuset_cpus: CPU list (``"0-3,6"``).
        cpuset_mems: Memory node list.
        unified: Raw cgroup v2 files to write (e.g. ``memory.min``).
    """

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory: int | None = None
    pids_limit: int | None = None
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None
    unified: Mapping[str, str] = attrs.field(factory=dict)


def _limits_declared(pod: Pod) -> tuple[bool, bool]:
    cpu = memory = True
    for c in pod.spec.all_containers():
        lim = c.resources.limits
        if "cpu" not in lim or lim["cpu"].is_zero():
            cpu = False
        if "memory" not in lim or lim["memory"].is_zero():
            memory = False
    res = pod.spec.resources
    if res is not None:
        # Pod-level limits stand in for the containers'.
        if "cpu" in res.limits and not res.limits["cpu"].is_zero():
            cpu = True
        if "memory" in res.limits and not res.limits["memory"].is_zero():
            memory = True
    return cpu, memory


def resource_config_for_pod(
    pod: Pod,
    *,
    enforce_cpu_limits: bool = True,
    cpu_period: int = QUOTA_PERIOD,
    enforce_memory_qos: bool = False,
    pids_limit: int | None = None,
) -> ResourceConfig:
    """The pod cgroup's limits (upstream ``ResourceConfigForPod``).

    Guaranteed: shares, quota and memory. Burstable: shares always, quota only when
    every container has a CPU limit, memory only when every container has a memory
    limit. BestEffort: the minimum shares only. With ``enforce_cpu_limits`` off the
    quota is -1 (unlimited). ``enforce_memory_qos`` (MemoryQoS on cgroup v2) adds
    ``memory.min`` = the pod's memory request (its containers' requests, as
    upstream ``PodRequests`` sums them) when that is not zero.

    Args:
        pod: The pod.
        enforce_cpu_limits: The kubelet's ``cpuCFSQuota``.
        cpu_period: CFS period in us.
        enforce_memory_qos: Protect the pod's memory request with memory.min.
        pids_limit: The kubelet's ``podPidsLimit`` (None or negative: not set).
    """
    reqs = pod_requests(pod)
    lims = pod_limits(pod)
    cpu_req = reqs["cpu"].milli_value() if "cpu" in reqs else 0
    cpu_lim = lims["cpu"].milli_value() if "cpu" in lims else 0
    mem_lim = lims["memory"].value() if "memory" in lims else 0
    shares = milli_cpu_to_shares(cpu_req)
    quota = milli_cpu_to_quota(cpu_lim, cpu_period) if enforce_cpu_limits else -1
    pids = pids_limit if pids_limit is not None and pids_limit > 0 else None
    qos = qos_class(pod)
    unified: dict[str, str] = {}
    mem_req = reqs["memory"].value() if "memory" in reqs else 0
    if enforce_memory_qos and mem_req > 0:
        unified[MEMORY_MIN] = str(mem_req)
    if qos == "Guaranteed":
        return ResourceConfig(
            cpu_shares=shares,
            cpu_quota=quota,
            cpu_period=cpu_period,
            memory=mem_lim,
            pids_limit=pids,
            unified=unified,
        )
    if qos == "Burstable":
        cpu_declared, mem_declared = _limits_declared(pod)
        return ResourceConfig(
            cpu_shares=shares,
            cpu_quota=quota if cpu_declared else None,
            cpu_period=cpu_period if cpu_declared else None,
            memory=mem_lim if mem_declared else None,
            pids_limit=pids,
            unified=unified,
        )
    return ResourceConfig(cpu_shares=MIN_SHARES, pids_limit=pids)


def container_memory_qos(
    container: Container,
    *,
    allocatable_memory_bytes: int,
    throttling_factor: float = DEFAULT_MEMORY_THROTTLING_FACTOR,
    page_size: int = PAGE_SIZE,
) -> dict[str, str]:
    """The cgroup v2 files MemoryQoS sets on a container's cgroup (upstream
    ``generateLinuxContainerResources`` with MemoryQoS, v1.27 to v1.35).

    ``memory.min`` is the memory request, when there is one. ``memory.high`` is set
    only when the request differs from the limit (a container whose memory
    request equals its limit, as in a Guaranteed pod, is not throttled; nor, in
    these versions, one with neither): ``request + factor * (limit - request)``,
    with node allocatable memory standing in for a missing limit, rounded down to
    a whole page, and kept only when above the request.

    Args:
        container: The container.
        allocatable_memory_bytes: Node allocatable memory as the kubelet's
            ``GetNodeAllocatableAbsolute`` gives it (capacity less system and
            kube reservations); 0 when unknown (no memory.high without a limit).
        throttling_factor: ``memoryThrottlingFactor`` (0 < factor <= 1).
        page_size: Page size in bytes.

    Returns:
        ``{"memory.min": ..., "memory.high": ...}``, either or both may be absent.
    """
    request = _memory_request(container)
    limit_qty = container.resources.limits.get("memory")
    limit = limit_qty.value() if limit_qty is not None else 0
    unified: dict[str, str] = {}
    if request != 0:
        unified[MEMORY_MIN] = str(request)
    if request == limit:
        return unified
    ceiling = limit if limit != 0 else allocatable_memory_bytes
    if ceiling <= 0:
        return unified
    # Float arithmetic in upstream's order (float64 both), so the page comes out
    # the same: floor(request + (ceiling - request) * factor), then whole pages.
    high_bytes = math.floor(float(request) + (float(ceiling) - float(request)) * throttling_factor)
    high = int(high_bytes / float(page_size)) * page_size
    if high != 0 and high > request:
        unified[MEMORY_HIGH] = str(high)
    return unified


def container_linux_resources(
    pod: Pod,
    container: Container,
    *,
    memory_capacity_bytes: int,
    cpu_cfs_quota: bool = True,
    cpu_period: int = QUOTA_PERIOD,
    cpuset_cpus: str = "",
    enforce_memory_qos: bool = False,
    allocatable_memory_bytes: int = 0,
    memory_throttling_factor: float = DEFAULT_MEMORY_THROTTLING_FACTOR,
    page_size: int = PAGE_SIZE,
) -> LinuxContainerResources:
    """What the kubelet hands the runtime for one container.

    Shares from the CPU request (from the limit when only a limit is set), memory
    limit from the memory limit, and with ``cpu_cfs_quota`` the period plus a quota
    from the CPU limit (0 when unlimited), as upstream ``calculateLinuxResources``;
    ``oom_score_adj`` from :func:`qos_oom_score_adj`. With ``enforce_memory_qos``
    (MemoryQoS on a cgroup v2 node) the ``unified`` map carries
    :func:`container_memory_qos`'s ``memory.min`` and ``memory.high``, computed
    from ``allocatable_memory_bytes``, ``memory_throttling_factor`` and
    ``page_size``.
    """
    req = container.resources.requests.get("cpu")
    lim = container.resources.limits.get("cpu")
    lim_milli = lim.milli_value() if lim is not None else 0
    if req is None and lim_milli != 0:
        shares = milli_cpu_to_shares(lim_milli)
    else:
        shares = milli_cpu_to_shares(req.milli_value() if req is not None else 0)
    mem = container.resources.limits.get("memory")
    unified = (
        container_memory_qos(
            container,
            allocatable_memory_bytes=allocatable_memory_bytes,
            throttling_factor=memory_throttling_factor,
            page_size=page_size,
        )
        if enforce_memory_qos
        else {}
    )
    return LinuxContainerResources(
        cpu_shares=shares,
        cpu_period=cpu_period if cpu_cfs_quota else 0,
        cpu_quota=milli_cpu_to_quota(lim_milli, cpu_period) if cpu_cfs_quota else 0,
        memory_limit_in_bytes=mem.value() if mem is not None else 0,
        oom_score_adj=qos_oom_score_adj(pod, container, memory_capacity_bytes),
        cpuset_cpus=cpuset_cpus,
        unified=unified,
    )


def qos_memory_limits(
    allocatable_memory: int, requests_by_qos: Mapping[str, int], percent_reserve: int
) -> dict[str, int]:
    """Memory limits of the Burstable and BestEffort tiers under ``qosReserved``.

    Upstream ``setMemoryReserve``: the Burstable tier may use what Guaranteed pods
    have not reserved (``percent_reserve`` percent of their requests), BestEffort
    what Burstable pods have not reserved on top of that.

    Args:
        allocatable_memory: Capacity less system and kube reservations, in bytes.
        requests_by_qos: Summed memory requests per QoS class name.
        percent_reserve: The ``qosReserved`` memory percentage (0-100).

    Returns:
        ``{"Burstable": bytes, "BestEffort": bytes}``; empty when nothing is allocatable.
    """
    if allocatable_memory == 0:
        return {}
    burstable = allocatable_memory - requests_by_qos.get("Guaranteed", 0) * percent_reserve // 100
    best_effort = burstable - requests_by_qos.get("Burstable", 0) * percent_reserve // 100
    return {"Burstable": burstable, "BestEffort": best_effort}


def qos_memory_min(requests_by_qos: Mapping[str, int]) -> dict[str, int]:
    """``memory.min`` of the QoS tiers under MemoryQoS (upstream ``setMemoryQoS``).

    A parent's protection bounds its children's, so the Burstable tier protects
    the sum of its pods' memory requests, and ``kubepods`` (the Guaranteed tier,
    parent of the others) the Guaranteed pods' requests plus that sum. BestEffort
    pods request nothing and their tier gets nothing.

    Args:
        requests_by_qos: Summed memory requests per QoS class name.

    Returns:
        ``{"Guaranteed": bytes, "Burstable": bytes}`` (0 when nothing is requested).
    """
    burstable = requests_by_qos.get("Burstable", 0)
    return {"Guaranteed": requests_by_qos.get("Guaranteed", 0) + burstable, "Burstable": burstable}
