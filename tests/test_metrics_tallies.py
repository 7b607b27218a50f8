"""The per-call agent metrics (runtime operations, pod worker durations) are kept
as plain tallies: their exposition must be what prometheus_client's own Counter
and Histogram wrote, series by series and bucket by bucket."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Sequence

import prometheus_client
import pytest
from _scrape_helpers import PausingDict, scrape_while_adding
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from kubelet_kit.node.metrics import RUNTIME_OPERATION_BUCKETS, KubeletMetrics
from kubelet_kit.node.tallies import TallyCounter, TallyHistogram

# The kubelet's metrics.DefBuckets, the pod worker histogram's buckets.
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Runtime calls as (operation, seconds, failed): on a bound, between bounds,
#: negative (a clock stepping back counts as 0), above every finite bound, failures
#: on operations first seen succeeding (the errors' series order is their own).
RUNTIME_CALLS = [
    ("version", 0.0, False),
    ("list_containers", 0.004, False),
    ("list_containers", 0.005, False),
    ("pull_image", 2.0, False),
    ("list_podsandbox", 0.0126, True),
    ("list_containers", -1.0, False),
    ("exec_sync", 1000.0, True),
    ("status", 0.0125, False),
    ("status", 0.03125, False),
    ("version", 1e-9, True),
    ("pull_image", 0.3, False),
]
#: Pod syncs as (operation, seconds).
WORKER_SYNCS = [
    ("create", 0.005),
    ("sync", 0.0051),
    ("sync", 11.0),
    ("kill", -2.0),
    ("update", 0.25),
    ("sync", 0.0001),
]

HELP = {
    "kubelet_runtime_operations": "Cumulative number of runtime operations by operation type.",
    "kubelet_runtime_operations_errors": (
        "Cumulative number of runtime operation errors by operation type."
    ),
    "kubelet_runtime_operations_duration_seconds": (
        "Duration in seconds of runtime operations. Broken down by operation type."
    ),
    "kubelet_pod_worker_duration_seconds": (
        "Duration in seconds to sync a single pod. Broken down by operation type: "
        "create, update, or sync"
    ),
}


def number(value: float) -> str:
    """A sample value or ``le`` as the text format writes it: Python's repr below
    1e6 (the values used here), +Inf for infinity."""
    if value == math.inf:
        return "+Inf"
    assert abs(value) < 1e6, "above 1e6 the format switches to Go's exponent notation"
    return repr(float(value))


def families(text: str) -> dict[str, list[str]]:
    """The exposition's lines by family (each block starts at its ``# HELP``)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current = blocks.setdefault(line.split(" ")[2], [])
        current.append(line)
    return blocks


def mask_created(lines: list[str], earliest: float, latest: float) -> list[str]:
    """``lines`` with each ``_created`` value replaced by <created>, after checking
    it is a wall-clock time within [earliest, latest]."""
    masked = []
    for line in lines:
        match = re.fullmatch(r"(\S+_created\S*) (\S+)", line)
        if match:
            assert earliest <= float(match.group(2)) <= latest, line
            line = f"{match.group(1)} <created>"
        masked.append(line)
    return masked


