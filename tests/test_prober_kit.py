"""The ProbeManager kit against the fake, the reference manager and broken managers,
and the FakeProbeManager's own scripts, call log and injected errors."""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import pytest

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
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ExecResult,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.prober import (
    ProbeKind,
    ProbeManager,
    ProbeResult,
    ProbeUpdate,
    ReferenceProbeManager,
    StubProbeManager,
)
from kubelet_kit.testing import Call, ConformanceFailure, FakeClock, FakeProbeManager, FakeRuntime
from kubelet_kit.testing.fake_prober import ProbeRun
from kubelet_kit.testing.kit import KitContext
from kubelet_kit.testing.prober_kit import (
    CHECKS,
    KIT_IMAGE,
    ProbeManagerConformance,
    check_prober,
    run_prober_kit,
)

pytestmark = pytest.mark.timeout(60)

S, F, U = ProbeResult.SUCCESS, ProbeResult.FAILURE, ProbeResult.UNKNOWN
L, R, ST = ProbeKind.LIVENESS, ProbeKind.READINESS, ProbeKind.STARTUP


def fake(ctx: KitContext[ProbeManager]) -> FakeProbeManager:
    return FakeProbeManager(ctx.options["clock"], runtime=ctx.options["runtime"])


def reference(ctx: KitContext[ProbeManager]) -> ReferenceProbeManager:
    clock = ctx.options["clock"]
    return ReferenceProbeManager(ctx.options["runtime"], clock, agent_start_time=clock.now() - 3600)


# ---------------------------------------------------------------- the kit, as users run it


class TestFakeProbeManager(ProbeManagerConformance):  # type: ignore[misc]
    def make(self, ctx: KitContext[ProbeManager]) -> ProbeManager:
        return fake(ctx)


class TestReferenceProbeManager(ProbeManagerConformance):  # type: ignore[misc]
    def make(self, ctx: KitContext[ProbeManager]) -> ProbeManager:
        return reference(ctx)


async def test_the_reference_passes_with_a_random_first_delay() -> None:
    # An agent that just started spreads first probes over a period: still conformant.
    def young(ctx: KitContext[ProbeManager]) -> ReferenceProbeManager:
        return ReferenceProbeManager(ctx.options["runtime"], ctx.options["clock"])

    report = await check_prober(young)
    assert [r.status for r in report.results] == ["passed"] * len(CHECKS)


async def test_check_prober_runs_chosen_checks_on_fresh_parts() -> None:
    seen: list[tuple[object, object]] = []

    def factory(ctx: KitContext[ProbeManager]) -> FakeProbeManager:
        seen.append((ctx.options["clock"], ctx.options["runtime"]))
        return fake(ctx)

    names = ["no_probes_ready_once_running", "probes_run_every_period"]
    report = await check_prober(factory, names=names)
    assert [r.name for r in report.results] == names
    assert len({id(c) for c, _ in seen}) == 2 and len({id(r) for _, r in seen}) == 2
    with pytest.raises(ValueError, match="unknown check"):
        await check_prober(factory, names=["nope"])


# ---------------------------------------------------------------- the kit catches broken managers


def _rewritten(pod: Pod, **probe_changes: int) -> Pod:
    def fix(c: Container) -> Container:
        changes = {
            k: attrs.evolve(getattr(c, k), **probe_changes)
            for k in ("liveness_probe", "readiness_probe", "startup_probe")
            if getattr(c, k) is not None
        }
        return attrs.evolve(c, **changes)

    return attrs.evolve(
        pod, spec=attrs.evolve(pod.spec, containers=tuple(fix(c) for c in pod.spec.containers))
    )


class IgnoresSettings(FakeProbeManager):
    """A manager that ignores some probe settings (a common bug)."""

    changes: dict[str, int] = {}

    def add_pod(self, pod: Pod) -> None:
        super().add_pod(_rewritten(pod, **self.changes))


class KeepsProbing(FakeProbeManager):
    """A manager whose remove_pod forgets to stop the workers."""

    def remove_pod(self, pod: Pod) -> None:
        self.calls.append(Call("remove_pod", (pod,)))


def _broken(cls: type[FakeProbeManager], **changes: int) -> Any:
    made = type(cls.__name__, (cls,), {"changes": changes})

    def factory(ctx: KitContext[ProbeManager]) -> FakeProbeManager:
        manager: FakeProbeManager = made(ctx.options["clock"], runtime=ctx.options["runtime"])
        return manager

    return factory


@pytest.mark.parametrize(
    ("factory", "failing"),
    [
        (
            _broken(IgnoresSettings, failure_threshold=1),
            {
                "liveness_failure_threshold",
                "startup_gates_the_others",
                "startup_failure_requests_restart",
                "prober_errors_are_discarded",
            },
        ),
        (_broken(IgnoresSettings, success_threshold=1), {"readiness_success_threshold"}),
        (_broken(IgnoresSettings, initial_delay_seconds=0), {"readiness_waits_for_first_success"}),
        (_broken(KeepsProbing), {"remove_pod_stops_its_probes"}),
    ],
    ids=["failure_threshold", "success_threshold", "initial_delay", "remove_pod"],
)
async def test_the_kit_fails_a_broken_manager(factory: Any, failing: set[str]) -> None:
    report = await run_prober_kit(factory)
    assert {r.name for r in report.failures} == failing, report.summary()
    with pytest.raises(ConformanceFailure):
        await check_prober(factory)


