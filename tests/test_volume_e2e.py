"""End to end: the Kubelet composer with the ReconcilingVolumeManager and the
host-process runtime (as root, so mounts are applied in mount namespaces).

A pod reads its configMap and its secret (on a tmpfs), and its app container
reads a file a sidecar wrote into a shared emptyDir; after the pod's manifest is
deleted every volume directory and mount is gone. Real time, bounded waits;
every mount target is under the test's temporary directory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from realtime import wait_until

from kubelet_kit.config import FileSource
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.volume import ManifestConfigSource, ReconcilingVolumeManager, mounter

pytestmark = pytest.mark.timeout(90)

NODE = "vol-node"
RequireReal = Callable[[bool, str], None]

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data:
  greeting: hello from the configMap
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret}
data:
  password: czNjcjN0LXZhbHVl   # s3cr3t-value
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: vols}}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
    - name: config
      configMap: {{name: app-config}}
    - name: creds
      secret: {{secretName: app-secret, defaultMode: 0400}}
    - name: shared
      emptyDir: {{}}
  initContainers:
    - name: writer
      image: busybox
      restartPolicy: Always
      command: [sh, -c, "echo written-by-sidecar > {shared}/msg; exec sleep 300"]
      volumeMounts:
        - {{name: shared, mountPath: "{shared}"}}
  containers:
    - name: app
      image: busybox
      command:
        - sh
        - -c
        - >-
          echo "config=$(cat {cfg}/greeting)";
          echo "secret=$(cat {sec}/password)";
          while [ ! -e {shared}/msg ]; do sleep 0.1; done;
          echo "shared=$(cat {shared}/msg)";
          exec sleep 300
      volumeMounts:
        - {{name: config, mountPath: "{cfg}"}}
        - {{name: creds, mountPath: "{sec}", readOnly: true}}
        - {{name: shared, mountPath: "{shared}"}}
"""


class Agent:
    def __init__(self, tmp: Path, refresh_period: float = 60.0) -> None:
        self.tmp = tmp
        self.manifests = tmp / "manifests"
        self.configs = tmp / "configs"
        self.root = tmp / "state"
        self.logs = tmp / "logs"
        for d in (self.manifests, self.configs):
            d.mkdir()
        self.volumes = ReconcilingVolumeManager(
            self.root,
            config_source=ManifestConfigSource(self.configs),
            refresh_period=refresh_period,
        )
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=HostProcessRuntime(self.root / "runtime"),
                sources=[FileSource(self.manifests, node_name=NODE, check_frequency=0.3)],
                volume_manager=self.volumes,
                node_name=NODE,
                root_dir=self.root,
                pod_logs_dir=self.logs,
            )
        )
        self.task: asyncio.Task[None] | None = None

    def app_log(self, pod: str = "vols") -> str:
        logs = list(self.logs.glob(f"default_{pod}-{NODE}_*/app/0.log"))
        return join_output(read_log(logs[0])).decode() if logs else ""


@pytest.fixture
async def agent(
    tmp_path: Path, require_real: RequireReal, request: pytest.FixtureRequest
) -> AsyncIterator[Agent]:
    require_real(mounter.can_mount(), "root (CAP_SYS_ADMIN) for tmpfs and mount namespaces")
    a = Agent(tmp_path, refresh_period=getattr(request, "param", 60.0))
    try:
        yield a
    finally:
        if a.task is not None and not a.task.done():
            a.kubelet.stop()
            await asyncio.wait_for(a.task, 30)
        runtime = HostProcessRuntime(a.root / "runtime")
        for c in await runtime.list_containers():
            await runtime.stop_container(c.id, 0)
        for s in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(s.id)
        for m in mounter.mount_points_under(tmp_path):  # only ever our own
            mounter.unmount(m, detach=True)


async def test_pod_reads_config_secret_and_sidecar_file_and_all_is_gone_after_delete(
    agent: Agent,
) -> None:
    (agent.configs / "app.yaml").write_text(CONFIG)
    inside = agent.tmp / "ctr"  # container paths, created on the host if missing
    paths = {
        "cfg": inside / "etc/config",
        "sec": inside / "etc/secret",
        "shared": inside / "shared",
    }
    (agent.manifests / "vols.yaml").write_text(POD.format(**{k: str(v) for k, v in paths.items()}))
    agent.task = asyncio.create_task(agent.kubelet.run())

    await wait_until(lambda: "shared=" in agent.app_log(), "the app's log")
    lines = agent.app_log().splitlines()
    assert lines == [
        "config=hello from the configMap",
        "secret=s3cr3t-value",
        "shared=written-by-sidecar",
    ]
    [pod] = agent.kubelet.pods()
    pod_dir = agent.root / "pods" / pod.uid
    secret_dir = pod_dir / "volumes" / "kubernetes.io~secret" / "creds"
    assert mounter.is_mount_point(secret_dir)  # the secret lives on a tmpfs
    assert (pod_dir / "volumes" / "kubernetes.io~empty-dir" / "shared" / "msg").read_text() == (
        "written-by-sidecar\n"
    )
    # The host's view of the container paths is untouched (only empty targets).
    assert list(paths["cfg"].iterdir()) == [] and list(paths["shared"].iterdir()) == []

    (agent.manifests / "vols.yaml").unlink()
    await wait_until(lambda: not pod_dir.exists(), "the pod's volume directories to go")
    assert mounter.mount_points_under(agent.tmp) == []
    assert agent.volumes.actual.volumes == {}


WATCHER = """\
apiVersion: v1
kind: Pod
metadata: {{name: watcher}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
    - name: config
      configMap: {{name: app-config}}
  containers:
    - name: app
      image: busybox
      command: [sh, -c, "while true; do echo \\"seen=$(cat {cfg}/greeting)\\"; sleep 0.1; done"]
      volumeMounts:
        - {{name: config, mountPath: "{cfg}"}}
"""


@pytest.mark.parametrize("agent", [0.5], indirect=True)
async def test_a_running_container_sees_config_updates_whole(agent: Agent) -> None:
    (agent.configs / "app.yaml").write_text(CONFIG)
    cfg = agent.tmp / "ctr" / "cfg"
    (agent.manifests / "watcher.yaml").write_text(WATCHER.format(cfg=cfg))
    agent.task = asyncio.create_task(agent.kubelet.run())
    await wait_until(
        lambda: "seen=hello from the configMap" in agent.app_log("watcher"), "the first value"
    )
    (agent.configs / "app.yaml").write_text(
        CONFIG.replace("hello from the configMap", "updated value")
    )
    await wait_until(
        lambda: "seen=updated value" in agent.app_log("watcher"),
        "the updated value in the running container",
    )
    # Every read saw one whole value: the old or the new, never a mix or nothing.
    seen = {line for line in agent.app_log("watcher").splitlines() if line.startswith("seen=")}
    assert seen == {"seen=hello from the configMap", "seen=updated value"}
