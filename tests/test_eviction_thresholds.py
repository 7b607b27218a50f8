"""Thresholds: parsing and the decision helpers, on upstream's own test tables.

The tables are ported as data from Kubernetes' pkg/kubelet/eviction/helpers_test.go
(TestParseThresholdConfig, TestAddAllocatableThresholds, TestThresholdsMet,
TestPercentageThresholdsMet, TestThresholdsFirstObservedAt,
TestThresholdsMetGracePeriod, TestNodeConditions*, TestParsePercentage,
TestSortByEvictionPriority, TestThresholdsUpdatedStats, TestMakeSignalObservations).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kubelet_kit.api import Quantity
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.errors import ValidationError
from kubelet_kit.eviction import (
    FsStats,
    MemoryStats,
    NodeSummary,
    PodUsage,
    make_observations,
)
from kubelet_kit.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    DEFAULT_EVICTION_HARD,
    DISK_PRESSURE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    PID_PRESSURE,
    EvictionConfig,
    Observation,
    Threshold,
    ThresholdValue,
    add_allocatable_thresholds,
    node_conditions,
    node_conditions_last_observed_at,
    node_conditions_observed_since,
    parse_percentage,
    parse_threshold_config,
    sort_by_eviction_priority,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
)


def f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def value(text: str) -> ThresholdValue:
    """A ThresholdValue as upstream's tables write it: "150Mi" or a fraction "0.1"."""
    if text.startswith("0.") or text == "1.0":
        return ThresholdValue(percentage=f32(float(text)))
    return ThresholdValue(quantity=Quantity.parse(text))


def th(signal: str, val: str, grace: float = 0.0, reclaim: str | None = None) -> Threshold:
    return Threshold(signal, value(val), grace, value(reclaim) if reclaim is not None else None)


