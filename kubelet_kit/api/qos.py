"""A pod's QoS class, by upstream's rules (``pkg/apis/core/v1/helper/qos``).

Only cpu and memory count; init containers (sidecars included) count like the
others; zero quantities are ignored. A pod with no request and no limit is
``BestEffort``; it is ``Guaranteed`` when every container has non-zero cpu and memory
limits and the summed requests equal the summed limits for every resource; anything
else is ``Burstable``. When pod-level ``spec.resources`` set cpu or memory, those
decide instead of the containers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal

from kubelet_kit.api.pod import Container, Pod
from kubelet_kit.api.quantity import Quantity

__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "QOSClass", "qos_class"]

QOSClass = Literal["Guaranteed", "Burstable", "BestEffort"]
GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT: Final = "BestEffort"

_QOS_RESOURCES = ("cpu", "memory")
_ZERO = Quantity.parse("0")


def _positive(values: Mapping[str, Quantity]) -> dict[str, Quantity]:
    return {k: v for k, v in values.items() if k in _QOS_RESOURCES and v > _ZERO}


def _sum_into(into: dict[str, Quantity], values: Mapping[str, Quantity]) -> None:
    for name, qty in values.items():
        into[name] = into[name] + qty if name in into else qty


def _containers(
    *groups: Iterable[Container],
) -> tuple[dict[str, Quantity], dict[str, Quantity], bool]:
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    all_limited = True
    for containers in groups:
        for c in containers:
            res = c.resources
            if not res.requests and not res.limits:
                # The usual container: nothing to sum, and it has no limits.
                all_limited = False
                continue
            _sum_into(requests, _positive(res.requests))
            found = _positive(res.limits)
            _sum_into(limits, found)
            if "cpu" not in found or "memory" not in found:
                all_limited = False
    return requests, limits, all_limited


def qos_class(pod: Pod) -> QOSClass:
    """Compute the pod's QoS class from its spec (upstream ``ComputePodQOS``).

    ``status.qosClass`` is not consulted: the answer always comes from the spec.

    Args:
        pod: The pod (normally as loaded, with missing requests defaulted from
            limits, as the API server would have done).

    Returns:
        ``"Guaranteed"``, ``"Burstable"`` or ``"BestEffort"``.
    """
    spec = pod.spec
    pod_res = spec.resources
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    if pod_res is not None:
        requests = _positive(pod_res.requests)
        limits = _positive(pod_res.limits)
    if requests or limits:
        guaranteed = "cpu" in limits and "memory" in limits
    else:
        # (All containers, in all_containers' order: init containers first.)
        requests, limits, guaranteed = _containers(spec.init_containers, spec.containers)
    if not requests and not limits:
        return BEST_EFFORT
    matched = all(name in limits and limits[name] == req for name, req in requests.items())
    if guaranteed and matched and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE
