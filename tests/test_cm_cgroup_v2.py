"""CgroupV2Driver on the fake tree (every controller) and on this machine's cgroup2 mount.

The machine's cgroup2 hierarchy is found in the mount table: ``/sys/fs/cgroup`` on a
pure v2 machine, ``/sys/fs/cgroup/unified`` (often without controllers) beside v1.
Limits are shown on FakeCgroupTree; the tree itself, cgroup.procs, cgroup.kill,
cgroup.freeze, cgroup.events and the PSI files are shown for real, under a root of
the test's own, without delegating any controller.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubelet_kit.cm.cgroup_v2 import (
    CgroupV2Driver,
    config_files_v2,
    discover_v2_mount,
    parse_pressure,
)
from kubelet_kit.cm.helpers import ResourceConfig
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree

#: This machine's cgroup2 mount ("" without one).
UNIFIED = discover_v2_mount() or ""

# ----------------------------------------------------------------- fake tree


@pytest.fixture
def tree() -> FakeCgroupTree:
    return FakeCgroupTree()


@pytest.fixture
def driver(tree: FakeCgroupTree) -> CgroupV2Driver:
    return CgroupV2Driver(files=tree, clock=FakeClock())


async def test_create_delegates_controllers_and_writes_limits(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    config = ResourceConfig(
        cpu_shares=1024,
        cpu_quota=50000,
        cpu_period=100000,
        memory=256 << 20,
        pids_limit=100,
        unified={"memory.min": "1024"},
    )
    await driver.create("/kubepods/burstable/pod1", config)
    assert tree.paths() == ["", "kubepods", "kubepods/burstable", "kubepods/burstable/pod1"]
    # Every controller the kubelet wants that the kernel offers, io included,
    # delegated on the way down, as runc enables them.
    for parent in ("", "kubepods", "kubepods/burstable"):
        assert set(tree.read(parent, "cgroup.subtree_control").split()) == {
            "cpu",
            "cpuset",
            "hugetlb",
            "io",
            "memory",
            "pids",
        }
    pod = "kubepods/burstable/pod1"
    assert tree.read(pod, "cpu.weight") == "39\n"  # linear: 1 + 1022*9999/262142
    assert tree.read(pod, "cpu.max") == "50000 100000\n"
    assert tree.read(pod, "memory.max") == f"{256 << 20}\n"
    assert tree.read(pod, "pids.max") == "100\n"
    assert tree.read(pod, "memory.min") == "1024\n"
    # Creating again changes nothing and does not fail.
    await driver.create("/kubepods/burstable/pod1", config)
    assert await driver.exists("/kubepods/burstable/pod1")


async def test_unlimited_values_are_written_as_max(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    await driver.create(
        "/a", ResourceConfig(cpu_quota=-1, cpu_period=100000, memory=-1, pids_limit=-1)
    )
    assert tree.read("a", "cpu.max") == "max 100000\n"
    assert tree.read("a", "memory.max") == "max\n"
    assert tree.read("a", "pids.max") == "max\n"


def test_config_files_order_and_conversion() -> None:
    assert config_files_v2(ResourceConfig(cpu_shares=2, cpuset_cpus="0-1")) == [
        ("cpuset.cpus", "0-1"),
        ("cpu.weight", "1"),
    ]
    assert config_files_v2(ResourceConfig(cpu_shares=262144)) == [("cpu.weight", "10000")]


async def test_missing_controller_is_a_configuration_error_naming_the_file() -> None:
    tree = FakeCgroupTree(controllers=("cpu",))
    driver = CgroupV2Driver(files=tree, clock=FakeClock())
    await driver.create("/a", ResourceConfig(cpu_shares=1024))
    with pytest.raises(
        ConfigurationError,
        match=r"/fake/cgroup/a/memory.max: controller "
        r"'memory' is not enabled",
    ):
        await driver.update("/a", ResourceConfig(memory=1 << 20))


async def test_kernel_refusals_surface_with_the_path(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    await driver.create("/a")
    with pytest.raises(ConfigurationError, match=r"a/cpu.max: cannot write '10 100000'"):
        await driver.update("/a", ResourceConfig(cpu_quota=10, cpu_period=100000))
    # No internal processes: a populated cgroup cannot delegate to a new child.
    tree.add_process("a", 4242)
    with pytest.raises(ConfigurationError, match=r"a/cgroup.subtree_control: cannot enable"):
        await driver.create("/a/b")
    with pytest.raises(ConfigurationError, match=r"'\.\.' are not allowed"):
        await driver.create("/a/../../etc")


async def test_processes_freeze_kill_and_remove(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    await driver.create("/pod/c1")
    await driver.add_process("/pod/c1", 100)
    tree.add_process("pod/c1", 101)
    assert await driver.pids("/pod/c1") == [100, 101]
    assert await driver.pids("/pod") == []
    assert await driver.pids("/pod", recursive=True) == [100, 101]
    assert (await driver.events("/pod"))["populated"] == 1
    await driver.freeze("/pod")
    assert (await driver.events("/pod/c1"))["frozen"] == 1
    await driver.freeze("/pod", frozen=False)
    assert (await driver.events("/pod/c1"))["frozen"] == 0
    await driver.remove("/pod")
    assert tree.killed == [100, 101]
    assert tree.paths() == [""]
    await driver.remove("/pod")  # idempotent
    with pytest.raises(ConfigurationError, match="root cgroup"):
        await driver.remove("/")


async def test_stats_read_memory_events_cpu_and_psi(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    await driver.create("/pod")
    tree.set_file("pod", "memory.current", "1000")
    tree.set_file("pod", "memory.stat", "anon 600\nfile 400\ninactive_file 300\n")
    tree.set_file("pod", "memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    tree.set_file("pod", "cpu.stat", "usage_usec 12345\nuser_usec 1\nsystem_usec 2\n")
    tree.set_file(
        "pod",
        "memory.pressure",
        "some avg10=1.71 avg60=2.36 avg300=2.57 total=230548833\n"
        "full avg10=1.00 avg60=1.01 avg300=1.00 total=157622356\n",
    )
    tree.add_process("pod", 7)
    stats = await driver.stats("/pod")
    assert (
        stats.memory_usage_bytes,
        stats.memory_working_set_bytes,
        stats.oom_kills,
        stats.cpu_usage_usec,
        stats.pids,
    ) == (1000, 700, 2, 12345, 1)
    assert stats.pressure["memory"].some_avg10 == 1.71
    assert stats.pressure["memory"].full_total == 157622356
    with pytest.raises(ConfigurationError, match="no such cgroup"):
        await driver.stats("/nope")


def test_parse_pressure_upstream_sample() -> None:
    # cadvisor/kubelet TestParseStatCPUPSI sample.
    psi = parse_pressure(
        "some avg10=1.71 avg60=2.36 avg300=2.57 total=230548833\n"
        "full avg10=1.00 avg60=1.01 avg300=1.00 total=157622356"
    )
    assert (psi.some_avg10, psi.some_avg60, psi.some_avg300, psi.some_total) == (
        1.71,
        2.36,
        2.57,
        230548833,
    )
    assert (psi.full_avg10, psi.full_avg60, psi.full_avg300, psi.full_total) == (
        1.0,
        1.01,
        1.0,
        157622356,
    )


async def test_injected_mkdir_error_is_reported(
    tree: FakeCgroupTree, driver: CgroupV2Driver
) -> None:
    tree.inject_error("mkdir", OSError(errno.ENOSPC, "no space"), target="x")
    with pytest.raises(ConfigurationError, match=r"/fake/cgroup/x: cannot create cgroup"):
        await driver.create("/x")
    await driver.create("/x")  # the error was one-shot
    assert ("mkdir", "x", "") in tree.calls


# ----------------------------------------------------------------- this machine


def _real_v2() -> bool:
    return (
        bool(UNIFIED)
        and os.geteuid() == 0
        and os.path.exists(os.path.join(UNIFIED, "cgroup.procs"))
        and os.access(UNIFIED, os.W_OK)
    )


def test_discover_v2_mount_reads_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text(
        "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n"
    )
    assert discover_v2_mount(str(table)) == "/sys/fs/cgroup/unified"
    table.write_text("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n")
    assert discover_v2_mount(str(table)) == "/sys/fs/cgroup"
    table.write_text("cgroup2 /mnt/with\\040space cgroup2 rw 0 0\n")
    assert discover_v2_mount(str(table)) == "/mnt/with space"
    table.write_text("proc /proc proc rw 0 0\n")
    assert discover_v2_mount(str(table)) is None
    assert discover_v2_mount(str(tmp_path / "missing")) is None


@pytest.fixture
async def real_root(require_real: Callable[[bool, str], None]) -> AsyncIterator[str]:
    require_real(_real_v2(), f"root and a writable cgroup2 hierarchy ({UNIFIED or 'none mounted'})")
    root = f"/kubelet-kit-test-{secrets.token_hex(4)}"
    # No delegation: the machine's root cgroup is not ours to change.
    driver = CgroupV2Driver(UNIFIED, controllers=frozenset())
    yield root
    await driver.remove(root)
    assert not os.path.exists(UNIFIED + root)


async def _sleeper() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")


async def test_real_v2_tree_procs_freeze_kill(real_root: str) -> None:
    driver = CgroupV2Driver(UNIFIED, controllers=frozenset())
    pod = f"{real_root}/pod1"
    await driver.create(pod)
    assert os.path.isdir(UNIFIED + pod)
    assert await driver.children(real_root) == ["pod1"]
    for name in (
        "cgroup.procs",
        "cgroup.kill",
        "cgroup.freeze",
        "cgroup.events",
        "cpu.pressure",
        "memory.pressure",
        "io.pressure",
    ):
        assert os.path.exists(os.path.join(UNIFIED + pod, name)), name
    proc = await _sleeper()
    try:
        await driver.add_process(pod, proc.pid)
        with open(f"/proc/{proc.pid}/cgroup", encoding="ascii") as f:
            assert f"0::{pod}\n" in f.read()
        assert await driver.pids(pod) == [proc.pid]
        assert await driver.pids(real_root, recursive=True) == [proc.pid]
        assert (await driver.events(pod))["populated"] == 1
        await driver.freeze(pod)
        for _ in range(200):
            if (await driver.events(pod))["frozen"] == 1:
                break
            await asyncio.sleep(0.01)
        assert (await driver.events(pod))["frozen"] == 1
        await driver.freeze(pod, frozen=False)
        stats = await driver.stats(pod)
        assert set(stats.pressure) == {"cpu", "memory", "io"}
        assert stats.pids == 1
        await driver.kill(pod)
        assert await asyncio.wait_for(proc.wait(), 10) == -9
        assert await driver.pids(pod) == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    await driver.remove(pod)
    assert not os.path.exists(UNIFIED + pod)


async def test_real_v2_remove_kills_what_is_left(real_root: str) -> None:
    driver = CgroupV2Driver(UNIFIED, controllers=frozenset())
    leaf = f"{real_root}/pod2/ctr"
    await driver.create(leaf)
    proc = await _sleeper()
    try:
        await driver.add_process(leaf, proc.pid)
        await driver.remove(f"{real_root}/pod2")
        assert await asyncio.wait_for(proc.wait(), 10) == -9
        assert not os.path.exists(UNIFIED + f"{real_root}/pod2")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
