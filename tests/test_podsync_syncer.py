"""RuntimePodSyncer scenarios on FakeRuntime + FakeClock, and the lifecycle hook runner.

Timelines are driven through PodWorkers with a 1 s resync, which stands in for
the PLEG noticing container exits; back-off expiries resync through
``SyncResult.requeue_after``. No test sleeps on real time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from aiohttp import web

from kubelet_kit.api import (
    Container,
    ContainerPort,
    ExecAction,
    HTTPGetAction,
    HTTPHeader,
    Lifecycle,
    LifecycleHandler,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    SleepAction,
    TCPSocketAction,
)
from kubelet_kit.container.interfaces import ContainerState, ContainerStatus, DNSConfig
from kubelet_kit.errors import ContainerStartError, PodSyncError
from kubelet_kit.node.podworkers import PodWorkers, UpdateType, WorkerPhase
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.podsync import configs
from kubelet_kit.podsync.backoff import stable_key
from kubelet_kit.podsync.hooks import HandlerRunner
from kubelet_kit.podsync.syncer import EventLog, RuntimePodSyncer
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult, ProbeUpdate
from kubelet_kit.status import StatusManager
from kubelet_kit.testing import FakeClock, FakeRuntime

IMAGE = "registry.example/app:1"
SERVE = ("sh", "-c", "sleep infinity")


def mkcontainer(name: str = "app", **kw: Any) -> Container:
    kw.setdefault("image", IMAGE)
    kw.setdefault("command", SERVE)
    return Container(name=name, **kw)


def mkpod(
    *containers: Container,
    inits: tuple[Container, ...] = (),
    restart: str = "Always",
    **spec: Any,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="u1"),
        spec=PodSpec(
            containers=containers or (mkcontainer(),),
            init_containers=inits,
            restart_policy=restart,
            **spec,
        ),
    )


class RecordingRuntime(FakeRuntime):
    """A FakeRuntime that remembers when each container name was started."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started: list[tuple[str, float]] = []

    async def start_container(self, container_id: str) -> None:
        await super().start_container(container_id)
        name = (await self.container_status(container_id)).metadata.name
        self.started.append((name, self.clock.now()))


@attrs.define
class Env:
    clock: FakeClock
    runtime: RecordingRuntime
    status: StatusManager
    syncer: RuntimePodSyncer
    workers: PodWorkers | None = None

    async def containers(self, name: str | None = None) -> list[ContainerStatus]:
        """Every container the runtime holds (of ``name``), oldest first."""
        listed = await self.runtime.list_containers()
        statuses = [await self.runtime.container_status(c.id) for c in listed]
        return sorted(
            (s for s in statuses if name is None or s.metadata.name == name),
            key=lambda s: (s.created_at, s.metadata.attempt),
        )

    def starts(self, name: str) -> list[float]:
        """Seconds after the start at which containers called ``name`` started."""
        return [t - self.t0 for n, t in self.runtime.started if n == name]

    @property
    def t0(self) -> float:
        return 1_767_225_600.0

    def pod_status(self) -> PodStatus:
        status = self.status.get_pod_status("u1")
        assert status is not None
        return status

    def waiting(self, name: str = "app") -> tuple[str, str] | None:
        status = self.pod_status()
        for cs in (*status.container_statuses, *status.init_container_statuses):
            if cs.name == name and cs.state.waiting is not None:
                return cs.state.waiting.reason, cs.state.waiting.message
        return None

    def events(self) -> list[tuple[str, str, str, str]]:
        """(container, type, reason, message) of every event so far, oldest first."""
        log = self.syncer.events
        assert isinstance(log, EventLog)
        return [(e.container, e.type, e.reason, e.message) for e in log.events("u1")]

    def start_workers(self, pod: Pod, resync: float = 1.0) -> PodWorkers:
        self.workers = PodWorkers(self.syncer, self.clock, resync_interval=resync)
        self.workers.update_pod(pod, UpdateType.CREATE)
        return self.workers

    async def run_until(self, t: float) -> None:
        """Let clock time pass until ``t`` seconds after the start."""
        await self.clock.run_for(self.t0 + t - self.clock.now(), settle_rounds=200)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    clock = FakeClock()
    runtime = RecordingRuntime(clock, images=[IMAGE])
    status = StatusManager(clock)
    syncer = RuntimePodSyncer(
        runtime,
        clock,
        status_manager=status,
        pod_logs_dir=str(tmp_path),
        node_name="node-1",
        resolv_conf=DNSConfig(servers=("10.0.0.10",)),
        events=EventLog(clock),
    )
    e = Env(clock, runtime, status, syncer)
    yield e


async def shutdown(env: Env) -> None:
    if env.workers is not None:
        await env.workers.shutdown()


