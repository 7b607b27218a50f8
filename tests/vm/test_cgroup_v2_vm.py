"""On a kernel booted with cgroup v2 alone: the hierarchy is pure v2, and the
container manager makes the kubepods tree there with the v2 driver."""

from __future__ import annotations

import pytest

from .vm import REPO, boot_vm

pytestmark = pytest.mark.timeout(420)

GUEST = REPO / "tests" / "vm" / "guest" / "kubepods_v2.py"


def _values(output: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            values[key] = value
    return values


def test_kubepods_on_pure_cgroup_v2() -> None:
    boot = boot_vm([str(REPO / ".venv" / "bin" / "python"), str(GUEST)], cgroup="v2", timeout=300)
    print(boot.output)
    print(
        f"VM: kernel+init {boot.kernel_uptime:.1f} s, qemu start to command "
        f"{boot.boot_seconds:.1f} s, whole run {boot.wall_seconds:.1f} s"
    )
    assert boot.exit_code == 0, boot.output
    v = _values(boot.output)

    # Pure v2: one cgroup2 mount, no v1 hierarchy, the controllers pods need.
    assert v["cgroup_mounts"] == "/sys/fs/cgroup:cgroup2"
    assert v["v1_hierarchies"] == ""
    assert {"cpu", "memory", "pids", "io"} <= set(v["root.controllers"].split())

    # The default driver is v2; kubepods and the QoS cgroups under it exist, with
    # cpu, io, memory and pids delegated from the root down to them.
    assert v["driver"] == "CgroupV2Driver"
    assert v["kubepods"] == "kubepods"
    for key in ("root.subtree_control", "kubepods.controllers", "kubepods.subtree_control"):
        assert {"cpu", "io", "memory", "pids"} <= set(v[key].split()), key
    assert set(v["kubepods.children"].split()) >= {"besteffort", "burstable"}
    assert v["kubepods.memory.max"] != "max"
