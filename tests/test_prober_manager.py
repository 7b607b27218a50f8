"""ReferenceProbeManager timelines on a FakeClock: nothing here sleeps in real time.

Most tests script probe outcomes with a Prober double that records when it was
called; the end-to-end ones run exec probes through FakeRuntime containers.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
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
    ProbeKind,
    ProbeManager,
    ProbeOutcome,
    Prober,
    ProbeResult,
    ProbeStatus,
    ProbeUpdate,
    ReferenceProbeManager,
)
from kubelet_kit.testing import FakeClock, FakeRuntime

pytestmark = pytest.mark.timeout(30)

S, F, U = ProbeResult.SUCCESS, ProbeResult.FAILURE, ProbeResult.UNKNOWN
R, L, ST = ProbeKind.READINESS, ProbeKind.LIVENESS, ProbeKind.STARTUP
UID = "uid-1"


class ScriptedProber(Prober):
    """Returns scripted outcomes per (container, kind) and records every call."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(FakeRuntime(clock), clock)
        self.clock_ = clock
        self.calls: list[tuple[float, str, ProbeKind, str]] = []
        self.scripts: dict[tuple[str, ProbeKind], list[ProbeStatus]] = {}
        self.default: dict[tuple[str, ProbeKind], ProbeStatus] = {}

    def set(self, container: str, kind: ProbeKind, *statuses: ProbeStatus) -> None:
        """Outcomes for the next calls; the last one repeats."""
        self.scripts[(container, kind)] = list(statuses[:-1])
        self.default[(container, kind)] = statuses[-1]

    def times(self, container: str, kind: ProbeKind) -> list[float]:
        start = 1000.0
        return [t - start for t, c, k, _ in self.calls if c == container and k == kind]

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        probe: Probe,
        *,
        pod_ip: str,
        container_id: str,
    ) -> ProbeOutcome:
        self.calls.append((self.clock_.monotonic(), container.name, kind, container_id))
        key = (container.name, kind)
        script = self.scripts.get(key)
        status = script.pop(0) if script else self.default.get(key, ProbeStatus.SUCCESS)
        return ProbeOutcome(status, f"{kind.value} said {status.value}")


def probe(**kwargs: int) -> Probe:
    return Probe(exec=ExecAction(command=("check",)), **kwargs)  # type: ignore[arg-type]


def make_pod(*containers: Container, restart_policy: str = "Always", **meta: object) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid=UID, **meta),  # type: ignore[arg-type]
        spec=PodSpec(containers=containers, restart_policy=restart_policy),
    )


def running_status(name: str, cid: str, started_at: float) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        container_id=cid,
        state=ContainerState(
            running=ContainerStateRunning(
                started_at=_dt.datetime.fromtimestamp(started_at, _dt.UTC)
            )
        ),
    )


class Env:
    """A manager on a FakeClock with a scripted prober and collected updates."""

    def __init__(self, **kwargs: object) -> None:
        self.clock = FakeClock()
        self.prober = ScriptedProber(self.clock)
        self.registry = CollectorRegistry()
        kwargs.setdefault("agent_start_time", self.clock.now() - 3600)
        self.manager = ReferenceProbeManager(
            self.prober.runtime,
            self.clock,
            prober=self.prober,
            registry=self.registry,
            **kwargs,  # type: ignore[arg-type]
        )
        self.updates: list[ProbeUpdate] = []
        self._collector: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Env:
        await self.manager.__aenter__()

        async def collect() -> None:
            async for update in self.manager.updates():
                self.updates.append(update)

        self._collector = asyncio.create_task(collect())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.manager.__aexit__(None, None, None)
        assert self._collector is not None
        await asyncio.wait_for(self._collector, 5)

    def start(self, name: str, cid: str, *, at: float | None = None) -> None:
        self.manager.update_container(
            UID, name, cid, running=True, started_at=self.clock.now() if at is None else at
        )

    def seen(self, kind: ProbeKind | None = None) -> list[tuple[str, str, ProbeResult]]:
        return [
            (u.container_id, u.kind.value, u.result)
            for u in self.updates
            if kind is None or u.kind is kind
        ]

    async def run_for(self, seconds: float) -> None:
        await self.clock.run_for(seconds)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with Env() as e:
        yield e


