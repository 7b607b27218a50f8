"""ReferenceProbeManager timelines on a FakeClock: nothing here sleeps in real time.

Most tests script probe outcomes with a Prober double that records when it was
called; the end-to-end ones run exec probes through FakeRuntime containers.
"""

from __future__ import annotations

import datetime as _dt
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
    U,
    attrs_evolve,
    container_status,
    make_pod,
    probe,
    running_status,
)

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ExecAction,
    PodStatus,
    Probe,
)
from kubelet_kit.prober import (
    ProbeManager,
    ProbeStatus,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with Env() as e:
        yield e


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
        "app",
        L,
        ProbeStatus.FAILURE,
        ProbeStatus.FAILURE,
        ProbeStatus.UNKNOWN,
        ProbeStatus.UNKNOWN,
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


async def test_a_pod_without_probes_folds_the_same_beside_probed_pods(env: Env) -> None:
    plain = make_pod(Container(name="app"), Container(name="idle"))
    status = PodStatus(
        phase="Running",
        container_statuses=(
            running_status("app", "containerd://c1", env.clock.now()),
            attrs_evolve(running_status("idle", "", env.clock.now()), state=ContainerState()),
        ),
    )
    env.manager.add_pod(plain)
    alone = env.manager.update_pod_status(plain, status)  # the manager probes nothing
    flags = [(c.started, c.ready) for c in alone.container_statuses]
    assert flags == [(True, True), (False, False)]
    assert env.manager.update_pod_status(plain, alone) is alone  # nothing left to change

    web_pod = make_pod(Container(name="web", startup_probe=probe()))
    other = attrs_evolve(web_pod, metadata=attrs_evolve(web_pod.metadata, uid="uid-2"))
    env.manager.add_pod(other)
    env.manager.update_container("uid-2", "web", "c2", running=True)
    beside = env.manager.update_pod_status(plain, status)
    assert beside == alone
    web = PodStatus(container_statuses=(running_status("web", "c2", env.clock.now()),))
    folded = env.manager.update_pod_status(other, web).container_statuses[0]
    assert (folded.started, folded.ready) == (False, False)  # its startup probe has not run


async def test_an_unchanged_pod_gets_its_previous_container_statuses_back(env: Env) -> None:
    # Each sync folds a freshly generated status (not ready, states reused): the
    # copies the previous fold made come back, so an unchanged container is
    # recognised by identity.
    pod = make_pod(Container(name="app"), Container(name="web", readiness_probe=probe()))
    app = running_status("app", "c1", env.clock.now())
    web = running_status("web", "c2", env.clock.now())
    env.manager.add_pod(pod)

    def fold() -> PodStatus:
        fresh = (attrs_evolve(app), attrs_evolve(web))
        return env.manager.update_pod_status(pod, PodStatus(container_statuses=fresh))

    first = fold()
    again = fold()
    assert [(c.started, c.ready) for c in again.container_statuses] == [(True, True), (True, False)]
    assert all(
        a is b for a, b in zip(again.container_statuses, first.container_statuses, strict=True)
    )


# ---------------------------------------------------------------- containers without probes


async def test_a_container_given_a_probe_later_is_probed_from_its_latest_report(
    env: Env,
) -> None:
    # The views of containers without probes are not kept on every report; the
    # latest report is, and a container that gets a probe starts from it.
    plain = make_pod(Container(name="app"))
    env.manager.add_pod(plain)
    for cid in ("c1", "c2"):
        status = PodStatus(container_statuses=(running_status("app", cid, env.clock.now()),))
        env.manager.update_pod_status(plain, status)
    env.manager.add_pod(make_pod(Container(name="app", readiness_probe=probe())))
    await env.run_for(0)
    assert [call[3] for call in env.prober.calls] == ["c2"]


async def test_a_later_update_container_is_not_undone_by_a_new_probe(env: Env) -> None:
    plain = make_pod(Container(name="app"))
    env.manager.add_pod(plain)
    status = PodStatus(container_statuses=(running_status("app", "c1", env.clock.now()),))
    env.manager.update_pod_status(plain, status)
    env.start("app", "c9")  # update_container: the newest word on the container
    env.manager.add_pod(make_pod(Container(name="app", readiness_probe=probe())))
    await env.run_for(0)
    assert [call[3] for call in env.prober.calls] == ["c9"]


async def test_a_start_time_taken_from_the_clock_is_the_first_reports(env: Env) -> None:
    # A running container reported without a start time counts its initial delay
    # from its first report: that report is recorded even without a probe.
    plain = make_pod(Container(name="app"))
    env.manager.add_pod(plain)
    untimed = attrs_evolve(
        running_status("app", "c1", env.clock.now()),
        state=ContainerState(running=ContainerStateRunning()),
    )
    env.manager.update_pod_status(plain, PodStatus(container_statuses=(untimed,)))
    await env.run_for(30)
    probed = Container(name="app", readiness_probe=probe(initial_delay_seconds=20))
    env.manager.add_pod(make_pod(probed))
    await env.run_for(0)
    assert env.prober.times("app", R) == [30]
