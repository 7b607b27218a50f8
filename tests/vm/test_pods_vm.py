"""Pods in real cgroups, in a throwaway VM: the agent core with the cgroup
container manager and the host runtime, on pure cgroup v2 and on cgroup v1.

One boot per layout runs tests/vm/guest/pods.py, which prints what it sees;
here the values are checked against what the kubelet computes from the pods'
specs (its formulas written out below, not the project's code): the QoS and pod
cgroups with their limits, each container in a cgroup of its own below its
pod's with the container's limits, exec'd commands there too, a container the
kernel kills for memory reported OOMKilled (exit 137) by the runtime and the
agent, and a deleted pod's cgroup gone.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_kit.api import Quantity

from .guest.pods import CAPACITY, POD_PIDS_LIMIT, PODS, RUNNING, SLEEPERS
from .vm import REPO, VMBoot, boot_vm

pytestmark = pytest.mark.timeout(900)

GUEST = REPO / "tests" / "vm" / "guest" / "pods.py"
CONTROLLERS = {"cpu", "io", "memory", "pids"}

# ------------------------------------------------ the kubelet's formulas, written out

PERIOD = 100000


def milli(q: str | None) -> int:
    return Quantity.parse(q).milli_value() if q else 0


def value(q: str | None) -> int:
    return Quantity.parse(q).value() if q else 0


def shares(milli_cpu: int) -> int:
    """MilliCPUToShares: 2 for nothing, clamped to [2, 262144]."""
    return max(2, min(milli_cpu * 1024 // 1000, 262144)) if milli_cpu > 0 else 2


def weight(cpu_shares: int) -> int:
    """The kubelet's (and runc's before 1.3.2) linear shares-to-weight conversion."""
    return 1 + (cpu_shares - 2) * 9999 // 262142


def quota(milli_cpu: int) -> int:
    return max(milli_cpu * PERIOD // 1000, 1000)


def requests(c: dict[str, Any]) -> dict[str, str]:
    """API defaulting: a missing request is its limit."""
    res = c.get("resources", {})
    return {**res.get("limits", {}), **res.get("requests", {})}


def limits(c: dict[str, Any]) -> dict[str, str]:
    limits_: dict[str, str] = c.get("resources", {}).get("limits", {})
    return limits_


def qos(pod: dict[str, Any]) -> str:
    cs = pod["spec"]["containers"]
    if not any(requests(c) or limits(c) for c in cs):
        return "BestEffort"
    guaranteed = all({"cpu", "memory"} <= set(limits(c)) and requests(c) == limits(c) for c in cs)
    return "Guaranteed" if guaranteed else "Burstable"


def pod_expected(pod: dict[str, Any], v2: bool) -> dict[str, str]:
    """ResourceConfigForPod: the pod cgroup's files."""
    cs = pod["spec"]["containers"]
    tier = qos(pod)
    cpu_req = sum(milli(requests(c).get("cpu")) for c in cs)
    all_cpu = all("cpu" in limits(c) for c in cs)
    all_mem = all("memory" in limits(c) for c in cs)
    s = shares(cpu_req) if tier != "BestEffort" else 2
    q = quota(sum(milli(limits(c).get("cpu")) for c in cs)) if tier != "BestEffort" else 0
    limited_cpu = tier == "Guaranteed" or (tier == "Burstable" and all_cpu)
    mem = sum(value(limits(c).get("memory")) for c in cs)
    limited_mem = tier == "Guaranteed" or (tier == "Burstable" and all_mem)
    if v2:
        return {
            "cpu.weight": str(weight(s)),
            "cpu.max": f"{q} {PERIOD}" if limited_cpu else f"max {PERIOD}",
            "memory.max": str(mem) if limited_mem else "max",
            "pids.max": str(POD_PIDS_LIMIT),
        }
    return {
        "cpu.shares": str(s),
        "cpu.cfs_quota_us": str(q) if limited_cpu else "-1",
        "memory.limit_in_bytes": str(mem) if limited_mem else "<unlimited>",
        "pids.max": str(POD_PIDS_LIMIT),
    }


def container_expected(c: dict[str, Any], v2: bool) -> dict[str, str]:
    """calculateLinuxResources, as runc writes it."""
    req, lim = requests(c), limits(c)
    cpu_limit = milli(lim.get("cpu"))
    s = shares(milli(req.get("cpu")) or cpu_limit)
    mem = value(lim.get("memory"))
    if v2:
        return {
            "cpu.weight": str(weight(s)),
            "cpu.max": f"{quota(cpu_limit) if cpu_limit else 'max'} {PERIOD}",
            "memory.max": str(mem) if mem else "max",
        }
    return {
        "cpu.shares": str(s),
        "cpu.cfs_quota_us": str(quota(cpu_limit)) if cpu_limit else "-1",
        "memory.limit_in_bytes": str(mem) if mem else "<unlimited>",
    }


def oom_score_adj(pod: dict[str, Any], c: dict[str, Any]) -> int:
    """The QoS policy's oom_score_adj (policy.go)."""
    tier = qos(pod)
    if tier == "Guaranteed":
        return -997
    if tier == "BestEffort":
        return 1000
    adj = 1000 - 1000 * value(requests(c).get("memory")) // value(CAPACITY["memory"])
    return 3 if adj < 3 else 999 if adj == 1000 else adj


