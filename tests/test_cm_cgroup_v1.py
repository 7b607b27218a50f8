"""CgroupV1Driver (cgroupspy) on this machine's v1 controllers, and on plain directories."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver, discover_v1_mounts
from kubelet_kit.cm.helpers import ResourceConfig
from kubelet_kit.errors import ConfigurationError

try:
    import cgroupspy  # type: ignore[import-untyped, unused-ignore, import-not-found]  # noqa: F401

    HAVE_CGROUPSPY = True
except ImportError:  # pragma: no cover
    HAVE_CGROUPSPY = False


@pytest.fixture(params=["cgroupspy", "plain"])
def spy(request: pytest.FixtureRequest) -> bool:
    """Run a test through cgroupspy and through the built-in fallback."""
    if request.param == "cgroupspy" and not HAVE_CGROUPSPY:
        pytest.skip("cgroupspy is not installed")
    return bool(request.param == "cgroupspy")


def test_discover_reads_comounted_hierarchies(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "proc /proc proc rw 0 0\n"
        "cgroup /sys/fs/cgroup/systemd cgroup rw,nosuid,xattr,name=systemd 0 0\n"
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
        "cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,nodev,noexec,relatime,devices 0 0\n"
        "cgroup /sys/fs/cgroup/hugetlb cgroup rw,hugetlb 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
    )
    # Every controller mounted, as the kubelet makes its cgroups in each; the named
    # systemd hierarchy and the mount options are no controllers.
    assert discover_v1_mounts(mounts_file=str(mounts)) == {
        "cpu": "/sys/fs/cgroup/cpu,cpuacct",
        "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
        "memory": "/sys/fs/cgroup/memory",
        "devices": "/sys/fs/cgroup/devices",
        "hugetlb": "/sys/fs/cgroup/hugetlb",
    }
    assert discover_v1_mounts(("memory",), mounts_file=str(mounts)) == {
        "memory": "/sys/fs/cgroup/memory"
    }


async def test_a_cgroup_is_made_in_every_hierarchy_and_exists_by_the_kubelets_list(
    tmp_path: Path,
) -> None:
    mounts = {c: str(tmp_path / c) for c in ("cpu", "memory", "pids", "devices", "freezer")}
    for m in mounts.values():
        os.mkdir(m)
    driver = CgroupV1Driver(mounts, use_cgroupspy=False)
    await driver.create("/kubepods/pod1")
    assert all(os.path.isdir(m + "/kubepods/pod1") for m in mounts.values())
    # A hierarchy outside the kubelet's list (devices, freezer) does not decide
    # whether the cgroup exists; cpu, memory and pids do.
    os.rmdir(mounts["freezer"] + "/kubepods/pod1")
    assert await driver.exists("/kubepods/pod1")
    os.rmdir(mounts["memory"] + "/kubepods/pod1")
    assert not await driver.exists("/kubepods/pod1")
    await driver.remove("/kubepods")
    assert not any(os.path.exists(m + "/kubepods") for m in mounts.values())


async def test_writes_on_plain_directories(tmp_path: Path, spy: bool) -> None:
    mounts = {c: str(tmp_path / c) for c in ("cpu", "memory", "pids")}
    for m in mounts.values():
        os.mkdir(m)
    driver = CgroupV1Driver(mounts, use_cgroupspy=spy)
    assert driver.uses_cgroupspy == spy
    await driver.create(
        "/kubepods/pod1",
        ResourceConfig(
            cpu_shares=102, cpu_quota=-1, cpu_period=100000, memory=1 << 20, pids_limit=-1
        ),
    )
    pod = tmp_path / "cpu" / "kubepods" / "pod1"
    assert (pod / "cpu.shares").read_text() == "102"
    assert (pod / "cpu.cfs_period_us").read_text() == "100000"
    assert (pod / "cpu.cfs_quota_us").read_text() == "-1"
    assert (tmp_path / "memory/kubepods/pod1/memory.limit_in_bytes").read_text() == "1048576"
    assert (tmp_path / "pids/kubepods/pod1/pids.max").read_text() == "max"
    assert await driver.exists("/kubepods/pod1")
    with pytest.raises(ConfigurationError, match="cpuset controller is not mounted"):
        await driver.update("/kubepods/pod1", ResourceConfig(cpuset_cpus="0"))


# ----------------------------------------------------------------- this machine

V1 = ("cpu", "cpuacct", "cpuset", "memory", "pids")


def _real_v1() -> bool:
    if os.geteuid() != 0:
        return False
    mounts = discover_v1_mounts(V1)
    return all(c in mounts for c in ("cpu", "memory", "cpuset", "pids"))


@pytest.fixture
async def real(
    require_real: Callable[[bool, str], None], spy: bool
) -> AsyncIterator[tuple[Any, str]]:
    require_real(_real_v1(), "root and the cgroup v1 cpu/memory/cpuset/pids controllers")
    driver = CgroupV1Driver(discover_v1_mounts(V1), use_cgroupspy=spy)
    root = f"/kubelet-kit-test-{secrets.token_hex(4)}"
    yield driver, root
    await driver.remove(root)
    for mount in driver.mounts.values():
        assert not os.path.exists(mount + root)


async def test_real_v1_hierarchy_limits_and_a_real_process(real: tuple[Any, str]) -> None:
    driver, root = real
    pod = f"{root}/kubepods/burstable/pod1"
    config = ResourceConfig(
        cpu_shares=512, cpu_quota=50000, cpu_period=100000, memory=64 << 20, pids_limit=50
    )
    await driver.create(pod, config)
    assert await driver.children(f"{root}/kubepods") == ["burstable"]
    m = driver.mounts
    assert Path(m["cpu"] + pod, "cpu.shares").read_text().strip() == "512"
    assert Path(m["cpu"] + pod, "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert Path(m["cpu"] + pod, "cpu.cfs_period_us").read_text().strip() == "100000"
    assert Path(m["memory"] + pod, "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
    assert Path(m["pids"] + pod, "pids.max").read_text().strip() == "50"
    # A new cpuset cgroup got its parent's CPUs, so a process can join it.
    parent_cpus = Path(m["cpuset"], "cpuset.cpus").read_text().strip()
    assert Path(m["cpuset"] + pod, "cpuset.cpus").read_text().strip() == parent_cpus
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "b = bytearray(8 << 20); import time; time.sleep(60)"
    )
    try:
        await driver.add_process(pod, proc.pid)
        with open(f"/proc/{proc.pid}/cgroup", encoding="ascii") as f:
            lines = f.read().splitlines()
        # "N:controllers:path", a hierarchy's controllers comma-joined where they
        # share it (cpu,cpuacct).
        where = {c: ln.split(":", 2)[2] for ln in lines for c in ln.split(":")[1].split(",")}
        for ctl in ("memory", "cpu", "cpuset", "pids"):
            assert where.get(ctl) == pod, (ctl, lines)
        assert await driver.pids(pod) == [proc.pid]
        assert await driver.pids(root, recursive=True) == [proc.pid]
        stats = await driver.stats(pod)
        assert stats.pids == 1
        # Lower the limit with update and read it back.
        await driver.update(pod, ResourceConfig(memory=128 << 20, cpu_shares=1024))
        assert Path(m["memory"] + pod, "memory.limit_in_bytes").read_text().strip() == str(
            128 << 20
        )
        await driver.remove(f"{root}/kubepods")
        assert await asyncio.wait_for(proc.wait(), 10) == -9
        for mount in m.values():
            assert not os.path.exists(mount + pod)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
