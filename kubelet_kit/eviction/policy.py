"""Who may be evicted, who is admitted under pressure, and what the pod is told.

Pure functions over pods, stats and thresholds, with the kubelet's strings:

* Critical pods (static pods, mirror pods, and pods of priority >= 2000000000)
  are never evicted and are admitted under any pressure (upstream
  ``IsCriticalPod``).
* Under memory pressure alone, BestEffort pods are refused unless they tolerate
  the ``node.kubernetes.io/memory-pressure`` NoSchedule taint; any other pressure
  refuses every non-critical pod. Reason ``Evicted``, message
  ``The node had condition: [DiskPressure]. ``.
* An evicted pod's message: ``The node was low on resource: memory. Threshold
  quantity: 100Mi, available: 50Mi. Container c was using 200Mi, request is 100Mi,
  has larger consumption of memory. `` (the newest upstream wording).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from kubelet_kit.api import BEST_EFFORT, Pod, Quantity, qos_class
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.api.podsource import (
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    is_mirror_pod,
    is_static_pod,
)
from kubelet_kit.api.quantity import Format
from kubelet_kit.eviction.stats import PodUsage
from kubelet_kit.eviction.thresholds import (
    MEMORY_PRESSURE,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_INODES,
    RESOURCE_MEMORY,
    RESOURCE_PIDS,
    SIGNAL_TO_RESOURCE,
    Observation,
    Threshold,
)

__all__ = [
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "EVICTED_REASON",
    "SYSTEM_CRITICAL_PRIORITY",
    "TAINT_MEMORY_PRESSURE",
    "admit_under_pressure",
    "eviction_message",
    "is_critical_pod",
    "is_mirror_pod",
    "is_static_pod",
    "tolerates_taint",
]

#: The reason of an evicted pod and of a refused admission.
EVICTED_REASON: Final = "Evicted"
#: ``scheduling.SystemCriticalPriority``: pods at or above it are critical.
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
TAINT_MEMORY_PRESSURE: Final = "node.kubernetes.io/memory-pressure"

_RESOURCE_FORMAT: Final[Mapping[str, Format]] = {
    RESOURCE_MEMORY: Format.BINARY_SI,
    RESOURCE_EPHEMERAL_STORAGE: Format.BINARY_SI,
    RESOURCE_INODES: Format.DECIMAL_SI,
    RESOURCE_PIDS: Format.DECIMAL_SI,
}
_ZERO: Final = Quantity.parse("0")


def is_critical_pod(pod: Pod) -> bool:
    """Static, mirror, or of system-critical priority: never evicted."""
    if is_static_pod(pod) or is_mirror_pod(pod):
        return True
    return pod.spec.priority is not None and pod.spec.priority >= SYSTEM_CRITICAL_PRIORITY


def tolerates_taint(
    tolerations: Iterable[Mapping[str, Any]], key: str, effect: str, value: str = ""
) -> bool:
    """Whether any toleration tolerates the taint ``key=value:effect`` (upstream
    ``Toleration.ToleratesTaint``)."""
    for t in tolerations:
        t_effect = t.get("effect") or ""
        if t_effect and t_effect != effect:
            continue
        t_key = t.get("key") or ""
        operator = t.get("operator") or "Equal"
        if t_key and t_key != key:
            continue
        if operator == "Exists" or (operator == "Equal" and (t.get("value") or "") == value):
            return True
    return False


def admit_under_pressure(pod: Pod, conditions: Sequence[str]) -> AdmitResult:
    """Admit or refuse ``pod`` on a node reporting ``conditions`` (upstream
    ``managerImpl.Admit``)."""
    if not conditions or is_critical_pod(pod):
        return AdmitResult.ok()
    if list(conditions) == [MEMORY_PRESSURE]:
        if qos_class(pod) != BEST_EFFORT:
            return AdmitResult.ok()
        if tolerates_taint(pod.spec.tolerations, TAINT_MEMORY_PRESSURE, "NoSchedule"):
            return AdmitResult.ok()
    return AdmitResult.refuse(EVICTED_REASON, f"The node had condition: [{' '.join(conditions)}]. ")


def eviction_message(
    resource: str,
    pod: Pod,
    usage: PodUsage | None,
    thresholds: Sequence[Threshold],
    observations: Mapping[str, Observation],
) -> str:
    """The status message of a pod evicted to reclaim ``resource`` (upstream
    ``evictionMessage``)."""
    message = f"The node was low on resource: {resource}. "
    fmt = _RESOURCE_FORMAT.get(resource, Format.BINARY_SI)
    for t in thresholds:
        if SIGNAL_TO_RESOURCE.get(t.signal) == resource and t.signal in observations:
            obs = observations[t.signal]
            message += (
                f"Threshold quantity: {t.value.display(obs.capacity, fmt)}, "
                f"available: {Quantity.from_int(obs.available, fmt)}. "
            )
            break
    if usage is None:
        return message
    containers = {c.name: c for c in (*pod.spec.containers, *pod.spec.init_containers)}
    for stats in usage.containers:
        container = containers.get(stats.name)
        if container is None:
            continue
        request = container.resources.requests.get(resource, _ZERO)
        used: int | None = None
        if resource == RESOURCE_EPHEMERAL_STORAGE:
            if stats.rootfs_used_bytes is not None and stats.logs_used_bytes is not None:
                used = stats.rootfs_used_bytes + stats.logs_used_bytes
        elif resource == RESOURCE_MEMORY:
            used = stats.memory_working_set_bytes
        if used is not None and used > request.value():
            message += (
                f"Container {container.name} was using {Quantity.from_int(used, Format.BINARY_SI)}"
                f", request is {request}, has larger consumption of {resource}. "
            )
    return message
