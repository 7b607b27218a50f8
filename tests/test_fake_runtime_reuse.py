"""FakeRuntime answers from what it worked out before (statuses, image lookups,
parsed commands) only while that is still the truth: every change shows."""

from __future__ import annotations

import attrs
from _fake_runtime_helpers import container_config, sandbox_config, start

from kubelet_kit.container import (
    ContainerState,
    ImageSpec,
    LinuxContainerResources,
    PodSandboxState,
)
from kubelet_kit.testing import FakeClock, FakeRuntime


async def test_container_status_follows_each_change_and_earlier_ones_stay() -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock)
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, container_config("app", "sleep 60"), sc)
    created = await rt.container_status(cid)
    assert created.state is ContainerState.CREATED
    assert await rt.container_status(cid) == created

    clock.advance(5)
    await rt.start_container(cid)
    running = await rt.container_status(cid)
    assert (running.state, running.started_at) == (ContainerState.RUNNING, clock.now())

    resources = LinuxContainerResources(cpu_shares=512)
    await rt.update_container_resources(cid, resources)
    assert (await rt.container_status(cid)).resources == resources

    clock.advance(5)
    rt.exit_container(cid, 3)
    exited = await rt.container_status(cid)
    assert (exited.state, exited.exit_code, exited.reason, exited.finished_at) == (
        ContainerState.EXITED,
        3,
        "Error",
        clock.now(),
    )
    # What was answered before is a value: later changes do not reach it.
    assert (created.state, running.state, running.resources) == (
        ContainerState.CREATED,
        ContainerState.RUNNING,
        None,
    )


async def test_sandbox_status_follows_a_stop() -> None:
    rt = FakeRuntime(FakeClock())
    sid = await rt.run_pod_sandbox(sandbox_config())
    ready = await rt.pod_sandbox_status(sid)
    await rt.stop_pod_sandbox(sid)
    assert (await rt.pod_sandbox_status(sid)).state is PodSandboxState.NOTREADY
    assert ready.state is PodSandboxState.READY


async def test_an_image_id_names_the_image_taught_after_it_was_first_used() -> None:
    busybox_id = FakeRuntime().add_image("busybox").id
    rt = FakeRuntime(FakeClock())
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    by_id = attrs.evolve(container_config("before"), image=ImageSpec(busybox_id))
    before = await rt.create_container(sid, by_id, sc)
    # Unknown to the registry: the container is named by the id it was given.
    assert (await rt.container_status(before)).image == busybox_id

    rt.add_image("busybox")
    after = await rt.create_container(
        sid, attrs.evolve(by_id, metadata=attrs.evolve(by_id.metadata, name="after")), sc
    )
    status = await rt.container_status(after)
    assert (status.image, status.image_ref) == ("docker.io/library/busybox:latest", busybox_id)


async def test_image_status_lists_only_the_references_pulled() -> None:
    rt = FakeRuntime(FakeClock())
    image = rt.add_image("app:1", aliases=["app:2"])
    await rt.pull_image(ImageSpec("app:2"))
    held = await rt.image_status(ImageSpec("app:2"))
    assert held is not None and held.repo_tags == ("docker.io/library/app:2",)
    assert await rt.image_status(ImageSpec("app:1")) is None

    await rt.pull_image(ImageSpec("app:1"))
    assert await rt.image_status(ImageSpec("app:2")) == image
    assert await rt.image_status(ImageSpec(image.id)) == image
    assert held.repo_tags == ("docker.io/library/app:2",)


async def test_one_command_runs_in_each_container_with_its_own_env() -> None:
    rt = FakeRuntime(FakeClock())
    script = 'echo "$GREETING"; echo done > /tmp/out'
    _, first = await start(rt, script, env={"GREETING": "hello"})
    _, second = await start_in_new_pod(rt, script, env={"GREETING": "bonjour"})
    assert [line.text for line in rt.logs(first)] == ["hello"]
    assert [line.text for line in rt.logs(second)] == ["bonjour"]
    assert rt.files(first)["/tmp/out"] == rt.files(second)["/tmp/out"] == "done\n"


async def start_in_new_pod(rt: FakeRuntime, script: str, env: dict[str, str]) -> tuple[str, str]:
    sc = sandbox_config(name="second", uid="uid-2")
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, container_config("app", script, env=env, uid="uid-2"), sc)
    await rt.start_container(cid)
    return sid, cid
