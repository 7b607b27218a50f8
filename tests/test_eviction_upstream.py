"""The eviction manager through the composer on fakes, and upstream's scenarios.

Ported as data from Kubernetes' pkg/kubelet/eviction/eviction_manager_test.go:
TestAdmitUnderNodeConditions, TestMemoryPressure, TestMinReclaim, the
TestDiskPressureNodeFs scenario (nodefs and imagefs cases),
TestDiskPressureNodeFs_VerifyPodStatus (the exact messages) and the message of
TestPIDPressure's pod status check.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from _eviction_helpers import Killer, Mi, make_pod, manager

from kubelet_kit.api import (
    Pod,
    Quantity,
)
from kubelet_kit.eviction import (
    DISK_PRESSURE,
    MEMORY_PRESSURE,
    PID_PRESSURE,
    ContainerUsage,
    ThresholdEvictionManager,
    admit_under_pressure,
    parse_threshold_config,
)
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.testing.fake_stats import FakeStatsProvider


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- through the composer, on fakes -------------------------------------------------------


async def test_composer_evicts_the_hog_and_then_refuses_best_effort_pods() -> None:
    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    m = ThresholdEvictionManager(
        stats=stats,
        clock=clock,
        thresholds=parse_threshold_config(eviction_hard={"memory.available": "1Gi"}),
    )
    usage = {"uid-hog": 3 * 1024 * Mi, "uid-web": 512 * Mi}
    async with KubeletEnv(clock=clock, eviction_manager=m) as env:

        def node_memory(s: FakeStatsProvider) -> None:
            # the node's 4Gi minus what the pods still running use
            running = {p.uid for p in env.kubelet.active_pods()}
            used = sum(v for uid, v in usage.items() if uid in running)
            s.set_memory(available=4 * 1024 * Mi - used, capacity="4Gi")

        stats.on_summary(node_memory)
        for name, mem in (("web", "512Mi"), ("hog", "3Gi")):
            pod = env.add_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "uid": f"uid-{name}"},
                    "spec": {
                        "containers": [
                            {
                                "name": name,
                                "image": "busybox:1.36",
                                "command": ["sh", "-c", "sleep infinity"],
                                "resources": {"requests": {"memory": "256Mi"}},
                            }
                        ]
                    },
                }
            )
            stats.set_pod(pod, memory=mem)
        await env.wait_for(lambda: env.phase("hog") == "Failed", what="hog evicted")
        status = env.status("hog")
        assert status.reason == "Evicted"
        assert status.message.startswith(
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: "
        )
        assert "Container hog was using 3Gi, request is 256Mi" in status.message
        [target] = [c for c in status.conditions if c.type == "DisruptionTarget"]
        assert (target.status, target.reason, target.message) == (
            "True",
            "TerminationByKubelet",
            status.message,
        )
        [event] = [e for e in env.kubelet.events.events("uid-hog") if e.reason == "Evicted"]
        assert (event.type, event.message) == ("Warning", status.message)
        assert await env.running_containers("uid-hog") == []
        await env.sleep(30)  # later syncs keep the condition
        assert "DisruptionTarget" in [c.type for c in env.status("hog").conditions]
        assert m.node_conditions() == {MEMORY_PRESSURE}

        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "late", "uid": "uid-late"},
                "spec": {"containers": [{"name": "late", "image": "busybox:1.36"}]},
            }
        )
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
    pods = [
        _qos_pod("guaranteed-pod", "Guaranteed"),
        _qos_pod("burstable-pod", "Burstable"),
        _qos_pod("best-effort-pod", "BestEffort"),
    ]
    assert [admit_under_pressure(p, list(conditions)).admit for p in pods] == expected


# upstream TestDiskPressureNodeFs: (name, priority, requests, limits, rootfs, logs, per volume)
DISK_PODS = [
    (
        "low-priority-high-usage",
        -1,
        {"cpu": "100m", "memory": "1Gi"},
        {"cpu": "100m", "memory": "1Gi"},
        "900Mi",
        "0",
        "0",
    ),
    (
        "below-requests",
        0,
        {"cpu": "100m", "memory": "100Mi"},
        {"cpu": "200m", "memory": "1Gi"},
        "0",
        "50Mi",
        "0",
    ),
    (
        "above-requests",
        0,
        {"cpu": "100m", "memory": "100Mi"},
        {"cpu": "200m", "memory": "1Gi"},
        "400Mi",
        "0",
        "0",
    ),
    ("high-priority-high-usage", 1, {}, {}, "0", "0", "400Mi"),
    ("low-priority-low-usage", -1, {}, {}, "100Mi", "0", "0"),
]


@pytest.mark.parametrize("pressure_on", ["nodefs", "imagefs"])
async def test_disk_pressure_upstream_scenario(pressure_on: str, clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = []
    for name, prio, req, lim, rootfs, logs, vol in DISK_PODS:
        pod = make_pod(name, priority=prio, requests=req, limits=lim, empty_dirs=("local-volume",))
        pods.append(pod)
        stats.set_pod(
            pod,
            containers=[
                ContainerUsage(
                    f"{name}-c",
                    rootfs_used_bytes=Quantity.parse(rootfs).value(),
                    logs_used_bytes=Quantity.parse(logs).value(),
                )
            ],
            volumes={"local-volume": vol},
        )
    signal = f"{pressure_on}.available"

    def available(amount: str) -> None:
        stats.set_nodefs(available="16Gi" if pressure_on == "imagefs" else amount, capacity="20Gi")
        if pressure_on == "imagefs":
            stats.set_imagefs(available=amount, capacity="20Gi")

    available("16Gi")
    kill = Killer(list(pods), stats)
    m = ThresholdEvictionManager(
        stats=stats,
        clock=clock,
        max_pod_grace_period=5,
        pressure_transition_period=300,
        hard_eviction_grace_period=1,  # upstream's newest immediate grace period
        thresholds=parse_threshold_config(
            eviction_hard={signal: "1Gi"},
            eviction_soft={signal: "2Gi"},
            eviction_soft_grace_period={signal: "2m"},
        ),
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
    (
        "guaranteed-low-priority-high-usage",
        -1,
        {"cpu": "100m", "memory": "1Gi"},
        {"cpu": "100m", "memory": "1Gi"},
        "900Mi",
    ),
    (
        "burstable-below-requests",
        0,
        {"cpu": "100m", "memory": "100Mi"},
        {"cpu": "200m", "memory": "1Gi"},
        "50Mi",
    ),
    (
        "burstable-above-requests",
        0,
        {"cpu": "100m", "memory": "100Mi"},
        {"cpu": "200m", "memory": "1Gi"},
        "400Mi",
    ),
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
        stats=stats,
        clock=clock,
        max_pod_grace_period=5,
        pressure_transition_period=300,
        hard_eviction_grace_period=1,
        thresholds=parse_threshold_config(
            eviction_hard={"memory.available": "1Gi"},
            eviction_soft={"memory.available": "2Gi"},
            eviction_soft_grace_period={"memory.available": "2m"},
        ),
    )
    best_effort = make_pod("best-admit")
    burstable = make_pod(
        "burst-admit",
        requests={"cpu": "100m", "memory": "100Mi"},
        limits={"cpu": "200m", "memory": "200Mi"},
    )

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
            "nodefs.available",
            "1.5Gi",
            None,
            "2Gi",
            [("below-requests", "1Gi", "900Mi"), ("above-requests", "100Mi", "700Mi")],
            "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, "
            "available: 1536Mi. Container above-requests was using 700Mi, request is 100Mi, "
            "has larger consumption of ephemeral-storage. ",
            id="eviction due to disk pressure; no image fs",
        ),
        pytest.param(
            "imagefs.available",
            "1Gi",
            "10Gi",
            "50Gi",
            [("below-requests", "1Gi", "900Mi"), ("above-requests", "50Gi", "80Gi")],
            "The node was low on resource: ephemeral-storage. Threshold quantity: 50Gi, "
            "available: 10Gi. Container above-requests was using 80Gi, request is 50Gi, "
            "has larger consumption of ephemeral-storage. ",
            id="eviction due to image disk pressure; image fs",
        ),
    ],
)
async def test_disk_pressure_pod_status_message_upstream_table(
    clock: FakeClock,
    signal: str,
    nodefs: str,
    imagefs: str | None,
    threshold: str,
    pods: list[tuple[str, str, str]],
    message: str,
) -> None:
    stats = FakeStatsProvider(clock=clock)
    stats.set_nodefs(available=nodefs, capacity="200Gi")
    if imagefs is not None:
        stats.set_imagefs(available=imagefs, capacity="200Gi")
    made = []
    for name, request, rootfs in pods:
        pod = make_pod(
            name,
            requests={"ephemeral-storage": request},
            limits={"ephemeral-storage": request},
            container=name,
        )
        stats.set_pod(
            pod,
            containers=[
                ContainerUsage(
                    name, rootfs_used_bytes=Quantity.parse(rootfs).value(), logs_used_bytes=0
                )
            ],
        )
        made.append(pod)
    kill = Killer(list(made), stats)
    # Upstream's table runs with local-storage isolation off: its pods' use is far
    # over their ephemeral-storage limits, which would evict them first.
    m = manager(
        stats,
        clock,
        thresholds=parse_threshold_config(eviction_hard={signal: threshold}),
        local_storage_capacity_isolation=False,
    )
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
    m = manager(
        stats, clock, thresholds=parse_threshold_config(eviction_hard={"pid.available": "1200"})
    )
    assert await m.synchronize(kill, kill.active) is pods[0]
    assert m.node_conditions() == {PID_PRESSURE}
    assert kill.calls[0][2:] == (
        "Evicted",
        "The node was low on resource: pids. Threshold quantity: 1200, available: 500. ",
    )


async def test_min_reclaim_upstream_scenario(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = []
    for name, prio, req, lim, ws in MEMORY_PODS:
        pod = make_pod(name, priority=prio, requests=req, limits=lim)
        stats.set_pod(pod, memory=ws)
        pods.append(pod)
    kill = Killer(list(pods), stats)
    m = ThresholdEvictionManager(
        stats=stats,
        clock=clock,
        max_pod_grace_period=5,
        pressure_transition_period=300,
        hard_eviction_grace_period=1,
        thresholds=parse_threshold_config(
            eviction_hard={"memory.available": "1Gi"},
            eviction_minimum_reclaim={"memory.available": "500Mi"},
        ),
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
