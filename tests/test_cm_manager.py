"""CgroupContainerManager on the fake cgroup2 tree, through the composer, and on real v1."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Quantity, load_pod
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm import ContainerManager
from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree

Q = Quantity.parse
CAPACITY = {"cpu": Q("4"), "memory": Q("8Gi"), "ephemeral-storage": Q("100Gi"), "pods": Q("4")}


def pod(
    name: str,
    *,
    cpu: str = "",
    mem: str = "",
    limit_cpu: str = "",
    limit_mem: str = "",
    extra: dict[str, str] | None = None,
) -> Any:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    limits = {k: v for k, v in (("cpu", limit_cpu), ("memory", limit_mem)) if v}
    if extra:
        requests.update(extra)
        limits.update(extra)
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"{name}-uid-1"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", "sleep infinity"],
                        "resources": {"requests": requests, "limits": limits},
                    }
                ],
            },
        }
    )


def make(
    tree: FakeCgroupTree | None = None, **config: Any
) -> tuple[CgroupContainerManager, FakeCgroupTree]:
    tree = tree or FakeCgroupTree()
    options = {
        k: config.pop(k)
        for k in (
            "state_dir",
            "qos_reserved_memory_percent",
            "enforce_memory_qos",
            "memory_throttling_factor",
        )
        if k in config
    }
    cfg = KubeletConfiguration(**config)
    mgr = CgroupContainerManager(
        cfg, driver=CgroupV2Driver(files=tree, clock=FakeClock()), capacity=CAPACITY, **options
    )
    return mgr, tree


def test_it_is_a_container_manager() -> None:
    mgr, _ = make()
    assert isinstance(mgr, ContainerManager)


async def test_start_builds_kubepods_with_allocatable_limits() -> None:
    mgr, tree = make(
        system_reserved={"cpu": "500m", "memory": "1Gi"}, kube_reserved={"memory": "512Mi"}
    )
    await mgr.start()
    await mgr.start()  # idempotent
    assert tree.paths() == ["", "kubepods", "kubepods/besteffort", "kubepods/burstable"]
    # 3500m -> 3584 shares -> weight 1 + 3582*9999/262142 = 137
    assert tree.read("kubepods", "cpu.weight") == "137\n"
    assert tree.read("kubepods", "memory.max") == f"{(8 << 30) - (1 << 30) - (512 << 20)}\n"
    assert tree.read("kubepods/besteffort", "cpu.weight") == "1\n"
    assert tree.read("kubepods/burstable", "cpu.weight") == "1\n"
    alloc = mgr.node_allocatable()
    assert alloc["cpu"] == Q("3500m")
    assert alloc["memory"] == Q("8Gi") - Q("1Gi") - Q("512Mi") - Q("100Mi")


async def test_without_pods_enforcement_kubepods_gets_capacity() -> None:
    mgr, tree = make(enforce_node_allocatable=("none",), system_reserved={"memory": "1Gi"})
    await mgr.start()
    assert tree.read("kubepods", "memory.max") == f"{8 << 30}\n"


async def test_start_refuses_a_tree_without_the_controllers() -> None:
    mgr, _ = make(FakeCgroupTree(controllers=("cpu", "io")))
    with pytest.raises(ConfigurationError, match="lacks the controllers memory, pids"):
        await mgr.start()


async def test_start_refuses_reservations_above_capacity() -> None:
    mgr, _ = make(system_reserved={"memory": "8Gi"})
    with pytest.raises(ConfigurationError, match='Resource "memory" has a reservation'):
        await mgr.start()


def test_bad_configuration_is_refused_with_the_field() -> None:
    with pytest.raises(ConfigurationError, match=r"systemReserved\[cpu\]"):
        make(system_reserved={"cpu": "many"})
    with pytest.raises(ConfigurationError, match="enforceNodeAllocatable"):
        make(enforce_node_allocatable=("everything",))
    with pytest.raises(ConfigurationError, match='cgroupDriver: Unsupported value: "lxc"'):
        make(cgroup_driver="lxc")


async def test_pod_cgroups_per_qos_with_limits_and_tier_shares() -> None:
    mgr, tree = make(pod_pids_limit=64)
    await mgr.start()
    g = pod("g", cpu="1", mem="1Gi", limit_cpu="1", limit_mem="1Gi")
    b = pod("b", cpu="500m", mem="256Mi", limit_mem="512Mi")
    e = pod("e")
    assert await mgr.ensure_pod_cgroup(g) == "/kubepods/podg-uid-1"
    assert await mgr.ensure_pod_cgroup(b) == "/kubepods/burstable/podb-uid-1"
    assert await mgr.ensure_pod_cgroup(e) == "/kubepods/besteffort/pode-uid-1"
    assert tree.read("kubepods/podg-uid-1", "cpu.max") == "100000 100000\n"
    assert tree.read("kubepods/podg-uid-1", "memory.max") == f"{1 << 30}\n"
    assert tree.read("kubepods/podg-uid-1", "pids.max") == "64\n"
    # Burstable without a CPU limit: no quota; the memory limit is the only one set.
    assert tree.read("kubepods/burstable/podb-uid-1", "cpu.max") == "max 100000\n"
    assert tree.read("kubepods/burstable/podb-uid-1", "memory.max") == f"{512 << 20}\n"
    assert tree.read("kubepods/besteffort/pode-uid-1", "cpu.weight") == "1\n"
    # The Burstable tier follows the sum of Burstable CPU requests: 500m -> 512 shares.
    assert tree.read("kubepods/burstable", "cpu.weight") == "20\n"
    await mgr.remove_pod_cgroup(b)
    await mgr.remove_pod_cgroup(b)  # idempotent
    assert "kubepods/burstable/podb-uid-1" not in tree.paths()
    assert tree.read("kubepods/burstable", "cpu.weight") == "1\n"


async def test_systemd_naming() -> None:
    mgr, tree = make(cgroup_driver="systemd")
    await mgr.start()
    b = pod("b", cpu="100m")
    path = await mgr.ensure_pod_cgroup(b)
    assert path == ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_uid_1.slice")
    assert tree.read(path.lstrip("/"), "cpu.weight") == "4\n"


async def test_cgroup_root_and_no_qos_cgroups() -> None:
    mgr, tree = make(cgroup_root="/agent")
    assert await mgr.ensure_pod_cgroup(pod("e")) == "/agent/kubepods/besteffort/pode-uid-1"
    assert tree.is_dir("agent/kubepods/besteffort/pode-uid-1")
    off, tree2 = make(cgroups_per_qos=False)
    await off.start()
    assert await off.ensure_pod_cgroup(pod("e")) == ""
    assert tree2.paths() == [""]


async def test_remove_kills_leftover_processes_and_reports_stats() -> None:
    mgr, tree = make()
    e = pod("e")
    path = (await mgr.ensure_pod_cgroup(e)).lstrip("/")
    tree.mkdir(path + "/ctr")
    tree.add_process(path + "/ctr", 321)
    tree.set_file(path, "memory.events", "oom 1\noom_kill 1\n")
    stats = await mgr.pod_cgroup_stats(e)
    assert (stats.oom_kills, stats.pids) == (1, 1)
    await mgr.remove_pod_cgroup(e)
    assert tree.killed == [321]
    assert path not in tree.paths()


async def test_qos_reserved_memory_limits_the_lower_tiers() -> None:
    mgr, tree = make(qos_reserved_memory_percent=100)
    await mgr.start()
    await mgr.ensure_pod_cgroup(pod("g", cpu="1", mem="2Gi", limit_cpu="1", limit_mem="2Gi"))
    await mgr.ensure_pod_cgroup(pod("b", mem="1Gi"))
    assert tree.read("kubepods/burstable", "memory.max") == f"{6 << 30}\n"
    assert tree.read("kubepods/besteffort", "memory.max") == f"{5 << 30}\n"


async def test_memory_qos_sets_the_pod_memory_min() -> None:
    mgr, tree = make(enforce_memory_qos=True)
    path = await mgr.ensure_pod_cgroup(pod("g", cpu="1", mem="1Gi", limit_cpu="1", limit_mem="1Gi"))
    assert tree.read(path.lstrip("/"), "memory.min") == f"{1 << 30}\n"


# ----------------------------------------------------------------- admission

ADMIT = [
    # active pods, new pod, expected (admit, reason, message)
    ([], pod("a", cpu="3"), (True, "", "")),
    (
        [pod("x", cpu="3")],
        pod("a", cpu="1500m"),
        (
            False,
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 1500, used: 3000, capacity: 4000",
        ),
    ),
    (
        [pod("x", mem="7Gi")],
        pod("a", mem="1Gi"),
        (
            False,
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 1073741824, "
            "used: 7516192768, capacity: 8485076992",
        ),
    ),
    (
        [pod(f"p{i}") for i in range(4)],
        pod("a"),
        (
            False,
            "OutOfpods",
            "Node didn't have enough resource: pods, requested: 1, used: 4, capacity: 4",
        ),
    ),
    (
        [],
        pod("a", extra={"example.com/gpu": "1"}),
        (
            False,
            "OutOfexample.com/gpu",
            "Node didn't have enough resource: example.com/gpu, requested: 1, used: 0, capacity: 0",
        ),
    ),
]


@pytest.mark.parametrize(("active", "new", "expected"), ADMIT)
def test_admission(active: list[Any], new: Any, expected: tuple[bool, str, str]) -> None:
    mgr, _ = make()
    result = mgr.admit_pod(new, active)
    assert (result.admit, result.reason, result.message) == expected


async def test_static_cpu_manager_pins_guaranteed_containers(tmp_path: Path) -> None:
    mgr, _ = make(cpu_manager_policy="static", system_reserved={"cpu": "1"}, state_dir=tmp_path)
    await mgr.start()
    g = pod("g", cpu="2", mem="1Gi", limit_cpu="2", limit_mem="1Gi")
    b = pod("b", cpu="100m")
    assert mgr.admit_pod(g, []).admit
    assert mgr.admit_pod(b, [g]).admit
    res_g = mgr.container_resources(g, g.spec.containers[0])
    res_b = mgr.container_resources(b, b.spec.containers[0])
    assert res_g is not None and res_b is not None
    assert (res_g.cpuset_cpus, res_g.cpu_quota, res_g.oom_score_adj) == ("1-2", 200000, -997)
    assert res_b.cpuset_cpus == "0,3"
    # A pod that does not fit allocatable never reaches the CPU manager.
    big = pod("big", cpu="1", mem="1Gi", limit_cpu="1", limit_mem="1Gi")
    assert mgr.admit_pod(big, [g, b]).reason == "OutOfcpu"
    assert "big-uid-1" not in mgr.cpu_manager.assignments
    await mgr.remove_pod_cgroup(g)
    assert mgr.cpu_manager.cpuset(b, b.spec.containers[0]) == "0-3"
    assert (tmp_path / "cpu_manager_state").exists()


# ----------------------------------------------------------------- through the composer


async def test_a_pod_through_the_composer_gets_its_cgroup_and_loses_it_on_deletion() -> None:
    tree = FakeCgroupTree()
    clock = FakeClock()
    mgr = CgroupContainerManager(
        KubeletConfiguration(), driver=CgroupV2Driver(files=tree, clock=clock), capacity=CAPACITY
    )
    async with KubeletEnv(clock=clock, container_manager=mgr) as env:
        env.add_pod(pod("web", cpu="250m", mem="64Mi", limit_cpu="500m", limit_mem="128Mi"))
        await env.wait_for(lambda: env.phase("web") == "Running", what="web Running")
        sandbox_calls = env.runtime.calls_to("run_pod_sandbox")
        assert sandbox_calls[-1].args[0].cgroup_parent == "/kubepods/burstable/podweb-uid-1"
        path = "kubepods/burstable/podweb-uid-1"
        assert tree.read(path, "cpu.max") == "50000 100000\n"
        assert tree.read(path, "memory.max") == f"{128 << 20}\n"
        created = env.runtime.calls_to("create_container")[-1]
        resources = created.args[1].resources
        assert (resources.cpu_shares, resources.cpu_quota, resources.memory_limit_in_bytes) == (
            256,
            50000,
            128 << 20,
        )
        env.delete_pod("web", grace_period_seconds=1)
        await env.wait_for(lambda: path not in tree.paths(), what="pod cgroup removed")


# ----------------------------------------------------------------- real cgroups (v1)


def _real_v1() -> bool:
    try:
        from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts
    except ImportError:  # pragma: no cover
        return False
    mounts = discover_v1_mounts()
    return os.geteuid() == 0 and all(c in mounts for c in ("cpu", "memory", "cpuset", "pids"))


async def test_real_v1_pod_cgroup_with_a_real_process(
    require_real: Callable[[bool, str], None], tmp_path: Path
) -> None:
    require_real(_real_v1(), "root and the cgroup v1 controllers")
    from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver

    driver = CgroupV1Driver()
    root = f"/kubelet-kit-test-{secrets.token_hex(4)}"
    mgr = CgroupContainerManager(
        KubeletConfiguration(
            cgroup_root=root, pod_pids_limit=32, system_reserved={"memory": "100Mi"}
        ),
        driver=driver,
        capacity=CAPACITY,
    )
    proc = None
    try:
        await mgr.start()
        g = pod("g", cpu="500m", mem="64Mi", limit_cpu="500m", limit_mem="64Mi")
        path = await mgr.ensure_pod_cgroup(g)
        assert path == f"{root}/kubepods/podg-uid-1"
        m = driver.mounts
        assert Path(m["cpu"] + path, "cpu.cfs_quota_us").read_text().strip() == "50000"
        assert Path(m["cpu"] + path, "cpu.shares").read_text().strip() == "512"
        assert Path(m["memory"] + path, "memory.limit_in_bytes").read_text().strip() == str(
            64 << 20
        )
        assert Path(m["pids"] + path, "pids.max").read_text().strip() == "32"
        # What a runtime honouring cgroup_parent does: put the workload in it.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(60)"
        )
        await driver.add_process(path, proc.pid)
        with open(f"/proc/{proc.pid}/cgroup", encoding="ascii") as f:
            assert f":memory:{path}\n" in f.read()
        await mgr.remove_pod_cgroup(g)
        assert await asyncio.wait_for(proc.wait(), 10) == -9
        for mount in m.values():
            assert not os.path.exists(mount + path)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await driver.remove(root)
    for mount in driver.mounts.values():
        assert not os.path.exists(mount + root)


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
async def test_orphaned_pod_cgroups_are_removed(driver: str) -> None:
    mgr, tree = make(cgroup_driver=driver)
    g = pod("g", cpu="1", mem="1Gi", limit_cpu="1", limit_mem="1Gi")
    b = pod("b", cpu="500m")
    e = pod("e")
    paths = {p.uid: (await mgr.ensure_pod_cgroup(p)).lstrip("/") for p in (g, b, e)}
    tree.mkdir(paths[e.uid] + "/ctr")
    tree.add_process(paths[e.uid] + "/ctr", 77)
    burstable = paths[b.uid].rsplit("/", 1)[0]
    tree.mkdir(burstable + "/not-a-pod")
    removed = await mgr.remove_orphaned_pod_cgroups([b.uid])
    assert sorted(removed) == sorted([g.uid, e.uid])
    left = tree.paths()
    assert paths[b.uid] in left and burstable + "/not-a-pod" in left
    assert paths[g.uid] not in left and paths[e.uid] not in left
    assert tree.killed == [77]
    assert await mgr.remove_orphaned_pod_cgroups([b.uid]) == []