# ---------------------------------------------------------------------- basics


async def test_first_sync_creates_sandbox_and_starts_container(env: Env) -> None:
    pod = mkpod()
    result = await env.syncer.sync_pod(UpdateType.CREATE, pod)
    assert not result.terminal and result.requeue_after is None
    sandboxes = await env.runtime.list_pod_sandboxes()
    assert len(sandboxes) == 1 and sandboxes[0].metadata.attempt == 0
    (app,) = await env.containers("app")
    assert app.state is ContainerState.RUNNING
    assert app.annotations["io.kubernetes.container.hash"] == configs.container_hash(
        pod.spec.containers[0]
    )
    status = env.pod_status()
    assert status.phase == "Running"
    assert status.container_statuses[0].state.running is not None
    # A second sync with nothing changed changes nothing.
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert len(await env.containers()) == 1 and len(await env.runtime.list_pod_sandboxes()) == 1


async def test_restart_count_continues_from_existing_logs(env: Env, tmp_path: Path) -> None:
    # The runtime forgot the pod (e.g. after a reboot) but its logs are still there.
    log_dir = tmp_path / "ns_web_u1" / "app"
    log_dir.mkdir(parents=True)
    for name in ("0.log", "3.log", "2.log.20260101-000000.gz", "notes.txt", "9x.log"):
        (log_dir / name).write_text("")
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod())
    (app,) = await env.containers("app")
    assert app.metadata.attempt == 4
    assert app.annotations["io.kubernetes.container.restartCount"] == "4"
    assert app.log_path.endswith("app/4.log")


async def test_log_directories_are_made_and_their_failure_reported(
    env: Env, tmp_path: Path
) -> None:
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod())
    assert (tmp_path / "ns_web_u1" / "app").is_dir()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the log root should be")
    syncer = RuntimePodSyncer(
        env.runtime, env.clock, status_manager=StatusManager(env.clock),
        pod_logs_dir=str(blocked), resolv_conf=DNSConfig(),
    )
    other = attrs.evolve(mkpod(), metadata=ObjectMeta(name="w2", namespace="ns", uid="u2"))
    with pytest.raises(PodSyncError) as info:
        await syncer.sync_pod(UpdateType.CREATE, other)
    assert info.value.reason == "FailedCreatePodSandBox"
    assert info.value.message.startswith('Failed to create log directory for pod "w2_ns(u2)": ')


def test_restart_count_from_log_dir(tmp_path: Path) -> None:
    from kubelet_kit.podsync.syncer import restart_count_from_log_dir

    assert restart_count_from_log_dir(str(tmp_path / "missing")) == 0
    assert restart_count_from_log_dir(str(tmp_path)) == 0
    (tmp_path / "7.log").mkdir()  # a directory does not count
    (tmp_path / "1.log").write_text("")
    assert restart_count_from_log_dir(str(tmp_path)) == 2


async def test_fresh_status_is_written_to_the_pod_cache(env: Env, tmp_path: Path) -> None:
    cache = PodCache()
    syncer = RuntimePodSyncer(
        env.runtime, env.clock, status_manager=env.status, pod_cache=cache,
        pod_logs_dir=str(tmp_path), resolv_conf=DNSConfig(),
    )
    await syncer.sync_pod(UpdateType.CREATE, mkpod())
    entry = cache.get("u1")
    assert entry.timestamp == env.clock.now()
    assert entry.status is not None
    assert [c.state for c in entry.status.container_statuses] == [ContainerState.RUNNING]


async def test_host_network_pod_keeps_its_sandbox(env: Env) -> None:
    pod = mkpod(host_network=True)
    for _ in range(3):
        await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert len(await env.runtime.list_pod_sandboxes()) == 1
    assert len(await env.containers("app")) == 1


async def test_dead_sandbox_is_recreated_with_next_attempt(env: Env) -> None:
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (sandbox,) = await env.runtime.list_pod_sandboxes()
    await env.runtime.stop_pod_sandbox(sandbox.id)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    attempts = sorted(s.metadata.attempt for s in await env.runtime.list_pod_sandboxes())
    assert attempts == [0, 1]
    assert (await env.containers("app"))[-1].state is ContainerState.RUNNING


# ------------------------------------------------------------ crash-loop back-off


