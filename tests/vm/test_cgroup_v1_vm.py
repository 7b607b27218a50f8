"""On a kernel booted with the cgroup v1 controllers: the container manager's v1
driver makes kubepods, its QoS tiers and the pod cgroups in every controller
hierarchy with the kubelet's values, a process moved into a pod cgroup is there in
each hierarchy, and removal removes the pod cgroups everywhere.

Expected values are worked out here from the pods' spec (tests/vm/guest/
kubepods_v1.py's PODS), the reservations and the VM's capacity, with the
kubelet's rules written out again (shares = milli * 1024 / 1000 within [2,
262144]; quota = milli * 100000 / 1000, at least 1000, over a 100000 us period).
"""

from __future__ import annotations

import pytest

from kubelet_kit.api import Quantity

from .guest.kubepods_v1 import POD_PIDS_LIMIT, PODS, SYSTEM_RESERVED
from .vm import REPO, boot_vm

pytestmark = pytest.mark.timeout(420)

GUEST = REPO / "tests" / "vm" / "guest" / "kubepods_v1.py"
#: What a v1 memory cgroup without a limit reads (PAGE_COUNTER_MAX pages of 4 KiB).
UNLIMITED_MEMORY = str((2**63 - 1) // 4096 * 4096)
#: The kubelet's existence check: these must be there when mounted.
KUBELET_CONTROLLERS = {"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"}


def _values(output: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            values[key] = value
    return values


def _milli(resources: dict[str, str]) -> int:
    return Quantity.parse(resources["cpu"]).milli_value() if "cpu" in resources else 0


def _bytes(resources: dict[str, str]) -> int:
    return Quantity.parse(resources["memory"]).value() if "memory" in resources else 0


def _shares(milli: int) -> str:
    return str(max(2, min(milli * 1024 // 1000, 262144)))


def _quota(milli: int) -> str:
    return str(max(milli * 100000 // 1000, 1000)) if milli else "-1"


def test_pod_cgroups_on_cgroup_v1() -> None:
    boot = boot_vm([str(REPO / ".venv" / "bin" / "python"), str(GUEST)], cgroup="v1", timeout=300)
    print(boot.output)
    print(
        f"VM: kernel+init {boot.kernel_uptime:.1f} s, qemu start to command "
        f"{boot.boot_seconds:.1f} s, whole run {boot.wall_seconds:.1f} s"
    )
    assert boot.exit_code == 0, boot.output
    v = _values(boot.output)

    # A v1 VM: the controllers are v1 hierarchies, cgroup2 sits empty at unified.
    assert v["v2_mounts"] == "/sys/fs/cgroup/unified"
    assert v["driver"] == "CgroupV1Driver"
    # The driver works in every controller hierarchy the kernel mounted (cpu and
    # cpuacct, net_cls and net_prio share theirs).
    kernel = set(v["kernel.controllers"].split())
    assert kernel >= KUBELET_CONTROLLERS
    everywhere = " ".join(sorted(kernel))
    assert v["driver.controllers"] == everywhere
    assert v["mount.cpu"] == v["mount.cpuacct"] == "/sys/fs/cgroup/cpu,cpuacct"

    # kubepods: node allocatable (capacity less systemReserved) as its limits.
    cpu = int(v["capacity.cpu"]) - _milli(SYSTEM_RESERVED)
    memory = int(v["capacity.memory"]) - _bytes(SYSTEM_RESERVED)
    assert v["kubepods"] == "/kubepods"
    assert v["kubepods.in"] == everywhere
    assert v["kubepods.cpu.shares"] == _shares(cpu)
    assert v["kubepods.memory.limit_in_bytes"] == str(memory)
    assert v["kubepods.cpu.cfs_quota_us"] == "-1"
    # The tiers: BestEffort at the minimum shares, Burstable at the sum of its
    # pods' CPU requests once they come, neither limited in memory.
    for tier in ("burstable", "besteffort"):
        assert v[f"{tier}.in"] == everywhere, tier
        assert v[f"{tier}.cpu.shares"] == "2", tier
        assert v[f"{tier}.memory.limit_in_bytes"] == UNLIMITED_MEMORY, tier
    assert v["burstable.after.cpu.shares"] == _shares(_milli(PODS["burstable"][0]))
    assert v["burstable.end.cpu.shares"] == "2"

    # The pods: Guaranteed directly in kubepods, the others in their tier, each in
    # every hierarchy, with the kubelet's values.
    assert v["pod.guaranteed.path"] == "/kubepods/podguaranteed-uid"
    assert v["pod.burstable.path"] == "/kubepods/burstable/podburstable-uid"
    assert v["pod.besteffort.path"] == "/kubepods/besteffort/podbesteffort-uid"
    for name, (requests, limits) in PODS.items():
        key = f"pod.{name}"
        assert v[f"{key}.in"] == everywhere, name
        assert v[f"{key}.cpu.shares"] == _shares(_milli(requests)), name
        # Quota from the CPU limit when every container has one, else unlimited.
        assert v[f"{key}.cpu.cfs_quota_us"] == _quota(_milli(limits)), name
        assert v[f"{key}.cpu.cfs_period_us"] == "100000", name
        # Memory limited only when every container has a memory limit.
        mem = _bytes(limits)
        assert v[f"{key}.memory.limit_in_bytes"] == (str(mem) if mem else UNLIMITED_MEMORY), name
        assert v[f"{key}.pids.max"] == str(POD_PIDS_LIMIT), name
        # A new cpuset cgroup has its parent's CPUs, or no process could join it.
        assert v[f"{key}.cpuset.cpus"] == v["parent.cpuset.cpus"], name

    # A process moved into the Guaranteed pod's cgroup is there in every hierarchy.
    pod = v["pod.guaranteed.path"]
    joined = {
        key.removeprefix("sleeper.cgroup."): path
        for key, path in v.items()
        if key.startswith("sleeper.cgroup.")
    }
    for controllers, path in joined.items():
        if controllers == "unified":
            assert path == "/"
        else:
            assert path == pod, controllers
    assert {c for cs in joined if cs != "unified" for c in cs.split(",")} == kernel
    assert v["pod.guaranteed.pids"] == v["sleeper.pid"]
    # Removal kills it and removes the pod cgroups in every hierarchy.
    assert v["sleeper.exit"] == "-9"
    assert v["orphans_removed"] == "besteffort-uid"
    for name in PODS:
        assert v[f"pod.{name}.left_in"] == "", name
