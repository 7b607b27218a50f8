"""RuntimePodSyncer when containers cannot run: the crash-loop back-off, image
pull back-off and image errors, create and run errors, volumes that do not mount,
and image pull secrets.

Timelines are driven through PodWorkers with a 1 s resync, which stands in for
the PLEG noticing container exits; back-off expiries resync through
``SyncResult.requeue_after``. No test sleeps on real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from _podsync_syncer_helpers import IMAGE, Env, make_env, mkcontainer, mkpod, shutdown

from kubelet_kit.api import Container, ObjectMeta, Pod
from kubelet_kit.container.interfaces import ContainerState, DNSConfig
from kubelet_kit.errors import ContainerStartError, PodSyncError
from kubelet_kit.node.podworkers import UpdateType
from kubelet_kit.podsync import configs
from kubelet_kit.podsync.backoff import stable_key
from kubelet_kit.podsync.syncer import RuntimePodSyncer
from kubelet_kit.status import StatusManager
from kubelet_kit.testing import FakeClock, FakeRuntime


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield make_env(tmp_path)


# ------------------------------------------------------------ crash-loop back-off


async def test_crash_loop_backoff_timeline(env: Env) -> None:
    env.runtime.script("app", exit_code=1)
    env.start_workers(mkpod())
    await env.run_until(5)
    assert env.waiting() == (
        "CrashLoopBackOff",
        "back-off 10s restarting failed container=app pod=web_ns(u1)",
    )
    await env.run_until(100)
    assert env.waiting() == (
        "CrashLoopBackOff",
        "back-off 1m20s restarting failed container=app pod=web_ns(u1)",
    )
    await env.run_until(920)
    starts = env.starts("app")
    # Restarted at once after the first exit, then after 10, 20, 40, ... capped at 300 s.
    assert starts == [0, 1, 11, 31, 71, 151, 311, 611, 911]
    assert env.waiting() == (
        "CrashLoopBackOff",
        "back-off 5m0s restarting failed container=app pod=web_ns(u1)",
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
        def container_mounts(
            self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
        ) -> list[Any]:
            return []

    syncer = RuntimePodSyncer(
        env.runtime,
        env.clock,
        status_manager=env.status,
        volume_manager=SlowVolumes(),
        pod_logs_dir=str(tmp_path),
        resolv_conf=DNSConfig(),
    )
    with pytest.raises(PodSyncError) as info:
        await syncer.sync_pod(UpdateType.CREATE, mkpod())
    assert info.value.reason == "FailedMount"
    assert "unmounted volumes=[data]" in info.value.message
    assert await env.containers() == [] and env.pod_status().phase == "Pending"


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
    source.set_secret(
        "ns",
        "regcred",
        {
            ".dockerconfigjson": '{"auths": {"registry.example": {"auth": "dXNlcjpzM2NyZXQ="}}}',
        },
    )
    syncer = RuntimePodSyncer(
        runtime,
        clock,
        status_manager=StatusManager(clock),
        pod_logs_dir=str(tmp_path),
        resolv_conf=DNSConfig(),
        config_source=source,
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