def grouped(pairs: Sequence[tuple[str, float]]) -> dict[str, list[float]]:
    """Values by key, keys in order of first appearance."""
    out: dict[str, list[float]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def expected_counter(name: str, label: str, counts: dict[str, int]) -> list[str]:
    """The text-format block of a labelled counter, then its ``_created`` block."""
    lines = [f"# HELP {name}_total {HELP[name]}", f"# TYPE {name}_total counter"]
    lines += [f'{name}_total{{{label}="{v}"}} {number(n)}' for v, n in counts.items()]
    lines += [f"# HELP {name}_created {HELP[name]}", f"# TYPE {name}_created gauge"]
    lines += [f'{name}_created{{{label}="{v}"}} <created>' for v in counts]
    return lines


def expected_histogram(
    name: str, label: str, bounds: Sequence[float], observed: dict[str, list[float]]
) -> list[str]:
    """The text-format block of a labelled histogram of ``observed`` durations (a
    negative one counts as 0), then its ``_created`` block."""
    lines = [f"# HELP {name} {HELP[name]}", f"# TYPE {name} histogram"]
    for value, seconds in observed.items():
        durations = [max(s, 0.0) for s in seconds]
        for bound in (*bounds, math.inf):
            in_bucket = sum(1 for d in durations if d <= bound)
            le = number(bound)
            lines.append(f'{name}_bucket{{le="{le}",{label}="{value}"}} {number(in_bucket)}')
        lines.append(f'{name}_count{{{label}="{value}"}} {number(len(durations))}')
        total = 0.0
        for d in durations:
            total += d
        lines.append(f'{name}_sum{{{label}="{value}"}} {number(total)}')
    lines += [f"# HELP {name}_created {HELP[name]}", f"# TYPE {name}_created gauge"]
    lines += [f'{name}_created{{{label}="{v}"}} <created>' for v in observed]
    return lines


def test_exposition_counts_every_call_bucket_by_bucket() -> None:
    earliest = time.time()
    metrics = KubeletMetrics()
    for operation, seconds, failed in RUNTIME_CALLS:
        metrics.record_operation(operation, seconds, failed)
    for operation, seconds in WORKER_SYNCS:
        metrics.observe_pod_worker(operation, seconds)
    latest = time.time()
    blocks = families(generate_latest(metrics.registry).decode())

    calls = grouped([(op, s) for op, s, _ in RUNTIME_CALLS])
    errors = grouped([(op, s) for op, s, failed in RUNTIME_CALLS if failed])
    # (family block, its _created block): expected lines
    expected = {
        ("kubelet_runtime_operations_total", "kubelet_runtime_operations_created"): (
            expected_counter(
                "kubelet_runtime_operations",
                "operation_type",
                {op: len(seconds) for op, seconds in calls.items()},
            )
        ),
        ("kubelet_runtime_operations_errors_total", "kubelet_runtime_operations_errors_created"): (
            expected_counter(
                "kubelet_runtime_operations_errors",
                "operation_type",
                {op: len(seconds) for op, seconds in errors.items()},
            )
        ),
        (
            "kubelet_runtime_operations_duration_seconds",
            "kubelet_runtime_operations_duration_seconds_created",
        ): expected_histogram(
            "kubelet_runtime_operations_duration_seconds",
            "operation_type",
            RUNTIME_OPERATION_BUCKETS,
            calls,
        ),
        (
            "kubelet_pod_worker_duration_seconds",
            "kubelet_pod_worker_duration_seconds_created",
        ): expected_histogram(
            "kubelet_pod_worker_duration_seconds", "operation", DEF_BUCKETS, grouped(WORKER_SYNCS)
        ),
    }
    for (family, created), lines in expected.items():
        got = mask_created(blocks[family] + blocks[created], earliest, latest)
        assert got == lines, family
    # The families keep their place on the page: after the pod start histogram,
    # the pod worker's, then the runtime's three.
    names = [n for n in blocks if not n.endswith("_created")]
    assert names[names.index("kubelet_pod_start_duration_seconds") :] == [
        "kubelet_pod_start_duration_seconds",
        "kubelet_pod_worker_duration_seconds",
        "kubelet_runtime_operations_total",
        "kubelet_runtime_operations_errors_total",
        "kubelet_runtime_operations_duration_seconds",
    ]


def _reference(registry: CollectorRegistry) -> tuple[Histogram, Counter, Counter, Histogram]:
    """prometheus_client's own metrics, defined (and registered in the order) the
    agent defined them with it."""
    return (
        Histogram(
            "kubelet_pod_worker_duration_seconds",
            HELP["kubelet_pod_worker_duration_seconds"],
            ["operation"],
            buckets=DEF_BUCKETS,
            registry=registry,
        ),
        Counter(
            "kubelet_runtime_operations",
            HELP["kubelet_runtime_operations"],
            ["operation_type"],
            registry=registry,
        ),
        Counter(
            "kubelet_runtime_operations_errors",
            HELP["kubelet_runtime_operations_errors"],
            ["operation_type"],
            registry=registry,
        ),
        Histogram(
            "kubelet_runtime_operations_duration_seconds",
            HELP["kubelet_runtime_operations_duration_seconds"],
            ["operation_type"],
            buckets=RUNTIME_OPERATION_BUCKETS,
            registry=registry,
        ),
    )


def _pages(registry: CollectorRegistry, prefixes: tuple[str, ...]) -> list[str]:
    """Both formats' lines of the families whose names start with ``prefixes``,
    ``_created`` values masked."""
    lines = []
    for generate in (generate_latest, generate_openmetrics):
        for name, block in families(generate(registry).decode()).items():
            if name.startswith(prefixes):
                lines += [re.sub(r"(_created\S*) \S+$", r"\1 <created>", line) for line in block]
    return lines


def test_exposition_equals_prometheus_client_metrics_fed_the_same_calls() -> None:
    # Odd durations too: NaN (in the sum only), +Inf and huge ones (Go's exponents).
    odd = [("exec_sync", math.nan, False), ("attach", math.inf, True), ("exec", 3e7, False)]
    metrics = KubeletMetrics()
    reference = CollectorRegistry()
    worker, calls, errors, durations = _reference(reference)
    for operation, seconds, failed in RUNTIME_CALLS + odd:
        metrics.record_operation(operation, seconds, failed)
        calls.labels(operation_type=operation).inc()
        durations.labels(operation_type=operation).observe(max(seconds, 0))
        if failed:
            errors.labels(operation_type=operation).inc()
    for operation, seconds in [*WORKER_SYNCS, ("sync", math.nan)]:
        metrics.observe_pod_worker(operation, seconds)
        worker.labels(operation=operation).observe(max(seconds, 0))

    prefixes = ("kubelet_runtime_operations", "kubelet_pod_worker_duration_seconds")
    got = _pages(metrics.registry, prefixes)
    want = _pages(reference, prefixes)
    assert any("nan" in line.lower() for line in want)  # the odd values are on the page
    assert got == want


def test_created_samples_follow_prometheus_client_setting() -> None:
    metrics = KubeletMetrics()
    metrics.record_operation("version", 0.01, True)
    metrics.observe_pod_worker("create", 0.1)
    assert "kubelet_runtime_operations_created{" in generate_latest(metrics.registry).decode()
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        text = generate_latest(metrics.registry).decode()
    finally:
        prometheus_client.enable_created_metrics()  # type: ignore[no-untyped-call]
    assert "_created" not in text
    assert 'kubelet_runtime_operations_errors_total{operation_type="version"} 1.0' in text


def test_tallies_claim_their_sample_names_in_the_registry() -> None:
    registry = CollectorRegistry()
    TallyCounter("calls", "Calls.", "kind", registry)
    TallyHistogram("wait_seconds", "Waits.", "kind", [0.1, 1.0], registry)
    for clash in ("calls_total", "calls_created", "wait_seconds_count", "wait_seconds_bucket"):
        with pytest.raises(ValueError, match="Duplicated"):
            Gauge(clash, "Clash.", registry=registry)


def test_labels_by_position_or_name_give_one_series() -> None:
    registry = CollectorRegistry()
    counter = TallyCounter("calls", "Calls.", "kind", registry)
    histogram = TallyHistogram("wait_seconds", "Waits.", "kind", [0.1, 1.0], registry)
    counter.labels("a").inc()
    counter.labels(kind="a").inc(2)
    histogram.labels(kind="a").observe(0.5)
    histogram.labels("a").observe(0.05)
    assert registry.get_sample_value("calls_total", {"kind": "a"}) == 3.0
    assert registry.get_sample_value("wait_seconds_bucket", {"kind": "a", "le": "0.1"}) == 1.0
    assert registry.get_sample_value("wait_seconds_count", {"kind": "a"}) == 2.0
    assert histogram.labels("a").count == 2.0
    with pytest.raises(ValueError):
        counter.labels(other="a")
    with pytest.raises(ValueError):
        counter.labels("a", "b")
    with pytest.raises(ValueError):
        counter.labels("a").inc(-1)
    with pytest.raises(ValueError):
        TallyHistogram("unsorted", "Unsorted.", "kind", [1.0, 0.1], registry)


def test_scrape_from_another_thread_sees_whole_series() -> None:
    # The agent records on its loop thread; a scrape may come from another thread
    # while series are being added, and sees each series' count equal to its +Inf
    # bucket.
    metrics = KubeletMetrics()
    calls, per_operation = 200_000, 200
    stop = threading.Event()
    problems: list[str] = []

    def scrape() -> None:
        try:
            while not stop.is_set():
                for family in metrics.registry.collect():
                    values = {
                        (s.name, frozenset(s.labels.items())): s.value for s in family.samples
                    }
                    for (name, labels), value in values.items():
                        if name.endswith("_count"):
                            inf = values[
                                (name[: -len("_count")] + "_bucket", labels | {("le", "+Inf")})
                            ]
                            if inf != value:
                                problems.append(f"{name}{dict(labels)}: {value} != {inf}")
        except Exception as exc:  # reported below, not lost in the thread
            problems.append(repr(exc))

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for i in range(calls):
            metrics.record_operation(f"op{i // per_operation}", (i % 7) * 0.01, i % 3 == 0)
    finally:
        stop.set()
        scraper.join()
    assert problems == []
    registry = metrics.registry
    for n in (0, calls // per_operation - 1):
        labels = {"operation_type": f"op{n}"}
        assert registry.get_sample_value("kubelet_runtime_operations_total", labels) == float(
            per_operation
        )
        assert registry.get_sample_value(
            "kubelet_runtime_operations_duration_seconds_count", labels
        ) == float(per_operation)


@pytest.mark.parametrize("kind", ["counter", "histogram"])
def test_scrape_from_another_thread_while_a_series_is_made(kind: str) -> None:
    # The collector copies its series; a series made by the agent's thread during
    # that copy (a collection's finalizers can let it run midway) neither breaks
    # the scrape nor goes missing from the tally.
    registry = CollectorRegistry()
    tally: TallyCounter | TallyHistogram
    if kind == "counter":
        tally = TallyCounter("calls", "Calls.", "kind", registry)
    else:
        tally = TallyHistogram("wait_seconds", "Waits.", "kind", [0.1, 1.0], registry)
    for name in ("a", "b", "c"):
        tally.labels(name)
    tally.series = series = PausingDict(tally.series)  # type: ignore[assignment]
    assert scrape_while_adding(registry, series, lambda: tally.labels("new")) == []
    assert "new" in tally.series
