"""CRIRuntime against a real containerd (root, containerd, runc, busybox)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from kubelet_kit.container import (
    ContainerFilter,
    ContainerState,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    PodSandboxFilter,
    PodSandboxState,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.cri.remote import CRIRuntime
from kubelet_kit.errors import (
    DeadlineExceededError,
    ImagePullError,
    NotFoundError,
    RuntimeUnavailableError,
    UnimplementedError,
)

from .containerd import (
    BUSYBOX_IMAGE,
    PAUSE_IMAGE,
    REGISTRY_HOST,
    REGISTRY_ONLY_IMAGE,
    Containerd,
)
from .helpers import container_config, pod_config

pytestmark = pytest.mark.integration

T = TypeVar("T")

# The CRI log format: <RFC3339Nano> <stream> <P|F> <text>
LOG_LINE = re.compile(r"^(\S+) (stdout|stderr) ([PF]) (.*)$")


async def eventually(probe: Callable[[], Awaitable[T | None]], within: float = 15.0) -> T:
    """Poll ``probe`` on real time until it returns a value (real runtime, real time)."""
    deadline = time.monotonic() + within
    while True:
        got = await probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.1)


async def test_version_and_status(cri: CRIRuntime) -> None:
    version = await cri.version()
    assert version.runtime_name == "containerd"
    assert version.runtime_api_version == "v1"
    status = await cri.status()
    runtime_ready = status.condition("RuntimeReady")
    assert runtime_ready is not None and runtime_ready.status
    # The harness installs a loopback-only CNI network, enough for NetworkReady.
    network_ready = status.condition("NetworkReady")
    assert network_ready is not None and network_ready.status
    assert cri.ready


async def test_images_imported_from_the_oci_tar_are_listed(cri: CRIRuntime) -> None:
    tags = {tag for image in await cri.list_images() for tag in image.repo_tags}
    assert {PAUSE_IMAGE, BUSYBOX_IMAGE} <= tags
    image = await cri.image_status(ImageSpec(BUSYBOX_IMAGE))
    assert image is not None and image.id.startswith("sha256:") and image.size > 0
    assert await cri.image_status(ImageSpec("kubelet-kit.test/absent:1")) is None


async def test_image_filesystem_is_under_containerds_root(
    cri: CRIRuntime, containerd: Containerd
) -> None:
    (fs,) = await cri.image_fs_info()
    # The snapshotter's directory under containerd's root. (containerd measures its
    # usage in the background, so the bytes may still read 0 just after start.)
    assert fs.mountpoint.startswith(f"{containerd.root}/io.containerd.snapshotter.")
    assert fs.used_bytes is not None and fs.used_bytes >= 0
    assert fs.timestamp > 0


async def test_unknown_image_fails_as_image_pull_error(cri: CRIRuntime) -> None:
    ref = "kubelet-kit.test/nothing-here:1"
    with pytest.raises(ImagePullError, match=re.escape(f"PullImage {ref}")):
        await cri.pull_image(ImageSpec(ref))


async def test_events_are_unimplemented_on_containerd_1_6(cri: CRIRuntime) -> None:
    events = cri.get_container_events()
    with pytest.raises(UnimplementedError):
        await anext(aiter(events))


async def test_sandbox_lifecycle(cri: CRIRuntime, containerd: Containerd) -> None:
    config = pod_config(containerd.logs)
    sandbox_id = await cri.run_pod_sandbox(config)

    status = await cri.pod_sandbox_status(sandbox_id)
    assert status.state is PodSandboxState.READY
    assert status.metadata == config.metadata
    assert status.labels[kl.POD_UID] == config.metadata.uid
    assert status.namespace_options.host_network
    assert abs(status.created_at - time.time()) < 60

    by_label = await cri.list_pod_sandboxes(
        PodSandboxFilter(label_selector={kl.POD_UID: config.metadata.uid})
    )
    assert [s.id for s in by_label] == [sandbox_id]
    ready = await cri.list_pod_sandboxes(PodSandboxFilter(state=PodSandboxState.READY))
    assert sandbox_id in {s.id for s in ready}

    await cri.stop_pod_sandbox(sandbox_id)
    await cri.stop_pod_sandbox(sandbox_id)  # idempotent
    assert (await cri.pod_sandbox_status(sandbox_id)).state is PodSandboxState.NOTREADY

    await cri.remove_pod_sandbox(sandbox_id)
    await cri.remove_pod_sandbox(sandbox_id)  # idempotent
    with pytest.raises(NotFoundError, match=sandbox_id):
        await cri.pod_sandbox_status(sandbox_id)
    assert sandbox_id not in {s.id for s in await cri.list_pod_sandboxes()}


async def test_log_rotation_through_reopen_container_log(
    cri: CRIRuntime, containerd: Containerd
) -> None:
    from kubelet_kit.podsync.logrotate import ContainerLogManager

    pod = pod_config(containerd.logs)
    sandbox_id = await cri.run_pod_sandbox(pod)
    try:
        cfg = container_config(
            pod,
            "talker",
            ("sh", "-c", "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.02; done"),
        )
        cid = await cri.create_container(sandbox_id, cfg, pod)
        await cri.start_container(cid)
        path = Path(pod.log_directory) / "talker" / "0.log"

        async def size() -> int | None:
            return path.stat().st_size if path.exists() and path.stat().st_size > 300 else None

        await eventually(size)
        manager = ContainerLogManager(cri, max_size=300)
        assert await manager.rotate_logs() == [cid]

        async def refilled() -> bool | None:
            return True if path.exists() and "line-" in path.read_text() else None

        await eventually(refilled)
        await cri.stop_container(cid, 0)
        (rotated,) = [p for p in path.parent.iterdir() if p.name != "0.log"]
        lines = [
            line.split(" ", 3)[3] for p in (rotated, path) for line in p.read_text().splitlines()
        ]
        numbers = [int(text.removeprefix("line-")) for text in lines]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # none lost
    finally:
        await cri.stop_pod_sandbox(sandbox_id)
        await cri.remove_pod_sandbox(sandbox_id)


async def test_two_container_pod(cri: CRIRuntime, containerd: Containerd) -> None:
    pod = pod_config(containerd.logs, cgroup_parent=containerd.cgroup_parent)
    sandbox_id = await cri.run_pod_sandbox(pod)
    app_cfg = container_config(
        pod,
        "app",
        ("sh", "-c", "echo hello; echo oops >&2; exec sleep 3600"),
        envs=(KeyValue("GREETING", "hi there"),),
    )
    job_cfg = container_config(pod, "job", ("sh", "-c", "echo done; exit 3"))
    app = await cri.create_container(sandbox_id, app_cfg, pod)
    job = await cri.create_container(sandbox_id, job_cfg, pod)
    assert (await cri.container_status(app)).state is ContainerState.CREATED
    await cri.start_container(app)
    await cri.start_container(job)

    async def job_exited() -> int | None:
        s = await cri.container_status(job)
        return s.exit_code if s.state is ContainerState.EXITED else None

    assert await eventually(job_exited) == 3
    job_status = await cri.container_status(job)
    assert job_status.reason == "Error"
    # Both set; containerd may stamp a very short container's exit a little before
    # the start time it records after Start returns, so their order is not checked.
    assert job_status.started_at > 0 and job_status.finished_at > 0
    app_status = await cri.container_status(app)
    assert app_status.state is ContainerState.RUNNING
    assert app_status.labels[kl.CONTAINER_NAME] == "app"
    assert app_status.log_path == str(Path(pod.log_directory) / "app" / "0.log")

    # Both containers are listed in the sandbox; the filter on state works.
    listed = await cri.list_containers(ContainerFilter(pod_sandbox_id=sandbox_id))
    assert {c.id for c in listed} == {app, job}
    running = await cri.list_containers(
        ContainerFilter(pod_sandbox_id=sandbox_id, state=ContainerState.RUNNING)
    )
    assert [c.id for c in running] == [app]

    # The log file holds CRI-format lines, both streams.
    async def log_lines() -> list[tuple[str, str, str]] | None:
        path = Path(app_status.log_path)
        lines = path.read_text().splitlines() if path.exists() else []
        parsed = [m.groups()[1:] for m in map(LOG_LINE.match, lines) if m]
        return parsed if len(parsed) >= 2 else None

    lines = await eventually(log_lines)
    assert ("stdout", "F", "hello") in lines
    assert ("stderr", "F", "oops") in lines

    # Exec sees the container's environment and reports exit codes.
    result = await cri.exec_sync(app, ["sh", "-c", 'echo "$GREETING"'], timeout=10)
    assert (result.exit_code, result.stdout) == (0, b"hi there\n")
    result = await cri.exec_sync(app, ["sh", "-c", "echo err >&2; exit 7"], timeout=10)
    assert (result.exit_code, result.stderr) == (7, b"err\n")
    with pytest.raises(DeadlineExceededError, match="timed out"):
        await cri.exec_sync(app, ["sleep", "30"], timeout=1)

    stats = await cri.container_stats(app)
    assert stats.container_id == app
    assert stats.memory_working_set_bytes is not None
    all_stats = await cri.list_container_stats(ContainerFilter(pod_sandbox_id=sandbox_id))
    assert app in {s.container_id for s in all_stats}
    pod_stats = await cri.pod_sandbox_stats(sandbox_id)
    assert pod_stats.pod_sandbox_id == sandbox_id
    assert pod_stats.memory_working_set_bytes is not None

    await cri.update_container_resources(app, LinuxContainerResources(cpu_shares=512))

    await cri.stop_container(app, timeout=1)
    await cri.stop_container(app, timeout=1)  # idempotent
    stopped = await cri.container_status(app)
    assert stopped.state is ContainerState.EXITED

    await cri.stop_pod_sandbox(sandbox_id)
    await cri.remove_pod_sandbox(sandbox_id)
    assert await cri.list_containers(ContainerFilter(pod_sandbox_id=sandbox_id)) == []
    for cid in (app, job):
        with pytest.raises(NotFoundError):
            await cri.container_status(cid)


async def test_a_new_client_adopts_the_pod_by_its_labels(containerd: Containerd) -> None:
    pod = pod_config(containerd.logs)
    annotations = {kl.CONTAINER_HASH: "1a2b3c", kl.CONTAINER_RESTART_COUNT: "0"}
    async with CRIRuntime(containerd.endpoint) as first:
        sandbox_id = await first.run_pod_sandbox(pod)
        cid = await first.create_container(
            sandbox_id,
            container_config(pod, "app", ("sleep", "3600"), annotations=annotations),
            pod,
        )
        await first.start_container(cid)

    async with CRIRuntime(containerd.endpoint) as second:
        selector = {kl.POD_UID: pod.metadata.uid}
        sandboxes = await second.list_pod_sandboxes(PodSandboxFilter(label_selector=selector))
        assert [s.id for s in sandboxes] == [sandbox_id]
        assert sandboxes[0].metadata == pod.metadata
        containers = await second.list_containers(ContainerFilter(label_selector=selector))
        assert [c.id for c in containers] == [cid]
        assert containers[0].labels[kl.CONTAINER_NAME] == "app"
        assert containers[0].annotations == annotations
        assert containers[0].pod_sandbox_id == sandbox_id
        await second.stop_pod_sandbox(sandbox_id)
        await second.remove_pod_sandbox(sandbox_id)


async def test_containerd_restart_mid_run(containerd: Containerd) -> None:
    pod = pod_config(containerd.logs)
    async with CRIRuntime(containerd.endpoint, retries=2, backoff_initial=0.05) as rt:
        sandbox_id = await rt.run_pod_sandbox(pod)
        cid = await rt.create_container(
            sandbox_id, container_config(pod, "app", ("sleep", "3600")), pod
        )
        await rt.start_container(cid)
        assert rt.ready

        containerd.kill()
        with pytest.raises(RuntimeUnavailableError, match="ListPodSandbox"):
            await rt.list_pod_sandboxes()
        assert not rt.ready
        with pytest.raises(RuntimeUnavailableError):
            await rt.container_status(cid)

        containerd.start()

        async def listed() -> list[str] | None:
            try:
                return [
                    s.id
                    for s in await rt.list_pod_sandboxes(
                        PodSandboxFilter(label_selector={kl.POD_UID: pod.metadata.uid})
                    )
                ]
            except RuntimeUnavailableError:
                return None

        assert await eventually(listed, within=30) == [sandbox_id]
        assert rt.ready
        # The container kept running under its shim while containerd was down.
        assert (await rt.container_status(cid)).state is ContainerState.RUNNING
        containers = await rt.list_containers(ContainerFilter(pod_sandbox_id=sandbox_id))
        assert [c.id for c in containers] == [cid]
        await rt.stop_pod_sandbox(sandbox_id)
        await rt.remove_pod_sandbox(sandbox_id)


async def test_real_pull_from_the_registry(containerd: Containerd) -> None:
    async with CRIRuntime(containerd.endpoint) as rt:
        ref = await rt.pull_image(ImageSpec(REGISTRY_ONLY_IMAGE))
        assert ref.startswith("sha256:")
        image = await rt.image_status(ImageSpec(REGISTRY_ONLY_IMAGE))
        assert image is not None and image.id == ref
        assert REGISTRY_ONLY_IMAGE in image.repo_tags
        # The blobs are shared with the imported busybox; the manifest came from the
        # registry.
        asked = containerd.registry.requests
        assert any(" /v2/registry-only/manifests/" in r for r in asked)
        await rt.remove_image(ImageSpec(REGISTRY_ONLY_IMAGE))
        await rt.remove_image(ImageSpec(REGISTRY_ONLY_IMAGE))  # idempotent
        assert await rt.image_status(ImageSpec(REGISTRY_ONLY_IMAGE)) is None


async def test_missing_tag_in_the_registry_is_an_image_pull_error(containerd: Containerd) -> None:
    # The mirror answers 404; containerd 1.6 then falls back to the registry's own
    # host, which does not resolve here, and reports that (UNKNOWN): ErrImagePull.
    async with CRIRuntime(containerd.endpoint) as rt:
        with pytest.raises(ImagePullError, match="no-such-tag"):
            await rt.pull_image(ImageSpec(f"{REGISTRY_HOST}/busybox:no-such-tag"))
    assert any("/v2/busybox/manifests/no-such-tag" in r for r in containerd.registry.requests)
