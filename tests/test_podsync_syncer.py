"""RuntimePodSyncer scenarios on FakeRuntime + FakeClock: the first sync, restart
policies, init containers and sidecars, the active deadline and deletion, and the
same syncer on the host process runtime.

Timelines are driven through PodWorkers with a 1 s resync, which stands in for
the PLEG noticing container exits. No test sleeps on real time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from _podsync_syncer_helpers import Env, make_env, mkcontainer, mkpod, shutdown

from kubelet_kit.api import ObjectMeta, PodStatus
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import ContainerState, DNSConfig
from kubelet_kit.errors import PodSyncError
from kubelet_kit.node.podworkers import UpdateType, WorkerPhase
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.podsync import configs
from kubelet_kit.podsync.syncer import RuntimePodSyncer
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult, ProbeUpdate
from kubelet_kit.status import StatusManager


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield make_env(tmp_path)


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
        env.runtime,
        env.clock,
        status_manager=StatusManager(env.clock),
        pod_logs_dir=str(blocked),
        resolv_conf=DNSConfig(),
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


async def test_a_container_the_runtime_forgot_continues_its_logs(env: Env, tmp_path: Path) -> None:
    # Logs left by earlier instances (the runtime lost them, a node reboot): the
    # new instance's restart count follows them, so its log overwrites none.
    pod = mkpod()
    log_dir = Path(configs.pod_log_directory(str(tmp_path), pod)) / "app"
    log_dir.mkdir(parents=True)
    (log_dir / "0.log").write_text("")
    (log_dir / "1.log").write_text("")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (app,) = await env.containers("app")
    assert app.metadata.attempt == 2
    # A new pod's directory is made with its first container, which starts at 0.
    other = attrs.evolve(pod, metadata=ObjectMeta(name="w2", namespace="ns", uid="u2"))
    await env.syncer.sync_pod(UpdateType.CREATE, other)
    assert sorted(c.metadata.attempt for c in await env.containers("app")) == [0, 2]


async def test_fresh_status_is_written_to_the_pod_cache(env: Env, tmp_path: Path) -> None:
    cache = PodCache()
    syncer = RuntimePodSyncer(
        env.runtime,
        env.clock,
        status_manager=env.status,
        pod_cache=cache,
        pod_logs_dir=str(tmp_path),
        resolv_conf=DNSConfig(),
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


async def test_probe_results_are_each_pods_own(env: Env) -> None:
    pod = mkpod()
    other = attrs.evolve(pod, metadata=ObjectMeta(name="w2", namespace="ns", uid="u2"))
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    await env.syncer.sync_pod(UpdateType.CREATE, other)
    mine = [c for c in await env.containers("app") if c.labels[kl.POD_UID] == "u1"]
    env.syncer.record_probe_result(
        ProbeUpdate("u1", "app", mine[0].id, ProbeKind.LIVENESS, ProbeResult.FAILURE)
    )
    # The other pod's sync and its end leave this pod's failure in place...
    await env.syncer.sync_pod(UpdateType.SYNC, other)
    env.syncer.forget_pod(other)
    await env.syncer.sync_pod(UpdateType.SYNC, pod)
    # ...so this pod's container is restarted, and the other's is not.
    by_pod = [c.labels[kl.POD_UID] for c in await env.containers("app")]
    assert sorted(by_pod) == ["u1", "u1", "u2"]


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
    assert (env.starts("i1"), env.starts("i2"), env.starts("app")) == ([0, 11], [3, 14], [6, 17])
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
    status = env.pod_status()
    assert (status.phase, status.reason, status.start_time) == ("Failed", "DeadlineExceeded", start)


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
        runtime,
        clock,
        status_manager=status,
        pod_logs_dir=str(tmp_path / "logs"),
        resolv_conf=DNSConfig(),
    )
    pod = mkpod(
        mkcontainer(command=("sh", "-c", "echo started; exec sleep 30")),
        inits=(
            mkcontainer("side", command=("sh", "-c", "exec sleep 30"), restart_policy="Always"),
        ),
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
        assert all(c.state is ContainerState.EXITED for c in await runtime.list_containers())
    finally:
        await syncer.sync_terminated_pod(pod)
    assert await runtime.list_containers() == []
    assert await runtime.list_pod_sandboxes() == []
