"""The probe manager's events, in the kubelet's words, on a FakeClock.

The manager-level tests script outcomes with the Prober double of
``_prober_helpers``; the composer tests run exec probes in FakeRuntime containers
and read the agent's event log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _prober_helpers import ST, UID, Env, F, L, R, S, make_pod, probe

from kubelet_kit.api import Container, Pod
from kubelet_kit.container import ContainerFilter, ContainerState, labels
from kubelet_kit.podsync.syncer import EventLog, RecordedEvent
from kubelet_kit.prober import ProbeKind, ProbeOutcome, ProbeStatus
from kubelet_kit.prober.manager import probe_event
from kubelet_kit.testing.env import KubeletEnv

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = Env()
    e.manager.recorder = EventLog(e.clock)
    async with e:
        yield e


def events(env: Env) -> list[tuple[str, str, str, str]]:
    """(type, reason, message, container) of every event recorded."""
    assert isinstance(env.manager.recorder, EventLog)
    return [(e.type, e.reason, e.message, e.container) for e in env.manager.recorder.events()]


# ---------------------------------------------------------------- the strings


@pytest.mark.parametrize(
    ("kind", "status", "expected"),
    [
        (L, ProbeStatus.FAILURE, ("Unhealthy", "Liveness probe failed: out")),
        (R, ProbeStatus.FAILURE, ("Unhealthy", "Readiness probe failed: out")),
        (ST, ProbeStatus.FAILURE, ("Unhealthy", "Startup probe failed: out")),
        (L, ProbeStatus.UNKNOWN, ("Unhealthy", "Liveness probe errored: out")),
        (R, ProbeStatus.WARNING, ("ProbeWarning", "Readiness probe warning: out")),
        (ST, ProbeStatus.SUCCESS, None),
    ],
)
def test_probe_event_strings(
    kind: ProbeKind, status: ProbeStatus, expected: tuple[str, str] | None
) -> None:
    assert probe_event(kind, ProbeOutcome(status, "out")) == expected


# ---------------------------------------------------------------- through the manager


async def test_each_liveness_failure_is_an_unhealthy_warning(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe()))
    env.prober.set("app", L, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    # Recorded at once, below the failure threshold: the result is still alive.
    assert events(env) == [
        ("Warning", "Unhealthy", "Liveness probe failed: Liveness said failure", "app")
    ]
    assert env.manager.result(L, "c1") is S
    await env.run_for(30)
    # Three in a row (the default threshold), then the worker holds: no more runs.
    assert events(env) == 3 * [
        ("Warning", "Unhealthy", "Liveness probe failed: Liveness said failure", "app")
    ]
    assert env.manager.result(L, "c1") is F
    log = env.manager.recorder
    assert isinstance(log, EventLog)
    recorded = log.events()[0]
    assert (recorded.namespace, recorded.pod_name, recorded.pod_uid) == ("ns", "web", UID)


async def test_readiness_and_startup_failures(env: Env) -> None:
    pod = make_pod(
        Container(name="app", startup_probe=probe(failure_threshold=1)),
        Container(name="side", readiness_probe=probe()),
    )
    env.prober.set("app", ST, ProbeStatus.FAILURE)
    env.prober.set("side", R, ProbeStatus.FAILURE)
    env.start("app", "c1")
    env.start("side", "c2")
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert sorted(events(env)) == [
        ("Warning", "Unhealthy", "Readiness probe failed: Readiness said failure", "side"),
        ("Warning", "Unhealthy", "Startup probe failed: Startup said failure", "app"),
    ]


async def test_a_prober_error_is_recorded_but_discarded(env: Env) -> None:
    pod = make_pod(Container(name="app", liveness_probe=probe(failure_threshold=1)))
    env.prober.set("app", L, ProbeStatus.UNKNOWN)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(10)
    assert events(env) == 2 * [
        ("Warning", "Unhealthy", "Liveness probe errored: Liveness said unknown", "app")
    ]
    assert env.manager.result(L, "c1") is S


async def test_a_warning_is_a_probe_warning_and_a_success(env: Env) -> None:
    pod = make_pod(Container(name="app", readiness_probe=probe()))
    env.prober.set("app", R, ProbeStatus.WARNING)
    env.start("app", "c1")
    env.manager.add_pod(pod)
    await env.run_for(0)
    assert events(env) == [
        ("Warning", "ProbeWarning", "Readiness probe warning: Readiness said warning", "app")
    ]
    assert env.manager.result(R, "c1") is S


async def test_success_and_a_container_not_running_record_nothing(env: Env) -> None:
    pod = make_pod(
        Container(name="app", readiness_probe=probe(), liveness_probe=probe()),
        Container(name="idle", readiness_probe=probe()),
    )
    env.start("app", "c1")
    env.manager.update_container(UID, "idle", "c2", running=False)
    env.manager.add_pod(pod)
    await env.run_for(30)
    assert env.manager.result(R, "c2") is F  # not running: not ready, yet no probe ran
    assert events(env) == []


async def test_the_recorder_is_a_constructor_argument() -> None:
    log = EventLog(Env().clock)
    async with Env(recorder=log) as env:
        env.manager.add_pod(make_pod(Container(name="app", readiness_probe=probe())))
        env.prober.set("app", R, ProbeStatus.FAILURE)
        env.start("app", "c1")
        await env.run_for(0)
    assert [e.message for e in log.events()] == ["Readiness probe failed: Readiness said failure"]


class _BrokenRecorder:
    def event(
        self, pod: Pod, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        raise RuntimeError("recorder down")


async def test_a_broken_recorder_does_not_cost_the_result() -> None:
    async with Env(recorder=_BrokenRecorder()) as env:
        env.manager.add_pod(make_pod(Container(name="app", readiness_probe=probe())))
        env.prober.set("app", R, ProbeStatus.FAILURE, ProbeStatus.SUCCESS)
        env.start("app", "c1")
        await env.run_for(10)
        assert env.manager.result(R, "c1") is S


# ---------------------------------------------------------------- through the composer


def probed(name: str, kind: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", "touch /tmp/healthy; sleep infinity"],
        kind: {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 10},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"terminationGracePeriodSeconds": 5, "containers": [container]},
    }


def pod_events(env: KubeletEnv, uid: str, *reasons: str) -> list[RecordedEvent]:
    return [e for e in env.kubelet.events.events(uid) if e.reason in reasons]


async def test_composer_records_liveness_failures_and_one_killing_per_restart() -> None:
    async with KubeletEnv() as env:
        env.add_pod(probed("web", "livenessProbe"))
        await env.wait_for(lambda: env.phase("web") == "Running", what="Running")
        await env.sleep(15)
        assert pod_events(env, "uid-web", "Unhealthy", "ProbeWarning") == []
        (running,) = await env.runtime.list_containers(
            ContainerFilter(
                state=ContainerState.RUNNING, label_selector={labels.POD_UID: "uid-web"}
            )
        )
        first = running.id
        env.runtime.remove_file(first, "/tmp/healthy")
        await env.wait_for(
            lambda: env.status("web").container_statuses[0].restart_count == 1,
            timeout=120,
            what="restart",
        )
        unhealthy = pod_events(env, "uid-web", "Unhealthy")
        assert [(e.type, e.container) for e in unhealthy] == 3 * [("Warning", "main")]
        assert {e.message for e in unhealthy} == {
            "Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory\n"
        }
        killing = pod_events(env, "uid-web", "Killing")
        assert [(e.type, e.message, e.container) for e in killing] == [
            ("Normal", "Container main failed liveness probe, will be restarted", "main")
        ]


async def test_composer_records_a_startup_failure_and_its_killing() -> None:
    async with KubeletEnv() as env:
        pod = probed("boot", "startupProbe")
        pod["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep infinity"]
        pod["spec"]["containers"][0]["startupProbe"]["failureThreshold"] = 1
        env.add_pod(pod)
        await env.wait_for(
            lambda: bool(pod_events(env, "uid-boot", "Killing")), timeout=60, what="Killing"
        )
        unhealthy = pod_events(env, "uid-boot", "Unhealthy")
        assert [e.message for e in unhealthy] == [
            "Startup probe failed: cat: can't open '/tmp/healthy': No such file or directory\n"
        ]
        killing = pod_events(env, "uid-boot", "Killing")
        assert [(e.type, e.message) for e in killing] == [
            ("Normal", "Container main failed startup probe, will be restarted")
        ]
