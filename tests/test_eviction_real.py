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
    EnvVar,
    ObjectMeta,
    Pod,
    PodCondition,
    PodSpec,
    Quantity,
    Volume,
)
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.clock import RealClock
from kubelet_kit.config.programmatic import ProgrammaticSource
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
    ActivePodsFunc,
    HostStatsProvider,
    KillPodFunc,
    ThresholdEvictionManager,
    parse_threshold_config,
)
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import stub_parts

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
    cid = await rt.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name="writer"),
            image=ImageSpec("busybox:1.36"),
            command=("/bin/sh", "-c", script),
            envs=(KeyValue("DATA", str(data_dir)), KeyValue("MIB", str(mib))),
            labels={labels.POD_UID: pod.uid, labels.CONTAINER_NAME: "writer"},
        ),
        cfg,
    )
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

    async def kill_pod(
        pod: Pod,
        grace: float,
        reason: str,
        message: str,
        /,
        *,
        condition: PodCondition | None = None,
    ) -> None:
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
    assert message.startswith(
        "The node was low on resource: ephemeral-storage. Threshold quantity: 8Mi, available: "
    )
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


class VolumeTeardown:
    """Wraps an EvictionManager and plays the volume manager's part after a kill:
    the evicted pod's emptyDir is deleted once its containers stopped (the
    composer's default volume manager is a stub that tears nothing down)."""

    def __init__(self, inner: ThresholdEvictionManager, dirs: dict[str, Path]) -> None:
        self.inner = inner
        self.dirs = dirs

    async def run(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> None:
        async def kill_and_clean(
            pod: Pod,
            grace: float,
            reason: str,
            message: str,
            /,
            *,
            condition: PodCondition | None = None,
        ) -> None:
            await kill_pod(pod, grace, reason, message, condition=condition)
            shutil.rmtree(self.dirs[pod.uid], ignore_errors=True)

        await self.inner.run(kill_and_clean, active_pods)

    async def stop(self) -> None:
        await self.inner.stop()

    def admit(self, pod: Pod) -> AdmitResult:
        return self.inner.admit(pod)

    def node_conditions(self) -> frozenset[str]:
        return self.inner.node_conditions()


def writer_pod(name: str, data_dir: Path, mib: int, size_limit: str | None = None) -> Pod:
    script = 'dd if=/dev/zero of="$DATA/blob" bs=1M count="$MIB" 2>/dev/null; exec sleep 1000'
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PodSpec(
            termination_grace_period_seconds=30,
            volumes=(
                Volume(
                    name="data",
                    empty_dir=EmptyDirVolumeSource(
                        size_limit=Quantity.parse(size_limit) if size_limit else None
                    ),
                ),
            ),
            containers=(
                Container(
                    name="writer",
                    image="busybox:1.36",
                    command=("/bin/sh", "-c", script),
                    env=(
                        EnvVar(name="DATA", value=str(data_dir)),
                        EnvVar(name="MIB", value=str(mib)),
                    ),
                ),
            ),
        ),
    )


async def test_through_the_composer_the_filler_ends_failed_evicted(
    tmpfs: Path, tmp_path: Path
) -> None:
    dirs = {f"uid-{n}": tmpfs / n for n in ("quiet", "filler")}
    for d in dirs.values():
        d.mkdir()
    quiet = writer_pod("quiet", dirs["uid-quiet"], 1)
    filler = writer_pod("filler", dirs["uid-filler"], 12)
    runtime = HostProcessRuntime(tmp_path / "runtime", kill_timeout=5)
    manager = ThresholdEvictionManager(
        stats=HostStatsProvider(
            root_dir=tmpfs,
            runtime=runtime,
            pod_volume_dirs=lambda pod: {"data": str(dirs[pod.uid])},
        ),
        runtime=runtime,
        clock=RealClock(),
        monitoring_interval=0.2,  # the real clock: keep the test short
        thresholds=parse_threshold_config(eviction_hard={"nodefs.available": "50%"}),
    )
    source = ProgrammaticSource()
    kubelet = Kubelet(
        **stub_parts(
            runtime=runtime,
            sources=[source],
            eviction_manager=VolumeTeardown(manager, dirs),
            root_dir=tmp_path / "agent",
            pod_logs_dir=tmp_path / "logs",
            node_name="eviction-test",
        )
    )
    try:
        async with kubelet:
            source.set_pods([quiet, filler])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                status = kubelet.pod_status(filler.uid)
                if status is not None and status.phase == "Failed":
                    break
                await asyncio.sleep(0.1)
            status = kubelet.pod_status(filler.uid)
            assert status is not None
            assert (status.phase, status.reason) == ("Failed", "Evicted")
            assert status.message.startswith("The node was low on resource: ephemeral-storage.")
            await asyncio.sleep(1)  # a few more rounds: pressure is gone, quiet stays
            quiet_status = kubelet.pod_status(quiet.uid)
            assert quiet_status is not None and quiet_status.phase == "Running"
            assert manager.metrics.evictions.get("nodefs.available") == 1
            running = await runtime.list_containers(ContainerFilter(state=ContainerState.RUNNING))
            assert [c.labels[labels.POD_UID] for c in running] == [quiet.uid]
    finally:
        for sb in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(sb.id)


async def test_an_empty_dir_written_past_its_size_limit_gets_its_pod_evicted(
    tmp_path: Path,
) -> None:
    # No node threshold and no tmpfs: the limit is the pod's own, measured with du.
    dirs = {f"uid-{n}": tmp_path / "volumes" / n for n in ("small", "big")}
    for d in dirs.values():
        d.mkdir(parents=True)
    small = writer_pod("small", dirs["uid-small"], 1, size_limit="4Mi")
    big = writer_pod("big", dirs["uid-big"], 6, size_limit="4Mi")
    runtime = HostProcessRuntime(tmp_path / "runtime", kill_timeout=5)
    manager = ThresholdEvictionManager(
        stats=HostStatsProvider(
            root_dir=tmp_path,
            runtime=runtime,
            pod_volume_dirs=lambda pod: {"data": str(dirs[pod.uid])},
        ),
        runtime=runtime,
        clock=RealClock(),
        monitoring_interval=0.2,
        thresholds=(),
    )
    source = ProgrammaticSource()
    kubelet = Kubelet(
        **stub_parts(
            runtime=runtime,
            sources=[source],
            eviction_manager=manager,
            root_dir=tmp_path / "agent",
            pod_logs_dir=tmp_path / "logs",
            node_name="local-storage-test",
        )
    )
    try:
        async with kubelet:
            source.set_pods([small, big])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                status = kubelet.pod_status(big.uid)
                if status is not None and status.phase == "Failed":
                    break
                await asyncio.sleep(0.1)
            status = kubelet.pod_status(big.uid)
            assert status is not None
            assert (status.phase, status.reason, status.message) == (
                "Failed",
                "Evicted",
                'Usage of EmptyDir volume "data" exceeds the limit "4Mi". ',
            )
            await asyncio.sleep(1)  # more rounds: the small pod is within its limit
            small_status = kubelet.pod_status(small.uid)
            assert small_status is not None and small_status.phase == "Running"
            assert manager.metrics.evictions.get("emptydirfs.limit") == 1
            running = await runtime.list_containers(ContainerFilter(state=ContainerState.RUNNING))
            assert [c.labels[labels.POD_UID] for c in running] == [small.uid]
    finally:
        for sb in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(sb.id)
