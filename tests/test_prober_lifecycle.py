"""ReferenceProbeManager after an agent restart, on removal and stop, end to end
through FakeRuntime exec probes, and with sidecars; on a FakeClock, nothing here
sleeps in real time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _prober_helpers import (
    ST,
    UID,
    Env,
    F,
    L,
    R,
    S,
    ScriptedProber,
    attrs_evolve,
    container_status,
    make_pod,
    probe,
    running_status,
)

from kubelet_kit.api import (
    Container,
    EnvVar,
    ExecAction,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Probe,
)
from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    KeyValue,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.prober import (
    ProbeStatus,
    ProbeUpdate,
    ReferenceProbeManager,
)
from kubelet_kit.testing import FakeClock, FakeRuntime

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with Env() as e:
        yield e


# ---------------------------------------------------------------- seeding after an agent restart


async def test_seeded_ready_container_stays_ready_until_probes_say_otherwise() -> None:
    clock_now = FakeClock().now()
    previous = PodStatus(
        container_statuses=(
            attrs_evolve(running_status("app", "c1", clock_now - 300), ready=True, started=True),
        )
    )
    async with Env(previous_statuses={UID: previous}) as env:
        pod = make_pod(
            Container(name="app", readiness_probe=probe(), startup_probe=probe(period_seconds=5))
        )
        env.prober.set("app", R, ProbeStatus.FAILURE)
        env.manager.add_pod(pod)
        env.manager.set_pod_status(UID, previous)
        # Before any probe ran: still ready and started, as reported before the restart.
        cs = env.manager.update_pod_status(pod, previous).container_statuses[0]
        assert (cs.started, cs.ready) == (True, True)
        await env.run_for(15)
        assert env.prober.times("app", ST) == []  # already started: no startup probe
        # Two failures are not enough (failureThreshold 3); nothing was published.
        assert env.prober.times("app", R) == [0, 10]
        cs = env.manager.update_pod_status(pod, previous).container_statuses[0]
        assert cs.ready is True
        assert env.seen(R) == []
        await env.run_for(5)
        assert env.manager.result(R, "c1") is F
        assert env.seen(R) == [("c1", "Readiness", F)]
        assert env.manager.update_pod_status(pod, previous).container_statuses[0].ready is False


async def test_seed_for_another_container_id_is_ignored() -> None:
    clock_now = FakeClock().now()
    previous = PodStatus(
        container_statuses=(
            attrs_evolve(running_status("app", "old", clock_now - 300), ready=True, started=True),
        )
    )
    async with Env(previous_statuses={UID: previous}) as env:
        pod = make_pod(Container(name="app", readiness_probe=probe()))
        env.prober.set("app", R, ProbeStatus.FAILURE)
        env.start("app", "new")
        env.manager.add_pod(pod)
        await env.run_for(0)
        assert container_status(env, pod, "app", "new").ready is False


# ---------------------------------------------------------------- removal, stop, metrics


async def test_remove_pod_stops_workers_and_forgets_results(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(), liveness_probe=probe()))
    env.start("app", "c1")
    env.manager.add_pod(pod)
    env.manager.add_pod(pod)  # idempotent
    await env.run_for(0)
    assert len(env.prober.calls) == 2
    env.manager.remove_pod(pod)
    env.manager.remove_pod(pod)
    await env.run_for(30)
    assert len(env.prober.calls) == 2
    assert env.manager.result(R, "c1") is None and env.manager.result(L, "c1") is None
    assert not env.manager.has_probe(UID, "app", R)


async def test_metrics_count_probes_with_the_kubelets_names(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(), liveness_probe=probe()))
    env.prober.set("app", L, ProbeStatus.SUCCESS, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(10)
    labels = {"container": "app", "pod": "web", "namespace": "ns", "pod_uid": UID}

    def value(kind: str, result: str) -> float | None:
        return env.registry.get_sample_value(
            "prober_probe_total", {"probe_type": kind, "result": result, **labels}
        )

    assert value("Readiness", "successful") == 2
    assert value("Liveness", "successful") == 1
    assert value("Liveness", "failed") == 1
    count = env.registry.get_sample_value(
        "prober_probe_duration_seconds_count",
        {"probe_type": "Liveness", "container": "app", "pod": "web", "namespace": "ns"},
    )
    assert count == 1  # failures are not timed
    env.manager.remove_pod(pod)
    await env.run_for(0)
    assert value("Readiness", "successful") is None


async def test_updates_end_when_the_manager_stops() -> None:
    clock = FakeClock()
    manager = ReferenceProbeManager(FakeRuntime(clock), clock)
    seen: list[ProbeUpdate] = []

    async def consume() -> None:
        async for u in manager.updates():
            seen.append(u)

    async with manager:
        task = asyncio.create_task(consume())
        await clock.settle()
        assert not task.done()
    await asyncio.wait_for(task, 5)
    await manager.stop()  # idempotent
    assert seen == []


# ---------------------------------------------------------------- exec end to end (FakeRuntime)


async def start_fake_container(
    runtime: FakeRuntime, name: str, env: tuple[KeyValue, ...] = ()
) -> str:
    sb = PodSandboxConfig(metadata=PodSandboxMetadata(name="web", namespace="ns", uid=UID))
    sid = await runtime.run_pod_sandbox(sb)
    cid = await runtime.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name=name),
            image=ImageSpec("busybox"),
            command=("sleep", "infinity"),
            envs=env,
        ),
        sb,
    )
    await runtime.start_container(cid)
    return cid


async def test_exec_liveness_probe_through_fake_runtime() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    cid = await start_fake_container(runtime, "app")
    manager = ReferenceProbeManager(runtime, clock, agent_start_time=clock.now() - 3600)
    probe_spec = Probe(exec=ExecAction(command=("sh", "-c", "exit $(CODE)")), period_seconds=10)
    pod = make_pod(
        Container(name="app", liveness_probe=probe_spec, env=(EnvVar(name="CODE", value="1"),))
    )
    updates: list[ProbeUpdate] = []
    async with manager:
        consumer = asyncio.create_task(collect(manager, updates))
        manager.update_container(UID, "app", f"fake://{cid}", running=True)
        manager.add_pod(pod)
        await clock.run_for(25)
    await asyncio.wait_for(consumer, 5)
    execs = runtime.calls_to("exec_sync")
    assert [c.args[:2] for c in execs] == [(cid, ("sh", "-c", "exit 1"))] * 3
    assert [c.args[2] for c in execs] == [1.0] * 3
    assert [(u.kind, u.result) for u in updates] == [(L, S), (L, F)]
    assert updates[-1].container_id == cid


async def collect(manager: ReferenceProbeManager, into: list[ProbeUpdate]) -> None:
    async for u in manager.updates():
        into.append(u)


async def test_exec_timeout_fails_the_probe_on_the_clock() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    cid = await start_fake_container(runtime, "app")
    manager = ReferenceProbeManager(runtime, clock, agent_start_time=clock.now() - 3600)
    pod = make_pod(
        Container(
            name="app",
            liveness_probe=Probe(
                exec=ExecAction(command=("sh", "-c", "sleep 5")),
                timeout_seconds=2,
                period_seconds=10,
                failure_threshold=1,
            ),
        )
    )
    updates: list[ProbeUpdate] = []
    async with manager:
        consumer = asyncio.create_task(collect(manager, updates))
        manager.update_container(UID, "app", cid, running=True)
        manager.add_pod(pod)
        await clock.run_for(1.5)
        assert manager.result(L, cid) is S  # the command is still running
        await clock.run_for(1)
        assert manager.result(L, cid) is F
    await asyncio.wait_for(consumer, 5)
    assert [(u.result, u.message) for u in updates] == [
        (S, ""),
        (F, 'command "sh -c sleep 5" timed out'),
    ]


# ---------------------------------------------------------------- sidecars and partial stops


async def test_sidecar_probes_run_and_fold_into_init_statuses(env: Env) -> None:
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid=UID),
        spec=PodSpec(
            init_containers=(
                Container(name="setup", readiness_probe=probe()),  # not a sidecar: ignored
                Container(name="proxy", restart_policy="Always", readiness_probe=probe()),
            ),
            containers=(Container(name="app"),),
        ),
    )
    env.start("proxy", "s1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert env.manager.has_probe(UID, "proxy", R)
    assert not env.manager.has_probe(UID, "setup", R)
    status = PodStatus(init_container_statuses=(running_status("proxy", "s1", env.clock.now()),))
    folded = env.manager.update_pod_status(pod, status)
    assert folded.init_container_statuses[0].ready is True


async def test_stop_liveness_and_startup_keeps_readiness(env: Env) -> None:
    pod = make_pod(
        Container(
            name="app", readiness_probe=probe(), liveness_probe=probe(), startup_probe=probe()
        )
    )
    env.manager.add_pod(pod)
    env.manager.stop_liveness_and_startup(pod)
    await env.run_for(0)
    assert env.manager.has_probe(UID, "app", R)
    assert not env.manager.has_probe(UID, "app", L)
    assert not env.manager.has_probe(UID, "app", ST)


async def test_cleanup_pods_stops_pods_not_desired(env: Env) -> None:
    keep = make_pod(Container(name="app", readiness_probe=probe()))
    other = Pod(
        metadata=ObjectMeta(name="old", namespace="ns", uid="uid-2"),
        spec=PodSpec(containers=(Container(name="app", readiness_probe=probe()),)),
    )
    env.manager.add_pod(keep)
    env.manager.add_pod(other)
    env.manager.cleanup_pods({UID})
    await env.run_for(0)
    assert env.manager.has_probe(UID, "app", R)
    assert not env.manager.has_probe("uid-2", "app", R)


async def test_workers_added_before_run_start_with_it() -> None:
    clock = FakeClock()
    prober = ScriptedProber(clock)
    manager = ReferenceProbeManager(
        prober.runtime, clock, prober=prober, agent_start_time=clock.now() - 3600
    )
    manager.update_container(UID, "app", "c1", running=True, started_at=clock.now())
    manager.add_pod(make_pod(Container(name="app", liveness_probe=probe())))
    await clock.run_for(30)
    assert prober.calls == []  # nothing probes until the manager runs
    async with manager:
        await clock.run_for(10)
    assert prober.times("app", L) == [30, 40]


async def test_removing_and_adding_a_pod_again_keeps_the_new_workers_results(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert env.manager.result(R, "c1") is S
    env.manager.remove_pod(pod)
    env.start("app", "c1")  # remove_pod forgot the reported state
    env.manager.add_pod(pod)  # before the old worker has ended
    await env.run_for(0)
    assert env.manager.has_probe(UID, "app", R)
    assert env.manager.result(R, "c1") is S
    await env.run_for(10)
    assert env.prober.times("app", R) == [0, 0, 10]


async def test_update_pod_status_alone_keeps_workers_informed(env: Env) -> None:
    # The agent's only call per sync: fold probes into the status it just built.
    pod = make_pod(Container(name="app", liveness_probe=probe(failure_threshold=1)))
    env.prober.set("app", L, ProbeStatus.FAILURE)
    env.manager.add_pod(pod)
    await env.run_for(1)
    status = PodStatus(
        phase="Running",
        pod_ip="10.0.0.7",
        container_statuses=(running_status("app", "containerd://abc", env.clock.now()),),
    )
    env.manager.update_pod_status(pod, status)
    await env.run_for(9)
    assert env.prober.times("app", L) == [10]
    assert env.prober.calls[0][3] == "abc"
    assert env.seen(L) == [("abc", "Liveness", S), ("abc", "Liveness", F)]
    assert env.manager.result(L, "containerd://abc") is F


async def test_a_removed_pods_final_status_is_not_recorded(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    env.manager.add_pod(pod)
    env.manager.remove_pod(pod)
    status = PodStatus(container_statuses=(running_status("app", "c1", env.clock.now()),))
    folded = env.manager.update_pod_status(pod, status)
    assert folded.container_statuses[0].ready is True  # no probe any more
    env.manager.add_pod(pod)
    await env.run_for(10)
    assert env.prober.calls == []  # the old state was not kept for the new workers
