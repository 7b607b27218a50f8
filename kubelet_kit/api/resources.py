"""A pod's effective resource requests and limits, as the scheduler and kubelet see them.

Ported from upstream ``k8s.io/component-helpers/resource`` (``PodRequests`` and
``PodLimits``): app containers add up; restartable init containers (sidecars) run
alongside everything started after them, so they add to the app containers' sum and
to every later init container's need; the pod needs the larger of that sum and the
biggest init-time need. Pod overhead is added (to limits only where a limit exists).
Pod-level ``spec.resources`` for cpu and memory replace the containers' aggregate.

These functions read the model as it is; a pod from the loader has its missing
requests defaulted from limits already.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet_kit.api.pod import Pod
from kubelet_kit.api.quantity import Quantity

__all__ = [
    "POD_LEVEL_RESOURCES",
    "add_resource_lists",
    "max_resource_lists",
    "pod_limits",
    "pod_requests",
]

#: Resources that pod-level ``spec.resources`` may set.
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})

ResourceList = dict[str, Quantity]


def add_resource_lists(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """Add ``other`` to ``into`` resource by resource (in place)."""
    for name, qty in other.items():
        into[name] = into[name] + qty if name in into else qty


def max_resource_lists(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """Keep in ``into`` the larger value of each resource in ``other`` (in place)."""
    for name, qty in other.items():
        if name not in into or qty > into[name]:
            into[name] = qty


def _aggregate(pod: Pod, pick: str) -> ResourceList:
    total: ResourceList = {}
    for c in pod.spec.containers:
        add_resource_lists(total, getattr(c.resources, pick))
    sidecars: ResourceList = {}
    init_need: ResourceList = {}
    for c in pod.spec.init_containers:
        own: Mapping[str, Quantity] = getattr(c.resources, pick)
        if c.is_sidecar:
            # A sidecar keeps running: it adds to the app containers' total and to
            # what every later init container needs while it runs.
            add_resource_lists(total, own)
            add_resource_lists(sidecars, own)
            need = dict(sidecars)
        else:
            need = dict(own)
            add_resource_lists(need, sidecars)
        max_resource_lists(init_need, need)
    max_resource_lists(total, init_need)
    return total


def _pod_level(pod: Pod, pick: str) -> Mapping[str, Quantity]:
    if pod.spec.resources is None:
        return {}
    values: Mapping[str, Quantity] = getattr(pod.spec.resources, pick)
    return {k: v for k, v in values.items() if k in POD_LEVEL_RESOURCES}


def pod_requests(pod: Pod, *, exclude_overhead: bool = False) -> ResourceList:
    """The pod's effective requests (upstream ``PodRequests``).

    Args:
        pod: The pod.
        exclude_overhead: Leave ``spec.overhead`` out.

    Returns:
        A new dict of resource name to quantity; resources nobody requests are absent.
    """
    reqs = _aggregate(pod, "requests")
    reqs.update(_pod_level(pod, "requests"))
    if not exclude_overhead:
        add_resource_lists(reqs, pod.spec.overhead)
    return reqs


def pod_limits(pod: Pod, *, exclude_overhead: bool = False) -> ResourceList:
    """The pod's effective limits (upstream ``PodLimits``).

    Overhead is added only to resources that have a limit: an unlimited resource
    stays unlimited.

    Args:
        pod: The pod.
        exclude_overhead: Leave ``spec.overhead`` out.

    Returns:
        A new dict of resource name to quantity; unlimited resources are absent.
    """
    limits = _aggregate(pod, "limits")
    limits.update(_pod_level(pod, "limits"))
    if not exclude_overhead:
        for name, qty in pod.spec.overhead.items():
            if name in limits:
                limits[name] = limits[name] + qty
    return limits
