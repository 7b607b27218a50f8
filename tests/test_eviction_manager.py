"""ThresholdEvictionManager policies on a FakeClock with fake stats.

Soft thresholds and their grace period, the transition period holding a
condition, minimum reclaim, one eviction per round, node-level reclaim through
the Runtime before any eviction, admission under pressure, critical pods, the
control loop itself and its metrics. Nothing here sleeps on real time. Upstream's
scenarios, ported as data, are in test_eviction_upstream.py.
"""

from __future__ import annotations

import asyncio

import pytest
from _eviction_helpers import Killer, Mi, make_pod, manager
from _scrape_helpers import PausingDict, scrape_while_adding
from prometheus_client import generate_latest

from kubelet_kit.api import (
    Pod,
)
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import ConfigurationError, RuntimeUnavailableError
from kubelet_kit.eviction import (
    DISK_PRESSURE,
    EVICTED_REASON,
    MEMORY_PRESSURE,
    PID_PRESSURE,
    EvictionManager,
    EvictionMetrics,
    ThresholdEvictionManager,
    parse_threshold_config,
)
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.fake_stats import FakeStatsProvider


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stats(clock: FakeClock) -> FakeStatsProvider:
    s = FakeStatsProvider(clock=clock)
    s.set_memory(available="4Gi", capacity="8Gi")
    return s


def test_the_manager_satisfies_the_protocol(stats: FakeStatsProvider, clock: FakeClock) -> None:
    assert isinstance(manager(stats, clock), EvictionManager)


