"""Inside a throwaway VM: the agent core runs real pods in real cgroups.

The composer (``Kubelet``) with the cgroup container manager and the host
runtime runs a Guaranteed, a Burstable (two containers, one without limits)
and a BestEffort pod, and a pod whose container allocates past its memory
limit. The script prints ``key=value`` lines for tests/vm/test_pods_vm.py:
the cgroup layout and controllers, each pod's and each container's cgroup
files, where each container's process (and a command exec'd into one) is, the
OOM-killed container's status in the runtime and in the agent, and whether
deleting a pod removed its cgroup. It reads cgroup v2 files on a unified
hierarchy and the v1 controllers' files otherwise, and exits 0 even when a
check would fail, so the test shows every value.

The pods (``PODS``), the node's capacity and ``podPidsLimit`` are module
constants: the test computes what it expects from them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CGROUP = Path("/sys/fs/cgroup")
NODE = "vm-node"
CAPACITY = {"cpu": "2", "memory": "1Gi", "pods": "10", "ephemeral-storage": "1Gi"}
POD_PIDS_LIMIT = 256
#: The memory limit of the container that allocates past it.
HOG_LIMIT = "32Mi"
#: Grows by 4 MiB of written bytes at a time until the kernel kills it.
HOG = "b = bytearray()\nwhile True:\n    b += b'x' * (4 << 20)\n"


def _container(name: str, seconds: int, resources: dict[str, Any]) -> dict[str, Any]:
    # A distinct sleep time per container: its process is found by its command line.
    return {
        "name": name,
        "image": "busybox",
        "command": ["sleep", str(seconds)],
        "resources": resources,
    }


PODS: dict[str, dict[str, Any]] = {
    "guaranteed": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guaranteed", "uid": "uid-guaranteed"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                _container(
                    "main",
                    3601,
                    {"limits": {"cpu": "500m", "memory": "64Mi"}},
                )
            ],
        },
    },
    "burstable": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "burstable", "uid": "uid-burstable"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                _container(
                    "limited",
                    3602,
                    {
                        "requests": {"cpu": "250m", "memory": "32Mi"},
                        "limits": {"cpu": "750m", "memory": "128Mi"},
                    },
                ),
                _container("unlimited", 3603, {"requests": {"cpu": "100m"}}),
            ],
        },
    },
    "besteffort": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "besteffort", "uid": "uid-besteffort"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [_container("main", 3604, {})],
        },
    },
    "oom": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "oom", "uid": "uid-oom"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Always",
            # A neighbour without a limit leaves the pod cgroup unlimited: only
            # the hog's own cgroup limits it.
            "containers": [
                {
                    "name": "hog",
                    "image": "busybox",
                    "command": [sys.executable, "-c", HOG],
                    "resources": {"limits": {"memory": HOG_LIMIT}},
                },
                _container("neighbour", 3605, {}),
            ],
        },
    },
}
#: The pods all of whose containers keep running (the OOM pod's hog is killed).
RUNNING = ("guaranteed", "burstable", "besteffort")
#: The containers that sleep, by pod: their processes are found by command line.
SLEEPERS = {
    name: [c for c in pod["spec"]["containers"] if c["command"][0] == "sleep"]
    for name, pod in PODS.items()
}

#: The files read in each pod and container cgroup, per layout (v1: by controller).
V2_FILES = ("cpu.weight", "cpu.max", "memory.max", "pids.max", "cgroup.subtree_control")
V1_FILES = (
    ("cpu", "cpu.shares"),
    ("cpu", "cpu.cfs_period_us"),
    ("cpu", "cpu.cfs_quota_us"),
    ("memory", "memory.limit_in_bytes"),
    ("pids", "pids.max"),
)


def show(key: str, value: object) -> None:
    print(f"{key}={value}", flush=True)


def words(path: Path) -> str:
    return " ".join(sorted(path.read_text().split()))


def unified() -> bool:
    return (CGROUP / "cgroup.controllers").exists()


def v1_mounts() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup":
            for option in fields[3].split(","):
                found.setdefault(option, fields[1])
    return found


def show_cgroup(prefix: str, path: str) -> None:
    """Print the files of the cgroup ``path`` (relative to the hierarchies)."""
    if unified():
        where = CGROUP / path.strip("/")
        show(f"{prefix}.exists", int(where.is_dir()))
        for name in V2_FILES:
            file = where / name
            text = file.read_text().strip() if file.exists() else "<none>"
            show(f"{prefix}.{name}", words(file) if name.startswith("cgroup.") else text)
        return
    mounts = v1_mounts()
    show(f"{prefix}.exists", int(all(Path(mounts[c] + path).is_dir() for c in ("cpu", "memory"))))
    for controller, name in V1_FILES:
        file = Path(mounts[controller] + path, name)
        show(f"{prefix}.{name}", file.read_text().strip() if file.exists() else "<none>")


def cgroups_of(pid: int | str) -> dict[str, str]:
    """``/proc/PID/cgroup``: hierarchy (``""`` for v2, else its controllers) -> path."""
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            out[name] = path
    return out


def show_membership(prefix: str, table: dict[str, str]) -> None:
    if unified():
        show(f"{prefix}.cgroup", table.get("", "<none>"))
        return
    for controller in ("memory", "cpu", "pids"):
        show(f"{prefix}.cgroup.{controller}", table.get(controller, "<none>"))


def pid_of_sleep(seconds: int) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", str(seconds).encode()]:
                return int(entry)
    return None


async def wait_for(what: str, check: Any, timeout: float) -> bool:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            show(f"wait.{what}.seconds", f"{time.monotonic() - start:.1f}")
            return True
        await asyncio.sleep(0.2)
    show(f"wait.{what}.seconds", "timeout")
    return False


async def scenario(tmp: Path) -> None:
    start = time.monotonic()
    from kubelet_kit.api import Quantity
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.api.loading import load_pod
    from kubelet_kit.cm.manager import CgroupContainerManager
    from kubelet_kit.config.programmatic import ProgrammaticSource
    from kubelet_kit.container import ContainerFilter, ContainerState
    from kubelet_kit.kubelet import Kubelet
    from kubelet_kit.runtimes.host import HostProcessRuntime
    from kubelet_kit.testing.env import stub_parts

    show("import_seconds", f"{time.monotonic() - start:.1f}")
    cm = CgroupContainerManager(
        KubeletConfiguration(pod_pids_limit=POD_PIDS_LIMIT),
        capacity={k: Quantity.parse(v) for k, v in CAPACITY.items()},
    )
    runtime = HostProcessRuntime(tmp / "runtime", kill_timeout=5)
    source = ProgrammaticSource()
    kubelet = Kubelet(
        **stub_parts(
            runtime=runtime,
            sources=[source],
            node_name=NODE,
            root_dir=tmp / "state",
            pod_logs_dir=tmp / "logs",
            container_manager=cm,
        )
    )
    pods = {name: load_pod(m, node_name=NODE) for name, m in PODS.items()}
    task = asyncio.create_task(kubelet.run())
    try:
        for pod in pods.values():
            source.add(pod)

        def status(name: str) -> Any:
            return kubelet.pod_status(pods[name].metadata.uid)

        def running(name: str) -> bool:
            s = status(name)
            return (
                s is not None
                and all(c.state.running for c in s.container_statuses)
                and bool(s.container_statuses)
            )

        await wait_for("running", lambda: all(running(n) for n in RUNNING), 180)

        def oom_restarted() -> bool:
            s = status("oom")
            hog = next((c for c in s.container_statuses if c.name == "hog"), None) if s else None
            return hog is not None and hog.restart_count >= 1 and bool(hog.last_state.terminated)

        await wait_for("oom_restart", oom_restarted, 120)
        # At once, before the agent prunes dead containers: the runtime's own
        # record of every hog that has exited.
        uid = pods["oom"].metadata.uid
        exits = []
        for info in await runtime.list_containers(
            ContainerFilter(label_selector={"io.kubernetes.pod.uid": uid})
        ):
            cs = await runtime.container_status(info.id)
            if info.metadata.name == "hog" and cs.state is ContainerState.EXITED:
                exits.append(f"{cs.reason}:{cs.exit_code}")
        show("runtime.oom.exits", " ".join(exits))

        show("cgroup.unified", int(unified()))
        if unified():
            show("root.subtree_control", words(CGROUP / "cgroup.subtree_control"))
            for tier in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
                show(f"{tier}.subtree_control", words(CGROUP / tier / "cgroup.subtree_control"))

        for name in PODS:
            pod = pods[name]
            path = cm.pod_cgroup_path(pod)
            show(f"pod.{name}.path", path)
            show_cgroup(f"pod.{name}", path)
            s = status(name)
            for c in s.container_statuses if s is not None else ():
                key = f"container.{name}.{c.name}"
                cid = c.container_id.rpartition("://")[2]
                show(f"{key}.id", cid)
                show(f"{key}.restart_count", c.restart_count)
                show_cgroup(key, f"{path}/{cid}")
                if c.last_state.terminated is not None:
                    t = c.last_state.terminated
                    show(f"{key}.last.reason", t.reason)
                    show(f"{key}.last.exit_code", t.exit_code)

        for name, sleepers in SLEEPERS.items():
            for spec in sleepers:
                key = f"process.{name}.{spec['name']}"
                pid = pid_of_sleep(int(spec["command"][1]))
                if pid is None:
                    show(f"{key}.pid", "<none>")
                    continue
                show_membership(key, cgroups_of(pid))
                show(f"{key}.oom_score_adj", Path(f"/proc/{pid}/oom_score_adj").read_text().strip())

        # A command exec'd into a container lands in the container's cgroup too.
        s = status("guaranteed")
        if s is not None and s.container_statuses:
            cid = s.container_statuses[0].container_id.rpartition("://")[2]
            result = await runtime.exec_sync(cid, ["cat", "/proc/self/cgroup"], timeout=60)
            table = {}
            for line in result.stdout.decode().splitlines():
                _, names, path = line.split(":", 2)
                for n in names.split(",") if names else [""]:
                    table[n] = path
            show_membership("exec.guaranteed", table)

        # Deleting a pod removes its cgroup (and its containers' with it).
        deleted = cm.pod_cgroup_path(pods["guaranteed"])
        source.remove(pods["guaranteed"].metadata.uid)
        deleted_dir = Path((str(CGROUP) if unified() else v1_mounts()["memory"]) + deleted)

        def gone() -> bool:
            return not deleted_dir.exists()

        await wait_for("deleted", gone, 60)
        show("deleted.guaranteed.exists", int(not gone()))
        show("deleted.guaranteed.process", int(pid_of_sleep(3601) is not None))
    finally:
        kubelet.stop()
        await asyncio.wait_for(task, 60)
        for sandbox in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(sandbox.id)
        for pod in pods.values():
            await cm.remove_pod_cgroup(pod)
    show("done", 1)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kubelet-kit-vm-") as tmp:
        asyncio.run(scenario(Path(tmp)))


if __name__ == "__main__":
    main()