def same_value(a: ThresholdValue | None, b: ThresholdValue | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.quantity is not None or b.quantity is not None:
        return a.quantity is not None and b.quantity is not None and a.quantity.cmp(b.quantity) == 0
    return a.percentage == b.percentage


def same(a: Threshold, b: Threshold) -> bool:
    return (a.signal, a.grace_period, a.operator) == (b.signal, b.grace_period, b.operator) and (
        same_value(a.value, b.value) and same_value(a.min_reclaim, b.min_reclaim)
    )


def assert_same_set(actual: list[Threshold], expected: list[Threshold]) -> None:
    assert len(actual) == len(expected), (actual, expected)
    for e in expected:
        assert any(same(e, a) for a in actual), (e, actual)
    for a in actual:
        assert any(same(a, e) for e in expected), (a, expected)


# -- TestParseThresholdConfig ------------------------------------------------------

PARSE_CASES: dict[str, dict[str, Any]] = {
    "no values": dict(alloc=[], hard={}, soft={}, grace={}, reclaim={}, err=False, expect=[]),
    "all memory eviction values": dict(
        alloc=["pods"],
        hard={"memory.available": "150Mi"},
        soft={"memory.available": "300Mi"},
        grace={"memory.available": "30s"},
        reclaim={"memory.available": "0"},
        err=False,
        expect=[
            th(ALLOCATABLE_MEMORY_AVAILABLE, "150Mi", reclaim="0"),
            th(MEMORY_AVAILABLE, "150Mi", reclaim="0"),
            th(MEMORY_AVAILABLE, "300Mi", 30, reclaim="0"),
        ],
    ),
    "all memory eviction values in percentages": dict(
        alloc=[],
        hard={"memory.available": "10%"},
        soft={"memory.available": "30%"},
        grace={"memory.available": "30s"},
        reclaim={"memory.available": "5%"},
        err=False,
        expect=[
            th(MEMORY_AVAILABLE, "0.1", reclaim="0.05"),
            th(MEMORY_AVAILABLE, "0.3", 30, reclaim="0.05"),
        ],
    ),
    "disk eviction values": dict(
        alloc=[],
        hard={"imagefs.available": "150Mi", "nodefs.available": "100Mi"},
        soft={"imagefs.available": "300Mi", "nodefs.available": "200Mi"},
        grace={"imagefs.available": "30s", "nodefs.available": "30s"},
        reclaim={"imagefs.available": "2Gi", "nodefs.available": "1Gi"},
        err=False,
        expect=[
            th(IMAGEFS_AVAILABLE, "150Mi", reclaim="2Gi"),
            th(NODEFS_AVAILABLE, "100Mi", reclaim="1Gi"),
            th(IMAGEFS_AVAILABLE, "300Mi", 30, reclaim="2Gi"),
            th(NODEFS_AVAILABLE, "200Mi", 30, reclaim="1Gi"),
        ],
    ),
    "disk eviction values in percentages": dict(
        alloc=[],
        hard={"imagefs.available": "15%", "nodefs.available": "10.5%"},
        soft={"imagefs.available": "30%", "nodefs.available": "20.5%"},
        grace={"imagefs.available": "30s", "nodefs.available": "30s"},
        reclaim={"imagefs.available": "10%", "nodefs.available": "5%"},
        err=False,
        expect=[
            th(IMAGEFS_AVAILABLE, "0.15", reclaim="0.1"),
            th(NODEFS_AVAILABLE, "0.105", reclaim="0.05"),
            th(IMAGEFS_AVAILABLE, "0.3", 30, reclaim="0.1"),
            th(NODEFS_AVAILABLE, "0.205", 30, reclaim="0.05"),
        ],
    ),
    "inode eviction values": dict(
        alloc=[],
        hard={"imagefs.inodesFree": "150Mi", "nodefs.inodesFree": "100Mi"},
        soft={"imagefs.inodesFree": "300Mi", "nodefs.inodesFree": "200Mi"},
        grace={"imagefs.inodesFree": "30s", "nodefs.inodesFree": "30s"},
        reclaim={"imagefs.inodesFree": "2Gi", "nodefs.inodesFree": "1Gi"},
        err=False,
        expect=[
            th(IMAGEFS_INODES_FREE, "150Mi", reclaim="2Gi"),
            th(NODEFS_INODES_FREE, "100Mi", reclaim="1Gi"),
            th(IMAGEFS_INODES_FREE, "300Mi", 30, reclaim="2Gi"),
            th(NODEFS_INODES_FREE, "200Mi", 30, reclaim="1Gi"),
        ],
    ),
    "disable via 0%": dict(
        alloc=[],
        hard={"memory.available": "0%"},
        soft={"memory.available": "0%"},
        grace={},
        reclaim={},
        err=False,
        expect=[],
    ),
    "disable via 100%": dict(
        alloc=[],
        hard={"memory.available": "100%"},
        soft={"memory.available": "100%"},
        grace={},
        reclaim={},
        err=False,
        expect=[],
    ),
    "invalid-signal": dict(
        alloc=[],
        hard={"mem.available": "150Mi"},
        soft={},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "hard-signal-negative": dict(
        alloc=[],
        hard={"memory.available": "-150Mi"},
        soft={},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "hard-signal-negative-percentage": dict(
        alloc=[],
        hard={"memory.available": "-15%"},
        soft={},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "hard-signal-percentage-greater-than-100%": dict(
        alloc=[],
        hard={"memory.available": "150%"},
        soft={},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "soft-signal-negative": dict(
        alloc=[],
        hard={},
        soft={"memory.available": "-150Mi"},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "valid-and-invalid-signal": dict(
        alloc=[],
        hard={"memory.available": "150Mi", "invalid.foo": "150Mi"},
        soft={},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "soft-no-grace-period": dict(
        alloc=[],
        hard={},
        soft={"memory.available": "150Mi"},
        grace={},
        reclaim={},
        err=True,
        expect=[],
    ),
    "soft-negative-grace-period": dict(
        alloc=[],
        hard={},
        soft={"memory.available": "150Mi"},
        grace={"memory.available": "-30s"},
        reclaim={},
        err=True,
        expect=[],
    ),
    "negative-reclaim": dict(
        alloc=[],
        hard={},
        soft={},
        grace={},
        reclaim={"memory.available": "-300Mi"},
        err=True,
        expect=[],
    ),
}


@pytest.mark.parametrize("name", sorted(PARSE_CASES))
def test_parse_threshold_config_upstream_table(name: str) -> None:
    case = PARSE_CASES[name]

    def parse() -> list[Threshold]:
        return parse_threshold_config(
            eviction_hard=case["hard"],
            eviction_soft=case["soft"],
            eviction_soft_grace_period=case["grace"],
            eviction_minimum_reclaim=case["reclaim"],
            enforce_node_allocatable=case["alloc"],
        )

    if case["err"]:
        with pytest.raises(ValidationError):
            parse()
    else:
        assert_same_set(parse(), case["expect"])


@pytest.mark.parametrize(
    ("kwargs", "path", "fragment"),
    [
        (
            {"eviction_hard": {"mem.available": "1Gi"}},
            "evictionHard[mem.available]",
            "unsupported eviction signal mem.available",
        ),
        (
            {"eviction_hard": {"memory.available": "-150Mi"}},
            "evictionHard[memory.available]",
            "must be positive: -150Mi",
        ),
        (
            {"eviction_hard": {"memory.available": "0"}},
            "evictionHard[memory.available]",
            "must be positive",
        ),
        (
            {"eviction_hard": {"memory.available": "-15%"}},
            "evictionHard[memory.available]",
            "must be >= 0%: -15%",
        ),
        (
            {"eviction_hard": {"memory.available": "150%"}},
            "evictionHard[memory.available]",
            "must be <= 100%: 150%",
        ),
        ({"eviction_hard": {"memory.available": "12Q"}}, "evictionHard[memory.available]", '"12Q"'),
        (
            {"eviction_hard": {"memory.available": "ten%"}},
            "evictionHard[memory.available]",
            "invalid syntax",
        ),
        (
            {"eviction_soft": {"memory.available": "1Gi"}},
            "evictionSoftGracePeriod[memory.available]",
            "grace period must be specified for the soft eviction threshold memory.available",
        ),
        (
            {"eviction_soft_grace_period": {"memory.available": "-30s"}},
            "evictionSoftGracePeriod[memory.available]",
            "invalid eviction grace period specified: -30s, must be a positive value",
        ),
        (
            {"eviction_soft_grace_period": {"memory.available": "soon"}},
            "evictionSoftGracePeriod[memory.available]",
            'invalid duration "soon"',
        ),
        (
            {"eviction_minimum_reclaim": {"memory.available": "-300Mi"}},
            "evictionMinimumReclaim[memory.available]",
            "negative eviction minimum reclaim specified for memory.available",
        ),
        (
            {"eviction_minimum_reclaim": {"memory.available": "0%"}},
            "evictionMinimumReclaim[memory.available]",
            "eviction percentage minimum reclaim memory.available must be positive: 0%",
        ),
        (
            {"eviction_minimum_reclaim": {"disk.available": "1Gi"}},
            "evictionMinimumReclaim[disk.available]",
            "unsupported eviction signal",
        ),
    ],
)
def test_every_invalid_value_is_rejected_with_its_field(
    kwargs: dict[str, Any], path: str, fragment: str
) -> None:
    kwargs.setdefault("eviction_hard", {})
    with pytest.raises(ValidationError) as info:
        parse_threshold_config(**kwargs)
    assert [e.path for e in info.value.errors] == [path]
    assert fragment in info.value.errors[0].message


def test_all_bad_values_are_reported_at_once() -> None:
    with pytest.raises(ValidationError) as info:
        parse_threshold_config(
            eviction_hard={"memory.available": "-1", "bogus": "1"},
            eviction_soft={"nodefs.available": "1Gi"},
        )
    assert {e.path for e in info.value.errors} == {
        "evictionHard[memory.available]",
        "evictionHard[bogus]",
        "evictionSoftGracePeriod[nodefs.available]",
    }


def test_defaults_apply_only_when_eviction_hard_is_unset() -> None:
    defaults = parse_threshold_config()
    assert {t.signal for t in defaults} == set(DEFAULT_EVICTION_HARD)
    mem = next(t for t in defaults if t.signal == MEMORY_AVAILABLE)
    assert mem.value.quantity == Quantity.parse("100Mi") and mem.hard
    # Giving any key drops the other defaults.
    only = parse_threshold_config(eviction_hard={"nodefs.available": "5%"})
    assert [t.signal for t in only] == [NODEFS_AVAILABLE]
    assert parse_threshold_config(eviction_hard={}) == []


def test_percentages_are_float32_fractions_as_upstream() -> None:
    t = parse_threshold_config(eviction_hard={"nodefs.available": "10%"})[0]
    # 10% of 100Gi, computed through a float32 0.1 as the kubelet does.
    assert t.value.amount(100 * 1024**3) == 10737418400
    assert t.value.amount(1000) == 100


# -- TestParsePercentage -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "fraction"),
    [("blah", True, 0.0), ("25.5%", False, 0.255), ("foo%", True, 0.0), ("12%345", True, 0.0)],
)
def test_parse_percentage_upstream_table(text: str, error: bool, fraction: float) -> None:
    if error:
        with pytest.raises(ValueError):
            parse_percentage(text)
    else:
        assert parse_percentage(text) == f32(fraction)


# -- TestAddAllocatableThresholds --------------------------------------------------

ALLOC_CASES = {
    "non-memory-signal": (
        [th(IMAGEFS_AVAILABLE, "150Mi", reclaim="0")],
        [th(IMAGEFS_AVAILABLE, "150Mi", reclaim="0")],
    ),
    # upstream uses a grace period of 10 (nanoseconds); any non-zero grace is soft
    "memory-signal-with-grace": (
        [th(MEMORY_AVAILABLE, "150Mi", 10, reclaim="0")],
        [th(MEMORY_AVAILABLE, "150Mi", 10, reclaim="0")],
    ),
    "memory-signal-without-grace": (
        [th(MEMORY_AVAILABLE, "150Mi", reclaim="0")],
        [
            th(ALLOCATABLE_MEMORY_AVAILABLE, "150Mi", reclaim="0"),
            th(MEMORY_AVAILABLE, "150Mi", reclaim="0"),
        ],
    ),
    "memory-signal-without-grace-two-thresholds": (
        [th(MEMORY_AVAILABLE, "150Mi", reclaim="0"), th(MEMORY_AVAILABLE, "200Mi", reclaim="1Gi")],
        [
            th(ALLOCATABLE_MEMORY_AVAILABLE, "150Mi", reclaim="0"),
            th(MEMORY_AVAILABLE, "150Mi", reclaim="0"),
            th(ALLOCATABLE_MEMORY_AVAILABLE, "200Mi", reclaim="1Gi"),
            th(MEMORY_AVAILABLE, "200Mi", reclaim="1Gi"),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(ALLOC_CASES))
def test_add_allocatable_thresholds_upstream_table(name: str) -> None:
    given, expected = ALLOC_CASES[name]
    assert_same_set(add_allocatable_thresholds(given), expected)


# -- TestThresholdsMet / TestPercentageThresholdsMet ------------------------------

HARD_1GI = th(MEMORY_AVAILABLE, "1Gi", reclaim="500Mi")


def obs(available: str, capacity: str = "0", time: float = 0.0) -> Observation:
    return Observation(Quantity.parse(available).value(), Quantity.parse(capacity).value(), time)


@pytest.mark.parametrize(
    ("enforce", "thresholds", "observations", "expected"),
    [
        pytest.param(False, [], {}, [], id="empty"),
        pytest.param(
            False,
            [HARD_1GI],
            {MEMORY_AVAILABLE: obs("500Mi")},
            [HARD_1GI],
            id="threshold-met-memory",
        ),
        pytest.param(False, [HARD_1GI], {MEMORY_AVAILABLE: obs("2Gi")}, [], id="threshold-not-met"),
        pytest.param(
            True,
            [HARD_1GI],
            {MEMORY_AVAILABLE: obs("1.05Gi")},
            [HARD_1GI],
            id="threshold-met-with-min-reclaim",
        ),
        pytest.param(
            True,
            [HARD_1GI],
            {MEMORY_AVAILABLE: obs("2Gi")},
            [],
            id="threshold-not-met-with-min-reclaim",
        ),
    ],
)
def test_thresholds_met_upstream_table(
    enforce: bool,
    thresholds: list[Threshold],
    observations: dict[str, Observation],
    expected: list[Threshold],
) -> None:
    assert thresholds_met(thresholds, observations, enforce) == expected


PCT = [th(MEMORY_AVAILABLE, "0.2", reclaim="0.05"), th(NODEFS_AVAILABLE, "0.3")]


@pytest.mark.parametrize(
    ("enforce", "observations", "expected"),
    [
        pytest.param(
            False,
            {MEMORY_AVAILABLE: obs("100Mi", "1000Mi"), NODEFS_AVAILABLE: obs("100Gi", "1000Gi")},
            PCT,
            id="BothMet",
        ),
        pytest.param(
            False,
            {MEMORY_AVAILABLE: obs("300Mi", "1000Mi"), NODEFS_AVAILABLE: obs("400Gi", "1000Gi")},
            [],
            id="NoneMet",
        ),
        pytest.param(
            False,
            {MEMORY_AVAILABLE: obs("300Mi", "1000Mi"), NODEFS_AVAILABLE: obs("100Gi", "1000Gi")},
            [PCT[1]],
            id="DiskMet",
        ),
        pytest.param(
            False,
            {MEMORY_AVAILABLE: obs("100Mi", "1000Mi"), NODEFS_AVAILABLE: obs("400Gi", "1000Gi")},
            [PCT[0]],
            id="MemoryMet",
        ),
        pytest.param(
            True, {MEMORY_AVAILABLE: obs("225Mi", "1000Mi")}, [PCT[0]], id="MemoryMetWithMinReclaim"
        ),
        pytest.param(
            True, {MEMORY_AVAILABLE: obs("300Mi", "1000Mi")}, [], id="MemoryNotMetWithMinReclaim"
        ),
    ],
)
def test_percentage_thresholds_met_upstream_table(
    enforce: bool, observations: dict[str, Observation], expected: list[Threshold]
) -> None:
    assert thresholds_met(PCT, observations, enforce) == expected


# -- TestThresholdsUpdatedStats ----------------------------------------------------

UPDATED = Threshold(MEMORY_AVAILABLE, ThresholdValue())
T0 = 1_451_606_400.0  # 2016-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("thresholds", "observations", "last", "expected"),
    [
        pytest.param([], {}, {}, [], id="empty"),
        pytest.param([UPDATED], {MEMORY_AVAILABLE: Observation(0, 0)}, {}, [UPDATED], id="no-time"),
        pytest.param(
            [UPDATED],
            {MEMORY_AVAILABLE: Observation(0, 0, T0)},
            {},
            [UPDATED],
            id="no-last-observation",
        ),
        pytest.param(
            [UPDATED],
            {MEMORY_AVAILABLE: Observation(0, 0, T0)},
            {MEMORY_AVAILABLE: Observation(0, 0, T0 + 60)},
            [],
            id="time-machine",
        ),
        pytest.param(
            [UPDATED],
            {MEMORY_AVAILABLE: Observation(0, 0, T0)},
            {MEMORY_AVAILABLE: Observation(0, 0, T0)},
            [],
            id="same-observation",
        ),
        pytest.param(
            [UPDATED],
            {MEMORY_AVAILABLE: Observation(0, 0, T0 + 60)},
            {MEMORY_AVAILABLE: Observation(0, 0, T0)},
            [UPDATED],
            id="new-observation",
        ),
    ],
)
def test_thresholds_updated_stats_upstream_table(
    thresholds: list[Threshold],
    observations: dict[str, Observation],
    last: dict[str, Observation],
    expected: list[Threshold],
) -> None:
    assert thresholds_updated_stats(thresholds, observations, last) == expected


# -- first observed, grace periods, node conditions -------------------------------

HARD = th(MEMORY_AVAILABLE, "1Gi")
SOFT = th(MEMORY_AVAILABLE, "2Gi", 60)
NOW = 5000.0


def test_thresholds_first_observed_at_upstream_table() -> None:
    assert thresholds_first_observed_at([], {}, NOW) == {}
    assert thresholds_first_observed_at([HARD], {}, NOW) == {HARD: NOW}
    assert thresholds_first_observed_at([HARD], {HARD: NOW - 60}, NOW) == {HARD: NOW - 60}


@pytest.mark.parametrize(
    ("observed_at", "expected"),
    [
        pytest.param({}, [], id="empty"),
        pytest.param({HARD: NOW}, [HARD], id="hard-threshold-met"),
        pytest.param({SOFT: NOW}, [], id="soft-threshold-not-met"),
        pytest.param({SOFT: NOW - 120}, [SOFT], id="soft-threshold-met"),
    ],
)
def test_thresholds_met_grace_period_upstream_table(
    observed_at: dict[Threshold, float], expected: list[Threshold]
) -> None:
    assert thresholds_met_grace_period(observed_at, NOW) == expected


def test_node_conditions_upstream_table() -> None:
    assert node_conditions([]) == []
    assert node_conditions([Threshold(MEMORY_AVAILABLE, ThresholdValue())]) == [MEMORY_PRESSURE]
    every = [
        Threshold(s, ThresholdValue())
        for s in (
            PID_AVAILABLE,
            IMAGEFS_INODES_FREE,
            ALLOCATABLE_MEMORY_AVAILABLE,
            NODEFS_AVAILABLE,
        )
    ]
    assert node_conditions(every) == [MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE]


def test_node_conditions_last_observed_at_upstream_table() -> None:
    old = NOW - 60
    assert node_conditions_last_observed_at([MEMORY_PRESSURE], {}, NOW) == {MEMORY_PRESSURE: NOW}
    assert node_conditions_last_observed_at([MEMORY_PRESSURE], {MEMORY_PRESSURE: old}, NOW) == {
        MEMORY_PRESSURE: NOW
    }
    assert node_conditions_last_observed_at([], {MEMORY_PRESSURE: old}, NOW) == {
        MEMORY_PRESSURE: old
    }


def test_node_conditions_observed_since_upstream_table() -> None:
    observed = {MEMORY_PRESSURE: NOW - 60}
    assert node_conditions_observed_since(observed, 120, NOW) == [MEMORY_PRESSURE]
    assert node_conditions_observed_since(observed, 30, NOW) == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param([], [], id="empty threshold list"),
        pytest.param(
            [NODEFS_AVAILABLE, PID_AVAILABLE, MEMORY_AVAILABLE],
            [MEMORY_AVAILABLE, NODEFS_AVAILABLE, PID_AVAILABLE],
            id="memory first",
        ),
        pytest.param(
            [NODEFS_AVAILABLE, PID_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE],
            [ALLOCATABLE_MEMORY_AVAILABLE, NODEFS_AVAILABLE, PID_AVAILABLE],
            id="allocatable memory first",
        ),
    ],
)
def test_sort_by_eviction_priority_upstream_table(given: list[str], expected: list[str]) -> None:
    ordered = sort_by_eviction_priority(Threshold(s, ThresholdValue()) for s in given)
    assert [t.signal for t in ordered] == expected


# -- TestMakeSignalObservations ----------------------------------------------------


def test_make_signal_observations_upstream_case() -> None:
    node_available, node_ws = 1024**3, 1024**3
    summary = NodeSummary(
        time=T0,
        memory=MemoryStats(node_available, node_ws),
        allocatable_memory=MemoryStats(node_available, node_ws),
        nodefs=FsStats(1024, 2048, 1024, 1024 * 1024),
        imagefs=FsStats(1024 * 1024, 2 * 1024 * 1024, 1024, 1024 * 1024),
        max_pid=255816,
        process_count=1000,
        pods=(PodUsage("uuid1", memory_working_set_bytes=1024**3),),
    )
    o = make_observations(summary)
    assert o[ALLOCATABLE_MEMORY_AVAILABLE] == Observation(
        node_available, node_available + node_ws, T0
    )
    assert o[MEMORY_AVAILABLE] == Observation(node_available, node_available + node_ws, T0)
    assert o[NODEFS_AVAILABLE] == Observation(1024, 2048, T0)
    assert o[NODEFS_INODES_FREE] == Observation(1024, 1024 * 1024, T0)
    assert o[IMAGEFS_AVAILABLE] == Observation(1024 * 1024, 2 * 1024 * 1024, T0)
    assert o[IMAGEFS_INODES_FREE] == Observation(1024, 1024 * 1024, T0)
    assert o[PID_AVAILABLE] == Observation(255816 - 1000, 255816, T0)


def test_missing_numbers_leave_the_signal_unobserved() -> None:
    o = make_observations(
        NodeSummary(
            memory=MemoryStats(available_bytes=5),
            nodefs=FsStats(available_bytes=1, capacity_bytes=2),
        )
    )
    assert set(o) == {NODEFS_AVAILABLE}


# -- configuration -----------------------------------------------------------------


def test_eviction_config_reads_kubelet_configuration_fields() -> None:
    cfg = KubeletConfiguration(
        eviction_hard={"memory.available": "200Mi"},
        eviction_soft={"nodefs.available": "20%"},
        eviction_soft_grace_period={"nodefs.available": "1m30s"},
        eviction_minimum_reclaim={"nodefs.available": "1Gi"},
        eviction_pressure_transition_period="30s",
        eviction_max_pod_grace_period=20,
        enforce_node_allocatable=("pods",),
    )
    ec = EvictionConfig.from_kubelet_config(cfg)
    assert ec.pressure_transition_period == 30
    assert ec.max_pod_grace_period == 20
    assert ec.monitoring_interval == 10
    signals = sorted((t.signal, t.grace_period) for t in ec.thresholds)
    assert signals == [
        (ALLOCATABLE_MEMORY_AVAILABLE, 0),
        (MEMORY_AVAILABLE, 0),
        (NODEFS_AVAILABLE, 90),
    ]
    soft = next(t for t in ec.thresholds if t.signal == NODEFS_AVAILABLE)
    assert soft.min_reclaim == ThresholdValue(quantity=Quantity.parse("1Gi"))


def test_eviction_config_defaults_match_the_kubelet() -> None:
    ec = EvictionConfig.from_kubelet_config(KubeletConfiguration())
    assert ec.pressure_transition_period == 300
    assert ec.max_pod_grace_period == 0
    # the five Linux hard defaults plus allocatableMemory.available (pods enforced)
    assert {t.signal for t in ec.thresholds} == set(DEFAULT_EVICTION_HARD) | {
        ALLOCATABLE_MEMORY_AVAILABLE
    }
    # "0s" cannot be told from unset in Go: it means the default
    zero = KubeletConfiguration(eviction_pressure_transition_period="0s")
    assert EvictionConfig.from_kubelet_config(zero).pressure_transition_period == 300


def test_eviction_config_names_every_bad_field() -> None:
    cfg = KubeletConfiguration(
        eviction_hard={"memory.available": "lots"},
        eviction_pressure_transition_period="5 minutes",
    )
    with pytest.raises(ValidationError) as info:
        EvictionConfig.from_kubelet_config(cfg)
    assert {e.path for e in info.value.errors} == {
        "evictionHard[memory.available]",
        "evictionPressureTransitionPeriod",
    }
    negative = KubeletConfiguration(eviction_pressure_transition_period="-1m")
    with pytest.raises(ValidationError, match="evictionPressureTransitionPeriod"):
        EvictionConfig.from_kubelet_config(negative)