# ------------------------------------------------------------------ the runs


def _values(output: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, val = line.partition("=")
        if sep and key and " " not in key:
            values[key] = val
    return values


def _boot(cgroup: str) -> tuple[VMBoot, dict[str, str]]:
    boot = boot_vm(
        [str(REPO / ".venv" / "bin" / "python"), str(GUEST)],
        cgroup=cgroup,  # type: ignore[arg-type]
        timeout=600,
        cpus=2,
    )
    print(boot.output)
    print(
        f"VM ({cgroup}): kernel+init {boot.kernel_uptime:.1f} s, qemu start to command "
        f"{boot.boot_seconds:.1f} s, whole run {boot.wall_seconds:.1f} s"
    )
    assert boot.exit_code == 0, boot.output
    v = _values(boot.output)
    assert v.get("done") == "1", boot.output
    return boot, v


def _unlimited_v1(v: dict[str, str]) -> dict[str, str]:
    # v1 has no "max": an unlimited memory cgroup shows the page-rounded maximum.
    return {
        k: "<unlimited>" if k.endswith("memory.limit_in_bytes") and int(x) >= 1 << 62 else x
        for k, x in v.items()
        if x.lstrip("-").isdigit()
    }


def _check(v: dict[str, str], v2: bool) -> None:
    assert v["cgroup.unified"] == str(int(v2))
    assert v["wait.running.seconds"] != "timeout"
    assert v["wait.oom_restart.seconds"] != "timeout"
    if v2:
        # cpu, io, memory and pids delegated from the root down to the pods, and
        # by each pod to its containers' cgroups.
        tiers = ("root", "kubepods", "kubepods/burstable", "kubepods/besteffort")
        keys = [f"{t}.subtree_control" for t in tiers]
        keys += [f"pod.{n}.cgroup.subtree_control" for n in PODS if n != "oom"]
        for key in keys:
            assert set(v[key].split()) >= CONTROLLERS, key
    numeric = v if v2 else {**v, **_unlimited_v1(v)}

    paths = {n: v[f"pod.{n}.path"] for n in PODS}
    assert paths["guaranteed"] == "/kubepods/poduid-guaranteed"
    assert paths["burstable"] == "/kubepods/burstable/poduid-burstable"
    assert paths["besteffort"] == "/kubepods/besteffort/poduid-besteffort"
    for name, pod in PODS.items():
        assert v[f"pod.{name}.exists"] == "1", name
        for file, want in pod_expected(pod, v2).items():
            assert numeric[f"pod.{name}.{file}"] == want, (name, file)
        for c in pod["spec"]["containers"]:
            key = f"container.{name}.{c['name']}"
            if name in RUNNING:
                assert v[f"{key}.exists"] == "1", key
            if v[f"{key}.exists"] == "1":  # the hog's, unless between attempts
                for file, want in container_expected(c, v2).items():
                    assert numeric[f"{key}.{file}"] == want, (key, file)
    for name, sleepers in SLEEPERS.items():
        pod = PODS[name]
        for c in sleepers:
            # The process is in its own cgroup below its pod's, in every hierarchy.
            cid = v[f"container.{name}.{c['name']}.id"]
            own = f"{paths[name]}/{cid}"
            proc = f"process.{name}.{c['name']}"
            if v2:
                assert v[f"{proc}.cgroup"] == own, proc
            else:
                for controller in ("memory", "cpu", "pids"):
                    assert v[f"{proc}.cgroup.{controller}"] == own, (proc, controller)
            assert v[f"{proc}.oom_score_adj"] == str(oom_score_adj(pod, c)), proc

    # An exec'd command joins the container's cgroup, not the pod's.
    exec_own = f"{paths['guaranteed']}/{v['container.guaranteed.main.id']}"
    assert v["exec.guaranteed.cgroup" if v2 else "exec.guaranteed.cgroup.memory"] == exec_own

    # Killed by the kernel past its own memory limit (the pod's has none): OOMKilled,
    # 137, in the runtime and in the agent's status (the last state of a restarted
    # container).
    assert numeric["pod.oom.memory.max" if v2 else "pod.oom.memory.limit_in_bytes"] in (
        "max",
        "<unlimited>",
    )
    exits = v["runtime.oom.exits"].split()
    assert exits, "no exited hog in the runtime"
    assert set(exits) == {"OOMKilled:137"}, exits
    assert int(v["container.oom.hog.restart_count"]) >= 1
    assert v["container.oom.hog.last.reason"] == "OOMKilled"
    assert v["container.oom.hog.last.exit_code"] == "137"

    # Deleting a pod stops its processes and removes its cgroup.
    assert v["wait.deleted.seconds"] != "timeout"
    assert v["deleted.guaranteed.exists"] == "0"
    assert v["deleted.guaranteed.process"] == "0"


def test_pods_on_pure_cgroup_v2() -> None:
    _, v = _boot("v2")
    _check(v, v2=True)


def test_pods_on_cgroup_v1() -> None:
    _, v = _boot("v1")
    _check(v, v2=False)
