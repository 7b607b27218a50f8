"""Tallies: counters and histograms kept as plain numbers, exposed as
prometheus_client's would be.

The agent counts every runtime call and every pod sync, many thousands of times a
second when pods arrive in a burst. prometheus_client's Counter and Histogram take
a lock per update and search their buckets in Python; these keep a float, or
per-bucket counts found with ``bisect``, and are registered as collectors in the
same registry, with the names, help, labels, buckets, values and ``_created``
samples prometheus_client's own would write.

Updates take no lock: the agent makes them from its event loop thread. Recording
from several threads at once is not supported (an update could be lost); a scrape
from another thread is fine. Only the making of a series and the collector's copy
of the series take a lock: copying a dict item by item can be interrupted by a
garbage collection, whose finalizers may let another thread add a series midway.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar, cast

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector

__all__ = ["CounterSeries", "HistogramSeries", "TallyCounter", "TallyHistogram"]

S = TypeVar("S", "CounterSeries", "HistogramSeries")


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


class _OneLabel(Generic[S]):
    """What the two tallies share: one label, and their series by its value.

    Args:
        name: The family name.
        documentation: The HELP text.
        label_name: The one label.
    """

    def __init__(self, name: str, documentation: str, label_name: str) -> None:
        self.name = name
        self.documentation = documentation
        self.label_name = label_name
        #: The series by label value, in the order they were made.
        self.series: dict[str, S] = {}
        self._making = threading.Lock()  # see the module's notes on threads

    def _new_series(self) -> S:
        raise NotImplementedError

    def labels(self, *labelvalues: object, **labelkwargs: object) -> S:
        """The series of one label value, by position or by name; made on first use.

        Raises:
            ValueError: not exactly this tally's one label.
        """
        value = _one_label_value(self.label_name, labelvalues, labelkwargs)
        series = self.series.get(value)
        if series is None:
            with self._making:
                series = self.series.setdefault(value, self._new_series())
        return series

    def _made(self) -> list[tuple[str, S]]:
        """The series made so far, by label value, copied for a scrape."""
        with self._making:
            return list(self.series.items())


class TallyCounter(_OneLabel[CounterSeries]):
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
        super().__init__(name, documentation, label_name)
        # Registered as a collector: it offers collect() and describe(), all a
        # registry calls, without inheriting prometheus_client's base class (which
        # this module would have to import when it loads).
        registry.register(cast("Collector", self))

    def _new_series(self) -> CounterSeries:
        return CounterSeries()

    def describe(self) -> list[Metric]:
        """The family without samples (what the registry checks names against)."""
        from prometheus_client.metrics_core import CounterMetricFamily

        return [CounterMetricFamily(self.name, self.documentation, labels=[self.label_name])]

    def collect(self) -> Iterator[Metric]:
        """Yield the family with one ``_total`` (and ``_created``) sample per series."""
        from prometheus_client.metrics_core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label_name])
        created = _created_samples_on()
        for value, series in self._made():
            family.add_metric([value], series.value, series.created if created else None)
        yield family


class TallyHistogram(_OneLabel[HistogramSeries]):
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
        super().__init__(name, documentation, label_name)
        self.upper_bounds: tuple[float, ...] = tuple(bounds)
        # ``le`` exactly as prometheus_client writes it (untyped there).
        self._le = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        registry.register(cast("Collector", self))  # a collector, as TallyCounter

    def _new_series(self) -> HistogramSeries:
        return HistogramSeries(self.upper_bounds)

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
        for value, series in self._made():
            cumulative = series.cumulative_counts()
            for le, total in zip(self._le, cumulative, strict=True):
                family.add_sample(f"{self.name}_bucket", {label: value, "le": le}, total)
            family.add_sample(f"{self.name}_count", {label: value}, cumulative[-1])
            if with_sum:
                family.add_sample(f"{self.name}_sum", {label: value}, series.sum)
            if created:
                family.add_sample(f"{self.name}_created", {label: value}, series.created)
        yield family
