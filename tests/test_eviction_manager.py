"""ThresholdEvictionManager policies on a FakeClock with fake stats.

Soft thresholds and their grace period, the transition period holding a
condition, minimum reclaim, one eviction per round, node-level reclaim through
the Runtime before any eviction, admission under pressure, critical pods, the
control loop itself and its metrics. Nothing here sleeps on real time.

Ported as data from Kubernetes' pkg/kubelet/eviction/eviction_manager_test.go:
TestAdmitUnderNodeConditions, TestMemoryPressure, TestMinReclaim, the
TestDiskPressureNodeFs scenario (nodefs and imagefs cases),
TestDiskPressureNodeFs_VerifyPodStatus (the exact messages) and the message of
TestPIDPressure's pod status check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import attrs
import pytest
from prometheus_client import generate_latest

from kubelet_kit.api import (
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Volume,
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
    ContainerUsage,
    EvictionManager,
    ThresholdEvictionManager,
    admit_under_pressure,
    parse_threshold_config,
)
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.testing.fake_stats import FakeStatsProvider

Mi = 1024 * 1024


def make_pod(
    name: str,
    *,
    priority: int | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    grace: int = 30,
    annotations: Mapping[str, str] | None = None,
    tolerations: tuple[Mapping[str, str], ...] = (),
    empty_dirs: tuple[str, ...] = (),
    container: str | None = None,
) -> Pod:
    res = ResourceRequirements(
        requests={k: Quantity.parse(v) for k, v in (requests or {}).items()},
        limits={k: Quantity.parse(v) for k, v in (limits or {}).items()},
    )
    return Pod(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}", annotations=dict(annotations or {})),
        spec=PodSpec(
            priority=priority,
            termination_grace_period_seconds=grace,
            tolerations=tolerations,
            volumes=tuple(Volume(name=v, empty_dir=EmptyDirVolumeSource()) for v in empty_dirs),
            containers=(Container(name=container or f"{name}-c", image="busybox:1.36",
                                  resources=res),),
        ),
    )


@attrs.define
class Killer:
    """A kill_pod that records its calls and removes the pod from the node."""

    pods: list[Pod]
    stats: FakeStatsProvider
    frees: Mapping[str, int] = attrs.field(factory=dict)
    calls: list[tuple[str, float, str, str]] = attrs.field(factory=list)

    async def __call__(self, pod: Pod, grace: float, reason: str, message: str) -> None:
        self.calls.append((pod.name, grace, reason, message))
        self.pods.remove(pod)
        self.stats.remove_pod(pod)
        freed = self.frees.get(pod.name, 0)
        if freed and self.stats.memory is not None:
            m = self.stats.memory
            assert m.available_bytes is not None and m.working_set_bytes is not None
            self.stats.memory = attrs.evolve(
                m, available_bytes=m.available_bytes + freed,
                working_set_bytes=m.working_set_bytes - freed)

    def active(self) -> list[Pod]:
        return list(self.pods)

    @property
    def evicted(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stats(clock: FakeClock) -> FakeStatsProvider:
    s = FakeStatsProvider(clock=clock)
    s.set_memory(available="4Gi", capacity="8Gi")
    return s


def manager(
    stats: FakeStatsProvider, clock: FakeClock, **kwargs: object
) -> ThresholdEvictionManager:
    kwargs.setdefault("thresholds", parse_threshold_config(
        eviction_hard={"memory.available": "500Mi"}))
    return ThresholdEvictionManager(stats=stats, clock=clock, **kwargs)  # type: ignore[arg-type]


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
    assert kill.calls == [(
        "hog", 0.0, EVICTED_REASON,
        "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. "
        "Container hog-c was using 900Mi, request is 100Mi, has larger consumption of memory. ",
    )]
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
        eviction_hard={}, eviction_soft={"memory.available": "1Gi"},
        eviction_soft_grace_period={"memory.available": "30s"})
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
    tolerant = make_pod("tolerant", tolerations=(
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
         "effect": "NoSchedule"},))
    critical = make_pod("critical", priority=2_000_000_000)
    m = manager(stats, clock, thresholds=parse_threshold_config(
        eviction_hard={"memory.available": "500Mi", "nodefs.available": "1Gi",
                       "pid.available": "100"}))
    kill = Killer([], stats)
    assert m.admit(best_effort).admit

    stats.set_memory(available="100Mi", capacity="8Gi")
    await m.synchronize(kill, kill.active)
    assert m.node_conditions() == {MEMORY_PRESSURE}
    refused = m.admit(best_effort)
    assert (refused.admit, refused.reason, refused.message) == (
        False, "Evicted", "The node had condition: [MemoryPressure]. ")
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
            False, "Evicted",
            "The node had condition: [MemoryPressure DiskPressure PIDPressure]. ")
    assert m.admit(critical).admit


async def test_disk_pressure_alone_refuses_every_non_critical_pod(
    stats: FakeStatsProvider, clock: FakeClock
) -> None:
    m = manager(stats, clock, thresholds=parse_threshold_config(
        eviction_hard={"nodefs.inodesFree": "5%"}))
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
    m = manager(stats, clock, thresholds=parse_threshold_config(
        eviction_hard={"pid.available": "5%"}))
    assert await m.synchronize(kill, kill.active) is many
    assert kill.calls[0][3] == (
        "The node was low on resource: pids. Threshold quantity: 50, available: 10. ")


# -- reclaim before eviction ------------------------------------------------------------


async def _pod_with_dead_container(rt: FakeRuntime, uid: str, image: str) -> str:
    md = PodSandboxMetadata(name=uid, namespace="default", uid=uid)
    cfg = PodSandboxConfig(metadata=md, labels={labels.POD_UID: uid})
    sid = await rt.run_pod_sandbox(cfg)
    cid = await rt.create_container(sid, ContainerConfig(
        metadata=ContainerMetadata(name="c"), image=ImageSpec(image), command=("sleep", "1000"),
        labels={labels.POD_UID: uid, labels.CONTAINER_NAME: "c"}), cfg)
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
    m = manager(stats, clock, runtime=rt, thresholds=parse_threshold_config(
        eviction_hard={"nodefs.available": "1Gi"}))

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
    live = await rt.create_container(sid, ContainerConfig(
        metadata=ContainerMetadata(name="c"), image=ImageSpec(running_image),
        command=("sleep", "1000"), labels={labels.POD_UID: "live"}), cfg)
    await rt.start_container(live)
    small, big = make_pod("small", empty_dirs=("v",)), make_pod("big", empty_dirs=("v",))
    stats.set_pod(small, volumes={"v": "1Mi"})
    stats.set_pod(big, volumes={"v": "5Gi"})
    stats.set_nodefs(available="100Mi", capacity="10Gi")
    kill = Killer([small, big], stats)
    m = manager(stats, clock, runtime=rt, thresholds=parse_threshold_config(
        eviction_hard={"nodefs.available": "1Gi"}))
    evicted = await m.synchronize(kill, kill.active)
    assert evicted is not None and evicted.name == "big"
    assert [c.id for c in await rt.list_containers()] == [live]  # the dead one went
    assert [i.repo_tags for i in await rt.list_images()] == [
        ("docker.io/library/nginx:1.25",)]  # in use: kept


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
    m = manager(stats, clock, runtime=rt, thresholds=parse_threshold_config(
        eviction_hard={"nodefs.available": "1Gi"}))
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
    m2 = ThresholdEvictionManager(stats=stats, clock=clock, config=cfg,
                                  pressure_transition_period=5)
    assert m2.pressure_transition_period == 5
    with pytest.raises(ConfigurationError, match="monitoring_interval"):
        ThresholdEvictionManager(stats=stats, clock=clock, monitoring_interval=0)


# -- through the composer, on fakes -------------------------------------------------------


async def test_composer_evicts_the_hog_and_then_refuses_best_effort_pods() -> None:
    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    m = ThresholdEvictionManager(stats=stats, clock=clock, thresholds=parse_threshold_config(
        eviction_hard={"memory.available": "1Gi"}))
    usage = {"uid-hog": 3 * 1024 * Mi, "uid-web": 512 * Mi}
    async with KubeletEnv(clock=clock, eviction_manager=m) as env:

        def node_memory(s: FakeStatsProvider) -> None:
            # the node's 4Gi minus what the pods still running use
            running = {p.uid for p in env.kubelet.active_pods()}
            used = sum(v for uid, v in usage.items() if uid in running)
            s.set_memory(available=4 * 1024 * Mi - used, capacity="4Gi")

        stats.on_summary(node_memory)
        for name, mem in (("web", "512Mi"), ("hog", "3Gi")):
            pod = env.add_pod({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "uid": f"uid-{name}"},
                "spec": {"containers": [{"name": name, "image": "busybox:1.36",
                                         "command": ["sh", "-c", "sleep infinity"],
                                         "resources": {"requests": {"memory": "256Mi"}}}]},
            })
            stats.set_pod(pod, memory=mem)
        await env.wait_for(lambda: env.phase("hog") == "Failed", what="hog evicted")
        status = env.status("hog")
        assert status.reason == "Evicted"
        assert status.message.startswith(
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: ")
        assert "Container hog was using 3Gi, request is 256Mi" in status.message
        assert await env.running_containers("uid-hog") == []
        assert m.node_conditions() == {MEMORY_PRESSURE}

        env.add_pod({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "late", "uid": "uid-late"},
                     "spec": {"containers": [{"name": "late", "image": "busybox:1.36"}]}})
        await env.wait_for(lambda: env.phase("late") == "Failed", what="late refused")
        assert env.status("late").reason == "Evicted"
        assert "The node had condition: [MemoryPressure]. " in env.status("late").message

        await env.sleep(60)  # pressure is gone: web keeps running
        assert env.phase("web") == "Running"
        assert m.metrics.evictions.get("memory.available") == 1


# -- ported from upstream's eviction_manager_test.go ------------------------------------------


def _qos_pod(name: str, qos: str) -> Pod:
    # upstream makeContainersByQOS: 100m/1Gi requests, as limits too when Guaranteed
    res = {"cpu": "100m", "memory": "1Gi"}
    if qos == "Guaranteed":
        return make_pod(name, priority=0, requests=res, limits=res)
    if qos == "Burstable":
        return make_pod(name, priority=0, requests=res)
    return make_pod(name, priority=0)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ((), [True, True, True]),
        ((MEMORY_PRESSURE,), [True, True, False]),
        ((MEMORY_PRESSURE, DISK_PRESSURE), [False, False, False]),
    ],
)
def test_admit_under_node_conditions_upstream_table(
    conditions: tuple[str, ...], expected: list[bool]
) -> None:
    pods = [_qos_pod("guaranteed-pod", "Guaranteed"), _qos_pod("burstable-pod", "Burstable"),
            _qos_pod("best-effort-pod", "BestEffort")]
    assert [admit_under_pressure(p, list(conditions)).admit for p in pods] == expected


# upstream TestDiskPressureNodeFs: (name, priority, requests, limits, rootfs, logs, per volume)
DISK_PODS = [
    ("low-priority-high-usage", -1, {"cpu": "100m", "memory": "1Gi"},
     {"cpu": "100m", "memory": "1Gi"}, "900Mi", "0", "0"),
    ("below-requests", 0, {"cpu": "100m", "memory": "100Mi"},
     {"cpu": "200m", "memory": "1Gi"}, "0", "50Mi", "0"),
    ("above-requests", 0, {"cpu": "100m", "memory": "100Mi"},
     {"cpu": "200m", "memory": "1Gi"}, "400Mi", "0", "0"),
    ("high-priority-high-usage", 1, {}, {}, "0", "0", "400Mi"),
    ("low-priority-low-usage", -1, {}, {}, "100Mi", "0", "0"),
]


@pytest.mark.parametrize("pressure_on", ["nodefs", "imagefs"])
async def test_disk_pressure_upstream_scenario(pressure_on: str, clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = []
    for name, prio, req, lim, rootfs, logs, vol in DISK_PODS:
        pod = make_pod(name, priority=prio, requests=req, limits=lim,
                       empty_dirs=("local-volume",))
        pods.append(pod)
        stats.set_pod(pod, containers=[ContainerUsage(
            f"{name}-c", rootfs_used_bytes=Quantity.parse(rootfs).value(),
            logs_used_bytes=Quantity.parse(logs).value())], volumes={"local-volume": vol})
    signal = f"{pressure_on}.available"

    def available(amount: str) -> None:
        stats.set_nodefs(available="16Gi" if pressure_on == "imagefs" else amount,
                         capacity="20Gi")
        if pressure_on == "imagefs":
            stats.set_imagefs(available=amount, capacity="20Gi")

    available("16Gi")
    kill = Killer(list(pods), stats)
    m = ThresholdEvictionManager(
        stats=stats, clock=clock, max_pod_grace_period=5, pressure_transition_period=300,
        hard_eviction_grace_period=1,  # upstream's newest immediate grace period
        thresholds=parse_threshold_config(
            eviction_hard={signal: "1Gi"}, eviction_soft={signal: "2Gi"},
            eviction_soft_grace_period={signal: "2m"}),
    )
    to_admit = make_pod("pod-to-admit")

    async def sync() -> None:
        kill.calls.clear()
        await m.synchronize(kill, lambda: pods)  # the pods stay active, as upstream's

    await sync()
    assert m.node_conditions() == frozenset() and m.admit(to_admit).admit
    clock.advance(60)
    available("1.5Gi")  # soft threshold met
    await sync()
    assert m.node_conditions() == {DISK_PRESSURE} and kill.calls == []
    clock.advance(180)  # past the grace period
    await sync()
    assert [(c[0], c[1]) for c in kill.calls] == [("low-priority-high-usage", 5.0)]
    clock.advance(1200)
    available("16Gi")
    await sync()
    assert m.node_conditions() == frozenset()
    clock.advance(60)
    available("750Mi")  # hard threshold met
    await sync()
    assert [(c[0], c[1]) for c in kill.calls] == [("low-priority-high-usage", 1.0)]
    assert not m.admit(to_admit).admit
    clock.advance(60)
    available("16Gi")
    await sync()
    assert m.node_conditions() == {DISK_PRESSURE} and kill.calls == []  # transition period
    assert not m.admit(to_admit).admit
    clock.advance(300)
    await sync()
    assert m.node_conditions() == frozenset() and kill.calls == []
    assert m.admit(to_admit).admit


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}, True),
        ({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}, True),
        ({"key": "node.kubernetes.io/memory-pressure", "effect": "NoExecute"}, False),
        ({"key": "node.kubernetes.io/memory-pressure", "value": "x"}, False),
        ({"operator": "Exists"}, True),
        ({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists"}, False),
        ({"key": "node.kubernetes.io/memory-pressure", "operator": "Gt"}, False),
    ],
)
def test_best_effort_pods_tolerating_memory_pressure_are_admitted(
    toleration: Mapping[str, str], tolerated: bool
) -> None:
    pod = make_pod("be", tolerations=(toleration,))
    assert admit_under_pressure(pod, [MEMORY_PRESSURE]).admit is tolerated
    assert not admit_under_pressure(pod, [DISK_PRESSURE]).admit


# upstream TestMemoryPressure: (name, priority, requests, limits, working set)
MEMORY_PODS = [
    ("guaranteed-low-priority-high-usage", -1, {"cpu": "100m", "memory": "1Gi"},
     {"cpu": "100m", "memory": "1Gi"}, "900Mi"),
    ("burstable-below-requests", 0, {"cpu": "100m", "memory": "100Mi"},
     {"cpu": "200m", "memory": "1Gi"}, "50Mi"),
    ("burstable-above-requests", 0, {"cpu": "100m", "memory": "100Mi"},
     {"cpu": "200m", "memory": "1Gi"}, "400Mi"),
    ("best-effort-high-priority-high-usage", 1, {}, {}, "400Mi"),
    ("best-effort-low-priority-low-usage", -1, {}, {}, "100Mi"),
]


async def test_memory_pressure_upstream_scenario(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = []
    for name, prio, req, lim, ws in MEMORY_PODS:
        pod = make_pod(name, priority=prio, requests=req, limits=lim)
        stats.set_pod(pod, memory=ws)
        pods.append(pod)
    to_evict = pods[4]
    kill = Killer(list(pods), stats)
    m = ThresholdEvictionManager(
        stats=stats, clock=clock, max_pod_grace_period=5, pressure_transition_period=300,
        hard_eviction_grace_period=1,
        thresholds=parse_threshold_config(
            eviction_hard={"memory.available": "1Gi"},
            eviction_soft={"memory.available": "2Gi"},
            eviction_soft_grace_period={"memory.available": "2m"}),
    )
    best_effort = make_pod("best-admit")
    burstable = make_pod("burst-admit", requests={"cpu": "100m", "memory": "100Mi"},
                         limits={"cpu": "200m", "memory": "200Mi"})

    async def sync(available: str) -> list[tuple[str, float]]:
        kill.calls.clear()
        stats.set_memory(available=available, capacity="8Gi")
        await m.synchronize(kill, lambda: pods)
        return [(c[0], c[1]) for c in kill.calls]

    assert await sync("2Gi") == []
    assert m.node_conditions() == frozenset()
    assert [m.admit(p).admit for p in (best_effort, burstable)] == [True, True]
    clock.advance(60)
    assert await sync("1500Mi") == []  # soft threshold met, grace period running
    assert m.node_conditions() == {MEMORY_PRESSURE}
    clock.advance(180)
    assert await sync("1500Mi") == [(to_evict.name, 5.0)]
    clock.advance(1200)
    assert await sync("3Gi") == []
    assert m.node_conditions() == frozenset()
    clock.advance(60)
    assert await sync("500Mi") == [(to_evict.name, 1.0)]  # hard: immediate
    assert [m.admit(p).admit for p in (best_effort, burstable)] == [False, True]
    clock.advance(60)
    assert await sync("2Gi") == []
    assert m.node_conditions() == {MEMORY_PRESSURE}  # transition period
    assert [m.admit(p).admit for p in (best_effort, burstable)] == [False, True]
    clock.advance(300)
    assert await sync("2Gi") == []
    assert m.node_conditions() == frozenset()
    assert [m.admit(p).admit for p in (best_effort, burstable)] == [True, True]


@pytest.mark.parametrize(
    ("signal", "nodefs", "imagefs", "threshold", "pods", "message"),
    [
        pytest.param(
            "nodefs.available", "1.5Gi", None, "2Gi",
            [("below-requests", "1Gi", "900Mi"), ("above-requests", "100Mi", "700Mi")],
            "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, "
            "available: 1536Mi. Container above-requests was using 700Mi, request is 100Mi, "
            "has larger consumption of ephemeral-storage. ",
            id="eviction due to disk pressure; no image fs"),
        pytest.param(
            "imagefs.available", "1Gi", "10Gi", "50Gi",
            [("below-requests", "1Gi", "900Mi"), ("above-requests", "50Gi", "80Gi")],
            "The node was low on resource: ephemeral-storage. Threshold quantity: 50Gi, "
            "available: 10Gi. Container above-requests was using 80Gi, request is 50Gi, "
            "has larger consumption of ephemeral-storage. ",
            id="eviction due to image disk pressure; image fs"),
    ],
)
async def test_disk_pressure_pod_status_message_upstream_table(
    clock: FakeClock, signal: str, nodefs: str, imagefs: str | None, threshold: str,
    pods: list[tuple[str, str, str]], message: str,
) -> None:
    stats = FakeStatsProvider(clock=clock)
    stats.set_nodefs(available=nodefs, capacity="200Gi")
    if imagefs is not None:
        stats.set_imagefs(available=imagefs, capacity="200Gi")
    made = []
    for name, request, rootfs in pods:
        pod = make_pod(name, requests={"ephemeral-storage": request},
                       limits={"ephemeral-storage": request}, container=name)
        stats.set_pod(pod, containers=[ContainerUsage(
            name, rootfs_used_bytes=Quantity.parse(rootfs).value(), logs_used_bytes=0)])
        made.append(pod)
    kill = Killer(list(made), stats)
    m = manager(stats, clock, thresholds=parse_threshold_config(eviction_hard={signal: threshold}))
    assert await m.synchronize(kill, kill.active) is made[1]
    assert m.node_conditions() == {DISK_PRESSURE}
    assert kill.calls[0][2:] == ("Evicted", message)


async def test_pid_pressure_pod_status_message_upstream_case(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = [make_pod("pod1", priority=-1), make_pod("pod2", priority=0)]
    for p in pods:
        stats.set_pod(p, processes=500)
    stats.set_pids(max_pid=1500, running=1000)
    kill = Killer(list(pods), stats)
    m = manager(stats, clock, thresholds=parse_threshold_config(
        eviction_hard={"pid.available": "1200"}))
    assert await m.synchronize(kill, kill.active) is pods[0]
    assert m.node_conditions() == {PID_PRESSURE}
    assert kill.calls[0][2:] == (
        "Evicted", "The node was low on resource: pids. Threshold quantity: 1200, available: 500. ")


async def test_min_reclaim_upstream_scenario(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = []
    for name, prio, req, lim, ws in MEMORY_PODS:
        pod = make_pod(name, priority=prio, requests=req, limits=lim)
        stats.set_pod(pod, memory=ws)
        pods.append(pod)
    kill = Killer(list(pods), stats)
    m = ThresholdEvictionManager(
        stats=stats, clock=clock, max_pod_grace_period=5, pressure_transition_period=300,
        hard_eviction_grace_period=1,
        thresholds=parse_threshold_config(
            eviction_hard={"memory.available": "1Gi"},
            eviction_minimum_reclaim={"memory.available": "500Mi"}),
    )

    async def sync(available: str) -> list[tuple[str, float]]:
        kill.calls.clear()
        stats.set_memory(available=available, capacity="8Gi")
        await m.synchronize(kill, lambda: pods)
        return [(c[0], c[1]) for c in kill.calls]

    assert await sync("2Gi") == [] and m.node_conditions() == frozenset()
    clock.advance(60)
    assert await sync("500Mi") == [(pods[4].name, 1.0)]
    clock.advance(60)
    # above the threshold but not by the minimum reclaim: evict again
    assert await sync("1.2Gi") == [(pods[4].name, 1.0)]
    assert m.node_conditions() == {MEMORY_PRESSURE}
    clock.advance(60)
    assert await sync("2Gi") == []  # reclaimed enough
    assert m.node_conditions() == {MEMORY_PRESSURE}  # transition period
    clock.advance(300)
    assert await sync("2Gi") == [] and m.node_conditions() == frozenset()
