"""HostProcessRuntime's per-container cgroups and OOMKilled.

Most tests run real containers (real processes) over the project's fake cgroup v2
tree, with the pod cgroup made by the container manager's own v2 driver on it:
the runtime makes, limits, updates and removes the container's cgroup there, and
reads its OOM kill counter, which a test plants as the kernel would. The process
itself cannot join a fake cgroup (its ``cgroup.procs`` is not a real file), so
joining, real limits and real OOM kills are checked on this machine's cgroup v1
controllers (as root) and, under cgroup v2, in the VM tests (tests/vm).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import _host_runtime_helpers as helpers
import attrs
import pytest

from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.helpers import cpu_shares_to_weight
from kubelet_kit.container import (
    ContainerState,
    LinuxContainerResources,
    PodSandboxConfig,
)
from kubelet_kit.errors import ContainerRuntimeError, ContainerStartError
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes._cgroupfs import (
    container_cgroup_path,
    parent_cgroup_path,
    resource_writes,
    shares_to_weight,
)
from kubelet_kit.runtimes.host import CgroupHierarchy
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree

pytestmark = pytest.mark.timeout(30)

WAIT = helpers.WAIT
container, run, wait_exited = helpers.container, helpers.run, helpers.wait_exited
roots, make_runtime = helpers.roots, helpers.make_runtime
sandbox_config = helpers.sandbox_config

MOUNT = "/fake/cgroup"
POD = "/kubepods/burstable/pod-uid-1"
RESOURCES = LinuxContainerResources(
    cpu_shares=512,
    cpu_period=100000,
    cpu_quota=50000,
    memory_limit_in_bytes=64 << 20,
    unified={"pids.max": "32"},
)


class FakeNode:
    """A fake cgroup v2 tree with a pod cgroup made by the manager's v2 driver, and
    a runtime making container cgroups on it."""

    def __init__(self, rt: HostProcessRuntime, tree: FakeCgroupTree, sb: PodSandboxConfig) -> None:
        self.rt, self.tree, self.sandbox_config = rt, tree, sb
        self.driver = CgroupV2Driver(files=tree)
        self.sandbox = ""

    def rel(self, cid: str, parent: str = POD) -> str:
        return container_cgroup_path(parent, cid).strip("/")

    def read(self, cgroup: str, name: str) -> str:
        return self.tree.read(cgroup, name).strip()

    def spec(self, cid: str) -> dict[str, object]:
        spec: dict[str, object] = json.loads(
            (self.rt.root_dir / "containers" / cid / "spec.json").read_text()
        )
        return spec

    async def start(self, *argv: str, resources: LinuxContainerResources = RESOURCES) -> str:
        return await run(
            self.rt, self.sandbox, self.sandbox_config, container("c", *argv, resources=resources)
        )


@pytest.fixture
async def node(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> AsyncIterator[FakeNode]:
    tree = FakeCgroupTree(name=MOUNT)
    rt = make_runtime(cgroup_hierarchies=[CgroupHierarchy(MOUNT, 2, tree)])
    n = FakeNode(rt, tree, attrs.evolve(sandbox_config, cgroup_parent=POD))
    await n.driver.create(POD)
    n.sandbox = await rt.run_pod_sandbox(n.sandbox_config)
    yield n
    await rt.remove_pod_sandbox(n.sandbox)


async def _pid(rt: HostProcessRuntime, cid: str) -> int:
    start = json.loads((rt.root_dir / "containers" / cid / "start.json").read_text())
    return int(start["pid"])


# ---------------------------------------------------------------- pure parts


def test_weight_is_the_kubelets_linear_conversion_of_shares() -> None:
    # The runtime cannot import the container manager; the two must still agree.
    for shares in (2, 3, 100, 256, 512, 1024, 2048, 100_000, 262_143, 262_144):
        assert shares_to_weight(shares) == cpu_shares_to_weight(shares), shares
    assert (shares_to_weight(2), shares_to_weight(262_144), shares_to_weight(10**9)) == (
        1,
        10000,
        10000,
    )


def test_resource_writes_follow_runc() -> None:
    assert resource_writes(2, RESOURCES) == [
        ("cpu.weight", str(1 + (512 - 2) * 9999 // 262142)),
        ("cpu.max", "50000 100000"),
        ("memory.max", str(64 << 20)),
        ("pids.max", "32"),
    ]
    assert resource_writes(1, RESOURCES) == [
        ("cpu.shares", "512"),
        ("cpu.cfs_period_us", "100000"),
        ("cpu.cfs_quota_us", "50000"),
        ("memory.limit_in_bytes", str(64 << 20)),
    ]
    # A period without a quota is no CPU limit; nothing set writes nothing.
    unlimited = LinuxContainerResources(cpu_shares=2, cpu_period=100000)
    assert resource_writes(2, unlimited) == [("cpu.weight", "1"), ("cpu.max", "max 100000")]
    assert resource_writes(2, LinuxContainerResources()) == []
    cpuset = LinuxContainerResources(cpuset_cpus="0-1", cpuset_mems="0")
    assert resource_writes(1, cpuset) == [("cpuset.cpus", "0-1"), ("cpuset.mems", "0")]


def test_names_follow_the_pod_cgroups_driver() -> None:
    assert container_cgroup_path("/kubepods/pod1", "abc") == "/kubepods/pod1/abc"
    slice_path = "/kubepods.slice/kubepods-pod1.slice"
    # A slice by path (what the manager hands over) or by name: the same place.
    assert parent_cgroup_path(slice_path) == slice_path
    assert parent_cgroup_path("kubepods-pod1.slice") == slice_path
    assert container_cgroup_path(slice_path, "abc") == f"{slice_path}/kubelet-kit-host-abc.scope"
    with pytest.raises(ValueError):
        parent_cgroup_path("kubepods--pod1.slice")


# ---------------------------------------------------------------- on a fake v2 tree


async def test_a_container_gets_its_own_limited_cgroup_below_the_pods(node: FakeNode) -> None:
    cid = await node.start("sleep", "60")
    rel = node.rel(cid)
    assert node.tree.is_dir(rel)
    # The pod cgroup passes its controllers down and holds no process itself.
    assert {"cpu", "memory", "pids", "io"} <= set(node.read(POD, "cgroup.subtree_control").split())
    assert node.read(rel, "cpu.weight") == str(cpu_shares_to_weight(512))
    assert node.read(rel, "cpu.max") == "50000 100000"
    assert node.read(rel, "memory.max") == str(64 << 20)
    assert node.read(rel, "pids.max") == "32"
    # The shim (and every exec) joins the container's cgroup, not the pod's.
    assert node.spec(cid)["cgroup_procs"] == [f"{MOUNT}/{rel}/cgroup.procs"]
    assert (await node.rt.container_status(cid)).state is ContainerState.RUNNING


async def test_removal_kills_what_is_left_and_removes_the_cgroup(node: FakeNode) -> None:
    cid = await node.start("sleep", "60")
    rel = node.rel(cid)
    node.tree.add_process(rel, 999_999)  # say, an exec'd command still running
    await node.rt.remove_container(cid)
    assert not node.tree.is_dir(rel)
    assert 999_999 in node.tree.killed
    assert node.tree.children(POD) == []
    # The pod cgroup is then removed by the manager as usual.
    await node.driver.remove(POD)
    assert not node.tree.is_dir(POD)


async def test_a_slice_parent_gets_a_scope(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    tree = FakeCgroupTree(name=MOUNT)
    pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
    await CgroupV2Driver(files=tree).create(pod)
    rt = make_runtime(cgroup_hierarchies=[CgroupHierarchy(MOUNT, 2, tree)])
    sb = attrs.evolve(sandbox_config, cgroup_parent=pod)
    sid = await rt.run_pod_sandbox(sb)
    cid = await run(rt, sid, sb, container("c", "sleep", "60", resources=RESOURCES))
    assert tree.children(pod.strip("/")) == [f"kubelet-kit-host-{cid}.scope"]
    await rt.remove_pod_sandbox(sid)
    assert tree.children(pod.strip("/")) == []


async def test_kernel_oom_kill_is_reported_oomkilled(node: FakeNode) -> None:
    cid = await node.start("sleep", "60")
    # What the kernel does: count the kill in memory.events, then SIGKILL.
    events = node.read(node.rel(cid), "memory.events").replace("oom_kill 0", "oom_kill 1")
    node.tree.set_file(node.rel(cid), "memory.events", events)
    os.kill(await _pid(node.rt, cid), signal.SIGKILL)
    await wait_exited(node.rt, cid)
    status = await node.rt.container_status(cid)
    assert (status.exit_code, status.reason) == (137, "OOMKilled")
    # The answer outlives the cgroup (the manager may remove the pod's first).
    await node.driver.remove(POD)
    status = await node.rt.container_status(cid)
    assert (status.exit_code, status.reason) == (137, "OOMKilled")


async def test_sigkill_without_an_oom_kill_is_an_error(node: FakeNode) -> None:
    cid = await node.start("sleep", "60")
    await node.rt.stop_container(cid, 0)
    status = await node.rt.container_status(cid)
    assert (status.exit_code, status.reason) == (137, "Error")
    # The counter is read once, at the exit: a later rise changes nothing.
    node.tree.set_file(node.rel(cid), "memory.events", "oom_kill 3\n")
    assert (await node.rt.container_status(cid)).reason == "Error"


async def test_an_oom_kill_of_another_process_with_a_clean_exit_is_not_oomkilled(
    node: FakeNode,
) -> None:
    cid = await node.start("sleep", "60")
    node.tree.set_file(node.rel(cid), "memory.events", "oom_kill 1\n")
    os.kill(await _pid(node.rt, cid), signal.SIGTERM)
    await wait_exited(node.rt, cid)
    status = await node.rt.container_status(cid)
    assert (status.exit_code, status.reason) == (143, "Error")


async def test_update_applies_to_the_live_cgroup(node: FakeNode) -> None:
    cid = await node.start("sleep", "60")
    rel = node.rel(cid)
    new = LinuxContainerResources(cpu_shares=1024, memory_limit_in_bytes=128 << 20)
    await node.rt.update_container_resources(cid, new)
    assert node.read(rel, "memory.max") == str(128 << 20)
    assert node.read(rel, "cpu.weight") == str(cpu_shares_to_weight(1024))
    assert node.read(rel, "cpu.max") == "50000 100000"  # not in the update: kept
    assert (await node.rt.container_status(cid)).resources == new
    # A limit the kernel refuses is an error, and is not recorded.
    node.tree.inject_error("write", OSError(errno.EBUSY, "busy"), target=f"{rel}/memory.max")
    with pytest.raises(ContainerRuntimeError, match=r"memory\.max"):
        await node.rt.update_container_resources(
            cid, LinuxContainerResources(memory_limit_in_bytes=1 << 20)
        )
    assert (await node.rt.container_status(cid)).resources == new


async def test_a_failed_start_leaves_no_cgroup(node: FakeNode) -> None:
    cid = await node.rt.create_container(
        node.sandbox,
        container("c", "/no/such/program", resources=RESOURCES),
        node.sandbox_config,
    )
    with pytest.raises(ContainerStartError):
        await node.rt.start_container(cid)
    assert node.tree.children(POD) == []
    status = await node.rt.container_status(cid)
    assert (status.exit_code, status.reason) == (128, "StartError")


async def test_a_cgroup_that_cannot_be_made_is_a_start_error(node: FakeNode) -> None:
    cid = await node.rt.create_container(
        node.sandbox, container("c", "sleep", "60", resources=RESOURCES), node.sandbox_config
    )
    node.tree.inject_error("write", OSError(errno.EINVAL, "bad"), target=f"{node.rel(cid)}/cpu.max")
    with pytest.raises(ContainerStartError, match=r"cpu\.max"):
        await node.rt.start_container(cid)
    assert node.tree.children(POD) == []
    status = await node.rt.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        128,
        "StartError",
    )
    assert "cpu.max" in status.message


async def test_a_v2_pod_cgroup_holding_processes_keeps_its_containers(node: FakeNode) -> None:
    # Put there by an earlier runtime: the pod cgroup cannot pass controllers down
    # any more, so a new container joins it as before, with the pod's limits.
    node.tree.add_process(POD, 424_242)
    cid = await node.start("sleep", "60")
    assert node.tree.children(POD) == []
    assert (await node.rt.container_status(cid)).state is ContainerState.RUNNING


async def test_without_a_pod_cgroup_there_is_no_container_cgroup(node: FakeNode) -> None:
    await node.driver.remove(POD)
    cid = await node.start("sleep", "60")
    assert not node.tree.is_dir(POD.strip("/"))
    assert "cgroup_procs" not in node.spec(cid)
    assert (await node.rt.container_status(cid)).state is ContainerState.RUNNING


# ---------------------------------------------------------------- real cgroup v1


def _real_v1() -> dict[str, str]:
    from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts

    mounts = discover_v1_mounts()
    wanted = ("cpu", "cpuset", "memory", "pids")
    return mounts if os.geteuid() == 0 and all(c in mounts for c in wanted) else {}


def _cgroup_of(pid: int, controller: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    raise AssertionError(f"no {controller} line for {pid}")


async def test_on_real_cgroup_v1_limits_joining_and_oomkilled(
    make_runtime: Callable[..., HostProcessRuntime],
    sandbox_config: PodSandboxConfig,
    require_real: Callable[[bool, str], None],
) -> None:
    mounts = _real_v1()
    require_real(bool(mounts), "root and the cgroup v1 cpu, cpuset, memory and pids controllers")
    from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver

    driver = CgroupV1Driver()
    root = f"/kubelet-kit-test-{secrets.token_hex(6)}"
    pod = f"{root}/pod1"
    await driver.create(pod)
    rt = make_runtime()  # as root: this machine's hierarchies
    sb = attrs.evolve(sandbox_config, cgroup_parent=pod)
    sid = ""
    try:
        sid = await rt.run_pod_sandbox(sb)
        cid = await run(rt, sid, sb, container("c", "sleep", "60", resources=RESOURCES))
        path = f"{pod}/{cid}"
        pid = await _pid(rt, cid)
        for controller in ("cpu", "memory", "pids", "cpuset"):
            assert _cgroup_of(pid, controller) == path, controller
        assert Path(mounts["cpu"] + path, "cpu.shares").read_text().strip() == "512"
        assert Path(mounts["cpu"] + path, "cpu.cfs_quota_us").read_text().strip() == "50000"
        limit = Path(mounts["memory"] + path, "memory.limit_in_bytes").read_text().strip()
        assert limit == str(64 << 20)
        # An exec'd command counts against the container's cgroup too.
        result = await rt.exec_sync(cid, ["cat", "/proc/self/cgroup"], timeout=WAIT)
        assert f":memory:{path}\n" in result.stdout.decode()

        hog = "b = bytearray(0)\nwhile True: b += bytearray(8 << 20)\n"
        small = LinuxContainerResources(memory_limit_in_bytes=32 << 20)
        oom = await run(rt, sid, sb, container("hog", "python3", "-c", hog, resources=small))
        await wait_exited(rt, oom)
        status = await rt.container_status(oom)
        assert (status.exit_code, status.reason) == (137, "OOMKilled")

        await rt.remove_pod_sandbox(sid)
        for controller in ("cpu", "memory", "pids", "cpuset"):
            left = [d for d in os.scandir(mounts[controller] + pod) if d.is_dir()]
            assert left == [], controller
    finally:
        if sid:
            await rt.remove_pod_sandbox(sid)
        await driver.remove(root)


def test_a_container_oom_score_below_the_agents_is_clamped_without_the_privilege() -> None:
    # The kubelet asks for -997 (Guaranteed and critical pods); lowering a score
    # needs CAP_SYS_RESOURCE, which an agent in a container may lack. The process
    # then keeps the agent's score instead of failing to start (containerd's
    # restrict_oom_score_adj); raising it always works.
    import subprocess
    import sys

    code = (
        "from kubelet_kit.runtimes._shim import set_oom_score_adj\n"
        "before = open('/proc/self/oom_score_adj').read().strip()\n"
        "set_oom_score_adj(-997)\n"
        "low = open('/proc/self/oom_score_adj').read().strip()\n"
        "set_oom_score_adj(1000)\n"
        "high = open('/proc/self/oom_score_adj').read().strip()\n"
        "print(before, low, high)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    before, low, high = out
    assert low in ("-997", before)  # set, or kept where the privilege is missing
    assert high == "1000"
