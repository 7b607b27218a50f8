"""The device plugin kit against the SDK's plain plugin, the example widget
plugin, the fake, a plugin written on the generated stubs alone (by socket), and
plugins that break the contract; and the fake's own records, faults and use with
the agent's device manager."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from kubelet_kit.cm.devicemanager import DeviceManager
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.deviceplugin import ContainerAllocation, Device, DevicePlugin, Mount
from kubelet_kit.testing import Call, ConformanceFailure, FakeClock
from kubelet_kit.testing.deviceplugin_kit import (
    CHECKS,
    DevicePluginConformance,
    check_device_plugin,
)
from kubelet_kit.testing.fake_deviceplugin import FakeDevicePlugin
from kubelet_kit.testing.kit import KitContext, run_kit

pytestmark = pytest.mark.timeout(60)

RES = "example.com/widget"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "device_plugin.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("kit_device_plugin_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestSDKPlugin(DevicePluginConformance):
    def make(self) -> DevicePlugin:
        return DevicePlugin(RES, devices=[Device("a"), Device("b", numa_nodes=(0,))])


class TestExampleWidgets(DevicePluginConformance):
    def make(self) -> DevicePlugin:
        return _example().WidgetPlugin(3)  # type: ignore[no-any-return]


class TestFakeDevicePlugin(DevicePluginConformance):
    def make(self) -> FakeDevicePlugin:
        return FakeDevicePlugin(RES, ["w0", "w1", "w2"], preferred=True, pre_start_required=True)


class StubsPlugin(pb_grpc.DevicePluginServicer):  # type: ignore[misc]
    """A plugin written directly on the generated stubs (no SDK), serving a socket."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.devices = {"s0": "Healthy", "s1": "Healthy"}
        self._changed = asyncio.Event()
        self.server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{path}")

    def set_health(self, device_id: str, health: str) -> None:
        self.devices[device_id] = health
        self._changed.set()
        self._changed = asyncio.Event()

    async def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return pb.DevicePluginOptions()

    async def ListAndWatch(self, request: Any, context: Any) -> AsyncIterator[Any]:
        while True:
            changed = self._changed
            yield pb.ListAndWatchResponse(
                devices=[pb.Device(ID=k, health=v) for k, v in sorted(self.devices.items())]
            )
            await changed.wait()

    async def Allocate(self, request: Any, context: Any) -> Any:
        out = []
        for req in request.container_requests:
            if set(req.devices_ids) - set(self.devices):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown device")
            out.append(pb.ContainerAllocateResponse(envs={"S": ",".join(req.devices_ids)}))
        return pb.AllocateResponse(container_responses=out)


class TestStubsPluginBySocket(DevicePluginConformance):
    async def make(self, ctx: KitContext[Any]) -> Path:
        directory = tempfile.mkdtemp(prefix="kit-dps-")
        plugin = StubsPlugin(Path(directory) / "s.sock")
        await plugin.server.start()

        async def stop() -> None:
            await plugin.server.stop(grace=None)
            shutil.rmtree(directory, ignore_errors=True)

        ctx.defer(stop)
        self.plugin = plugin
        return plugin.path

    def kit_options(self) -> dict[str, Any]:
        return {"set_health": lambda _, d, h: self.plugin.set_health(d, h)}


# ------------------------------------------------------------ broken plugins


class Silent(DevicePlugin):
    """Changes health without telling the watchers."""

    def set_health(self, device_id: str, health: str) -> None:
        import attrs

        self._devices[device_id] = attrs.evolve(self._devices[device_id], health=health)


class Lenient(DevicePlugin):
    """Allocates whatever it is asked."""

    def _unknown(self, ids: Sequence[str]) -> list[str]:
        return []


class Greedy(DevicePlugin):
    """Prefers more devices than asked, forgetting the ones it must include."""

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> Sequence[str]:
        return [d for d in available if d not in must_include]


