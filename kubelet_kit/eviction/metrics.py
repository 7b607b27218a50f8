"""Eviction metrics, with the kubelet's names where it has them.

* ``kubelet_evictions{eviction_signal}``: pods evicted, by the signal that caused
  it. The kubelet's counter carries no ``_total`` suffix, and prometheus_client
  would add one to a ``Counter``, so it is exposed as an untyped sample under
  exactly the kubelet's name (what dashboards built for the kubelet query).
* ``kubelet_eviction_stats_age_seconds{eviction_signal}``: age of the stats an
  eviction acted on (a histogram, as the kubelet's).
* ``kubelet_kit_node_pressure{condition}``: 1 while a pressure condition is
  reported, else 0. The kubelet reports pressure only as node conditions, not as
  a metric, so this one is in the project's own namespace.

Metrics are registered in the registry given, or a fresh one: never in
prometheus_client's global registry, so two managers (or two tests) never clash.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from kubelet_kit.eviction.thresholds import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE

__all__ = ["EvictionMetrics", "LabelledExactCounter"]

# The kubelet's metrics.DefBuckets.
_DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LabelledExactCounter(Collector):
    """A counter with one label, exposed under exactly its name (no ``_total``).

    A scrape may come from another thread (prometheus_client's own HTTP server
    serves from one): a series added meanwhile neither breaks it nor is half seen.

    Args:
        name: The sample name.
        documentation: The HELP text.
        label: The label's name.
        registry: Where to register it.
    """

    def __init__(
        self, name: str, documentation: str, label: str, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.label = label
        self.values: dict[str, float] = {}
        # Taken by every update and by the collector's copy: copying a dict item by
        # item can run a garbage collection whose finalizers let another thread on.
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, label_value: str, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0) to the series of ``label_value``."""
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up, got {amount}")
        with self._lock:
            self.values[label_value] = self.values.get(label_value, 0.0) + amount

    def get(self, label_value: str) -> float:
        """The current value of one series (0 if never incremented)."""
        return self.values.get(label_value, 0.0)

    def collect(self) -> Iterator[Metric]:
        """Yield every series."""
        metric = Metric(self.name, self.documentation, "unknown")
        with self._lock:
            counts = sorted(self.values.items())
        for value, count in counts:
            metric.add_sample(self.name, {self.label: value}, count)
        yield metric


class EvictionMetrics:
    """The metrics one eviction manager updates.

    Args:
        registry: Where to register them; a fresh registry when None.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.evictions = LabelledExactCounter(
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            "eviction_signal",
            self.registry,
        )
        self.stats_age = Histogram(
            "kubelet_eviction_stats_age_seconds",
            "Time between when stats are collected, and when pod is evicted based on those "
            "stats by eviction signal",
            ["eviction_signal"],
            buckets=_DEF_BUCKETS,
            registry=self.registry,
        )
        self.pressure = Gauge(
            "kubelet_kit_node_pressure",
            "1 while the node reports the pressure condition, else 0.",
            ["condition"],
            registry=self.registry,
        )
        for condition in (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE):
            self.pressure.labels(condition=condition).set(0)

    def set_conditions(self, conditions: Iterable[str]) -> None:
        """Publish the set of conditions now reported."""
        now = set(conditions)
        for condition in (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE):
            self.pressure.labels(condition=condition).set(1 if condition in now else 0)
