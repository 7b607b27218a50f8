"""HostStatsProvider's readings and FakeStatsProvider's behaviour.

The cgroup and procfs readers run against small fake trees written by the
tests (the files and formats of cgroup v1 and v2 and of /proc); the
filesystem readers run on this machine's real filesystems. The package's
``__all__`` is kept honest here too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kubelet_kit.eviction as eviction
from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec
from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.eviction import (
    HostStatsProvider,
    MemoryStats,
    StatsProvider,
    make_observations,
)
from kubelet_kit.eviction.host_stats import (
    cgroup_memory_working_set,
    directory_usage,
    fs_stats,
    read_meminfo,
)
from kubelet_kit.eviction.thresholds import (
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    PID_AVAILABLE,
)
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.fake_stats import FakeStatsProvider

MEMINFO = """MemTotal:        8000000 kB
MemFree:          100000 kB
MemAvailable:    6000000 kB
Buffers:           10000 kB
HugePages_Total:       0
"""


def fake_proc(
    root: Path, *, pid_max: int = 32768, threads_max: int = 60000, entities: int = 321
) -> Path:
    (root / "sys/kernel").mkdir(parents=True)
    (root / "meminfo").write_text(MEMINFO)
    (root / "sys/kernel/pid_max").write_text(f"{pid_max}\n")
    (root / "sys/kernel/threads-max").write_text(f"{threads_max}\n")
    (root / "loadavg").write_text(f"0.10 0.20 0.30 2/{entities} 12345\n")
    return root


def fake_v1_memory(d: Path, usage: int, inactive: int, limit: int = 9223372036854771712) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (d / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (d / "memory.stat").write_text(
        f"cache 5\nrss 7\ninactive_file 3\ntotal_inactive_file {inactive}\n"
    )
    return d


def pod(name: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}"),
        spec=PodSpec(containers=(Container(name="c", image="busybox:1.36"),)),
    )


def test_meminfo_of_a_fake_proc(tmp_path: Path) -> None:
    info = read_meminfo(fake_proc(tmp_path / "proc") / "meminfo")
    assert info["MemTotal"] == 8_000_000 * 1024
    assert info["MemAvailable"] == 6_000_000 * 1024
    assert info["HugePages_Total"] == 0


def test_cgroup_v1_and_v2_working_set(tmp_path: Path) -> None:
    v1 = fake_v1_memory(tmp_path / "v1", usage=1000, inactive=300, limit=5000)
    assert cgroup_memory_working_set(v1) == (700, 5000)
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.current").write_text("2000\n")
    (v2 / "memory.max").write_text("max\n")
    (v2 / "memory.stat").write_text("anon 1\ninactive_file 500\nactive_file 9\n")
    assert cgroup_memory_working_set(v2) == (1500, 1 << 62)
    assert cgroup_memory_working_set(tmp_path / "nothing") is None
    fake_v1_memory(tmp_path / "neg", usage=100, inactive=300)
    assert cgroup_memory_working_set(tmp_path / "neg") == (0, 9223372036854771712)


async def test_node_memory_is_capacity_minus_root_cgroup_working_set(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    root = fake_v1_memory(tmp_path / "memory", usage=3 << 30, inactive=1 << 30)
    provider = HostStatsProvider(
        root_dir=tmp_path, memory_cgroup_root=root, proc=proc, clock=FakeClock()
    )
    summary = await provider.summary([])
    total = 8_000_000 * 1024
    assert summary.memory == MemoryStats(
        available_bytes=total - (2 << 30), working_set_bytes=2 << 30
    )
    obs = make_observations(summary)[MEMORY_AVAILABLE]
    assert (obs.available, obs.capacity) == (total - (2 << 30), total)
    assert summary.time == FakeClock().now()


async def test_without_a_root_cgroup_the_kernel_estimate_is_used(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    provider = HostStatsProvider(root_dir=tmp_path, memory_cgroup_root=tmp_path / "none", proc=proc)
    summary = await provider.summary([])
    assert summary.memory == MemoryStats(
        available_bytes=6_000_000 * 1024, working_set_bytes=2_000_000 * 1024
    )


async def test_pids_are_the_smaller_limit_minus_scheduling_entities(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", pid_max=4_194_304, threads_max=60_000, entities=321)
    provider = HostStatsProvider(root_dir=tmp_path, memory_cgroup_root=tmp_path, proc=proc)
    obs = make_observations(await provider.summary([]))[PID_AVAILABLE]
    assert (obs.available, obs.capacity) == (60_000 - 321, 60_000)


async def test_pods_cgroup_gives_allocatable_memory(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    kubepods = fake_v1_memory(tmp_path / "kubepods", usage=900, inactive=100, limit=4000)
    provider = HostStatsProvider(
        root_dir=tmp_path, memory_cgroup_root=tmp_path / "none", proc=proc, pods_cgroup=kubepods
    )
    summary = await provider.summary([])
    assert summary.allocatable_memory == MemoryStats(available_bytes=3200, working_set_bytes=800)


async def test_a_pod_is_measured_from_its_cgroup_and_volumes(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    cg = fake_v1_memory(tmp_path / "pod-a", usage=5000, inactive=1000)
    (cg / "cgroup.procs").write_text("1\n2\n3\n")
    vol = tmp_path / "vol"
    (vol / "sub").mkdir(parents=True)
    (vol / "sub" / "f").write_bytes(b"x" * 10000)
    a, b = pod("a"), pod("b")
    provider = HostStatsProvider(
        root_dir=tmp_path,
        memory_cgroup_root=tmp_path / "none",
        proc=proc,
        pod_cgroup=lambda p: str(cg) if p is a else None,
        pod_volume_dirs=lambda p: {"data": str(vol)} if p is a else {},
    )
    summary = await provider.summary([a, b])
    [usage] = summary.pods  # b has nothing measurable: left out
    assert usage.uid == a.uid
    assert usage.memory_working_set_bytes == 4000
    assert usage.process_count == 3
    assert usage.volumes["data"].inodes_used == 2
    assert usage.volumes["data"].used_bytes >= 10000


async def test_without_a_cgroup_the_runtime_sandbox_stats_are_used(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock, images=["busybox:1.36"])
    a = pod("a")
    cfg = PodSandboxConfig(
        metadata=PodSandboxMetadata(name="a", namespace="default", uid=a.uid),
        labels={labels.POD_UID: a.uid},
    )
    sid = await rt.run_pod_sandbox(cfg)
    cid = await rt.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name="c"),
            image=ImageSpec("busybox:1.36"),
            command=("sleep", "1000"),
            labels={labels.POD_UID: a.uid},
        ),
        cfg,
    )
    await rt.start_container(cid)
    rt.set_stats(
        cid, memory_working_set=123 << 20, writable_layer_bytes=7 << 20, writable_layer_inodes=11
    )
    provider = HostStatsProvider(
        root_dir=tmp_path,
        memory_cgroup_root=tmp_path / "none",
        proc=fake_proc(tmp_path / "proc"),
        runtime=rt,
    )
    [usage] = (await provider.summary([a])).pods
    assert usage.memory_working_set_bytes == 123 << 20
    [c] = usage.containers
    assert (c.name, c.memory_working_set_bytes, c.rootfs_used_bytes, c.rootfs_inodes_used) == (
        "c",
        123 << 20,
        7 << 20,
        11,
    )


async def test_filesystems_are_read_with_statvfs(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    fs = fs_stats(tmp_path)
    assert fs.capacity_bytes == st.f_blocks * st.f_frsize
    assert fs.inodes == st.f_files
    provider = HostStatsProvider(
        root_dir=tmp_path,
        image_dir=tmp_path,
        memory_cgroup_root=tmp_path / "none",
        proc=fake_proc(tmp_path / "proc"),
    )
    summary = await provider.summary([])
    assert summary.dedicated_image_fs is False
    assert NODEFS_AVAILABLE in make_observations(summary)
    # /proc is its own filesystem: as an image dir it counts as dedicated
    other = HostStatsProvider(
        root_dir=tmp_path,
        image_dir="/proc",
        memory_cgroup_root=tmp_path / "none",
        proc=fake_proc(tmp_path / "proc2"),
    )
    assert (await other.summary([])).dedicated_image_fs is True


async def test_the_real_machine_can_be_measured(tmp_path: Path) -> None:
    summary = await HostStatsProvider(root_dir=tmp_path).summary([])
    obs = make_observations(summary)
    assert {MEMORY_AVAILABLE, NODEFS_AVAILABLE, PID_AVAILABLE} <= set(obs)
    mem = obs[MEMORY_AVAILABLE]
    assert 0 < mem.available <= mem.capacity
    assert 0 < obs[PID_AVAILABLE].available < obs[PID_AVAILABLE].capacity


def test_directory_usage_skips_what_it_cannot_read(tmp_path: Path) -> None:
    assert directory_usage(tmp_path / "missing").used_bytes == 0
    (tmp_path / "link").symlink_to("/usr")  # not followed
    assert directory_usage(tmp_path).inodes_used == 1


# -- FakeStatsProvider ------------------------------------------------------------------


async def test_fake_stats_provider() -> None:
    clock = FakeClock()
    fake = FakeStatsProvider(clock=clock)
    assert isinstance(fake, StatsProvider)
    a, b = pod("a"), pod("b")
    fake.set_memory(available="1Gi", capacity="4Gi")
    fake.set_pod(a, memory="300Mi", processes=4)
    summary = await fake.summary([a, b])
    assert summary.time == clock.now()
    assert summary.memory == MemoryStats(1 << 30, 3 << 30)
    [usage] = summary.pods
    assert usage.containers[0].name == "c"
    assert usage.containers[0].memory_working_set_bytes == 300 << 20
    assert fake.calls[-1].pod_uids == (a.uid, b.uid)
    assert summary.dedicated_image_fs is False and summary.imagefs == summary.nodefs
    fake.set_imagefs(available="1Gi")
    assert (await fake.summary([])).dedicated_image_fs is True
    fake.inject_error("summary", RuntimeUnavailableError("down"), times=2)
    for _ in range(2):
        with pytest.raises(RuntimeUnavailableError):
            await fake.summary([])
    await fake.summary([])
    fake.remove_pod(a)
    assert (await fake.summary([a])).pods == ()


def test_all_is_honest() -> None:
    for name in eviction.__all__:
        assert hasattr(eviction, name), name
    public = {n for n in vars(eviction) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(eviction.__all__) | {"TYPE_CHECKING"}


def test_the_package_imports_no_other_subsystem() -> None:
    code = (
        "import json, sys, kubelet_kit.eviction; "
        "print(json.dumps(sorted({m.split('.')[1] for m in sys.modules "
        "if m.startswith('kubelet_kit.')})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert set(json.loads(out)) <= {
        "api",
        "container",
        "clock",
        "errors",
        "eviction",
        "_version",
        "_lazy",
    }


def test_fake_stats_inject_error_names_the_method() -> None:
    fake = FakeStatsProvider()
    with pytest.raises(ValueError, match="no method 'stats'"):
        fake.inject_error("stats", RuntimeError("x"))


async def test_imagefs_is_where_the_runtime_keeps_its_images(tmp_path: Path) -> None:
    import os
    import tempfile

    from kubelet_kit.eviction.host_stats import fs_stats
    from kubelet_kit.testing import FakeRuntime

    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on a filesystem of its own")
    images = Path(tempfile.mkdtemp(dir=shm))
    try:
        proc = fake_proc(tmp_path / "proc")
        runtime = FakeRuntime(image_fs=str(images))
        provider = HostStatsProvider(root_dir=tmp_path, runtime=runtime, proc=proc)
        summary = await provider.summary([])
        assert summary.dedicated_image_fs
        assert summary.imagefs.capacity_bytes == fs_stats(images).capacity_bytes
        # An image_dir given explicitly wins over the runtime's answer.
        given = HostStatsProvider(root_dir=tmp_path, image_dir=tmp_path, runtime=runtime, proc=proc)
        assert not (await given.summary([])).dedicated_image_fs
        # A runtime that cannot tell leaves the state directory's filesystem.
        silent = HostStatsProvider(root_dir=tmp_path, runtime=FakeRuntime(), proc=proc)
        assert not (await silent.summary([])).dedicated_image_fs
    finally:
        images.rmdir()