async def test_the_stub_fails_every_check_that_needs_a_probe() -> None:
    report = await run_prober_kit(StubProbeManager)
    assert [r.name for r in report.results if r.status == "passed"] == [
        "no_probes_ready_once_running"
    ]
    failure = report.result("liveness_failure_threshold").message
    assert failure.startswith("add the pod; liveness fails, fails, succeeds, then fails three")
    assert "no liveness FAILURE update" in failure


async def test_the_kit_needs_its_fake_parts() -> None:
    report = await run_prober_kit(fake, names=["probes_run_every_period"], runtime=object())
    assert (
        "needs a FakeClock as 'clock' and a FakeRuntime as 'runtime'" in report.failures[0].message
    )


# ---------------------------------------------------------------- FakeProbeManager


UID = "uid-1"


def probe(**timing: int) -> Probe:
    return Probe(exec=ExecAction(command=("check",)), **timing)  # type: ignore[arg-type]


def make_pod(*containers: Container, **meta: Any) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid=UID, **meta),
        spec=PodSpec(containers=containers),
    )


def running(name: str, cid: str, at: float) -> PodStatus:
    state = ContainerState(
        running=ContainerStateRunning(started_at=_dt.datetime.fromtimestamp(at, _dt.UTC))
    )
    return PodStatus(
        phase="Running",
        container_statuses=(ContainerStatus(name=name, container_id=f"fake://{cid}", state=state),),
    )


@attrs.define
class Env:
    clock: FakeClock
    probes: FakeProbeManager
    updates: list[ProbeUpdate]

    def seen(self) -> list[tuple[str, ProbeKind, ProbeResult]]:
        return [(u.container_id, u.kind, u.result) for u in self.updates]

    def times(self, kind: ProbeKind) -> list[float]:
        return [r.time - 1000.0 for r in self.probes.runs if r.kind is kind]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock()
    probes = FakeProbeManager(clock)
    updates: list[ProbeUpdate] = []

    async def consume() -> None:
        async for u in probes.updates():
            updates.append(u)

    runner = asyncio.create_task(probes.run())
    consumer = asyncio.create_task(consume())
    await clock.settle()
    yield Env(clock, probes, updates)
    await probes.stop()
    await asyncio.wait_for(asyncio.gather(runner, consumer), 5)


def test_the_fake_is_a_probe_manager() -> None:
    assert isinstance(FakeProbeManager(), ProbeManager)


async def test_a_scripted_list_runs_each_period_and_its_last_result_repeats(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(period_seconds=10)))
    env.probes.script("web", "app", L, [S, F, S, F, F])
    env.probes.add_pod(pod)
    env.probes.update_pod_status(pod, running("app", "c1", env.clock.now()))
    await env.clock.run_for(50)
    # S F S F F -> (failureThreshold 3) F at 50 s is the third failure in a row.
    assert [r.result for r in env.probes.runs_of("app", L)] == [S, F, S, F, F, F]
    assert env.times(L) == [0, 10, 20, 30, 40, 50]
    assert env.seen() == [("c1", L, S), ("c1", L, F)]
    assert env.probes.result(L, "fake://c1") is F
    await env.clock.run_for(30)
    assert len(env.probes.runs) == 6  # on hold until the container is restarted
    env.probes.update_pod_status(pod, running("app", "c2", env.clock.now()))
    await env.clock.run_for(10)
    assert env.probes.runs[-1] == ProbeRun(1090.0, UID, "app", "c2", L, F)


async def test_a_callable_script_gets_the_run_number(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe(success_threshold=2)))
    env.probes.script(pod, "app", R, lambda n: S if n >= 1 else U)
    env.probes.add_pod(pod)
    status = running("app", "c1", env.clock.now())
    assert env.probes.update_pod_status(pod, status).container_statuses[0].ready is False
    await env.clock.run_for(20)
    # UNKNOWN (a prober error) is discarded; two successes make it ready.
    assert [r.result for r in env.probes.runs] == [U, S, S]
    assert env.seen() == [("c1", R, F), ("c1", R, S)]
    folded = env.probes.update_pod_status(pod, status).container_statuses[0]
    assert (folded.started, folded.ready) == (True, True)


