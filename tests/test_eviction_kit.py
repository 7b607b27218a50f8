"""The EvictionManager kit against the fake, the reference manager and broken
managers, and the FakeEvictionManager's own scripts, call log and injected errors."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from _eviction_helpers import Killer, make_pod

import kubelet_kit.testing.fake_eviction as fake_eviction_module
from kubelet_kit.api import Pod
from kubelet_kit.eviction import (
    DISK_PRESSURE,
    EVICTED_REASON,
    MEMORY_PRESSURE,
    EvictionManager,
    PodUsage,
    StubEvictionManager,
    ThresholdEvictionManager,
    rank_memory_pressure,
)
from kubelet_kit.testing import (
    ConformanceFailure,
    EvictionManagerConformance,
    FakeClock,
    FakeEvictionManager,
    FakeStatsProvider,
)
from kubelet_kit.testing.eviction_kit import (
    CHECKS,
    MONITORING_INTERVAL,
    check_eviction,
    eviction_kit_options,
    run_eviction_kit,
)
from kubelet_kit.testing.kit import KitContext

pytestmark = pytest.mark.timeout(60)


def fake(ctx: KitContext[EvictionManager]) -> FakeEvictionManager:
    o = ctx.options
    return FakeEvictionManager(clock=o["clock"], stats=o["stats"], config=o["config"])


def reference(ctx: KitContext[EvictionManager], **kwargs: Any) -> ThresholdEvictionManager:
    o = ctx.options
    return ThresholdEvictionManager(
        clock=o["clock"], stats=o["stats"], config=o["config"], **kwargs
    )


# ---------------------------------------------------------------- the kit, as users run it


class TestFakeEvictionManager(EvictionManagerConformance):  # type: ignore[misc]
    def make(self, ctx: KitContext[EvictionManager]) -> EvictionManager:
        return fake(ctx)


class TestReferenceEvictionManager(EvictionManagerConformance):  # type: ignore[misc]
    def make(self, ctx: KitContext[EvictionManager]) -> EvictionManager:
        return reference(ctx)


async def test_the_reference_passes_with_the_newest_one_second_hard_grace() -> None:
    report = await check_eviction(lambda ctx: reference(ctx, hard_eviction_grace_period=1))
    assert [r.status for r in report.results] == ["passed"] * len(CHECKS)


async def test_the_kits_order_is_the_projects_ranking() -> None:
    # The order one_pod_per_round_in_rank_order expects is rank_memory_pressure's.
    opts = eviction_kit_options()
    stats: FakeStatsProvider = opts["stats"]
    pods = {
        "under": ("1Gi", None, "100Mi"),
        "guaranteed": ("1Gi", "1Gi", "900Mi"),
        "small-excess": ("100Mi", None, "150Mi"),
        "besteffort": (None, None, "300Mi"),
        "big-excess": ("200Mi", None, "600Mi"),
    }
    made = []
    for name, (request, limit, used) in pods.items():
        requests = {"memory": request} if request else None
        limits = {"memory": limit, "cpu": "1"} if limit else None
        if limit:
            requests = {"memory": request or limit, "cpu": "1"}
        pod = make_pod(name, requests=requests, limits=limits)
        stats.set_pod(pod, memory=used)
        made.append(pod)
    usage: Mapping[str, PodUsage] = stats.pods
    ranked = [p.name for p in rank_memory_pressure(made, usage)]
    assert ranked == ["big-excess", "besteffort", "small-excess", "guaranteed", "under"]


async def test_check_eviction_picks_checks_and_raises_on_failure() -> None:
    report = await check_eviction(fake, names=["stop_is_idempotent"])
    assert [r.name for r in report.results] == ["stop_is_idempotent"]
    with pytest.raises(ConformanceFailure, match="hard_threshold_evicts_the_top_ranked_pod"):
        await check_eviction(StubEvictionManager)


# ---------------------------------------------------------------- the kit catches broken managers


def _by_raw_usage(signal: str, dedicated_image_fs: bool) -> Any:
    def rank(
        pods: Sequence[Pod], stats: Mapping[str, PodUsage], *, cache: object = None
    ) -> list[Pod]:
        used = {uid: s.memory_working_set_bytes or 0 for uid, s in stats.items()}
        return sorted(pods, key=lambda p: -used.get(p.uid, 0))

    return rank


async def test_the_kit_fails_a_manager_that_ranks_by_raw_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fake_eviction_module, "rank_for_signal", _by_raw_usage)
    report = await run_eviction_kit(fake)
    assert {r.name for r in report.failures} == {
        "hard_threshold_evicts_the_top_ranked_pod",
        "one_pod_per_round_in_rank_order",
    }, report.summary()


@pytest.mark.parametrize(
    ("changes", "failing"),
    [
        # Conditions dropped one round after the pressure is gone.
        (
            {"pressure_transition_period": MONITORING_INTERVAL},
            {"pressure_condition_holds_for_transition_period"},
        ),
        # A hard eviction that waits for the pod's own grace period.
        ({"hard_eviction_grace_period": 30}, {"hard_threshold_evicts_the_top_ranked_pod"}),
        # The pod's full grace period in a soft eviction.
        ({"max_pod_grace_period": 600}, {"soft_threshold_waits_for_its_grace_period"}),
    ],
    ids=["transition_period", "hard_grace", "soft_grace_cap"],
)
async def test_the_kit_fails_a_misconfigured_reference(
    changes: dict[str, Any], failing: set[str]
) -> None:
    report = await run_eviction_kit(lambda ctx: reference(ctx, **changes))
    assert {r.name for r in report.failures} == failing, report.summary()


async def test_the_stub_fails_every_check_that_needs_pressure() -> None:
    report = await run_eviction_kit(StubEvictionManager)
    assert [r.name for r in report.results if r.status == "passed"] == [
        "no_pressure_no_eviction",
        "stop_is_idempotent",
    ]
    assert report.result("admission_under_memory_pressure").message.startswith(
        "admit under MemoryPressure: admit a BestEffort pod: expected (False, 'Evicted'"
    )


# ---------------------------------------------------------------- FakeEvictionManager


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_the_fake_is_an_eviction_manager() -> None:
    assert isinstance(FakeEvictionManager(), EvictionManager)


async def test_stats_under_the_default_hard_threshold_evict_with_the_kubelets_words(
    clock: FakeClock,
) -> None:
    m = FakeEvictionManager(clock=clock)  # the kubelet's defaults: memory.available<100Mi
    stats = m.stats
    assert isinstance(stats, FakeStatsProvider)
    hog, small = make_pod("hog", requests={"memory": "100Mi"}), make_pod("small")
    stats.set_pod(hog, memory="900Mi")
    stats.set_pod(small, memory="50Mi")
    stats.set_memory(available="60Mi", capacity="8Gi")
    kill = Killer([hog, small], stats)
    assert await m.synchronize(kill, kill.active) is hog
    assert kill.calls == [
        (
            "hog",
            0.0,
            EVICTED_REASON,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "
            "Container hog-c was using 900Mi, request is 100Mi, has larger consumption of memory. ",
        )
    ]
    condition = kill.conditions[0]
    assert condition is not None and condition.type == "DisruptionTarget"
    assert m.evicted == ["hog"] and m.evictions[0].signal == "memory.available"
    assert m.node_conditions() == {MEMORY_PRESSURE}
    refused = m.admit(make_pod("newcomer"))
    assert (refused.admit, refused.reason) == (False, "Evicted")


async def test_scripted_pressure_is_reported_and_evicts_by_the_kubelets_ranking(
    clock: FakeClock,
) -> None:
    m = FakeEvictionManager(clock=clock, thresholds=())
    stats = m.stats
    assert isinstance(stats, FakeStatsProvider)
    pods = [
        make_pod(
            "guaranteed",
            requests={"memory": "1Gi", "cpu": "1"},
            limits={"memory": "1Gi", "cpu": "1"},
        ),
        make_pod("burstable", requests={"memory": "100Mi"}),
        make_pod("besteffort"),
    ]
    for pod, used in zip(pods, ("800Mi", "300Mi", "250Mi"), strict=True):
        stats.set_pod(pod, memory=used)
    kill = Killer(list(pods), stats)
    m.set_pressure(MEMORY_PRESSURE)
    assert m.node_conditions() == {MEMORY_PRESSURE}
    runner = asyncio.create_task(m.run(kill, kill.active))
    await clock.run_for(2 * MONITORING_INTERVAL)
    assert m.evicted == ["besteffort", "burstable", "guaranteed"]
    assert kill.calls[0][3].startswith(
        "The node was low on resource: memory. Container besteffort-c"
    )
    m.set_pressure()
    assert m.node_conditions() == frozenset()
    m.set_pressure(DISK_PRESSURE)
    refused = m.admit(make_pod("burstable2", requests={"memory": "1Mi"}))
    assert (refused.admit, refused.message) == (False, "The node had condition: [DiskPressure]. ")
    await m.stop()
    await asyncio.wait_for(runner, 5)
    with pytest.raises(ValueError, match="unknown condition"):
        m.set_pressure("NetworkUnavailable")


async def test_the_call_log_and_injected_errors(clock: FakeClock) -> None:
    m = FakeEvictionManager(clock=clock)
    stats = m.stats
    assert isinstance(stats, FakeStatsProvider)
    pod = make_pod("p")
    stats.set_pod(pod, memory="300Mi")
    stats.set_memory(available="50Mi", capacity="8Gi")
    kill = Killer([pod], stats)
    boom = RuntimeError("a round failed")
    m.inject_error("synchronize", boom)
    with pytest.raises(RuntimeError) as info:
        await m.synchronize(kill, kill.active)
    assert info.value is boom
    m.inject_error("admit", OSError("admission down"), times=2)
    for _ in range(2):
        with pytest.raises(OSError, match="admission down"):
            m.admit(pod)
    assert m.admit(pod).admit is True  # no round has measured the pressure yet
    # A failing round inside run() is logged and the next one runs on time.
    m.inject_error("synchronize", boom)
    runner = asyncio.create_task(m.run(kill, kill.active))
    await clock.run_for(0)
    assert m.evicted == []
    await clock.run_for(MONITORING_INTERVAL)
    assert m.evicted == ["p"]
    await m.stop()
    await m.stop()
    await asyncio.wait_for(runner, 5)
    assert [c.method for c in m.calls] == [
        "synchronize",
        "admit",
        "admit",
        "admit",
        "run",
        "synchronize",
        "synchronize",
        "stop",
        "stop",
    ]
    assert m.calls_to("admit")[0].args == (pod,)
    m.inject_error("run", OSError("fatal"))
    with pytest.raises(OSError, match="fatal"):
        await m.run(kill, kill.active)
    with pytest.raises(ValueError, match="not an EvictionManager method"):
        m.inject_error("evict", boom)
    with pytest.raises(ValueError, match="times must be >= 1"):
        m.inject_error("stop", boom, times=0)


async def test_a_soft_threshold_from_the_configuration(clock: FakeClock) -> None:
    opts = eviction_kit_options()
    m = FakeEvictionManager(clock=opts["clock"], stats=opts["stats"], config=opts["config"])
    stats: FakeStatsProvider = opts["stats"]
    pod = make_pod("p", requests={"memory": "100Mi"}, grace=60)
    stats.set_pod(pod, memory="1Gi")
    stats.set_memory(available="500Mi", capacity="8Gi")
    kill = Killer([pod], stats)
    fake_clock: FakeClock = opts["clock"]
    for _ in range(3):  # 0, 10, 20 s: met, not yet for 30 s
        assert await m.synchronize(kill, kill.active) is None
        fake_clock.advance(10)
    assert await m.synchronize(kill, kill.active) is pod
    assert kill.calls[0][1] == 20.0  # min(evictionMaxPodGracePeriod 20, 60)