async def test_crash_loop_backoff_timeline(env: Env) -> None:
    env.runtime.script("app", exit_code=1)
    env.start_workers(mkpod())
    await env.run_until(5)
    assert env.waiting() == (
        "CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_ns(u1)"
    )
    await env.run_until(100)
    assert env.waiting() == (
        "CrashLoopBackOff", "back-off 1m20s restarting failed container=app pod=web_ns(u1)"
    )
    await env.run_until(920)
    starts = env.starts("app")
    # Restarted at once after the first exit, then after 10, 20, 40, ... capped at 300 s.
    assert starts == [0, 1, 11, 31, 71, 151, 311, 611, 911]
    assert env.waiting() == (
        "CrashLoopBackOff", "back-off 5m0s restarting failed container=app pod=web_ns(u1)"
    )
    cs = env.pod_status().container_statuses[0]
    assert cs.restart_count == 8
    assert cs.last_state.terminated is not None and cs.last_state.terminated.exit_code == 1
    await shutdown(env)


async def test_backoff_expiry_resyncs_exactly_when_due(env: Env) -> None:
    # A slow periodic resync (60 s) and a PLEG stand-in that resyncs the pod when
    # one of its containers stops: restarts after a back-off come only from
    # SyncResult.requeue_after, and still happen exactly on time.
    env.runtime.enable_events()
    env.runtime.script("app", exit_code=1, after=2)
    pod = mkpod()
    workers = env.start_workers(pod, resync=60)

    async def pleg() -> None:
        async for event in env.runtime.get_container_events():
            if event.type.name == "STOPPED":
                workers.update_pod(pod, UpdateType.SYNC)

    watcher = asyncio.create_task(pleg())
    await env.clock.settle()
    await env.run_until(100)
    # Runs 2 s each: exits at 2 (restarted at once), 4 (+10 s), 16 (+20 s), 38 (+40 s).
    assert env.starts("app") == [0, 2, 14, 36, 78]
    watcher.cancel()
    await shutdown(env)


async def test_crash_loop_resets_after_running_ten_minutes(env: Env) -> None:
    env.runtime.script("app", exit_code=1, times=4)
    env.runtime.script("app", exit_code=1, after=700, times=1)
    env.runtime.script("app", exit_code=1)
    env.start_workers(mkpod())
    await env.run_until(800)
    starts = env.starts("app")
    assert starts[:5] == [0, 1, 11, 31, 71]
    # The fifth run (from 71 s) lasted 700 s, more than 600 s since the last
    # back-off update: it is restarted at once and its back-off starts from 10 s.
    assert starts[5:] == [771, 781]
    await shutdown(env)


async def test_requeue_after_is_the_backoff_expiry(env: Env) -> None:
    env.runtime.script("app", exit_code=1)
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)  # starts, exits at once
    env.clock.advance(1)
    result = await env.syncer.sync_pod(UpdateType.SYNC, pod)  # restarted at once
    assert result.requeue_after is None
    env.clock.advance(3)
    result = await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert result.requeue_after == pytest.approx(7)
    env.clock.advance(7)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert env.starts("app") == [0, 1, 11]


async def test_gc_drops_stale_backoff_entries(env: Env) -> None:
    env.runtime.script("app", exit_code=1)
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    env.syncer.gc()
    assert len(env.syncer.crash_backoff) == 1
    env.clock.advance(601)
    env.syncer.gc()
    assert len(env.syncer.crash_backoff) == 0


async def test_spec_change_gets_its_own_backoff_key(env: Env) -> None:
    env.runtime.add_image("registry.example/app:2", present=True)
    env.runtime.script("app", exit_code=1)
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)  # restarted; now in back-off
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert env.waiting()[0] == "CrashLoopBackOff"  # type: ignore[index]
    assert env.starts("app") == [0, 1]
    fixed = attrs.evolve(
        pod, spec=attrs.evolve(pod.spec, containers=(mkcontainer(image="registry.example/app:2"),))
    )
    await env.syncer.sync_pod(UpdateType.UPDATE, fixed)
    # The key holds the spec hash: a new spec is not held back by the old back-off.
    assert env.starts("app") == [0, 1, 2]
    old = pod.spec.containers[0]
    assert stable_key(pod, old, configs.container_hash(old)) in env.syncer.crash_backoff


# --------------------------------------------------------------- restart policies


@pytest.mark.parametrize(
    ("policy", "exit_code", "phase", "restarted"),
    [
        ("Never", 1, "Failed", False),
        ("Never", 0, "Succeeded", False),
        ("OnFailure", 0, "Succeeded", False),
        ("OnFailure", 1, "Running", True),
        ("Always", 0, "Running", True),
        ("Always", 1, "Running", True),
    ],
)
async def test_restart_policy(
    env: Env, policy: str, exit_code: int, phase: str, restarted: bool
) -> None:
    env.runtime.script("app", exit_code=exit_code, after=2, times=1)
    workers = env.start_workers(mkpod(restart=policy))
    await env.run_until(10)
    assert len(env.starts("app")) == (2 if restarted else 1)
    assert env.pod_status().phase == phase
    if phase in ("Succeeded", "Failed"):
        assert workers.is_finished("u1")
        assert await env.runtime.list_containers() == []  # cleaned up after termination
    await shutdown(env)