async def test_scripts_match_the_pod_by_uid_full_name_or_name(env: Env) -> None:
    pod = make_pod(
        Container(name="a", liveness_probe=probe(failure_threshold=1)),
        Container(name="b", liveness_probe=probe(failure_threshold=1)),
        Container(name="c", liveness_probe=probe(failure_threshold=1)),
    )
    env.probes.script(UID, "a", L, [F])
    env.probes.script("ns/web", "b", L, [F])
    env.probes.script("other", "c", L, [F])
    env.probes.add_pod(pod)
    status = PodStatus(
        phase="Running",
        container_statuses=tuple(
            running(n, f"c-{n}", env.clock.now()).container_statuses[0] for n in "abc"
        ),
    )
    env.probes.update_pod_status(pod, status)
    await env.clock.run_for(0)
    assert {(r.container_name, r.result) for r in env.probes.runs} == {
        ("a", F),
        ("b", F),
        ("c", S),  # another pod's script; the default result
    }


async def test_the_call_log_records_each_protocol_call(env: Env) -> None:
    pod = make_pod(Container(name="app"))
    status = running("app", "c1", env.clock.now())
    env.probes.add_pod(pod)
    folded = env.probes.update_pod_status(pod, status)
    env.probes.remove_pod(pod)
    assert [c.method for c in env.probes.calls] == [
        "run",
        "updates",
        "add_pod",
        "update_pod_status",
        "remove_pod",
    ]
    assert env.probes.calls_to("update_pod_status")[0].args == (pod, status)
    assert folded.container_statuses[0].ready is True  # no probes: ready once running


async def test_injected_errors_are_raised_the_given_number_of_times() -> None:
    probes = FakeProbeManager()
    pod = make_pod(Container(name="app", liveness_probe=probe()))
    boom = RuntimeError("boom")
    probes.inject_error("add_pod", boom, times=2)
    for _ in range(2):
        with pytest.raises(RuntimeError) as info:
            probes.add_pod(pod)
        assert info.value is boom
    probes.add_pod(pod)
    assert probes.has_probe(UID, "app", L)
    probes.inject_error("run", OSError("fatal"))
    with pytest.raises(OSError, match="fatal"):
        await probes.run()
    probes.inject_error("updates", ValueError("no updates"))
    with pytest.raises(ValueError, match="no updates"):
        await anext(aiter(probes.updates()))
    with pytest.raises(ValueError, match="not a ProbeManager method"):
        probes.inject_error("probe", boom)
    with pytest.raises(ValueError, match="times must be >= 1"):
        probes.inject_error("stop", boom, times=0)


async def start_container(runtime: FakeRuntime) -> str:
    sandbox = PodSandboxConfig(metadata=PodSandboxMetadata(name="web", namespace="ns", uid=UID))
    sid = await runtime.run_pod_sandbox(sandbox)
    config = ContainerConfig(metadata=ContainerMetadata(name="app"), image=ImageSpec(KIT_IMAGE))
    cid = await runtime.create_container(sid, config, sandbox)
    await runtime.start_container(cid)
    return cid


async def test_following_a_runtime_runs_exec_probes_through_it() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=[KIT_IMAGE])
    cid = await start_container(runtime)
    commands: list[Sequence[str]] = []

    def handler(container_id: str, cmd: Sequence[str]) -> ExecResult:
        commands.append(cmd)
        return ExecResult(1, b"not healthy\n")

    runtime.set_exec_handler(handler)
    probes = FakeProbeManager(clock, runtime=runtime)
    pod = make_pod(
        Container(
            name="app",
            env=(EnvVar(name="WHAT", value="db"),),
            liveness_probe=Probe(
                exec=ExecAction(command=("check", "$(WHAT)")), failure_threshold=1
            ),
        )
    )
    updates: list[ProbeUpdate] = []

    async def consume() -> None:
        async for u in probes.updates():
            updates.append(u)

    runner = asyncio.create_task(probes.run())
    consumer = asyncio.create_task(consume())
    probes.add_pod(pod)
    probes.update_pod_status(pod, running("app", cid, clock.now()))
    await clock.run_for(0)
    await probes.stop()
    await asyncio.wait_for(asyncio.gather(runner, consumer), 5)
    assert commands == [("check", "db")]
    assert [(u.result, u.message) for u in updates] == [(S, ""), (F, "not healthy\n")]


async def test_a_pod_being_deleted_ends_liveness_with_a_success(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(), readiness_probe=probe()))
    env.probes.script(pod, "app", L, [F])
    env.probes.add_pod(pod)
    env.probes.update_pod_status(pod, running("app", "c1", env.clock.now()))
    await env.clock.run_for(10)
    env.probes.add_pod(
        make_pod(*pod.spec.containers, deletion_timestamp=_dt.datetime(2026, 1, 1, tzinfo=_dt.UTC))
    )
    await env.clock.run_for(10)
    assert not env.probes.has_probe(UID, "app", L)
    assert env.probes.has_probe(UID, "app", R)
    assert [(k, r) for _, k, r in env.seen() if k is L] == [(L, S)]


async def test_stop_is_idempotent_and_a_stopped_fake_does_not_run_again() -> None:
    probes = FakeProbeManager()
    await probes.stop()
    await probes.stop()
    await asyncio.wait_for(probes.run(), 5)
    assert [c.method for c in probes.calls] == ["stop", "stop", "run"]