@pytest.mark.parametrize(
    ("plugin", "check", "message"),
    [
        (Silent, "list_and_watch_resends_on_health_change", "no ListAndWatch response within"),
        (Lenient, "allocate_of_unknown_devices_fails", "kit-no-such-device succeeded"),
        (Greedy, "preferred_allocation_follows_the_request", "which must be included"),
    ],
)
async def test_the_kit_catches_a_broken_plugin(plugin: type, check: str, message: str) -> None:
    def factory() -> DevicePlugin:
        return plugin(RES, devices=[Device("a"), Device("b"), Device("c")])  # type: ignore[no-any-return]

    with pytest.raises(ConformanceFailure):
        await check_device_plugin(factory, names=[check], timeout=0.5)
    report = await run_kit(CHECKS, factory, names=[check], options={"timeout": 0.5})
    result = report.result(check)
    assert result.status == "failed" and message in result.message, result


# ------------------------------------------------------------ the fake itself


async def test_the_fake_records_and_answers_as_configured() -> None:
    d = Path(tempfile.mkdtemp(prefix="kit-dpf-"))
    try:
        allocation = ContainerAllocation(
            envs={"X": "1"}, mounts=(Mount("/opt/w", "/srv/w", read_only=True),)
        )
        plugin = FakeDevicePlugin(
            RES, ["w0", "w1"], allocation=allocation, preferred=["w9"], plugins_dir=d
        )
        await plugin.serve()
        async with grpc.aio.insecure_channel(f"unix://{plugin.socket_path}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            resp = await stub.Allocate(
                pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=["w1"])]
                )
            )
            [c] = resp.container_responses
            assert dict(c.envs) == {"X": "1"} and c.mounts[0].host_path == "/srv/w"
            pref = await stub.GetPreferredAllocation(
                pb.PreferredAllocationRequest(
                    container_requests=[
                        pb.ContainerPreferredAllocationRequest(
                            available_deviceIDs=["w0", "w1"], allocation_size=1
                        )
                    ]
                )
            )
            # A fixed answer is given as is, even outside what is available.
            assert list(pref.container_responses[0].deviceIDs) == ["w9"]
            plugin.inject_error("allocate", RuntimeError("w0 is being serviced"))
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Allocate(
                    pb.AllocateRequest(
                        container_requests=[pb.ContainerAllocateRequest(devices_ids=["w0"])]
                    )
                )
            assert info.value.details() == "w0 is being serviced"
        assert plugin.allocations == [("w1",)]
        assert plugin.preferred_requests == [(("w0", "w1"), (), 1)]
        assert [c.method for c in plugin.calls] == [
            "list_devices",
            "allocate",
            "get_preferred_allocation",
            "allocate",
        ]
        assert plugin.calls[1] == Call("allocate", (("w1",),), {"device_ids": ("w1",)})
        plugin.flip("w0")
        assert [(x.id, x.health) for x in plugin.devices] == [
            ("w0", "Unhealthy"),
            ("w1", "Healthy"),
        ]
        with pytest.raises(KeyError):
            plugin.flip("nope")
        await plugin.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


async def test_the_fake_with_the_agents_device_manager() -> None:
    d = Path(tempfile.mkdtemp(prefix="kit-dpm-"))
    try:
        clock = FakeClock()
        async with DeviceManager(plugins_dir=d, clock=clock) as dm:
            plugin = FakeDevicePlugin(RES, ["w0", "w1"], plugins_dir=d)
            async with plugin:
                for _ in range(500):
                    if dm.allocatable().get(RES) == 2:
                        break
                    await asyncio.sleep(0.01)
                assert dm.capacity() == {RES: 2} and dm.allocatable() == {RES: 2}
                plugin.flip("w1")
                for _ in range(500):
                    if dm.allocatable().get(RES) == 1:
                        break
                    await asyncio.sleep(0.01)
                assert dm.healthy_devices(RES) == {"w0"}
    finally:
        shutil.rmtree(d, ignore_errors=True)
