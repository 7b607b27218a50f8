"""PLEG metrics, with the kubelet's names.

Each PLEG registers its metrics in a ``CollectorRegistry`` it is given, or in a
fresh one of its own, never in prometheus_client's global registry: two PLEGs in
one process (or one per test) must not clash.

The kubelet's counters ``kubelet_pleg_discard_events`` and
``kubelet_evented_pleg_connection_{error,success}_count`` are exposed under
exactly those names. prometheus_client appends ``_total`` to every counter it
writes, which would rename them, so they are exposed as untyped samples with
the kubelet's names (what a dashboard built for the kubelet queries).
``kubelet_pleg_events_total{type}`` has no kubelet counterpart: it counts the
events a PLEG sent, by type.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["ExactCounter", "PLEGMetrics"]

# prometheus' default buckets, which the kubelet's metrics.DefBuckets equal.
_DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ExactCounter(Collector):
    """A monotonic counter exposed under exactly its name (no ``_total`` added).

    Args:
        name: The sample name, e.g. ``kubelet_pleg_discard_events``.
        documentation: The HELP text.
        registry: Where to register it.
    """

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        registry.register(self)

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0)."""
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up, got {amount}")
        self.value += amount

    def collect(self) -> Iterator[Metric]:
        """Yield the one sample."""
        metric = Metric(self.name, self.documentation, "unknown")
        metric.add_sample(self.name, {}, self.value)
        yield metric


class PLEGMetrics:
    """The metrics one PLEG updates.

    Args:
        registry: Where to register them; a fresh registry when None.
        evented: Also create the evented PLEG's stream connection metrics.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, evented: bool = False):
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            buckets=_DEF_BUCKETS,
            registry=r,
        )
        self.relist_interval = Histogram(
            "kubelet_pleg_relist_interval_seconds",
            "Interval in seconds between relisting in PLEG.",
            buckets=_DEF_BUCKETS,
            registry=r,
        )
        self.last_seen = Gauge(
            "kubelet_pleg_last_seen_seconds",
            "Timestamp in seconds when PLEG was last seen active.",
            registry=r,
        )
        self.discard_events = ExactCounter(
            "kubelet_pleg_discard_events", "The number of discard events in PLEG.", r
        )
        self.events = Counter(
            "kubelet_pleg_events",
            "Pod lifecycle events sent by the PLEG, by type.",
            ["type"],
            registry=r,
        )
        self.connection_errors: ExactCounter | None = None
        self.connections: ExactCounter | None = None
        self.connection_latency: Histogram | None = None
        if evented:
            self.connection_errors = ExactCounter(
                "kubelet_evented_pleg_connection_error_count",
                "The number of errors encountered during the establishment of streaming "
                "connection with the CRI runtime.",
                r,
            )
            self.connections = ExactCounter(
                "kubelet_evented_pleg_connection_success_count",
                "The number of times a streaming client was obtained to receive CRI Events.",
                r,
            )
            self.connection_latency = Histogram(
                "kubelet_evented_pleg_connection_latency_seconds",
                "The latency of streaming connection with the CRI runtime, measured in seconds.",
                buckets=_DEF_BUCKETS,
                registry=r,
            )