async def test_spec_change_restarts_the_container(env: Env) -> None:
    env.runtime.add_image("registry.example/app:2", present=True)
    pod = mkpod(restart="Never")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (old,) = await env.containers("app")
    changed = attrs.evolve(
        pod, spec=attrs.evolve(pod.spec, containers=(mkcontainer(image="registry.example/app:2"),))
    )
    await env.syncer.sync_pod(UpdateType.UPDATE, changed)
    stops = env.runtime.calls_to("stop_container")
    assert [c.args[:2] for c in stops] == [(old.id, 30)]
    old_now, new = await env.containers("app")
    assert old_now.state is ContainerState.EXITED
    assert new.state is ContainerState.RUNNING and new.metadata.attempt == 1
    assert new.annotations["io.kubernetes.container.restartCount"] == "1"
    assert new.annotations["io.kubernetes.container.hash"] == configs.container_hash(
        changed.spec.containers[0]
    )


async def test_liveness_failure_restarts_the_container(env: Env) -> None:
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (first,) = await env.containers("app")
    env.syncer.record_probe_result(
        ProbeUpdate("u1", "app", first.id, ProbeKind.LIVENESS, ProbeResult.FAILURE)
    )
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    old, new = await env.containers("app")
    assert old.state is ContainerState.EXITED and new.state is ContainerState.RUNNING
    # The failed result belongs to the old container: the new one stays.
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert len(await env.containers("app")) == 2


# ---------------------------------------------------------- init containers, sidecars


async def test_init_containers_run_in_order_before_regular_ones(env: Env) -> None:
    env.runtime.script("i1", exit_code=0, after=5)
    env.runtime.script("i2", exit_code=0, after=3)
    pod = mkpod(inits=(mkcontainer("i1"), mkcontainer("i2")))
    env.start_workers(pod)
    await env.run_until(2)
    assert env.waiting("app") == ("PodInitializing", "")
    assert env.pod_status().phase == "Pending"
    await env.run_until(20)
    assert (env.starts("i1"), env.starts("i2"), env.starts("app")) == ([0], [5], [8])
    assert env.pod_status().phase == "Running"
    await shutdown(env)


async def test_new_sandbox_runs_init_containers_again(env: Env) -> None:
    env.runtime.script("i1", exit_code=0, after=3)
    env.runtime.script("i2", exit_code=0, after=3)
    env.start_workers(mkpod(inits=(mkcontainer("i1"), mkcontainer("i2"))))
    await env.run_until(10)
    assert (env.starts("i1"), env.starts("i2"), env.starts("app")) == ([0], [3], [6])
    (sandbox,) = await env.runtime.list_pod_sandboxes()
    await env.runtime.stop_pod_sandbox(sandbox.id)  # e.g. the node rebooted
    await env.run_until(30)
    # The old init containers are removed when the new sandbox is made, so the
    # old exits do not count: both run again, in order, before the app.
    assert (env.starts("i1"), env.starts("i2"), env.starts("app")) == (
        [0, 11], [3, 14], [6, 17]
    )
    assert len(await env.containers("i1")) == len(await env.containers("i2")) == 1
    await shutdown(env)


async def test_failed_init_container_with_never_fails_the_pod(env: Env) -> None:
    env.runtime.script("i1", exit_code=3, after=1)
    workers = env.start_workers(mkpod(inits=(mkcontainer("i1"),), restart="Never"))
    await env.run_until(10)
    assert env.starts("i1") == [0] and env.starts("app") == []
    assert env.pod_status().phase == "Failed"
    assert workers.is_finished("u1")
    await shutdown(env)


async def test_failed_init_container_is_retried_with_backoff(env: Env) -> None:
    env.runtime.script("i1", exit_code=3)
    env.start_workers(mkpod(inits=(mkcontainer("i1"),)))
    await env.run_until(40)
    assert env.starts("i1") == [0, 1, 11, 31]
    assert env.starts("app") == []
    await shutdown(env)


async def test_sidecars_start_first_keep_running_and_restart(env: Env) -> None:
    env.runtime.script("init", exit_code=0, after=2)
    sidecar = mkcontainer("side", restart_policy="Always")
    pod = mkpod(inits=(sidecar, mkcontainer("init")), restart="Never")
    env.start_workers(pod)
    await env.run_until(10)
    assert (env.starts("side"), env.starts("init"), env.starts("app")) == ([0], [1], [3])
    (side,) = await env.containers("side")
    env.runtime.exit_container(side.id, 1)
    await env.run_until(20)
    # Restarted even though the pod's restartPolicy is Never; the app kept running.
    assert env.starts("side") == [0, 11]
    assert [c.state for c in await env.containers("app")] == [ContainerState.RUNNING]
    assert env.pod_status().phase == "Running"
    await shutdown(env)


