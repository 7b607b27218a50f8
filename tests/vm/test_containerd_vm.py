"""containerd as the CRI runtime on a kernel booted with cgroup v2 alone, with the
cgroupfs driver: a pod's sandbox and containers get their cgroups under the pod
cgroup the container manager made in kubepods, with the container's limits.

One VM runs tests/vm/guest/containerd_v2.py: the container manager (cgroupfs
driver) makes kubepods and the pod's cgroup, a private containerd 1.6 with runc
(``SystemdCgroup = false``; images imported from local tars, the VM has no
network) runs the pod through the project's CRI client, and the guest reports
which cgroup each process is in, the limits there, what a process in the
container sees, a container killed at its memory limit, and the cleanup.

The systemd cgroup driver is not tested here: runc's systemd driver has systemd
make each container's scope over D-Bus, and the VM runs no systemd (its first
process is a small shell init). With ``SystemdCgroup = true`` RunPodSandbox fails
there with runc's "systemd not running on this host, cannot use systemd cgroups
manager". Faking systemd would test the fake.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from .vm import REPO, boot_vm

pytestmark = pytest.mark.timeout(420)

#: What the VM runs: this machine's containerd and runc, over the shared root.
PARTS = ("containerd", "containerd-shim-runc-v2", "ctr", "runc")


def _report(output: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The guest's ``key=value`` lines, and its ``proc=CGROUP COMMAND`` lines."""
    values: dict[str, str] = {}
    procs: list[tuple[str, str]] = []
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if not sep or not key or " " in key:
            continue
        if key == "proc":
            cgroup, _, command = value.partition(" ")
            procs.append((cgroup, command))
        else:
            values[key] = value
    return values, procs


def test_containerd_cgroupfs_pod_in_kubepods_on_pure_cgroup_v2(
    require_real: Callable[[bool, str], None],
) -> None:
    missing = [p for p in PARTS if shutil.which(p) is None]
    require_real(not missing, "containerd and runc for the VM (" + ", ".join(missing) + ")")
    boot = boot_vm(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "tests.vm.guest.containerd_v2"],
        cgroup="v2",
        timeout=300,
        cwd=REPO,
    )
    print(boot.output)
    print(
        f"VM: kernel+init {boot.kernel_uptime:.1f} s, qemu start to command "
        f"{boot.boot_seconds:.1f} s, whole run {boot.wall_seconds:.1f} s"
    )
    assert boot.exit_code == 0, boot.output
    v, procs = _report(boot.output)

    # The manager's cgroupfs layout on the v2 driver: the Burstable pod's cgroup.
    assert v["driver"] == "cgroupfs CgroupV2Driver"
    assert v["runtime"].startswith("containerd ")
    pod_cgroup = f"{v['kubepods']}/burstable/pod{v['pod_uid']}"
    assert v["pod_cgroup"] == pod_cgroup

    # runc's cgroupfs paths: the sandbox's pause and each container in a cgroup
    # named by its id, right under the pod's cgroup; nothing of the pod elsewhere.
    sandbox, app, hog = (f"{pod_cgroup}/{v[k]}" for k in ("sandbox_id", "app.id", "hog.id"))
    by_cgroup = dict(procs)
    assert by_cgroup.get(sandbox) == "sleep infinity", procs
    assert by_cgroup.get(app) == "sleep 3600", procs
    # The hog may already be gone; if it was seen, it was in its own cgroup.
    assert {cgroup for cgroup, _ in procs} <= {sandbox, app, hog}, procs

    # The container's limits in its cgroup; the pod's (all containers limited:
    # the sum of their memory limits; one has no CPU limit: no CPU quota).
    assert v["app.memory.max"] == v["app.limits.memory"]
    quota = int(v["app.limits.cpu_milli"]) * 100_000 // 1000
    assert v["app.cpu.max"] == f"{quota} 100000"
    assert int(v["pod.memory.max"]) == int(v["app.limits.memory"]) + int(v["hog.limits.memory"])
    assert v["pod.cpu.max"] == "max 100000"

    # A process run in the container (ExecSync) is in the container: its root,
    # its cgroup namespace (its cgroup is /), its memory limit.
    assert v["exec.exit_code"] == "0", v.get("exec.stderr")
    assert v["exec.root"] == v["app.root"]
    assert "usr" not in v["exec.root"].split()  # the image's root, not the VM's
    assert v["exec.cgroup"] == "0::/"
    assert v["exec.memory.max"] == v["app.limits.memory"]

    # Past its memory limit the kernel kills the container, and containerd says so.
    assert v["hog.exit"] == "137 OOMKilled"
    assert int(v["pod.memory.events.oom_kill"]) >= 1

    # Removing the sandbox removes the containers' cgroups, so the manager can
    # remove the pod's.
    assert v["pod.children_after_remove"] == ""
    assert v["pod_cgroup_after_remove"] == "gone"
