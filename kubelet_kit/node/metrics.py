"""Agent-level metrics with the kubelet's names.

The subsystems register their own metrics (``kubelet_pleg_*``, ``kubelet_evictions``,
``prober_probe_*``) in the registry the :class:`~kubelet_kit.Kubelet` hands them.
This module adds what only the agent as a whole can tell, in that same registry:

* ``kubelet_node_name{node}``: always 1, names the node.
* ``kubelet_running_pods``: pods with a ready sandbox.
* ``kubelet_running_containers{container_state}``: containers by CRI state
  (``created``, ``running``, ``exited``, ``unknown``).
* ``kubelet_pod_start_duration_seconds``: from the agent first seeing a pod to
  the pod running (the kubelet's buckets).
* ``kubelet_pod_worker_duration_seconds{operation}``: time to sync one pod, by
  ``create``, ``update``, ``sync`` or ``kill``; kept by :class:`TimedPodSyncer`
  around the pod workers' syncer.
* ``kubelet_runtime_operations_total``, ``kubelet_runtime_operations_errors_total``
  and ``kubelet_runtime_operations_duration_seconds`` (all by ``operation_type``):
  kept by :class:`~kubelet_kit.node.instrumented.InstrumentedRuntime`, with the
  kubelet's operation names (``run_podsandbox``, ``list_containers``, ``exec_sync``, ...).

Running pods and containers are gauges of runtime state: :meth:`KubeletMetrics.refresh`
lists the runtime and sets them (the HTTP server calls it before each scrape).

The per-call metrics (runtime operations, pod worker durations) are counted many
thousands of times a second when pods arrive in a burst, so they are kept as plain
Python numbers (:class:`TallyCounter`, :class:`TallyHistogram`) rather than
prometheus_client metrics, which take a lock per value and search their buckets in
Python on every update. They are exposed through collectors in the same registry,
with the same names, help, labels, buckets, values and ``_created`` samples as
prometheus_client's own Counter and Histogram would write. Their updates take no
lock: the agent makes them from its event loop thread. Recording from several
threads at once is not supported (an update could be lost); a scrape from another
thread is fine.
"""

from __future__ import annotations

import math
import time
import weakref
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, TypeVar, cast

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerState,
    PodSandbox,
    PodSandboxState,
    Runtime,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector

    from kubelet_kit.api import Pod, PodStatus
    from kubelet_kit.node.podworkers import PodSyncer, SyncResult, UpdateType

__all__ = [
    "POD_START_BUCKETS",
    "RUNTIME_OPERATION_BUCKETS",
    "CounterSeries",
    "HistogramSeries",
    "KubeletMetrics",
    "TallyCounter",
    "TallyHistogram",
    "TimedPodSyncer",
    "new_registry",
]

T = TypeVar("T")

# The kubelet's metrics.DefBuckets.
_DEF_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: kubelet_pod_start_duration_seconds' buckets, as the kubelet's.
POD_START_BUCKETS: Final = (
    0.5,
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    20,
    30,
    45,
    60,
    120,
    180,
    240,
    300,
    360,
    480,
    600,
    900,
    1200,
    1800,
    2700,
    3600,
)
#: kubelet_runtime_operations_duration_seconds' buckets: exponential from 5 ms by 2.5, 14.
RUNTIME_OPERATION_BUCKETS: Final = tuple(0.005 * 2.5**i for i in range(14))

_CONTAINER_STATES: Final = {
    ContainerState.CREATED: "created",
    ContainerState.RUNNING: "running",
    ContainerState.EXITED: "exited",
    ContainerState.UNKNOWN: "unknown",
}

# One KubeletMetrics per registry: a second server on the same agent reuses it
# instead of failing on duplicate metric names.
_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, KubeletMetrics] = (
    weakref.WeakKeyDictionary()
)


def new_registry(*, auto_describe: bool = False) -> CollectorRegistry:
    """A fresh metrics registry of the agent's own, never prometheus_client's global
    one. prometheus_client is imported here, on first use: the agent's modules load
    without it."""
    from prometheus_client import CollectorRegistry

    return CollectorRegistry(auto_describe=auto_describe)


def _created_samples_on() -> bool:
    """Whether prometheus_client writes ``_created`` samples at the moment (its
    ``PROMETHEUS_DISABLE_CREATED_SERIES`` setting, ``disable_created_metrics()``).

    The tally collectors follow it, so their exposition stays what prometheus_client's
    own Counter and Histogram would write. It has no public getter; when the flag is
    missing, prometheus_client's default (on) is assumed.
    """
    from prometheus_client import metrics

    return bool(getattr(metrics, "_use_created", True))