async def test_pod_with_sidecar_completes_when_app_exits(env: Env) -> None:
    env.runtime.script("app", exit_code=0, after=5)
    sidecar = mkcontainer("side", restart_policy="Always")
    workers = env.start_workers(mkpod(inits=(sidecar,), restart="Never"))
    await env.run_until(30)
    assert env.pod_status().phase == "Succeeded"
    assert workers.phase("u1") is WorkerPhase.TERMINATED and workers.is_finished("u1")
    await shutdown(env)


# ------------------------------------------------------------------------- hooks


def exec_hook(*cmd: str) -> LifecycleHandler:
    return LifecycleHandler(exec=ExecAction(command=cmd))


async def test_post_start_failure_kills_the_container(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(post_start=exec_hook("sh", "-c", "exit 3")))
    pod = mkpod(container, restart="Never")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (app,) = await env.containers("app")
    assert app.state is ContainerState.EXITED
    reason, message = env.syncer.waiting_reasons("u1")["app"]
    assert reason == "PostStartHookError"
    assert message == (
        'Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "web_ns(u1)" '
        "failed - error: command 'sh -c exit 3' exited with 3: , message: \"\""
    )


async def test_post_start_success_clears_nothing_and_keeps_running(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(post_start=exec_hook("sh", "-c", "echo hi")))
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod(container))
    assert (await env.containers("app"))[0].state is ContainerState.RUNNING
    assert env.syncer.waiting_reasons("u1") == {}


async def test_pre_stop_then_graceful_stop_with_term_and_kill(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(pre_stop=exec_hook("sh", "-c", "sleep 5")))
    pod = mkpod(container)
    env.runtime.ignore_sigterm("app")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (app,) = await env.containers("app")
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 30))
    await env.clock.run_for(4, settle_rounds=200)
    assert env.runtime.calls_to("stop_container") == []  # preStop still running
    await env.clock.run_for(40, settle_rounds=200)
    await task
    (stop,) = env.runtime.calls_to("stop_container")
    assert stop.args[:2] == (app.id, 25)  # what the 5 s hook left of 30 s
    (done,) = await env.containers("app")
    assert done.exit_code == 137  # SIGTERM ignored: killed at the deadline
    assert done.finished_at - env.t0 == 30
    assert all(s.state.value == "SANDBOX_NOTREADY" for s in await env.runtime.list_pod_sandboxes())


async def test_pre_stop_bounded_by_grace_and_minimum_stop_window(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(pre_stop=exec_hook("sh", "-c", "sleep 100")))
    pod = mkpod(container)
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 10))
    await env.clock.run_for(20, settle_rounds=200)
    await task
    (stop,) = env.runtime.calls_to("stop_container")
    assert stop.args[1] == 2  # the hook used the whole grace; 2 s is the floor


async def test_termination_stops_sidecars_after_regular_containers(env: Env) -> None:
    sidecars = tuple(mkcontainer(n, restart_policy="Always") for n in ("s1", "s2"))
    pod = mkpod(inits=sidecars)
    env.runtime.ignore_sigterm("s2")
    env.start_workers(pod)
    await env.run_until(5)
    assert all(c.state is ContainerState.RUNNING for c in await env.containers())
    await shutdown(env)
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 20))
    await env.clock.run_for(60, settle_rounds=200)
    await task
    finished = {c.metadata.name: c.finished_at - env.t0 for c in await env.containers()}
    # app stops at once on SIGTERM; s2 (the later sidecar) is stopped only then,
    # ignores SIGTERM and is killed 20 s later; s1 waits for s2, and its grace is
    # used up by then, so it gets the 2 s floor (and stops at once).
    assert finished == {"app": 5, "s2": 25, "s1": 25}
    names = {c.id: c.metadata.name for c in await env.containers()}
    stops = [(names[c.args[0]], c.args[1]) for c in env.runtime.calls_to("stop_container")]
    assert stops == [("app", 20), ("s2", 20), ("s1", 2)]


# ---------------------------------------------------------------- active deadline


