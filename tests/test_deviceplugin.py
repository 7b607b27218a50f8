"""The device plugin SDK over real unix-socket gRPC: what it registers, serves and
answers, and how it re-registers."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

import kubelet_kit.deviceplugin as sdk
from kubelet_kit.cm.devicemanager import DeviceManager
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.deviceplugin import (
    ContainerAllocation,
    Device,
    DevicePlugin,
    DeviceSpec,
    Mount,
)
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.testing import FakeClock

RES = "example.com/widget"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "device_plugin.py"


async def until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Bounded short real waits for gRPC traffic on real sockets."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s")
        await asyncio.sleep(0.01)


@pytest.fixture
def plugins_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dp-"))  # unix socket paths are short
    yield d
    shutil.rmtree(d, ignore_errors=True)


class FakeKubelet:
    """A Registration server that records requests (no connecting back)."""

    def __init__(self, directory: Path, refuse: str | None = None) -> None:
        self.path = directory / "kubelet.sock"
        self.requests: list[Any] = []
        self.refuse = refuse
        self._server: grpc.aio.Server | None = None

    async def Register(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        if self.refuse:
            await context.abort(grpc.StatusCode.UNKNOWN, self.refuse)
        return pb.Empty()

    async def start(self) -> None:
        self._server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.path}")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
        self.path.unlink(missing_ok=True)


@pytest.fixture
async def kubelet(plugins_dir: Path) -> AsyncIterator[FakeKubelet]:
    k = FakeKubelet(plugins_dir)
    await k.start()
    yield k
    await k.stop()


class Widgets(DevicePlugin):
    """A plugin using every hook."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(RES, devices=[Device("w0"), Device("w1"), Device("w2")], **kw)
        self.pre_started: list[list[str]] = []

    async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        if "w2" in device_ids:
            raise RuntimeError("w2 is being serviced")
        return ContainerAllocation(
            envs={"W": ",".join(device_ids)},
            mounts=(Mount("/opt/w", "/srv/w", read_only=True),),
            devices=(DeviceSpec("/dev/w", "/dev/null", "r"),),
            annotations={"a": "b"},
            cdi_devices=("example.com/widget=w0",),
        )

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> Sequence[str]:
        return sorted(available, reverse=True)[:size]

    async def pre_start_container(self, device_ids: Sequence[str]) -> None:
        self.pre_started.append(list(device_ids))


async def test_registration_request(plugins_dir: Path, kubelet: FakeKubelet) -> None:
    plain = DevicePlugin(RES, plugins_dir=plugins_dir, devices=[Device("x")])
    full = Widgets(plugins_dir=plugins_dir, socket_name="w.sock")
    async with plain, full:
        pass
    first, second = kubelet.requests
    assert (first.version, first.endpoint, first.resource_name) == (
        "v1beta1",
        "example_com-widget.sock",
        RES,
    )
    assert not first.options.pre_start_required
    assert not first.options.get_preferred_allocation_available
    assert second.endpoint == "w.sock"
    assert second.options.pre_start_required
    assert second.options.get_preferred_allocation_available
    # Closing removes the plugin's own socket.
    assert not (plugins_dir / "w.sock").exists()


async def test_register_without_kubelet_is_a_connection_error(plugins_dir: Path) -> None:
    plugin = DevicePlugin(RES, plugins_dir=plugins_dir, devices=[Device("x")])
    await plugin.serve()
    try:
        with pytest.raises(ConnectionError, match="no kubelet socket"):
            await plugin.register()
    finally:
        await plugin.close()


async def test_refusal_carries_the_kubelets_reason(plugins_dir: Path) -> None:
    async with DeviceManager(plugins_dir=plugins_dir, clock=FakeClock()):
        plugin = DevicePlugin("widget", plugins_dir=plugins_dir, devices=[Device("x")])
        await plugin.serve()
        try:
            with pytest.raises(
                ConfigurationError,
                match="registration of widget refused: the ResourceName 'widget' is invalid",
            ):
                await plugin.register()
        finally:
            await plugin.close()


@pytest.fixture
async def served(plugins_dir: Path) -> AsyncIterator[tuple[Widgets, Any]]:
    plugin = Widgets(plugins_dir=plugins_dir)
    await plugin.serve()
    channel = grpc.aio.insecure_channel(f"unix://{plugin.socket_path}")
    yield plugin, pb_grpc.DevicePluginStub(channel)
    await channel.close()
    await plugin.close()


async def test_list_and_watch_follows_changes(served: tuple[Widgets, Any]) -> None:
    plugin, stub = served
    options = await stub.GetDevicePluginOptions(pb.Empty())
    assert options.pre_start_required and options.get_preferred_allocation_available
    stream = stub.ListAndWatch(pb.Empty())
    first = await stream.read()
    assert [(d.ID, d.health) for d in first.devices] == [
        ("w0", "Healthy"),
        ("w1", "Healthy"),
        ("w2", "Healthy"),
    ]
    plugin.set_health("w1", "Unhealthy")
    second = await stream.read()
    assert [(d.ID, d.health) for d in second.devices][1] == ("w1", "Unhealthy")
    plugin.set_devices([Device("w9", numa_nodes=(1,))])
    third = await stream.read()
    assert [(d.ID, [n.ID for n in d.topology.nodes]) for d in third.devices] == [("w9", [1])]
    stream.cancel()


