"""Pure decisions of the device manager: resource names, device counts, choices.

Plain functions, no I/O, so they are tested without an event loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from kubelet_kit.api import Container, Pod

__all__ = [
    "choose_devices",
    "container_device_requests",
    "is_extended_resource_name",
    "pod_device_needs",
    "shortage_message",
]

_DNS1123_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Resource names of the core API that look prefixed (kubernetes.io/...) are native.
_NATIVE_DOMAIN: Final = "kubernetes.io/"
_QUOTA_PREFIX: Final = "requests."


def is_extended_resource_name(name: str) -> bool:
    """Whether ``name`` is an extended resource name (apimachinery's
    ``IsExtendedResourceName``): it has a domain prefix that is not
    ``kubernetes.io``, and ``requests.<name>`` is a valid qualified name.

    >>> is_extended_resource_name("example.com/widget")
    True
    >>> is_extended_resource_name("cpu")
    False
    """
    if "/" not in name or _NATIVE_DOMAIN in name or name.startswith(_QUOTA_PREFIX):
        return False
    # The quota form must be a qualified name: "<DNS-1123 subdomain>/<name part>".
    quota = _QUOTA_PREFIX + name
    prefix, _, part = quota.partition("/")
    if "/" in part or not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
        return False
    return 0 < len(part) <= 63 and _QUALIFIED_NAME.match(part) is not None


def container_device_requests(
    container: Container, resources: Iterable[str] | None = None
) -> dict[str, int]:
    """How many devices of each extended resource ``container`` asks for.

    Extended resources are not overcommitted: the limit is the amount (a request
    without a limit counts too). Zero amounts are left out.

    Args:
        container: The container.
        resources: Only these resource names (default: every extended resource).
    """
    wanted = set(resources) if resources is not None else None
    out: dict[str, int] = {}
    amounts = {**container.resources.requests, **container.resources.limits}
    for name, qty in amounts.items():
        if wanted is not None and name not in wanted:
            continue
        if wanted is None and not is_extended_resource_name(name):
            continue
        n = qty.value()
        if n > 0:
            out[name] = n
    return out


def pod_device_needs(pod: Pod, resources: Iterable[str] | None = None) -> dict[str, int]:
    """Devices the pod holds at most at once, per resource.

    Init containers run one at a time and their devices are handed on to the
    containers after them, so a pod needs the larger of its biggest init
    container and the sum of its sidecars and regular containers.
    """
    names = list(resources) if resources is not None else None
    init_max: dict[str, int] = {}
    running: dict[str, int] = {}
    for c in pod.spec.init_containers:
        for r, n in container_device_requests(c, names).items():
            if c.is_sidecar:
                running[r] = running.get(r, 0) + n
            else:
                init_max[r] = max(init_max.get(r, 0), n)
    for c in pod.spec.containers:
        for r, n in container_device_requests(c, names).items():
            running[r] = running.get(r, 0) + n
    return {
        r: max(init_max.get(r, 0), running.get(r, 0)) for r in sorted(set(init_max) | set(running))
    }


def choose_devices(
    available: Iterable[str],
    size: int,
    *,
    must_include: Sequence[str] = (),
    preferred: Sequence[str] | None = None,
) -> list[str]:
    """Pick ``size`` device ids from ``available``.

    ``must_include`` come first (devices handed on from init containers); then the
    plugin's ``preferred`` ones that are available; then the rest in sorted order,
    so the choice is stable. Preferred ids that are not available are ignored:
    the plugin's answer is advice.

    Raises:
        ValueError: Fewer than ``size`` devices to pick from.
    """
    pool = set(available) | set(must_include)
    if len(pool) < size:
        raise ValueError(f"only {len(pool)} devices to choose {size} from")
    chosen: list[str] = []
    for dev in [*must_include, *(preferred or ()), *sorted(pool)]:
        if len(chosen) == size:
            break
        if dev in pool and dev not in chosen:
            chosen.append(dev)
    return chosen


def shortage_message(resource: str, requested: int, available: int) -> str:
    """The device manager's error for too few free devices (as upstream words it)."""
    return (
        f"requested number of devices unavailable for {resource}. "
        f"Requested: {requested}, Available: {available}"
    )