async def test_active_deadline_fails_the_pod(env: Env) -> None:
    workers = env.start_workers(mkpod(active_deadline_seconds=30), resync=60)
    await env.run_until(29)
    assert env.pod_status().phase == "Running"
    await env.run_until(40)
    status = env.pod_status()
    assert (status.phase, status.reason, status.message) == (
        "Failed",
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    assert workers.is_finished("u1")
    await shutdown(env)


async def test_deadline_measured_from_recorded_start_time(env: Env) -> None:
    start = dt.datetime.fromtimestamp(env.t0 - 100, tz=dt.UTC)
    pod = mkpod(active_deadline_seconds=60)
    pod = attrs.evolve(pod, status=PodStatus(phase="Running", start_time=start))
    result = await env.syncer.sync_pod(UpdateType.CREATE, pod)
    assert result.terminal
    assert await env.containers() == []  # nothing is started for a pod past its deadline


# ------------------------------------------------------------------------ images


async def test_image_pull_backoff_timeline(env: Env) -> None:
    from kubelet_kit.errors import ImagePullError

    image = "registry.example/missing:1"
    env.runtime.fail_pull(image, ImagePullError("manifest unknown"))
    pod = mkpod(mkcontainer(image=image))
    env.start_workers(pod)
    await env.run_until(0)
    assert env.waiting() == ("ErrImagePull", "manifest unknown")
    await env.run_until(5)
    assert env.waiting() == ("ImagePullBackOff", f'Back-off pulling image "{image}"')
    await env.run_until(75)
    pulls = [c for c in env.runtime.calls if c.method == "pull_image"]
    assert len(pulls) == 4  # at 0, 10, 30, 70
    env.runtime.add_image(image)
    await env.run_until(160)
    assert [c.state for c in await env.containers("app")] == [ContainerState.RUNNING]
    assert env.pod_status().phase == "Running"
    await shutdown(env)


async def test_err_image_never_pull(env: Env) -> None:
    pod = mkpod(mkcontainer(image="registry.example/absent:1", image_pull_policy="Never"))
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    assert env.waiting() == (
        "ErrImageNeverPull",
        'Container image "registry.example/absent:1" is not present with pull policy of Never',
    )
    assert await env.containers() == []


async def test_create_and_run_errors_are_reported(env: Env) -> None:
    pod = mkpod()
    env.runtime.inject_error("create_container", ContainerStartError("no space left"))
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    assert env.waiting() == ("CreateContainerError", "no space left")
    env.runtime.inject_error("start_container", ContainerStartError("exec format error"))
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert env.waiting() == ("RunContainerError", "exec format error")
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert (await env.containers("app"))[-1].state is ContainerState.RUNNING
    assert env.syncer.waiting_reasons("u1") == {}


async def test_volume_timeout_is_failed_mount(env: Env, tmp_path: Path) -> None:
    class SlowVolumes:
        async def run(self) -> None: ...
        async def stop(self) -> None: ...
        def add_pod(self, pod: Pod) -> None: ...
        def remove_pod(self, pod: Pod) -> None: ...
        async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
            raise TimeoutError("unmounted volumes=[data]")
        async def wait_for_unmount(self, pod: Pod, timeout: float) -> None: ...
        def container_mounts(self, pod: Pod, container: Container,
                             env: Mapping[str, str] | None = None) -> list[Any]:
            return []

    syncer = RuntimePodSyncer(
        env.runtime, env.clock, status_manager=env.status, volume_manager=SlowVolumes(),
        pod_logs_dir=str(tmp_path), resolv_conf=DNSConfig(),
    )
    with pytest.raises(PodSyncError) as info:
        await syncer.sync_pod(UpdateType.CREATE, mkpod())
    assert info.value.reason == "FailedMount"
    assert "unmounted volumes=[data]" in info.value.message
    assert await env.containers() == [] and env.pod_status().phase == "Pending"


# ---------------------------------------------------------------------- deletion


async def test_deletion_stops_and_removes_everything(env: Env) -> None:
    env.runtime.script("app", exit_code=1, times=2)
    pod = mkpod()
    workers = env.start_workers(pod)
    await env.run_until(5)
    assert len(env.syncer.crash_backoff) == 1
    workers.update_pod(pod, UpdateType.KILL, grace_period=10)
    await env.run_until(20)
    assert workers.is_finished("u1")
    assert await env.runtime.list_containers() == []
    assert await env.runtime.list_pod_sandboxes() == []
    assert len(env.syncer.crash_backoff) == 0
    assert env.pod_status().phase in ("Failed", "Succeeded")
    await shutdown(env)


# ----------------------------------------------------------- hook runner details


@pytest.fixture
async def http_server() -> Any:
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(status=int(request.query.get("status", "200")), text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield port, seen
    await runner.cleanup()


async def test_http_hook_uses_pod_ip_named_port_path_and_headers(
    env: Env, http_server: Any
) -> None:
    port, seen = http_server
    container = mkcontainer(ports=(ContainerPort(name="web", container_port=port),))
    handler = LifecycleHandler(
        http_get=HTTPGetAction(
            path="/hook?status=500", port="web", http_headers=(HTTPHeader(name="X-A", value="1"),)
        )
    )
    runner = HandlerRunner(env.runtime, env.clock)
    pod = mkpod(container)
    # As upstream, any HTTP response (even a 500) is a completed hook.
    assert await runner.run("cid", pod, container, handler, pod_ips=("127.0.0.1",)) is None
    (request,) = seen
    assert request.path == "/hook"
    assert request.headers["X-A"] == "1"
    assert request.headers["User-Agent"].startswith("kube-lifecycle/")


async def test_https_hook_answered_over_http_falls_back(env: Env, http_server: Any) -> None:
    port, seen = http_server
    handler = LifecycleHandler(
        http_get=HTTPGetAction(
            path="/tls", port=port, host="127.0.0.1", scheme="HTTPS",
            http_headers=(HTTPHeader(name="Authorization", value="Bearer x"),
                          HTTPHeader(name="X-B", value="2")),
        )
    )
    runner = HandlerRunner(env.runtime, env.clock)
    assert await runner.run("cid", mkpod(), mkcontainer(), handler) is None
    (request,) = seen
    assert request.path == "/tls" and request.headers["X-B"] == "2"
    assert "Authorization" not in request.headers


async def test_http_hook_failure_message(env: Env, http_server: Any) -> None:
    port, _ = http_server
    await asyncio.sleep(0)
    container = mkcontainer()
    handler = LifecycleHandler(http_get=HTTPGetAction(path="/x", port=1, host="127.0.0.1"))
    message = await HandlerRunner(env.runtime, env.clock).run("cid", mkpod(), container, handler)
    assert message is not None
    assert message.startswith(
        'HTTP lifecycle hook (/x) for Container "app" in Pod "web_ns(u1)" failed - error: '
        'Get "http://127.0.0.1:1/x":'
    )
    no_ip = LifecycleHandler(http_get=HTTPGetAction(path="/x", port=port))
    message = await HandlerRunner(env.runtime, env.clock).run("cid", mkpod(), container, no_ip)
    assert message is not None and "failed to find networking container" in message


async def test_tcp_hook(env: Env, http_server: Any) -> None:
    port, _ = http_server
    runner = HandlerRunner(env.runtime, env.clock)
    ok = LifecycleHandler(tcp_socket=TCPSocketAction(port=port, host="127.0.0.1"))
    assert await runner.run("cid", mkpod(), mkcontainer(), ok) is None
    bad = LifecycleHandler(tcp_socket=TCPSocketAction(port="missing", host="127.0.0.1"))
    message = await runner.run("cid", mkpod(), mkcontainer(), bad)
    assert message is not None and "couldn't find port: missing in app" in message


async def test_sleep_hook_waits_on_the_clock(env: Env) -> None:
    runner = HandlerRunner(env.runtime, env.clock)
    handler = LifecycleHandler(sleep=SleepAction(seconds=5))
    task = asyncio.create_task(runner.run("cid", mkpod(), mkcontainer(), handler))
    await env.clock.run_for(4.9)
    assert not task.done()
    await env.clock.run_for(0.1)
    assert await task is None


async def test_exec_hook_runtime_error(env: Env) -> None:
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod())
    (app,) = await env.containers("app")
    runner = HandlerRunner(env.runtime, env.clock)
    ok = await runner.run(app.id, mkpod(), mkcontainer(), exec_hook("sh", "-c", "echo fine"))
    assert ok is None
    message = await runner.run("nope", mkpod(), mkcontainer(), exec_hook("true"))
    assert message is not None
    assert message.startswith('Exec lifecycle hook ([true]) for Container "app" in Pod')


# ------------------------------------------------- the same syncer, real processes


async def test_syncer_runs_a_pod_on_the_host_process_runtime(tmp_path: Path) -> None:
    """The pod logic is runtime-neutral: a pod with a sidecar runs, is left alone
    while it runs, and is stopped and cleaned up on HostProcessRuntime too."""
    from kubelet_kit.clock import RealClock
    from kubelet_kit.runtimes.host import HostProcessRuntime

    clock = RealClock()
    runtime = HostProcessRuntime(tmp_path / "root", clock=clock, host_ip="127.0.0.1")
    status = StatusManager(clock)
    syncer = RuntimePodSyncer(
        runtime, clock, status_manager=status, pod_logs_dir=str(tmp_path / "logs"),
        resolv_conf=DNSConfig(),
    )
    pod = mkpod(
        mkcontainer(command=("sh", "-c", "echo started; exec sleep 30")),
        inits=(mkcontainer("side", command=("sh", "-c", "exec sleep 30"),
                           restart_policy="Always"),),
    )
    try:
        await syncer.sync_pod(UpdateType.CREATE, pod)
        await syncer.sync_pod(UpdateType.SYNC, pod)  # the sidecar runs: start the app
        await syncer.sync_pod(UpdateType.SYNC, pod)  # nothing left to do
        containers = await runtime.list_containers()
        assert sorted(c.metadata.name for c in containers) == ["app", "side"]
        assert all(c.state is ContainerState.RUNNING for c in containers)
        assert len(await runtime.list_pod_sandboxes()) == 1
        assert status.get_pod_status("u1") is not None
        assert status.get_pod_status("u1").phase == "Running"  # type: ignore[union-attr]
        await syncer.sync_terminating_pod(pod, 5)
        assert all(
            c.state is ContainerState.EXITED for c in await runtime.list_containers()
        )
    finally:
        await syncer.sync_terminated_pod(pod)
    assert await runtime.list_containers() == []
    assert await runtime.list_pod_sandboxes() == []


# ------------------------------------------------------------------------ events


async def test_events_of_a_normal_start_and_stop(env: Env) -> None:
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    await env.syncer.sync_terminating_pod(pod, 30)
    assert env.events() == [
        ("app", "Normal", "Pulled", f'Container image "{IMAGE}" already present on machine'),
        ("app", "Normal", "Created", "Created container: app"),
        ("app", "Normal", "Started", "Started container app"),
        ("app", "Normal", "Killing", "Stopping container app"),
    ]


async def test_events_of_pull_failures_and_crash_loops(env: Env) -> None:
    from kubelet_kit.errors import ImagePullError

    image = "registry.example/missing:1"
    env.runtime.fail_pull(image, ImagePullError("not found"))
    pod = mkpod(mkcontainer(image=image, image_pull_policy="IfNotPresent"))
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert env.events() == [
        ("app", "Normal", "Pulling", f'Pulling image "{image}"'),
        ("app", "Warning", "Failed", f'Failed to pull image "{image}": not found'),
        ("app", "Warning", "Failed", "Error: ErrImagePull"),
        ("app", "Normal", "BackOff", f'Back-off pulling image "{image}"'),
        ("app", "Warning", "Failed", "Error: ImagePullBackOff"),
    ]


async def test_crash_loop_and_hook_events(env: Env) -> None:
    env.runtime.script("app", exit_code=1)
    pod = mkpod()
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    env.clock.advance(1)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    assert env.events()[-1] == (
        "app", "Warning", "BackOff", "Back-off restarting failed container app in pod web_ns(u1)"
    )
    hooked = mkcontainer("hooked", lifecycle=Lifecycle(post_start=exec_hook("false")))
    other = attrs.evolve(mkpod(hooked), metadata=ObjectMeta(name="w2", namespace="ns", uid="u2"))
    await env.syncer.sync_pod(UpdateType.CREATE, other)
    log = env.syncer.events
    assert isinstance(log, EventLog)
    assert [(e.reason, e.message) for e in log.events("u2")][-2:] == [
        ("FailedPostStartHook", "PostStartHook failed"),
        ("Killing", "FailedPostStartHook"),
    ]


# ------------------------------------------------------------ image pull secrets


async def test_pod_with_image_pull_secrets_pulls_with_their_credentials(tmp_path: Path) -> None:
    """The conformance "pull from private registry with secret": the syncer reads
    the pod's imagePullSecrets from its config source and the runtime sees the
    secret's credentials; a pod without secrets pulls anonymously (auth None)."""
    from kubelet_kit.volume.sources import StaticConfigSource

    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("registry.example/private:1")
    runtime.require_auth("registry.example/private:1", "user", "s3cret")
    runtime.add_image(IMAGE)
    source = StaticConfigSource()
    source.set_secret("ns", "regcred", {
        ".dockerconfigjson": '{"auths": {"registry.example": {"auth": "dXNlcjpzM2NyZXQ="}}}',
    })
    syncer = RuntimePodSyncer(
        runtime, clock, status_manager=StatusManager(clock), pod_logs_dir=str(tmp_path),
        resolv_conf=DNSConfig(), config_source=source,
    )
    private = mkpod(
        mkcontainer(image="registry.example/private:1"),
        image_pull_secrets=({"name": "regcred"},),
    )
    await syncer.sync_pod(UpdateType.CREATE, private)
    (pull,) = runtime.calls_to("pull_image")
    assert pull.kwargs["auth"] is not None
    assert (pull.kwargs["auth"].username, pull.kwargs["auth"].password) == ("user", "s3cret")
    assert pull.kwargs["auth"].server_address == "registry.example"
    assert [c.state for c in await runtime.list_containers()] == [ContainerState.RUNNING]

    runtime.clear_calls()
    public = attrs.evolve(mkpod(), metadata=ObjectMeta(name="pub", namespace="ns", uid="u2"))
    await syncer.sync_pod(UpdateType.CREATE, public)
    (pull,) = runtime.calls_to("pull_image")
    assert pull.kwargs["auth"] is None
