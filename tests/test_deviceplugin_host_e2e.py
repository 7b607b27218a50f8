"""End to end on this machine with real processes: the example plugin as its own
process, the agent on HostProcessRuntime, and a pod whose process reads the
widget the plugin allocated from its environment. Real time, bounded waits."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from realtime import wait_until

from kubelet_kit.cm import StubContainerManager
from kubelet_kit.cm.devicemanager import DeviceManager
from kubelet_kit.config import FileSource
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts

RES = "example.com/widget"
NODE = "widget-node"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "device_plugin.py"
# The pod's process: write the widgets it was given, then stay running.
READER = (
    "import os, sys, time; open(sys.argv[1], 'w').write(os.environ['WIDGET_IDS']); time.sleep(600)"
)


class Node:
    def __init__(self, tmp: Path, plugins_dir: Path) -> None:
        self.manifests = tmp / "manifests"
        self.manifests.mkdir()
        self.dm = DeviceManager(plugins_dir=plugins_dir)
        self.cm = StubContainerManager(device_manager=self.dm)
        self.runtime = HostProcessRuntime(tmp / "runtime", kill_timeout=5)
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.runtime,
                sources=[FileSource(self.manifests, node_name=NODE, check_frequency=0.3)],
                node_name=NODE,
                root_dir=tmp / "state",
                pod_logs_dir=tmp / "logs",
                container_manager=self.cm,
            )
        )

    def phase(self, name: str) -> str:
        for pod in self.kubelet.pods():
            if pod.metadata.name == f"{name}-{NODE}":
                status = self.kubelet.pod_status(pod.metadata.uid)
                return status.phase if status else ""
        return ""


@pytest.fixture
async def plugins_dir() -> AsyncIterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dph-"))  # unix socket paths are short
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def test_pod_process_sees_its_widget(tmp_path: Path, plugins_dir: Path) -> None:
    node = Node(tmp_path, plugins_dir)
    out = tmp_path / "widget.txt"
    agent = asyncio.create_task(node.kubelet.run())
    plugin = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--count",
        "2",
        "--plugins-dir",
        str(plugins_dir),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: node.dm.allocatable() == {RES: 2}, "widgets registered")
        assert node.cm.node_allocatable()[RES].value() == 2
        (node.manifests / "reader.yaml").write_text(f"""\
apiVersion: v1
kind: Pod
metadata: {{name: reader}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["python3", "-c", "{READER}", "{out}"]
    resources:
      limits: {{{RES}: 1}}
""")
        await wait_until(lambda: node.phase("reader") == "Running", "pod Running")
        await wait_until(lambda: out.exists() and out.read_text() != "", "widget written")
        assert out.read_text() == "widget-0"
        [uid] = [p.metadata.uid for p in node.kubelet.pods()]
        assert node.dm.pod_devices(uid) == {"main": {RES: ("widget-0",)}}

        # Deleting the pod frees its widget.
        (node.manifests / "reader.yaml").unlink()
        await wait_until(lambda: node.dm.pod_devices(uid) == {}, "widget freed")
    finally:
        if plugin.returncode is None:
            plugin.send_signal(signal.SIGTERM)
        await asyncio.wait_for(plugin.wait(), 20)
        node.kubelet.stop()
        await asyncio.wait_for(agent, 30)
        for container in await node.runtime.list_containers():
            await node.runtime.stop_container(container.id, 0)
        for sandbox in await node.runtime.list_pod_sandboxes():
            await node.runtime.remove_pod_sandbox(sandbox.id)
    assert plugin.returncode == 0
