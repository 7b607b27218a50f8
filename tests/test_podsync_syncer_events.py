"""The events RuntimePodSyncer records: a normal start and stop, image pull
failures, crash loops and a failed postStart hook."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from _podsync_syncer_helpers import IMAGE, Env, exec_hook, make_env, mkcontainer, mkpod

from kubelet_kit.api import Lifecycle, ObjectMeta
from kubelet_kit.node.podworkers import UpdateType
from kubelet_kit.podsync.syncer import EventLog


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield make_env(tmp_path)


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
        "app",
        "Warning",
        "BackOff",
        "Back-off restarting failed container app in pod web_ns(u1)",
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