async def test_hard_threshold_evicts_the_top_ranked_pod_at_once(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    small = make_pod("small", requests={"memory": "100Mi"})
    hog = make_pod("hog", requests={"memory": "100Mi"})
    guaranteed = make_pod("guaranteed", requests={"memory": "2Gi"}, limits={"memory": "2Gi"})
    stats.set_pod(small, memory="150Mi")
    stats.set_pod(hog, memory="900Mi")
    stats.set_pod(guaranteed, memory="1Gi")
    stats.set_memory(available="300Mi", capacity="8Gi")
    kill = Killer([small, hog, guaranteed], stats)
    m = manager(stats, clock)

    evicted = await m.synchronize(kill, kill.active)

    assert evicted is hog
    assert kill.calls == [
        (
            "hog",
            0.0,
            EVICTED_REASON,
            "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. "
            "Container hog-c was using 900Mi, request is 100Mi, has larger consumption of memory. ",
        )
    ]
    assert m.node_conditions() == {MEMORY_PRESSURE}
    text = generate_latest(m.metrics.registry).decode()
    assert 'kubelet_evictions{eviction_signal="memory.available"} 1.0' in text
    assert 'kubelet_kit_node_pressure{condition="MemoryPressure"} 1.0' in text


async def test_one_eviction_per_round(stats: FakeStatsProvider, clock: FakeClock) -> None:
    pods = [make_pod(f"p{i}") for i in range(3)]
    for i, p in enumerate(pods):
        stats.set_pod(p, memory=f"{100 * (i + 1)}Mi")
    stats.set_memory(available="100Mi", capacity="8Gi")  # stays low: nothing is freed
    kill = Killer(list(pods), stats)
    m = manager(stats, clock)
    for expected in (["p2"], ["p2", "p1"], ["p2", "p1", "p0"]):
        await m.synchronize(kill, kill.active)
        assert kill.evicted == expected
        clock.advance(10)
    assert await m.synchronize(kill, kill.active) is None  # nobody left to evict


async def test_stale_stats_are_not_acted_on_twice(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pods = [make_pod("a"), make_pod("b")]
    for p in pods:
        stats.set_pod(p, memory="100Mi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    kill = Killer(list(pods), stats)
    m = manager(stats, clock)
    await m.synchronize(kill, kill.active)
    # same clock reading: the stats have the same time, so no second eviction
    assert await m.synchronize(kill, kill.active) is None
    assert len(kill.calls) == 1


async def test_soft_threshold_waits_for_its_grace_period_and_caps_the_pod_grace(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pod = make_pod("slow", grace=60)
    quick = make_pod("quick", grace=5)
    stats.set_pod(pod, memory="2Gi")
    stats.set_pod(quick, memory="1Gi")
    stats.set_memory(available="800Mi", capacity="8Gi")
    thresholds = parse_threshold_config(
        eviction_hard={},
        eviction_soft={"memory.available": "1Gi"},
        eviction_soft_grace_period={"memory.available": "1m30s"},
    )
    kill = Killer([pod, quick], stats)
    m = manager(stats, clock, thresholds=thresholds, max_pod_grace_period=20)

    for _ in range(9):  # 0 s .. 80 s: met, but not for 90 s yet
        assert await m.synchronize(kill, kill.active) is None
        assert m.node_conditions() == {MEMORY_PRESSURE}  # reported from the first round
        clock.advance(10)
    assert await m.synchronize(kill, kill.active) is pod  # 90 s
    assert kill.calls[0][1] == 20.0  # min(evictionMaxPodGracePeriod, 60)
    clock.advance(10)
    assert await m.synchronize(kill, kill.active) is quick
    assert kill.calls[1][1] == 5.0  # the pod's own, shorter grace period


async def test_soft_threshold_that_clears_restarts_its_grace_period(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pod = make_pod("p")
    stats.set_pod(pod, memory="1Gi")
    thresholds = parse_threshold_config(
        eviction_hard={},
        eviction_soft={"memory.available": "1Gi"},
        eviction_soft_grace_period={"memory.available": "30s"},
    )
    kill = Killer([pod], stats)
    m = manager(stats, clock, thresholds=thresholds)
    stats.set_memory(available="500Mi", capacity="8Gi")
    await m.synchronize(kill, kill.active)
    clock.advance(20)
    stats.set_memory(available="2Gi", capacity="8Gi")  # recovered for a round
    await m.synchronize(kill, kill.active)
    clock.advance(10)
    stats.set_memory(available="500Mi", capacity="8Gi")
    await m.synchronize(kill, kill.active)  # met again at 30 s: the clock starts over
    clock.advance(20)
    assert await m.synchronize(kill, kill.active) is None
    clock.advance(10)
    assert await m.synchronize(kill, kill.active) is pod


async def test_transition_period_holds_the_condition(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pod = make_pod("p")
    stats.set_pod(pod, memory="1Gi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    kill = Killer([pod], stats, frees={"p": 4 * 1024 * Mi})
    m = manager(stats, clock, pressure_transition_period=300)
    assert await m.synchronize(kill, kill.active) is pod
    assert m.node_conditions() == {MEMORY_PRESSURE}
    for _ in range(29):  # pressure gone at once, the condition stays for 5 minutes
        clock.advance(10)
        await m.synchronize(kill, kill.active)
        assert m.node_conditions() == {MEMORY_PRESSURE}
    clock.advance(10)
    await m.synchronize(kill, kill.active)
    assert m.node_conditions() == frozenset()
    assert m.admit(make_pod("new")).admit


async def test_minimum_reclaim_keeps_evicting_until_headroom_is_reached(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pods = [make_pod("a"), make_pod("b"), make_pod("c")]
    for p, mem in zip(pods, ("300Mi", "200Mi", "100Mi"), strict=True):
        stats.set_pod(p, memory=mem)
    stats.set_memory(available="400Mi", capacity="8Gi")
    thresholds = parse_threshold_config(
        eviction_hard={"memory.available": "500Mi"},
        eviction_minimum_reclaim={"memory.available": "300Mi"},
    )
    kill = Killer(list(pods), stats, frees={"a": 300 * Mi, "b": 200 * Mi, "c": 100 * Mi})
    m = manager(stats, clock, thresholds=thresholds)

    assert await m.synchronize(kill, kill.active) is pods[0]  # 400Mi < 500Mi
    clock.advance(10)
    # 700Mi is above the threshold but below 500Mi + 300Mi: not yet resolved
    assert await m.synchronize(kill, kill.active) is pods[1]
    clock.advance(10)
    # 900Mi >= 800Mi: resolved, nobody else goes
    assert await m.synchronize(kill, kill.active) is None
    assert kill.evicted == ["a", "b"]


async def test_static_and_critical_pods_are_never_evicted(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    static = make_pod("static", annotations={"kubernetes.io/config.source": "file"})
    mirror = make_pod("mirror", annotations={"kubernetes.io/config.mirror": "abc"})
    critical = make_pod("critical", priority=2_000_000_000)
    api = make_pod("from-api", annotations={"kubernetes.io/config.source": "api"})
    for p, mem in ((static, "3Gi"), (mirror, "2Gi"), (critical, "1Gi"), (api, "10Mi")):
        stats.set_pod(p, memory=mem)
    stats.set_memory(available="100Mi", capacity="8Gi")
    kill = Killer([static, mirror, critical, api], stats)
    m = manager(stats, clock)
    assert await m.synchronize(kill, kill.active) is api
    clock.advance(10)
    assert await m.synchronize(kill, kill.active) is None
    assert kill.evicted == ["from-api"]


async def test_admission_under_pressure(stats: FakeStatsProvider, clock: FakeClock) -> None:
    best_effort = make_pod("be")
    burstable = make_pod("burst", requests={"memory": "10Mi"})
    tolerant = make_pod(
        "tolerant",
        tolerations=(
            {
                "key": "node.kubernetes.io/memory-pressure",
                "operator": "Exists",
                "effect": "NoSchedule",
            },
        ),
    )
    critical = make_pod("critical", priority=2_000_000_000)
    m = manager(
        stats,
        clock,
        thresholds=parse_threshold_config(
            eviction_hard={
                "memory.available": "500Mi",
                "nodefs.available": "1Gi",
                "pid.available": "100",
            }
        ),
    )
    kill = Killer([], stats)
    assert m.admit(best_effort).admit

    stats.set_memory(available="100Mi", capacity="8Gi")
    await m.synchronize(kill, kill.active)
    assert m.node_conditions() == {MEMORY_PRESSURE}
    refused = m.admit(best_effort)
    assert (refused.admit, refused.reason, refused.message) == (
        False,
        "Evicted",
        "The node had condition: [MemoryPressure]. ",
    )
    assert m.admit(burstable).admit
    assert m.admit(tolerant).admit
    assert m.admit(critical).admit

    stats.set_nodefs(available="500Mi", capacity="100Gi")
    stats.set_pids(max_pid=1000, running=950)
    clock.advance(10)
    await m.synchronize(kill, kill.active)
    assert m.node_conditions() == {MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE}
    for pod in (best_effort, burstable, tolerant):
        refused = m.admit(pod)
        assert (refused.admit, refused.reason, refused.message) == (
            False,
            "Evicted",
            "The node had condition: [MemoryPressure DiskPressure PIDPressure]. ",
        )
    assert m.admit(critical).admit


async def test_disk_pressure_alone_refuses_every_non_critical_pod(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    m = manager(
        stats, clock, thresholds=parse_threshold_config(eviction_hard={"nodefs.inodesFree": "5%"})
    )
    stats.set_nodefs(inodes_free=10, inodes=1000)
    await m.synchronize(Killer([], stats), list)
    refused = m.admit(make_pod("burst", requests={"memory": "1Gi"}))
    assert refused.message == "The node had condition: [DiskPressure]. "


async def test_pid_pressure_evicts_the_pod_with_most_processes(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    few, many = make_pod("few"), make_pod("many")
    stats.set_pod(few, processes=3)
    stats.set_pod(many, processes=300)
    stats.set_pids(max_pid=1000, running=990)
    kill = Killer([few, many], stats)
    m = manager(
        stats, clock, thresholds=parse_threshold_config(eviction_hard={"pid.available": "5%"})
    )
    assert await m.synchronize(kill, kill.active) is many
    assert kill.calls[0][3] == (
        "The node was low on resource: pids. Threshold quantity: 50, available: 10. "
    )


# -- reclaim before eviction ------------------------------------------------------------


async def _pod_with_dead_container(rt: FakeRuntime, uid: str, image: str) -> str:
    md = PodSandboxMetadata(name=uid, namespace="default", uid=uid)
    cfg = PodSandboxConfig(metadata=md, labels={labels.POD_UID: uid})
    sid = await rt.run_pod_sandbox(cfg)
    cid = await rt.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name="c"),
            image=ImageSpec(image),
            command=("sleep", "1000"),
            labels={labels.POD_UID: uid, labels.CONTAINER_NAME: "c"},
        ),
        cfg,
    )
    await rt.start_container(cid)
    rt.exit_container(cid, 1)
    return cid


async def test_disk_pressure_reclaims_dead_containers_and_unused_images_before_evicting(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    rt = FakeRuntime(clock, images=["busybox:1.36", "nginx:1.25", "redis:7"])
    dead = await _pod_with_dead_container(rt, "old-pod", "busybox:1.36")
    pod = make_pod("writer", empty_dirs=("data",))
    stats.set_pod(pod, volumes={"data": "1Gi"})

    def nodefs_follows_the_runtime(s: FakeStatsProvider) -> None:
        # every image on the node takes 1Gi of a 10Gi disk; pods take the rest
        images = 3 - len(rt.calls_to("remove_image"))
        s.set_nodefs(available=f"{10 - 7 - images}Gi", capacity="10Gi")

    stats.on_summary(nodefs_follows_the_runtime)
    kill = Killer([pod], stats)
    m = manager(
        stats,
        clock,
        runtime=rt,
        thresholds=parse_threshold_config(eviction_hard={"nodefs.available": "1Gi"}),
    )

    assert await m.synchronize(kill, kill.active) is None  # 0Gi left -> reclaim to 2Gi
    assert kill.calls == []
    assert [c.id for c in await rt.list_containers()] == []
    assert dead not in {c.id for c in await rt.list_containers()}
    assert await rt.list_images() == []
    assert m.node_conditions() == {DISK_PRESSURE}


async def test_reclaim_that_is_not_enough_is_followed_by_an_eviction(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    rt = FakeRuntime(clock, images=["busybox:1.36"])
    await _pod_with_dead_container(rt, "old-pod", "busybox:1.36")
    running_image = "nginx:1.25"
    rt.add_image(running_image, present=True)
    md = PodSandboxMetadata(name="live", namespace="default", uid="live")
    cfg = PodSandboxConfig(metadata=md, labels={labels.POD_UID: "live"})
    sid = await rt.run_pod_sandbox(cfg)
    live = await rt.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name="c"),
            image=ImageSpec(running_image),
            command=("sleep", "1000"),
            labels={labels.POD_UID: "live"},
        ),
        cfg,
    )
    await rt.start_container(live)
    small, big = make_pod("small", empty_dirs=("v",)), make_pod("big", empty_dirs=("v",))
    stats.set_pod(small, volumes={"v": "1Mi"})
    stats.set_pod(big, volumes={"v": "5Gi"})
    stats.set_nodefs(available="100Mi", capacity="10Gi")
    kill = Killer([small, big], stats)
    m = manager(
        stats,
        clock,
        runtime=rt,
        thresholds=parse_threshold_config(eviction_hard={"nodefs.available": "1Gi"}),
    )
    evicted = await m.synchronize(kill, kill.active)
    assert evicted is not None and evicted.name == "big"
    assert [c.id for c in await rt.list_containers()] == [live]  # the dead one went
    assert [i.repo_tags for i in await rt.list_images()] == [
        ("docker.io/library/nginx:1.25",)
    ]  # in use: kept


async def test_memory_pressure_reclaims_nothing_through_the_runtime(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    rt = FakeRuntime(clock, images=["busybox:1.36"])
    await _pod_with_dead_container(rt, "old-pod", "busybox:1.36")
    pod = make_pod("p")
    stats.set_pod(pod, memory="1Gi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    kill = Killer([pod], stats)
    m = manager(stats, clock, runtime=rt)
    assert await m.synchronize(kill, kill.active) is pod
    assert len(await rt.list_containers()) == 1
    assert len(await rt.list_images()) == 1


async def test_dedicated_imagefs_nodefs_pressure_does_not_touch_images(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    rt = FakeRuntime(clock, images=["busybox:1.36"])
    pod = make_pod("p", empty_dirs=("v",))
    stats.set_pod(pod, volumes={"v": "1Gi"})
    stats.set_imagefs(available="50Gi", capacity="100Gi")
    stats.set_nodefs(available="100Mi", capacity="10Gi")
    kill = Killer([pod], stats)
    m = manager(
        stats,
        clock,
        runtime=rt,
        thresholds=parse_threshold_config(eviction_hard={"nodefs.available": "1Gi"}),
    )
    assert await m.synchronize(kill, kill.active) is pod
    assert len(await rt.list_images()) == 1


# -- the loop ---------------------------------------------------------------------------------


async def test_run_synchronizes_every_ten_seconds_until_stopped(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pods = [make_pod(f"p{i}") for i in range(5)]
    for i, p in enumerate(pods):
        stats.set_pod(p, memory=f"{10 * (i + 1)}Mi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    kill = Killer(list(pods), stats)
    m = manager(stats, clock)
    task = asyncio.create_task(m.run(kill, kill.active))
    await clock.run_for(25)  # rounds at 0, 10 and 20 s
    assert kill.evicted == ["p4", "p3", "p2"]
    assert len(stats.calls) == 3
    await m.stop()
    await m.stop()  # idempotent
    await clock.run_for(10)
    await asyncio.wait_for(task, timeout=5)
    assert len(stats.calls) == 3


async def test_a_failing_round_is_skipped_and_the_loop_goes_on(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pod = make_pod("p")
    stats.set_pod(pod, memory="1Gi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    stats.inject_error("summary", RuntimeUnavailableError("stats down"))
    kill = Killer([pod], stats)
    m = manager(stats, clock)
    task = asyncio.create_task(m.run(kill, kill.active))
    await clock.run_for(1)
    assert kill.calls == []
    await clock.run_for(10)
    assert kill.evicted == ["p"]
    await m.stop()
    await asyncio.wait_for(task, timeout=5)


async def test_kill_failure_still_counts_and_the_loop_survives(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    pod = make_pod("p")
    stats.set_pod(pod, memory="1Gi")
    stats.set_memory(available="100Mi", capacity="8Gi")
    m = manager(stats, clock)

    async def broken_kill(pod: Pod, grace: float, reason: str, message: str) -> None:
        raise RuntimeUnavailableError("runtime down")

    assert await m.synchronize(broken_kill, lambda: [pod]) is pod
    assert m.metrics.evictions.get("memory.available") == 1


def test_configuration_from_kubelet_configuration(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    cfg = KubeletConfiguration(
        eviction_hard={"memory.available": "1Gi"},
        eviction_pressure_transition_period="1m",
        eviction_max_pod_grace_period=45,
    )
    m = ThresholdEvictionManager(stats=stats, clock=clock, config=cfg)
    assert m.pressure_transition_period == 60
    assert m.max_pod_grace_period == 45
    assert m.monitoring_interval == 10
    assert {t.signal for t in m.thresholds} == {"memory.available", "allocatableMemory.available"}
    # plain arguments win over the configuration
    m2 = ThresholdEvictionManager(
        stats=stats, clock=clock, config=cfg, pressure_transition_period=5
    )
    assert m2.pressure_transition_period == 5
    with pytest.raises(ConfigurationError, match="monitoring_interval"):
        ThresholdEvictionManager(stats=stats, clock=clock, monitoring_interval=0)


def test_evictions_counter_scraped_from_another_thread_while_a_signal_is_added() -> None:
    # A scrape from another thread (prometheus_client's HTTP server) while the
    # agent counts an eviction under a new signal neither fails nor loses a count.
    metrics = EvictionMetrics()
    counter = metrics.evictions
    counter.values = series = PausingDict({"a": 1.0, "b": 1.0, "c": 1.0})
    assert scrape_while_adding(metrics.registry, series, lambda: counter.inc("new")) == []
    assert counter.get("new") == 1.0
