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
thousands of times a second when pods arrive in a burst, so they are tallies
(:mod:`kubelet_kit.node.tallies`): plain numbers exposed as prometheus_client's
Counter and Histogram would expose them, updated from the event loop thread only.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerState,
    PodSandbox,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.node.tallies import CounterSeries, HistogramSeries, TallyCounter, TallyHistogram

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.api import Pod, PodStatus
    from kubelet_kit.node.podworkers import PodSyncer, SyncResult, UpdateType

__all__ = [
    "POD_START_BUCKETS",
    "RUNTIME_OPERATION_BUCKETS",
    "KubeletMetrics",
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