def container_status(env: Env, pod: Pod, name: str, cid: str) -> ContainerStatus:
    status = PodStatus(container_statuses=(running_status(name, cid, env.clock.now()),))
    return env.manager.update_pod_status(pod, status).container_statuses[0]


# ---------------------------------------------------------------- protocol


async def test_is_a_probe_manager(env: Env) -> None:
    assert isinstance(env.manager, ProbeManager)


# ---------------------------------------------------------------- thresholds


async def test_readiness_counts_consecutive_results_against_thresholds(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(success_threshold=2)))
    env.prober.set("app", R, ProbeStatus.SUCCESS, ProbeStatus.SUCCESS, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    # First sight: readiness starts at Failure; one success is below the threshold.
    assert env.prober.times("app", R) == [0]
    assert env.seen(R) == [("c1", "Readiness", F)]
    assert env.manager.result(R, "c1") is F
    await env.run_for(10)
    assert env.prober.times("app", R) == [0, 10]
    assert env.seen(R)[-1] == ("c1", "Readiness", S)
    assert container_status(env, pod, "app", "c1").ready is True
    # Failures: the default failure threshold is 3 in a row.
    await env.run_for(20)
    assert env.manager.result(R, "c1") is S
    await env.run_for(10)
    assert env.manager.result(R, "c1") is F
    assert env.seen(R) == [("c1", "Readiness", F), ("c1", "Readiness", S), ("c1", "Readiness", F)]
    assert env.updates[-1].message == "Readiness said failure"
    assert env.prober.times("app", R) == [0, 10, 20, 30, 40]


async def test_a_prober_error_is_discarded(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(period_seconds=5)))
    env.prober.set(
        "app", L,
        ProbeStatus.FAILURE, ProbeStatus.FAILURE, ProbeStatus.UNKNOWN, ProbeStatus.UNKNOWN,
        ProbeStatus.FAILURE,
    )
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(15)
    # F, F, error, error: still alive (the errors neither count nor break the run).
    assert env.prober.times("app", L) == [0, 5, 10, 15]
    assert env.manager.result(L, "c1") is S
    await env.run_for(5)
    assert env.manager.result(L, "c1") is F
    assert env.seen(L) == [("c1", "Liveness", S), ("c1", "Liveness", F)]


async def test_warning_counts_as_success(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    env.prober.set("app", R, ProbeStatus.WARNING)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert env.manager.result(R, "c1") is S


# ---------------------------------------------------------------- initial values and delays


async def test_initial_results_before_any_probe(env: Env) -> None:
    pod = make_pod(
        Container(
            name="app",
            readiness_probe=probe(initial_delay_seconds=100),
            liveness_probe=probe(initial_delay_seconds=100),
            startup_probe=probe(initial_delay_seconds=100),
        )
    )
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(30)
    assert env.prober.calls == []
    assert env.manager.result(R, "c1") is F
    assert env.manager.result(L, "c1") is S
    assert env.manager.result(ST, "c1") is U
    cs = container_status(env, pod, "app", "c1")
    assert (cs.started, cs.ready) == (False, False)


async def test_initial_delay_counts_whole_seconds_from_the_container_start(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(initial_delay_seconds=15)))
    # Started 0.5 s before the worker first looks: 0.5 -> 0 s, 10.5 -> 10 s, 20.5.
    env.start("app", "c1", at=env.clock.now() - 0.5)
    env.manager.add_pod(pod)
    await env.run_for(25)
    assert env.prober.times("app", L) == [20]