async def test_allocate_answers(served: tuple[Widgets, Any]) -> None:
    _, stub = served
    resp = await stub.Allocate(
        pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=["w0", "w1"])]
        )
    )
    [c] = resp.container_responses
    assert dict(c.envs) == {"W": "w0,w1"} and dict(c.annotations) == {"a": "b"}
    assert [(m.container_path, m.host_path, m.read_only) for m in c.mounts] == [
        ("/opt/w", "/srv/w", True)
    ]
    assert [(d.container_path, d.host_path, d.permissions) for d in c.devices] == [
        ("/dev/w", "/dev/null", "r")
    ]
    assert [d.name for d in c.cdi_devices] == ["example.com/widget=w0"]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["w0", "nope"], "invalid allocation request: unknown devices: ['nope']"),
        (["w2"], "w2 is being serviced"),
    ],
)
async def test_allocate_errors(served: tuple[Widgets, Any], ids: list[str], message: str) -> None:
    _, stub = served
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
        )
    assert info.value.details() == message


async def test_preferred_allocation_and_pre_start(served: tuple[Widgets, Any]) -> None:
    plugin, stub = served
    resp = await stub.GetPreferredAllocation(
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=["w0", "w1", "w2"], allocation_size=2
                )
            ]
        )
    )
    assert list(resp.container_responses[0].deviceIDs) == ["w2", "w1"]
    await stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["w1"]))
    assert plugin.pre_started == [["w1"]]


def test_values_are_checked() -> None:
    with pytest.raises(ValueError, match="health: 'ok' is neither"):
        Device("x", health="ok")
    plugin = DevicePlugin(RES)
    with pytest.raises(ValueError, match="duplicate ids"):
        plugin.set_devices([Device("x"), Device("x")])
    with pytest.raises(ConfigurationError, match="socket_name"):
        DevicePlugin(RES, socket_name="a/b.sock")
    assert plugin.socket_path.name == "example_com-widget.sock"


async def test_run_serves_again_and_reregisters(plugins_dir: Path, kubelet: FakeKubelet) -> None:
    clock = FakeClock()
    plugin = Widgets(plugins_dir=plugins_dir, clock=clock, watch_interval=1.0)
    task = asyncio.create_task(plugin.run())
    try:
        await until(lambda: len(kubelet.requests) == 1, "first registration")
        # The kubelet restarted: it removed the plugin's socket and made its own anew.
        await kubelet.stop()
        plugin.socket_path.unlink()
        await kubelet.start()
        await clock.run_for(1.0)
        await until(lambda: len(kubelet.requests) == 2, "second registration")
        assert plugin.socket_path.is_socket()
        assert plugin.registrations == 2
        # Nothing changed: no further registration.
        await clock.run_for(3.0)
        await asyncio.sleep(0.05)
        assert len(kubelet.requests) == 2
    finally:
        plugin.stop()
        await asyncio.wait_for(task, 10)
    assert not plugin.socket_path.exists()


async def test_run_waits_for_the_kubelet(plugins_dir: Path) -> None:
    clock = FakeClock()
    plugin = DevicePlugin(RES, plugins_dir=plugins_dir, devices=[Device("x")], clock=clock)
    task = asyncio.create_task(plugin.run())
    kubelet = FakeKubelet(plugins_dir)
    try:
        await until(lambda: plugin.socket_path.exists(), "serving")
        assert plugin.registrations == 0
        await kubelet.start()
        await clock.run_for(1.0)
        await until(lambda: plugin.registrations == 1, "registered once the kubelet is up")
    finally:
        plugin.stop()
        await asyncio.wait_for(task, 10)
        await kubelet.stop()


async def test_example_plugin_process(plugins_dir: Path) -> None:
    """The example as its own process, against the device manager, ended by SIGTERM."""
    async with DeviceManager(plugins_dir=plugins_dir, clock=FakeClock()) as dm:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLE),
            "--count",
            "3",
            "--plugins-dir",
            str(plugins_dir),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            await until(lambda: dm.allocatable() == {RES: 3}, "example registered", 20)
            proc.send_signal(signal.SIGUSR1)
            await until(lambda: dm.allocatable() == {RES: 2}, "widget-0 unhealthy", 10)
            assert dm.healthy_devices(RES) == {"widget-1", "widget-2"}
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, err.decode()
        await until(lambda: dm.allocatable() == {RES: 0}, "plugin gone")


def test_all_is_honest() -> None:
    assert all(hasattr(sdk, name) for name in sdk.__all__)
