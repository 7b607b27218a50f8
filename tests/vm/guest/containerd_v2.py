"""Inside a pure cgroup v2 VM: containerd and runc with the cgroupfs driver put a
pod's sandbox and containers in the pod cgroup the container manager made.

The container manager (cgroupfs driver) makes kubepods and the pod's cgroup; a
private containerd (runc's ``SystemdCgroup = false``, images imported from local
tars, started as the integration tests start it) runs the pod through the
project's CRI client, with the sandbox and container configs the agent would hand
it. This program then reads from outside which cgroup each process of the pod is
in and what limits those cgroups have, reads the same from inside a container
(ExecSync), waits for a container that runs past its memory limit, and removes
the pod again.

Run it as ``python -m tests.vm.guest.containerd_v2`` from the checkout (it
imports the integration tests' containerd harness). It prints ``key=value``
lines for tests/vm/test_containerd_vm.py to check; a step that raises ends it
with the last lines of containerd's log and a traceback.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from kubelet_kit.api import Pod, load_pod
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm import CgroupContainerManager
from kubelet_kit.container import ContainerState, DNSConfig
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.podsync.configs import container_config, sandbox_config
from tests.integration.containerd import BUSYBOX_IMAGE, PAUSE_IMAGE, Containerd, build_image_tar

CGROUP = Path("/sys/fs/cgroup")
_RUNC = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc'


def show(key: str, value: object) -> None:
    """One line of the program's report."""
    print(f"{key}={value}", flush=True)


def read(path: Path) -> str:
    """A cgroup file's content, or ``<absent>``."""
    return path.read_text().strip() if path.exists() else "<absent>"


class CgroupfsContainerd(Containerd):
    """The integration tests' private containerd, with runc's cgroup driver named
    (cgroupfs: ``SystemdCgroup = false``) and only the two images the pod runs."""

    def write_config(self) -> None:
        """The harness's config, plus runc as the runtime with its cgroup driver."""
        super().write_config()
        with self.config.open("a") as config:
            config.write(
                f"\n{_RUNC}]\n"
                '  runtime_type = "io.containerd.runc.v2"\n'
                f"\n{_RUNC}.options]\n"
                "  SystemdCgroup = false\n"
            )

    def import_images(self) -> None:
        """Import the pause and busybox images from tars (no network to pull)."""
        for name, entrypoint, cmd in (
            (PAUSE_IMAGE, ["sleep", "infinity"], []),
            (BUSYBOX_IMAGE, [], ["sh"]),
        ):
            tar = self.base / (name.rpartition("/")[2].replace(":", "-") + ".tar")
            build_image_tar(tar, name, entrypoint, cmd)
            self.ctr("images", "import", "--snapshotter", "native", str(tar))


def the_pod() -> Pod:
    """A Burstable pod on the host's network: ``app`` stays up with CPU and memory
    limits, ``hog`` allocates (grep reads /dev/zero as one endless line) past its
    memory limit."""
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "cgroups",
                "namespace": "default",
                "uid": "3c1d0e6a-5d1b-4f4e-9a38-6a2f0f0ac9d2",
            },
            "spec": {
                "hostNetwork": True,
                "containers": [
                    {
                        "name": "app",
                        "image": BUSYBOX_IMAGE,
                        "command": ["sleep", "3600"],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "16Mi"},
                            "limits": {"cpu": "500m", "memory": "48Mi"},
                        },
                    },
                    {
                        "name": "hog",
                        "image": BUSYBOX_IMAGE,
                        "command": ["grep", "x", "/dev/zero"],
                        "resources": {"limits": {"memory": "24Mi"}},
                    },
                ],
            },
        }
    )


def pod_processes(pod_cgroup: str) -> list[tuple[str, int, str]]:
    """(cgroup, pid, command line) of each process in the pod's cgroup or below."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text().strip().removeprefix("0::")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # it ended meanwhile
            continue
        if cgroup == pod_cgroup or cgroup.startswith(pod_cgroup + "/"):
            found.append((cgroup, int(entry.name), cmdline))
    return sorted(found)


def has_process(cgroup: Path) -> bool:
    """Whether a process is in ``cgroup`` (False when there is no such cgroup)."""
    try:
        return bool((cgroup / "cgroup.procs").read_text().strip())
    except OSError:
        return False


async def settled_processes(
    pod_cgroup: str, cgroups: list[Path], within: float = 60
) -> list[tuple[str, int, str]]:
    """:func:`pod_processes` once each of ``cgroups`` has a process and none of
    the pod's processes is runc's init still (it execs the container's command
    just after StartContainer returns); as they are then if that takes longer."""
    deadline = time.monotonic() + within
    while True:
        procs = pod_processes(pod_cgroup)
        in_runc = any(cmdline.split()[1:2] == ["init"] for _, _, cmdline in procs)
        empty = any(not has_process(c) for c in cgroups)
        if (not in_runc and not empty) or time.monotonic() > deadline:
            return procs
        await asyncio.sleep(0.2)


async def wait_exited(cri: CRIRuntime, container_id: str, within: float) -> None:
    """Poll the container's status on real time until it has exited."""
    deadline = time.monotonic() + within
    while (await cri.container_status(container_id)).state is not ContainerState.EXITED:
        if time.monotonic() > deadline:
            raise TimeoutError(f"container {container_id} still runs after {within:g} s")
        await asyncio.sleep(0.2)