async def test_no_probe_before_the_container_is_reported(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    env.manager.add_pod(pod)
    await env.run_for(5)
    env.start("app", "c1")
    await env.run_for(4)
    assert env.prober.calls == []  # the worker notices at its next tick
    await env.run_for(1)
    assert env.prober.times("app", R) == [10]


# ---------------------------------------------------------------- random first delay


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


async def test_random_first_delay_while_the_agent_is_young() -> None:
    async with Env(agent_start_time=None, rng=FixedRandom(0.25)) as env:
        # The agent starts now: a 10 s period is longer than its age.
        pod = make_pod(Container(name="app", liveness_probe=probe()))
        env.start("app", "c1")
        env.manager.add_pod(pod)
        await env.run_for(30)
        assert env.prober.times("app", L) == [2.5, 12.5, 22.5]


async def test_random_first_delay_only_within_one_period_of_the_agent_start() -> None:
    clock_age = 12.0
    async with Env(rng=FixedRandom(0.5)) as env:
        env.manager.agent_start_time = env.clock.now() - clock_age
        pod = make_pod(
            Container(name="slow", liveness_probe=probe(period_seconds=20)),
            Container(name="fast", liveness_probe=probe(period_seconds=10)),
        )
        env.start("slow", "c1")
        env.start("fast", "c2")
        env.manager.add_pod(pod)
        await env.run_for(30)
        # 20 s > 12 s of agent age: spread; 10 s < 12 s: probe at once.
        assert env.prober.times("slow", L) == [10, 30]
        assert env.prober.times("fast", L) == [0, 10, 20, 30]


# ---------------------------------------------------------------- startup gating


async def test_startup_probe_gates_liveness_and_readiness(env: Env) -> None:
    pod = make_pod(
        Container(
            name="app",
            startup_probe=probe(period_seconds=5, failure_threshold=10),
            readiness_probe=probe(period_seconds=10),
            liveness_probe=probe(period_seconds=10),
        )
    )
    env.prober.set("app", ST, ProbeStatus.FAILURE, ProbeStatus.FAILURE, ProbeStatus.SUCCESS)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(9)
    assert env.prober.times("app", ST) == [0, 5]
    assert env.prober.times("app", R) == [] and env.prober.times("app", L) == []
    cs = container_status(env, pod, "app", "c1")
    assert (cs.started, cs.ready) == (False, False)
    await env.run_for(1)  # t=10: startup succeeds
    assert env.manager.result(ST, "c1") is S
    assert ("c1", "Startup", S) in env.seen(ST)
    await env.run_for(30)
    # The startup probe holds after its verdict; the others run from their next tick.
    assert env.prober.times("app", ST) == [0, 5, 10]
    assert env.prober.times("app", L) == [20, 30, 40]
    assert env.prober.times("app", R) == [20, 30, 40]
    cs = container_status(env, pod, "app", "c1")
    assert (cs.started, cs.ready) == (True, True)


async def test_startup_failure_is_published_and_holds_until_a_new_container(env: Env) -> None:
    pod = make_pod(
        Container(
            name="app",
            startup_probe=Probe(
                exec=ExecAction(command=("check",)),
                period_seconds=5,
                failure_threshold=2,
                termination_grace_period_seconds=7,
            ),
            liveness_probe=probe(),
        )
    )
    env.prober.set("app", ST, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(30)
    assert env.prober.times("app", ST) == [0, 5]  # on hold after the published failure
    failure = [u for u in env.updates if u.kind is ST and u.result is F]
    assert len(failure) == 1
    assert failure[0].container_id == "c1"
    assert failure[0].termination_grace_period_seconds == 7
    assert env.prober.times("app", L) == []
    # The agent restarts the container: a new id resumes probing from scratch.
    env.prober.set("app", ST, ProbeStatus.SUCCESS)
    env.start("app", "c2")
    await env.run_for(5)
    assert env.manager.result(ST, "c2") is S
    assert env.manager.result(ST, "c1") is None
    assert env.prober.calls[-1][3] == "c2"


# ---------------------------------------------------------------- liveness hold and restarts


async def test_liveness_failure_holds_the_worker_until_the_container_id_changes(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(period_seconds=10)))
    env.prober.set("app", L, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(60)
    assert env.prober.times("app", L) == [0, 10, 20]
    assert env.seen(L) == [("c1", "Liveness", S), ("c1", "Liveness", F)]
    assert env.updates[-1].termination_grace_period_seconds is None
    env.prober.set("app", L, ProbeStatus.SUCCESS)
    env.start("app", "c2")
    await env.run_for(10)
    assert env.prober.times("app", L) == [0, 10, 20, 70]
    assert env.manager.result(L, "c2") is S
    assert env.manager.result(L, "c1") is None


async def test_restart_resets_readiness(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(success_threshold=2)))
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(10)
    assert container_status(env, pod, "app", "c1").ready is True
    env.start("app", "c2")
    env.prober.set("app", R, ProbeStatus.FAILURE, ProbeStatus.SUCCESS)
    await env.run_for(10)
    # A new container starts unready, and its count starts over.
    assert env.manager.result(R, "c1") is None
    assert env.manager.result(R, "c2") is F
    assert env.seen(R)[-1] == ("c2", "Readiness", F)
    await env.run_for(10)
    assert env.manager.result(R, "c2") is F  # one success of two
    await env.run_for(10)
    assert env.manager.result(R, "c2") is S


async def test_no_probing_of_a_container_that_is_not_running(env: Env) -> None:
    pod = make_pod(
        Container(name="app", readiness_probe=probe(), liveness_probe=probe()),
        restart_policy="Never",
    )
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(10)
    assert env.manager.result(R, "c1") is S
    calls = len(env.prober.calls)
    env.manager.update_container(UID, "app", "c1", running=False, terminated=True)
    await env.run_for(30)
    assert len(env.prober.calls) == calls
    assert env.seen(R)[-1] == ("c1", "Readiness", F)
    # Liveness is not failed for a container that merely exited.
    assert all(u.result is not F for u in env.updates if u.kind is L)
    # Exited under restartPolicy Never: the workers end and forget their results.
    assert not env.manager.has_probe(UID, "app", R)
    assert not env.manager.has_probe(UID, "app", L)


async def test_an_exited_container_that_will_restart_keeps_its_workers(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe()))
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    env.manager.update_container(UID, "app", "c1", running=False, terminated=True)
    await env.run_for(20)
    assert env.manager.has_probe(UID, "app", L)
    assert env.prober.times("app", L) == [0]


