"""Real disk pressure: a tmpfs filled by a real process ends with that pod evicted.

The test mounts a 16 MiB tmpfs as the node filesystem (root needed), runs two pods
through HostProcessRuntime, one of which writes 12 MiB into its emptyDir on the
tmpfs, and lets the eviction manager with a HostStatsProvider (statvfs of the
tmpfs, ``du`` of the volumes) find ``nodefs.available < 50%`` and evict the
writer: kill_pod is called for it with the kubelet's reason and message, and its
container is stopped through the runtime while the quiet pod keeps running.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from kubelet_kit.api import (
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodSpec,
    Volume,
)
from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    KeyValue,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
)
from kubelet_kit.eviction import (
    DISK_PRESSURE,
    HostStatsProvider,
    ThresholdEvictionManager,
    parse_threshold_config,
)
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing import FakeClock

pytestmark = pytest.mark.integration

MiB = 1024 * 1024


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def tmpfs(tmp_path: Path, require_real: Callable[[bool, str], None]) -> Iterator[Path]:
    require_real(_can_mount(), "root and mount(8) to mount a tmpfs")
    mnt = tmp_path / "nodefs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[HostProcessRuntime]:
    rt = HostProcessRuntime(tmp_path / "runtime", kill_timeout=5)
    try:
        yield rt
    finally:
        for sb in await rt.list_pod_sandboxes():
            await rt.remove_pod_sandbox(sb.id)


def make_pod(name: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PodSpec(
            termination_grace_period_seconds=30,
            volumes=(Volume(name="data", empty_dir=EmptyDirVolumeSource()),),
            containers=(Container(name="writer", image="busybox:1.36"),),
        ),
    )


async def start_pod(rt: HostProcessRuntime, pod: Pod, data_dir: Path, mib: int) -> str:
    """Run the pod's one container: write ``mib`` MiB into its volume, then wait."""
    data_dir.mkdir()
    cfg = PodSandboxConfig(
        metadata=PodSandboxMetadata(name=pod.name, namespace=pod.namespace, uid=pod.uid),
        labels={labels.POD_UID: pod.uid, labels.POD_NAME: pod.name},
    )
    sid = await rt.run_pod_sandbox(cfg)
    script = 'dd if=/dev/zero of="$DATA/blob" bs=1M count="$MIB" 2>/dev/null; exec sleep 1000'
    cid = await rt.create_container(sid, ContainerConfig(
        metadata=ContainerMetadata(name="writer"),
        image=ImageSpec("busybox:1.36"),
        command=("/bin/sh", "-c", script),
        envs=(KeyValue("DATA", str(data_dir)), KeyValue("MIB", str(mib))),
        labels={labels.POD_UID: pod.uid, labels.CONTAINER_NAME: "writer"},
    ), cfg)
    await rt.start_container(cid)
    return cid


async def wait_for_size(path: Path, size: int, timeout: float = 30.0) -> None:
    """Wait (real time: a real process is writing) until ``path`` holds ``size`` bytes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size >= size:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} did not reach {size} bytes")


async def test_filling_a_tmpfs_evicts_the_pod_that_filled_it(
    tmpfs: Path, runtime: HostProcessRuntime
) -> None:
    quiet, filler = make_pod("quiet"), make_pod("filler")
    pods = [quiet, filler]
    dirs = {p.uid: tmpfs / p.name for p in pods}
    quiet_cid = await start_pod(runtime, quiet, dirs[quiet.uid], 1)
    filler_cid = await start_pod(runtime, filler, dirs[filler.uid], 12)
    await wait_for_size(dirs[quiet.uid] / "blob", 1 * MiB)
    await wait_for_size(dirs[filler.uid] / "blob", 12 * MiB)

    stats = HostStatsProvider(
        root_dir=tmpfs,
        runtime=runtime,
        pod_volume_dirs=lambda pod: {"data": str(dirs[pod.uid])},
    )
    clock = FakeClock()
    manager = ThresholdEvictionManager(
        stats=stats,
        runtime=runtime,
        clock=clock,
        thresholds=parse_threshold_config(eviction_hard={"nodefs.available": "50%"}),
    )
    killed: list[tuple[str, float, str, str]] = []

    async def kill_pod(pod: Pod, grace: float, reason: str, message: str) -> None:
        """What the composer does: stop the pod's containers and its sandbox."""
        killed.append((pod.name, grace, reason, message))
        selector = {labels.POD_UID: pod.uid}
        for c in await runtime.list_containers(ContainerFilter(label_selector=selector)):
            await runtime.stop_container(c.id, grace)
        for sb in await runtime.list_pod_sandboxes(PodSandboxFilter(label_selector=selector)):
            await runtime.stop_pod_sandbox(sb.id)
        pods.remove(pod)

    evicted = await manager.synchronize(kill_pod, lambda: list(pods))

    assert evicted is filler
    assert manager.node_conditions() == {DISK_PRESSURE}
    [(name, grace, reason, message)] = killed
    assert (name, grace, reason) == ("filler", 0.0, "Evicted")
    assert message.startswith("The node was low on resource: ephemeral-storage. "
                              "Threshold quantity: 8Mi, available: ")
    assert (await runtime.container_status(filler_cid)).state is ContainerState.EXITED
    assert (await runtime.container_status(quiet_cid)).state is ContainerState.RUNNING
    assert manager.admit(make_pod("newcomer")).reason == "Evicted"

    # Cleaning the evicted pod's volume up (the kubelet's job after a kill) ends
    # the pressure: the next round evicts nobody else.
    shutil.rmtree(dirs[filler.uid])
    clock.advance(10)
    assert await manager.synchronize(kill_pod, lambda: list(pods)) is None
    assert [k[0] for k in killed] == ["filler"]
    assert (await runtime.container_status(quiet_cid)).state is ContainerState.RUNNING