def _one_label_value(
    label_name: str, labelvalues: tuple[object, ...], labelkwargs: dict[str, object]
) -> str:
    """The value of the one label ``label_name``, given by position or by name, as
    prometheus_client's ``labels()`` takes it (converted to str)."""
    if labelvalues and labelkwargs:
        raise ValueError("Can't pass both *args and **kwargs")
    if labelkwargs:
        if len(labelkwargs) != 1 or label_name not in labelkwargs:
            raise ValueError(f"Incorrect label names: expected {label_name!r}")
        return str(labelkwargs[label_name])
    if len(labelvalues) != 1:
        raise ValueError(f"Incorrect label count: expected one value, for {label_name!r}")
    return str(labelvalues[0])


class CounterSeries:
    """One labelled series of a :class:`TallyCounter`: a plain float, updated
    without a lock (see the module's notes on threads).

    Attributes:
        value: The count so far (the ``_total`` sample).
        created: When the series was made, in seconds since the epoch (the
            ``_created`` sample, stamped as prometheus_client stamps it).
    """

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount``.

        Raises:
            ValueError: ``amount`` is negative.
        """
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class HistogramSeries:
    """One labelled series of a :class:`TallyHistogram`: per-bucket counts and a
    sum, updated without a lock (see the module's notes on threads).

    Attributes:
        upper_bounds: The buckets' upper bounds, ending with +Inf.
        bucket_counts: Observations per bucket (not cumulative): an observation
            counts in the first bucket whose bound is >= it.
        sum: Sum of the observations (the ``_sum`` sample).
        created: When the series was made, in seconds since the epoch.
    """

    __slots__ = ("bucket_counts", "created", "sum", "upper_bounds")

    def __init__(self, upper_bounds: tuple[float, ...]) -> None:
        self.upper_bounds = upper_bounds
        self.bucket_counts = [0] * len(upper_bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        """Observe ``amount``."""
        self.sum += amount
        # The bounds end with +Inf, so every number has a bucket. NaN compares
        # false with every bound: like prometheus_client, it counts in the sum only.
        if amount == amount:
            self.bucket_counts[bisect_left(self.upper_bounds, amount)] += 1

    @property
    def count(self) -> float:
        """Number of observations in the buckets (the ``_count`` sample)."""
        return float(sum(self.bucket_counts))

    def cumulative_counts(self) -> list[float]:
        """Cumulative bucket counts, one per upper bound (the ``_bucket`` samples)."""
        counts = self.bucket_counts.copy()  # one step, so the total is of one moment
        total = 0.0
        cumulative = []
        for n in counts:
            total += n
            cumulative.append(total)
        return cumulative


class TallyCounter:
    """A counter with one label, kept as plain numbers and exposed as
    prometheus_client's labelled Counter would expose it.

    ``labels(value)`` gives the series of one label value (made on first use);
    ``labels(value).inc()`` counts. The exposition has ``<name>_total`` per series
    and, when prometheus_client writes them, ``<name>_created``, in the order the
    series were made.

    Args:
        name: The family name, without ``_total`` (``kubelet_runtime_operations``).
        documentation: The HELP text.
        label_name: The one label (``operation_type``).
        registry: Where to register the collector.
    """

    def __init__(
        self, name: str, documentation: str, label_name: str, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.label_name = label_name
        #: The series by label value, in the order they were made.
        self.series: dict[str, CounterSeries] = {}
        # Registered as a collector: it offers collect() and describe(), all a
        # registry calls, without inheriting prometheus_client's base class (which
        # this module would have to import when it loads).
        registry.register(cast("Collector", self))

    def labels(self, *labelvalues: object, **labelkwargs: object) -> CounterSeries:
        """The series of one label value, by position or by name; made on first use.

        Raises:
            ValueError: not exactly this counter's one label.
        """
        value = _one_label_value(self.label_name, labelvalues, labelkwargs)
        series = self.series.get(value)
        if series is None:
            series = self.series[value] = CounterSeries()
        return series

    def describe(self) -> list[Metric]:
        """The family without samples (what the registry checks names against)."""
        from prometheus_client.metrics_core import CounterMetricFamily

        return [CounterMetricFamily(self.name, self.documentation, labels=[self.label_name])]

    def collect(self) -> Iterator[Metric]:
        """Yield the family with one ``_total`` (and ``_created``) sample per series."""
        from prometheus_client.metrics_core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label_name])
        created = _created_samples_on()
        # list() copies the items in one step: a series made meanwhile cannot break this.
        for value, series in list(self.series.items()):
            family.add_metric([value], series.value, series.created if created else None)
        yield family


class TallyHistogram:
    """A histogram with one label, kept as plain numbers and exposed as
    prometheus_client's labelled Histogram would expose it.

    ``labels(value)`` gives the series of one label value (made on first use);
    ``labels(value).observe(seconds)`` observes. The exposition has, per series in
    the order they were made, the cumulative ``<name>_bucket`` samples (``le`` as
    prometheus_client writes it, +Inf last), ``<name>_count``, ``<name>_sum`` (when
    the first bound is not negative) and, when prometheus_client writes them,
    ``<name>_created``.

    Args:
        name: The family name (``kubelet_pod_worker_duration_seconds``).
        documentation: The HELP text.
        label_name: The one label (``operation``).
        buckets: Upper bounds in increasing order; +Inf is added when missing.
        registry: Where to register the collector.

    Raises:
        ValueError: the bounds are not sorted, or there is only +Inf.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        label_name: str,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        from prometheus_client.utils import floatToGoString

        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets not in sorted order")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        if len(bounds) < 2:
            raise ValueError(f"{name}: must have at least two buckets")
        self.name = name
        self.documentation = documentation
        self.label_name = label_name
        self.upper_bounds: tuple[float, ...] = tuple(bounds)
        # ``le`` exactly as prometheus_client writes it (untyped there).
        self._le = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        #: The series by label value, in the order they were made.
        self.series: dict[str, HistogramSeries] = {}
        registry.register(cast("Collector", self))  # a collector, as TallyCounter

    def labels(self, *labelvalues: object, **labelkwargs: object) -> HistogramSeries:
        """The series of one label value, by position or by name; made on first use.

        Raises:
            ValueError: not exactly this histogram's one label.
        """
        value = _one_label_value(self.label_name, labelvalues, labelkwargs)
        series = self.series.get(value)
        if series is None:
            series = self.series[value] = HistogramSeries(self.upper_bounds)
        return series

    def describe(self) -> list[Metric]:
        """The family without samples (what the registry checks names against)."""
        from prometheus_client.metrics_core import Metric

        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> Iterator[Metric]:
        """Yield the family with every series' samples."""
        from prometheus_client.metrics_core import Metric

        family = Metric(self.name, self.documentation, "histogram")
        created = _created_samples_on()
        with_sum = self.upper_bounds[0] >= 0
        label = self.label_name
        for value, series in list(self.series.items()):
            cumulative = series.cumulative_counts()
            for le, total in zip(self._le, cumulative, strict=True):
                family.add_sample(f"{self.name}_bucket", {label: value, "le": le}, total)
            family.add_sample(f"{self.name}_count", {label: value}, cumulative[-1])
            if with_sum:
                family.add_sample(f"{self.name}_sum", {label: value}, series.sum)
            if created:
                family.add_sample(f"{self.name}_created", {label: value}, series.created)
        yield family


class KubeletMetrics:
    """The agent-level metrics, registered in ``registry``.

    Use :meth:`for_registry` to get the one instance of a registry.

    Args:
        registry: Where to register; a fresh registry when None.
        node_name: Value of ``kubelet_node_name``'s ``node`` label ("" for none).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, node_name: str = "") -> None:
        # prometheus_client is imported when metrics are made, not with the module
        from prometheus_client import CollectorRegistry, Gauge, Histogram

        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.node_name = Gauge(
            "kubelet_node_name", "The node's name. The count is always 1.", ["node"], registry=r
        )
        if node_name:
            self.node_name.labels(node=node_name).set(1)
        self.running_pods = Gauge(
            "kubelet_running_pods", "Number of pods that have a running pod sandbox", registry=r
        )
        self.running_containers = Gauge(
            "kubelet_running_containers",
            "Number of containers currently running",
            ["container_state"],
            registry=r,
        )
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod "
            "starting to run",
            buckets=POD_START_BUCKETS,
            registry=r,
        )
        # The per-call metrics are tallies (see the module's docstring), registered
        # in the order prometheus_client's metrics were, so the page reads the same.
        self.pod_worker_duration = TallyHistogram(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: "
            "create, update, or sync",
            "operation",
            _DEF_BUCKETS,
            r,
        )
        self.runtime_operations = TallyCounter(
            "kubelet_runtime_operations",
            "Cumulative number of runtime operations by operation type.",
            "operation_type",
            r,
        )
        self.runtime_operations_errors = TallyCounter(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            "operation_type",
            r,
        )
        self.runtime_operations_duration = TallyHistogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            "operation_type",
            RUNTIME_OPERATION_BUCKETS,
            r,
        )
        # Each operation's two series, found with one lookup per runtime call.
        self._operation_series: dict[str, tuple[CounterSeries, HistogramSeries]] = {}
        # A later for_registry() on this registry finds these instead of clashing.
        _BY_REGISTRY.setdefault(self.registry, self)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry, *, node_name: str = "") -> KubeletMetrics:
        """The KubeletMetrics of ``registry``, created on first use.

        A later call with another ``node_name`` adds that name's series.
        """
        metrics = _BY_REGISTRY.get(registry)
        if metrics is None:
            metrics = cls(registry, node_name=node_name)
            _BY_REGISTRY[registry] = metrics
        elif node_name:
            metrics.node_name.labels(node=node_name).set(1)
        return metrics

    def record_operation(self, operation: str, seconds: float, failed: bool) -> None:
        """Count one runtime call of ``operation`` that took ``seconds`` (a negative
        duration counts as 0); a ``failed`` call also counts as an error."""
        series = self._operation_series.get(operation)
        if series is None:
            series = self._operation_series[operation] = (
                self.runtime_operations.labels(operation),
                self.runtime_operations_duration.labels(operation),
            )
        calls, duration = series
        # Every runtime call passes here: the series' updates are written out
        # rather than called (inc() checks its amount, observe() is one more call).
        calls.value += 1.0
        if seconds < 0:  # a clock stepping back counts as 0; NaN is kept
            seconds = 0.0
        duration.sum += seconds
        if seconds == seconds:  # NaN counts in the sum only, as in observe()
            duration.bucket_counts[bisect_left(duration.upper_bounds, seconds)] += 1
        if failed:
            self.runtime_operations_errors.labels(operation).inc()

    def observe_pod_worker(self, operation: str, seconds: float) -> None:
        """Observe one pod sync of ``operation`` (``create``, ``update``, ``sync``,
        ``kill``); a negative duration counts as 0."""
        series = self.pod_worker_duration.series.get(operation)
        if series is None:
            series = self.pod_worker_duration.labels(operation)
        series.observe(0.0 if seconds < 0 else seconds)  # NaN is kept

    def set_runtime_state(
        self, sandboxes: Sequence[PodSandbox], containers: Sequence[ContainerInfo]
    ) -> None:
        """Set the running-pods and running-containers gauges from a runtime listing."""
        self.running_pods.set(sum(1 for s in sandboxes if s.state is PodSandboxState.READY))
        counts = dict.fromkeys(_CONTAINER_STATES.values(), 0)
        for c in containers:
            counts[_CONTAINER_STATES[c.state]] += 1
        for state, n in counts.items():
            self.running_containers.labels(container_state=state).set(n)

    async def refresh(self, runtime: Runtime) -> None:
        """List ``runtime`` and set the running gauges. Raises what the runtime raises."""
        sandboxes = await runtime.list_pod_sandboxes()
        containers = await runtime.list_containers()
        self.set_runtime_state(sandboxes, containers)

    async def watch_pod_starts(
        self, statuses: AsyncIterator[tuple[Pod, PodStatus]], clock: Clock
    ) -> None:
        """Observe ``kubelet_pod_start_duration_seconds`` for every pod in ``statuses``
        (an agent's ``subscribe()``).

        A pod's clock starts when its first status is seen (or when this watch first
        sees it) and stops when its phase first becomes Running, as ``clock`` tells.
        Runs until cancelled.
        """
        first_seen: dict[str, float] = {}
        started: set[str] = set()
        async for pod, status in statuses:
            uid = pod.metadata.uid
            if uid in started:
                continue
            seen = first_seen.setdefault(uid, clock.monotonic())
            if status.phase == "Running":
                started.add(uid)
                self.pod_start_duration.observe(max(clock.monotonic() - seen, 0.0))
                del first_seen[uid]


class TimedPodSyncer:
    """A PodSyncer that observes ``kubelet_pod_worker_duration_seconds``.

    ``sync_pod`` is observed under its update type (``create``, ``update``,
    ``sync``, ``kill``), ``sync_terminating_pod`` under ``kill``, as the kubelet
    labels its pod worker's syncs; a sync that raises is observed too. Durations
    come from ``clock``.

    Args:
        syncer: The syncer the pod workers would otherwise call.
        metrics: Where to observe.
        clock: Source of durations.
    """

    def __init__(self, syncer: PodSyncer, metrics: KubeletMetrics, clock: Clock) -> None:
        self.inner = syncer
        self.metrics = metrics
        self.clock = clock

    async def _timed(self, operation: str, call: Awaitable[T]) -> T:
        start = self.clock.monotonic()
        try:
            return await call
        finally:
            self.metrics.observe_pod_worker(operation, self.clock.monotonic() - start)

    async def sync_pod(self, update_type: UpdateType, pod: Pod) -> SyncResult:
        """Forwarded and timed under ``update_type``'s name."""
        return await self._timed(update_type.value, self.inner.sync_pod(update_type, pod))

    async def sync_terminating_pod(self, pod: Pod, grace_period: float) -> None:
        """Forwarded and timed as ``kill``."""
        await self._timed("kill", self.inner.sync_terminating_pod(pod, grace_period))

    async def sync_terminated_pod(self, pod: Pod) -> None:
        """Forwarded (not timed: the kubelet does not count cleanup as a sync)."""
        await self.inner.sync_terminated_pod(pod)