# ---------------------------------------------------------------- status folding


async def test_update_pod_status_runs_the_readiness_probe_at_once(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(period_seconds=60)))
    env.prober.set("app", R, ProbeStatus.FAILURE, ProbeStatus.SUCCESS)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(1)
    assert env.prober.times("app", R) == [0]
    assert container_status(env, pod, "app", "c1").ready is False  # triggers a run
    await env.run_for(0)
    assert env.prober.times("app", R) == [0, 1]
    assert container_status(env, pod, "app", "c1").ready is True
    # The period counts from the manual run.
    await env.run_for(60)
    assert env.prober.times("app", R) == [0, 1, 61]


async def test_set_pod_status_feeds_ids_states_and_ip(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    status = PodStatus(
        phase="Running",
        pod_ip="10.1.2.3",
        container_statuses=(running_status("app", "containerd://c1", env.clock.now()),),
    )
    env.manager.set_pod_status(UID, status)
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert env.prober.calls[0][3] == "c1"  # the runtime's id, without its prefix
    folded = env.manager.update_pod_status(pod, status)
    assert folded.container_statuses[0].ready is True
    assert folded.container_statuses[0].started is True
    # A pod that reached a terminal phase needs no probes.
    env.manager.set_pod_status(UID, attrs_evolve(status, phase="Succeeded"))
    await env.run_for(10)
    assert not env.manager.has_probe(UID, "app", R)


def attrs_evolve(status: PodStatus, **changes: object) -> PodStatus:
    import attrs

    return attrs.evolve(status, **changes)  # type: ignore[arg-type]


async def test_deleted_pod_ends_liveness_with_success(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(), readiness_probe=probe()))
    env.prober.set("app", L, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(10)
    deleting = make_pod(
        *pod.spec.containers, deletion_timestamp=_dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
    )
    env.manager.add_pod(deleting)  # the agent passes the updated pod
    await env.run_for(10)
    assert not env.manager.has_probe(UID, "app", L)
    assert env.manager.has_probe(UID, "app", R)
    assert env.seen(L)[-1] == ("c1", "Liveness", S)
    assert all(u.result is not F for u in env.updates if u.kind is L)


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
            Container(
                name="app", readiness_probe=probe(), startup_probe=probe(period_seconds=5)
            )
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
    probe_spec = Probe(
        exec=ExecAction(command=("sh", "-c", "exit $(CODE)")), period_seconds=10
    )
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
