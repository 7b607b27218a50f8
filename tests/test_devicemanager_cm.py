"""Container managers holding a DeviceManager: capacity, admission order, release,
container run options; and a ContainerManager without one."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Quantity, load_pod
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm import ContainerManager, StubContainerManager
from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.devicemanager import DeviceManager
from kubelet_kit.cm.interfaces import ContainerRunOptions
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.container import KeyValue
from kubelet_kit.deviceplugin import ContainerAllocation, Device, DevicePlugin
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree

RES = "example.com/widget"
CAPACITY = {
    "cpu": Quantity.parse("2"),
    "memory": Quantity.parse("4Gi"),
    "pods": Quantity.parse("110"),
}


async def until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Bounded short real waits for gRPC traffic on real sockets."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s")
        await asyncio.sleep(0.01)


class Widgets(DevicePlugin):
    async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        return ContainerAllocation(envs={"W": ",".join(device_ids)})


def pod(name: str, widgets: int, cpu: str = "100m") -> Any:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": cpu},
                            "limits": {RES: str(widgets)} if widgets else {},
                        },
                    }
                ]
            },
        }
    )


@pytest.fixture
async def plugins_dir() -> AsyncIterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dmc-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cgroup_manager(dm: DeviceManager) -> CgroupContainerManager:
    return CgroupContainerManager(
        KubeletConfiguration(),
        driver=CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()),
        capacity=CAPACITY,
        device_manager=dm,
    )


@pytest.mark.parametrize("kind", ["cgroup", "stub"])
async def test_manager_with_devices(plugins_dir: Path, kind: str) -> None:
    dm = DeviceManager(plugins_dir=plugins_dir, clock=FakeClock())
    cm: Any = cgroup_manager(dm) if kind == "cgroup" else StubContainerManager(device_manager=dm)
    assert isinstance(cm, ContainerManager)
    await cm.start()
    plugin = Widgets(
        RES,
        plugins_dir=plugins_dir,
        devices=[Device("w0"), Device("w1"), Device("w2", health="Unhealthy")],
    )
    try:
        async with plugin:
            await until(lambda: dm.capacity().get(RES) == 3, "widgets in capacity")
            assert cm.node_capacity()[RES] == Quantity.parse("3")
            assert cm.node_allocatable()[RES] == Quantity.parse("2")
            assert cm.node_capacity()["pods"] == Quantity.parse("110")

            a = pod("a", 2)
            assert cm.admit_pod(a, []).admit
            refused = cm.admit_pod(pod("b", 1), [a])
            assert (refused.reason, refused.message) == (
                "UnexpectedAdmissionError",
                f"Allocate failed due to requested number of devices unavailable for {RES}. "
                "Requested: 1, Available: 0, which is unexpected",
            )
            opts = await cm.container_run_options(a, a.spec.containers[0])
            assert opts.envs == (KeyValue("W", "w0,w1"),)
            plain = pod("plain", 0)
            assert await cm.container_run_options(plain, plain.spec.containers[0]) == (
                ContainerRunOptions()
            )

            await cm.remove_pod_cgroup(a)
            assert dm.pod_devices("uid-a") == {}
            assert cm.admit_pod(pod("b", 1), []).admit
            # Housekeeping frees the devices of pods no longer active.
            b = pod("b", 1)
            await cm.container_run_options(b, b.spec.containers[0])
            await cm.remove_orphaned_pod_cgroups([])
            assert dm.pod_devices("uid-b") == {}
    finally:
        await cm.stop()
    assert not dm.socket_path.exists()


async def test_refusal_by_other_resources_gives_devices_back(plugins_dir: Path) -> None:
    dm = DeviceManager(plugins_dir=plugins_dir, clock=FakeClock())
    cm = cgroup_manager(dm)
    await cm.start()
    try:
        async with Widgets(RES, plugins_dir=plugins_dir, devices=[Device("w0")]):
            await until(lambda: dm.allocatable().get(RES) == 1, "widgets")
            hungry = cm.admit_pod(pod("hungry", 1, cpu="3"), [])
            assert hungry.reason == "OutOfcpu"
            # The refused pod holds no reservation: the widget is still free.
            assert cm.admit_pod(pod("b", 1), []).admit
    finally:
        await cm.stop()


async def test_without_device_manager_run_options_are_empty() -> None:
    for cm in (
        StubContainerManager(),
        CgroupContainerManager(
            KubeletConfiguration(),
            driver=CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()),
            capacity=CAPACITY,
        ),
    ):
        p = pod("p", 1)
        assert await cm.container_run_options(p, p.spec.containers[0]) == ContainerRunOptions()
        assert RES not in cm.node_capacity()


def test_cm_imports_no_grpc() -> None:
    """The container manager package stays light: gRPC only with the device manager."""
    code = (
        "import sys, kubelet_kit.cm; "
        "assert 'grpc' not in sys.modules, 'grpc imported'; "
        "import kubelet_kit.cm.devicemanager; assert 'grpc' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
