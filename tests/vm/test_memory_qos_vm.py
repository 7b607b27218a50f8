"""MemoryQoS on a kernel booted with cgroup v2 alone: the container manager's
memory.min at pod and QoS level, and the container values it hands the runtime
(memory.min, memory.high), as the kernel itself reads them back.

Expected values are worked out here from the pods' spec (tests/vm/guest/
memory_qos_v2.py's PODS), the VM's MemTotal and page size, in exact arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from kubelet_kit.api import Quantity

from .guest.memory_qos_v2 import PODS, SYSTEM_RESERVED
from .vm import REPO, boot_vm

pytestmark = pytest.mark.timeout(420)

GUEST = REPO / "tests" / "vm" / "guest" / "memory_qos_v2.py"
#: The kubelet's default memoryThrottlingFactor (v1.27 on).
FACTOR = Fraction(9, 10)


def _values(output: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            values[key] = value
    return values


def _bytes(resources: dict[str, str]) -> int:
    return Quantity.parse(resources["memory"]).value() if "memory" in resources else 0


def _pod_request(name: str) -> int:
    return sum(_bytes(req) for req, _ in PODS[name].values())


def test_memory_qos_on_pure_cgroup_v2() -> None:
    boot = boot_vm([str(REPO / ".venv" / "bin" / "python"), str(GUEST)], cgroup="v2", timeout=300)
    print(boot.output)
    print(
        f"VM: kernel+init {boot.kernel_uptime:.1f} s, qemu start to command "
        f"{boot.boot_seconds:.1f} s, whole run {boot.wall_seconds:.1f} s"
    )
    assert boot.exit_code == 0, boot.output
    v = _values(boot.output)
    page = int(v["page_size"])
    assert v["driver"] == "CgroupV2Driver"
    assert v["memory_qos_enforced"] == "True"
    assert int(v["capacity.memory"]) == int(v["meminfo.MemTotal"])

    def in_pages(n: int) -> str:
        # The kernel keeps protection and limits in whole pages, rounded down.
        return str(n // page * page)

    # Nothing is protected before pods come.
    for tier in ("kubepods", "burstable", "besteffort"):
        assert v[f"start.{tier}.memory.min"] == "0", tier

    # Pod level: memory.min is the sum of the containers' requests.
    guaranteed, burstable = _pod_request("guaranteed"), _pod_request("burstable")
    assert v["pod.guaranteed.path"] == "/kubepods/podguaranteed-uid"
    assert v["pod.burstable.path"] == "/kubepods/burstable/podburstable-uid"
    assert v["pod.guaranteed.memory.min"] == in_pages(guaranteed)
    assert v["pod.burstable.memory.min"] == in_pages(burstable)
    assert v["pod.besteffort.memory.min"] == "0"
    assert v["pod.guaranteed.memory.max"] == in_pages(guaranteed)  # requests == limits

    # QoS level: Burstable tier = Burstable requests; kubepods adds Guaranteed ones.
    assert v["admitted.burstable.memory.min"] == in_pages(burstable)
    assert v["admitted.kubepods.memory.min"] == in_pages(guaranteed + burstable)
    assert v["admitted.besteffort.memory.min"] == "0"

    # Container level: memory.min = request; memory.high only where the request and
    # limit differ, at request + 0.9 * (limit, or allocatable, - request) in pages.
    allocatable = int(v["capacity.memory"]) - _bytes(SYSTEM_RESERVED)
    for pod, containers in PODS.items():
        for ctr, (req, lim) in containers.items():
            request, limit = _bytes(req), _bytes(lim)
            expected: dict[str, str] = {}
            if request:
                expected["memory.min"] = str(request)
            if request != limit:
                ceiling = limit or allocatable
                high = math.floor(request + (ceiling - request) * FACTOR) // page * page
                if high > request:
                    expected["memory.high"] = str(high)
            shown = v[f"cm.{pod}.{ctr}.unified"]
            got = dict(item.split(":") for item in shown.split()) if shown else {}
            assert got == expected, (pod, ctr)
            where = f"kernel.{pod}.{ctr}"
            assert v[f"{where}.memory.min"] == in_pages(request), (pod, ctr)
            assert v[f"{where}.memory.high"] == expected.get("memory.high", "max"), (pod, ctr)
            assert v[f"{where}.memory.max"] == (str(limit) if limit else "max"), (pod, ctr)
    assert "memory.high" in v["cm.burstable.app.unified"]
    assert "memory.high" in v["cm.burstable.side.unified"]  # from allocatable

    # Removing a pod kills what runs in it and lowers the tiers' protection.
    assert v["sleeper.cgroup"] == "0::/kubepods/burstable/podburstable-uid/app"
    assert v["sleeper.exit"] == "-9"
    assert v["burstable.pod.exists"] == "False"
    assert v["burstable_removed.burstable.memory.min"] == "0"
    assert v["burstable_removed.kubepods.memory.min"] == in_pages(guaranteed)
    assert v["guaranteed_removed.kubepods.memory.min"] == "0"
    assert v["orphans_removed"] == "besteffort-uid"
    for tier in ("kubepods", "burstable", "besteffort"):
        assert v[f"all_removed.{tier}.memory.min"] == "0", tier