async def run(harness: Containerd) -> None:
    """The steps; see the module docstring."""
    manager = CgroupContainerManager(KubeletConfiguration(cgroup_driver="cgroupfs"))
    await manager.start()
    show("driver", f"{manager.driver_name} {type(manager.driver).__name__}")
    show("kubepods", manager.kubepods_path())

    start = time.monotonic()
    harness.write_config()
    harness.start(wait=120)
    show("containerd_start_seconds", f"{time.monotonic() - start:.1f}")
    start = time.monotonic()
    harness.import_images()
    show("image_import_seconds", f"{time.monotonic() - start:.1f}")

    pod = the_pod()
    show("pod_uid", pod.uid)
    for c in pod.spec.containers:
        limits = c.resources.limits
        show(f"{c.name}.limits.memory", limits["memory"].value())
        if "cpu" in limits:
            show(f"{c.name}.limits.cpu_milli", limits["cpu"].milli_value())
    pod_cgroup = await manager.ensure_pod_cgroup(pod)
    show("pod_cgroup", pod_cgroup)
    pod_dir = CGROUP / pod_cgroup.strip("/")

    async with CRIRuntime(harness.endpoint, timeout=120) as cri:
        version = await cri.version()
        show("runtime", f"{version.runtime_name} {version.runtime_version}")
        sandbox = sandbox_config(
            pod,
            attempt=0,
            pod_logs_dir=str(harness.logs),
            cgroup_parent=pod_cgroup,
            resolv_conf=DNSConfig(),
        )
        start = time.monotonic()
        sandbox_id = await cri.run_pod_sandbox(sandbox)
        show("sandbox_id", sandbox_id)
        ids = {}
        for container in pod.spec.containers:
            config = container_config(
                pod,
                container,
                restart_count=0,
                env=(),
                resources=manager.container_resources(pod, container),
            )
            ids[container.name] = await cri.create_container(sandbox_id, config, sandbox)
            await cri.start_container(ids[container.name])
            show(f"{container.name}.id", ids[container.name])
        show("pod_start_seconds", f"{time.monotonic() - start:.1f}")

        # Where the pod's processes are, as the host sees them, once the sandbox's
        # and the app's have left runc's init for their own command.
        procs = await settled_processes(pod_cgroup, [pod_dir / sandbox_id, pod_dir / ids["app"]])
        app_pid = 0
        for cgroup, pid, cmdline in procs:
            show("proc", f"{cgroup} {cmdline}")
            if cgroup.endswith("/" + ids["app"]):
                app_pid = pid
        app_dir = pod_dir / ids["app"]
        for name in ("memory.max", "cpu.max"):
            show(f"app.{name}", read(app_dir / name))
        for name in ("memory.max", "cpu.max"):
            show(f"pod.{name}", read(pod_dir / name))

        # What a process run in the container sees: the container's root (as its
        # main process has it), its own cgroup as /, its memory limit.
        if app_pid:
            show("app.root", " ".join(sorted(os.listdir(f"/proc/{app_pid}/root"))))
        script = "echo $(ls -A /); cat /proc/self/cgroup /sys/fs/cgroup/memory.max"
        inside = await cri.exec_sync(ids["app"], ["sh", "-c", script], timeout=60)
        show("exec.exit_code", inside.exit_code)
        lines = [*inside.stdout.decode().splitlines(), "", "", ""]
        show("exec.root", " ".join(sorted(lines[0].split())))
        show("exec.cgroup", lines[1])
        show("exec.memory.max", lines[2])
        if inside.stderr:
            show("exec.stderr", inside.stderr.decode().strip().replace("\n", " | "))

        await wait_exited(cri, ids["hog"], within=120)
        hog = await cri.container_status(ids["hog"])
        show("hog.exit", f"{hog.exit_code} {hog.reason}")
        # Counted for the pod's descendants too; the hog's own cgroup went with it.
        events = dict(line.split() for line in read(pod_dir / "memory.events").splitlines())
        show("pod.memory.events.oom_kill", events.get("oom_kill", "<absent>"))

        start = time.monotonic()
        await cri.stop_pod_sandbox(sandbox_id)
        await cri.remove_pod_sandbox(sandbox_id)
        show("pod_remove_seconds", f"{time.monotonic() - start:.1f}")
        left = sorted(p.name for p in pod_dir.iterdir() if p.is_dir())
        show("pod.children_after_remove", " ".join(left))
    await manager.remove_pod_cgroup(pod)
    show("pod_cgroup_after_remove", "present" if pod_dir.exists() else "gone")


def main() -> None:
    """Run the steps against a containerd of this program's own."""
    harness = CgroupfsContainerd(Path(tempfile.mkdtemp(prefix="kk-containerd-")))
    try:
        asyncio.run(run(harness))
    except BaseException:
        if harness.log_file.exists():
            print("--- containerd's log, last lines ---")
            print("\n".join(harness.log_file.read_text().splitlines()[-40:]), flush=True)
        raise


if __name__ == "__main__":
    main()
