"""Device manager metrics, with the kubelet's names.

- ``kubelet_device_plugin_registration_total{resource_name}``: registrations
  received (refused ones too), as the kubelet counts them.
- ``kubelet_device_plugin_alloc_duration_seconds{resource_name}``: how long
  serving a container's devices took (choice, Allocate, checkpoint), for each
  new allocation.

Registered in the ``CollectorRegistry`` given, or a fresh one: never in
prometheus_client's global registry, so managers in one process do not clash.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["DeviceManagerMetrics"]

# prometheus' default buckets, which the kubelet's metrics.DefBuckets equal.
_DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class DeviceManagerMetrics:
    """The metrics one DeviceManager updates.

    Args:
        registry: Where to register them (default: a new registry).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        # prometheus_client adds the "_total" suffix the kubelet's name carries.
        self.registrations = Counter(
            "kubelet_device_plugin_registration",
            "Cumulative number of device plugin registrations.",
            ["resource_name"],
            registry=self.registry,
        )
        self.alloc_duration = Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request.",
            ["resource_name"],
            buckets=_DEF_BUCKETS,
            registry=self.registry,
        )
