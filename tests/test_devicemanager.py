"""DeviceManager against in-process fake device plugins over real unix-socket gRPC."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from kubelet_kit.api import load_pod
from kubelet_kit.cm.devicemanager import (
    CHECKPOINT_NAME,
    KUBELET_SOCKET,
    DeviceManager,
    checkpoint,
)
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.container import Device, KeyValue, Mount
from kubelet_kit.errors import PodSyncError
from kubelet_kit.testing import FakeClock

RESOURCE = "example.com/widget"


async def until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Wait for gRPC traffic on real sockets: bounded short real waits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s")
        await asyncio.sleep(0.01)


class FakePlugin:
    """A device plugin written directly on the generated stubs (not the SDK)."""

    def __init__(
        self,
        directory: Path,
        name: str = "widget.sock",
        *,
        devices: dict[str, str] | None = None,
        pre_start: bool = False,
        preferred: list[str] | None = None,
    ) -> None:
        self.path = directory / name
        self.name = name
        self.devices = dict(devices or {"w0": "Healthy", "w1": "Healthy"})
        self.pre_start = pre_start
        self.preferred = preferred
        self.allocations: list[list[str]] = []
        self.preferred_requests: list[tuple[list[str], list[str], int]] = []
        self.pre_starts: list[list[str]] = []
        self.fail_allocate: str | None = None
        self._changed = asyncio.Event()
        self._server: grpc.aio.Server | None = None

    def set_health(self, dev: str, health: str) -> None:
        self.devices[dev] = health
        self._changed.set()
        self._changed = asyncio.Event()

    async def start(self) -> None:
        self._server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.path}")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None

    async def register(
        self, kubelet: Path, *, version: str = "v1beta1", resource: str = RESOURCE
    ) -> None:
        async with grpc.aio.insecure_channel(f"unix://{kubelet}") as ch:
            await pb_grpc.RegistrationStub(ch).Register(
                pb.RegisterRequest(
                    version=version,
                    endpoint=self.name,
                    resource_name=resource,
                    options=pb.DevicePluginOptions(
                        pre_start_required=self.pre_start,
                        get_preferred_allocation_available=self.preferred is not None,
                    ),
                ),
                timeout=5,
            )

    # DevicePlugin service
    async def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return pb.DevicePluginOptions(pre_start_required=self.pre_start)

    async def ListAndWatch(self, request: Any, context: Any) -> AsyncIterator[Any]:
        while True:
            changed = self._changed
            yield pb.ListAndWatchResponse(
                devices=[pb.Device(ID=k, health=v) for k, v in sorted(self.devices.items())]
            )
            await changed.wait()

    async def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        req = request.container_requests[0]
        self.preferred_requests.append(
            (list(req.available_deviceIDs), list(req.must_include_deviceIDs), req.allocation_size)
        )
        return pb.PreferredAllocationResponse(
            container_responses=[
                pb.ContainerPreferredAllocationResponse(deviceIDs=self.preferred or [])
            ]
        )

    async def Allocate(self, request: Any, context: Any) -> Any:
        ids = list(request.container_requests[0].devices_ids)
        if self.fail_allocate:
            await context.abort(grpc.StatusCode.UNKNOWN, self.fail_allocate)
        self.allocations.append(ids)
        return pb.AllocateResponse(
            container_responses=[
                pb.ContainerAllocateResponse(
                    envs={"WIDGETS": ",".join(ids)},
                    mounts=[
                        pb.Mount(
                            container_path="/opt/widget", host_path="/srv/widget", read_only=True
                        )
                    ],
                    devices=[
                        pb.DeviceSpec(
                            container_path=f"/dev/{i}", host_path="/dev/null", permissions="rw"
                        )
                        for i in ids
                    ],
                    annotations={"example.com/widgets": ",".join(ids)},
                )
            ]
        )

    async def PreStartContainer(self, request: Any, context: Any) -> Any:
        self.pre_starts.append(list(request.devices_ids))
        return pb.PreStartContainerResponse()


def widget_pod(name: str, count: int = 1, *, init: int = 0) -> Any:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "busybox", "resources": {"limits": {RESOURCE: str(count)}}}
        ]
    }
    if init:
        spec["initContainers"] = [
            {"name": "prep", "image": "busybox", "resources": {"limits": {RESOURCE: str(init)}}}
        ]
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec,
        }
    )


@pytest.fixture
def plugins_dir() -> Any:
    # Unix socket paths are limited to 108 bytes: keep the directory short.
    d = Path(tempfile.mkdtemp(prefix="dm-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


Setup = Callable[..., Awaitable[tuple[DeviceManager, FakePlugin]]]


@pytest.fixture
async def setup(plugins_dir: Path) -> AsyncIterator[Setup]:
    managers: list[DeviceManager] = []
    plugins: list[FakePlugin] = []

    async def make(
        clock: FakeClock | None = None, **plugin_args: Any
    ) -> tuple[DeviceManager, FakePlugin]:
        dm = DeviceManager(plugins_dir=plugins_dir, clock=clock or FakeClock())
        await dm.start()
        managers.append(dm)
        plugin = FakePlugin(plugins_dir, **plugin_args)
        await plugin.start()
        plugins.append(plugin)
        await plugin.register(dm.socket_path)
        await until(lambda: dm.capacity().get(RESOURCE) == len(plugin.devices), "capacity")
        return dm, plugin

    yield make
    for p in plugins:
        await p.stop()
    for m in managers:
        await m.stop()


async def test_registration_reports_capacity_and_allocatable(setup: Setup) -> None:
    dm, plugin = await setup(devices={"w0": "Healthy", "w1": "Healthy", "w2": "Unhealthy"})
    assert dm.capacity() == {RESOURCE: 3}
    assert dm.allocatable() == {RESOURCE: 2}
    assert dm.capacity_quantities()[RESOURCE].value() == 3
    info = dm.plugin(RESOURCE)
    assert info is not None and info.connected and info.endpoint.endswith("widget.sock")
    plugin.set_health("w0", "Unhealthy")
    await until(lambda: dm.allocatable() == {RESOURCE: 1}, "health change")
    assert dm.capacity() == {RESOURCE: 3}
    assert dm.healthy_devices(RESOURCE) == {"w1"}


@pytest.mark.parametrize(
    ("version", "resource", "message"),
    [
        (
            "v1alpha",
            RESOURCE,
            "requested API version 'v1alpha' is not supported by kubelet. "
            "Supported versions are ['v1beta1']",
        ),
        ("v1beta1", "widget", "the ResourceName 'widget' is invalid"),
        ("v1beta1", "kubernetes.io/widget", "the ResourceName 'kubernetes.io/widget' is invalid"),
    ],
)
async def test_registration_refusals(
    plugins_dir: Path, version: str, resource: str, message: str
) -> None:
    async with DeviceManager(plugins_dir=plugins_dir, clock=FakeClock()) as dm:
        plugin = FakePlugin(plugins_dir)
        await plugin.start()
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await plugin.register(dm.socket_path, version=version, resource=resource)
            assert info.value.details() == message
            assert dm.resources() == []
        finally:
            await plugin.stop()


async def test_start_clears_directory_but_keeps_checkpoint(plugins_dir: Path) -> None:
    (plugins_dir / "stale.sock").write_text("")
    (plugins_dir / CHECKPOINT_NAME).write_bytes(checkpoint.encode(checkpoint.CheckpointData()))
    async with DeviceManager(plugins_dir=plugins_dir, clock=FakeClock()) as dm:
        names = sorted(p.name for p in plugins_dir.iterdir())
        assert names == sorted([CHECKPOINT_NAME, KUBELET_SOCKET])
        assert dm.socket_path.is_socket()
    assert not (plugins_dir / KUBELET_SOCKET).exists()


async def test_admission_refuses_more_than_free(setup: Setup) -> None:
    dm, _ = await setup()
    assert dm.admit(widget_pod("a", 1)).admit
    too_many = dm.admit(widget_pod("b", 2))
    assert not too_many.admit
    assert too_many.reason == "UnexpectedAdmissionError"
    assert too_many.message == (
        "Allocate failed due to requested number of devices unavailable for "
        f"{RESOURCE}. Requested: 2, Available: 1, which is unexpected"
    )
    # Admitting the same pod again does not count its own reservation twice.
    assert dm.admit(widget_pod("a", 1)).admit
    assert dm.admit(widget_pod("c", 1)).admit
    assert not dm.admit(widget_pod("d", 1)).admit
    await dm.remove_pod("uid-a")
    assert dm.admit(widget_pod("d", 1)).admit


async def test_pods_without_device_resources_are_admitted(setup: Setup) -> None:
    dm, _ = await setup()
    pod = load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}
                ]
            },
        }
    )
    assert dm.admit(pod).admit
    opts = await dm.container_run_options(pod, pod.spec.containers[0])
    assert opts.envs == () and opts.devices == ()


async def test_allocation_reaches_run_options_and_is_reused(setup: Setup) -> None:
    dm, plugin = await setup()
    pod = widget_pod("a", 2)
    assert dm.admit(pod).admit
    opts = await dm.container_run_options(pod, pod.spec.containers[0])
    assert opts.envs == (KeyValue("WIDGETS", "w0,w1"),)
    assert opts.mounts == (Mount("/opt/widget", "/srv/widget", readonly=True),)
    assert opts.devices == (
        Device("/dev/w0", "/dev/null", "rw"),
        Device("/dev/w1", "/dev/null", "rw"),
    )
    assert opts.annotations == {"example.com/widgets": "w0,w1"}
    assert dm.pod_devices("uid-a") == {"app": {RESOURCE: ("w0", "w1")}}
    # A restart of the container gets the same answer without a second Allocate.
    again = await dm.container_run_options(pod, pod.spec.containers[0])
    assert again == opts
    assert plugin.allocations == [["w0", "w1"]]


async def test_allocate_failure_is_a_container_config_error(setup: Setup) -> None:
    dm, plugin = await setup()
    plugin.fail_allocate = "widget w0 is on fire"
    pod = widget_pod("a", 1)
    with pytest.raises(PodSyncError) as info:
        await dm.container_run_options(pod, pod.spec.containers[0])
    assert info.value.reason == "CreateContainerConfigError"
    assert info.value.container == "app"
    assert RESOURCE in info.value.message and "widget w0 is on fire" in info.value.message
    assert dm.pod_devices("uid-a") == {"app": {}}


async def test_preferred_allocation_is_asked_and_followed(setup: Setup) -> None:
    dm, plugin = await setup(
        devices={"w0": "Healthy", "w1": "Healthy", "w2": "Healthy"}, preferred=["w2"]
    )
    pod = widget_pod("a", 1)
    await dm.container_run_options(pod, pod.spec.containers[0])
    assert plugin.preferred_requests == [(["w0", "w1", "w2"], [], 1)]
    assert plugin.allocations == [["w2"]]


async def test_preferred_allocation_answer_outside_available_is_ignored(setup: Setup) -> None:
    dm, plugin = await setup(preferred=["nope"])
    pod = widget_pod("a", 1)
    await dm.container_run_options(pod, pod.spec.containers[0])
    assert plugin.allocations == [["w0"]]


async def test_pre_start_container_called_before_each_start(setup: Setup) -> None:
    dm, plugin = await setup(pre_start=True)
    pod = widget_pod("a", 1)
    await dm.container_run_options(pod, pod.spec.containers[0])
    await dm.container_run_options(pod, pod.spec.containers[0])
    assert plugin.pre_starts == [["w0"], ["w0"]]
    assert plugin.allocations == [["w0"]]


async def test_init_container_devices_are_handed_on(setup: Setup) -> None:
    dm, plugin = await setup()
    pod = widget_pod("a", 1, init=1)
    assert dm.admit(pod).admit
    init = await dm.container_run_options(pod, pod.spec.init_containers[0])
    app = await dm.container_run_options(pod, pod.spec.containers[0])
    assert init.envs == app.envs == (KeyValue("WIDGETS", "w0"),)
    assert plugin.allocations == [["w0"], ["w0"]]
    # The pod holds one device at once, so another pod still gets the other one.
    assert dm.admit(widget_pod("b", 1)).admit


async def test_devices_of_other_pods_are_not_given_twice(setup: Setup) -> None:
    dm, _ = await setup()
    a, b = widget_pod("a", 1), widget_pod("b", 1)
    oa = await dm.container_run_options(a, a.spec.containers[0])
    ob = await dm.container_run_options(b, b.spec.containers[0])
    assert {oa.envs[0].value, ob.envs[0].value} == {"w0", "w1"}
    c = widget_pod("c", 1)
    with pytest.raises(PodSyncError) as info:
        await dm.container_run_options(c, c.spec.containers[0])
    assert info.value.message == (
        f"requested number of devices unavailable for {RESOURCE}. Requested: 1, Available: 0"
    )
    assert await dm.retain_pods(["uid-b"]) == ["uid-a", "uid-c"]
    oc = await dm.container_run_options(c, c.spec.containers[0])
    assert oc.envs == oa.envs


async def test_plugin_gone_then_back(setup: Setup, plugins_dir: Path) -> None:
    clock = FakeClock()
    dm, plugin = await setup(clock=clock)
    await plugin.stop()
    await until(lambda: dm.allocatable() == {RESOURCE: 0}, "devices unhealthy")
    assert dm.capacity() == {RESOURCE: 2}
    info = dm.plugin(RESOURCE)
    assert info is not None and not info.connected
    pod = widget_pod("a", 1)
    refused = dm.admit(pod)
    assert not refused.admit and "Available: 0" in refused.message
    with pytest.raises(PodSyncError, match="not registered"):
        await dm.container_run_options(pod, pod.spec.containers[0])
    # A restarted plugin registers again and its devices are back.
    again = FakePlugin(plugins_dir)
    await again.start()
    try:
        await again.register(dm.socket_path)
        await until(lambda: dm.allocatable() == {RESOURCE: 2}, "re-registration")
        clock.advance(1000)  # the grace period no longer applies
        assert dm.capacity() == {RESOURCE: 2}
        opts = await dm.container_run_options(pod, pod.spec.containers[0])
        assert opts.envs == (KeyValue("WIDGETS", "w0"),)
        assert again.allocations == [["w0"]]
    finally:
        await again.stop()


async def test_resource_dropped_after_grace_period(setup: Setup) -> None:
    clock = FakeClock()
    dm, plugin = await setup(clock=clock)
    await plugin.stop()
    await until(lambda: dm.allocatable() == {RESOURCE: 0}, "devices unhealthy")
    clock.advance(299)
    assert dm.capacity() == {RESOURCE: 2}
    clock.advance(2)
    assert dm.capacity() == {}
    assert dm.resources() == []


async def test_checkpoint_survives_restart(setup: Setup, plugins_dir: Path) -> None:
    dm, plugin = await setup()
    a = widget_pod("a", 1)
    first = await dm.container_run_options(a, a.spec.containers[0])
    doc = json.loads((plugins_dir / CHECKPOINT_NAME).read_bytes())
    entry = doc["Data"]["PodDeviceEntries"][0]
    assert (entry["PodUID"], entry["ContainerName"], entry["ResourceName"], entry["DeviceIDs"]) == (
        "uid-a",
        "app",
        RESOURCE,
        {"-1": ["w0"]},
    )
    assert doc["Data"]["RegisteredDevices"] == {RESOURCE: ["w0", "w1"]}
    await dm.stop()
    await plugin.stop()

    clock = FakeClock()
    async with DeviceManager(plugins_dir=plugins_dir, clock=clock) as restarted:
        # Known from the checkpoint, no devices until the plugin is back.
        assert restarted.capacity() == {RESOURCE: 0}
        assert restarted.pod_devices("uid-a") == {"app": {RESOURCE: ("w0",)}}
        # The container restarts with the same environment, no plugin needed.
        assert await restarted.container_run_options(a, a.spec.containers[0]) == first
        back = FakePlugin(plugins_dir)
        await back.start()
        try:
            await back.register(restarted.socket_path)
            await until(lambda: restarted.allocatable() == {RESOURCE: 2}, "plugin back")
            assert restarted.admit(a).admit  # it keeps its device
            assert restarted.admit(widget_pod("b", 1)).admit
            refused = restarted.admit(widget_pod("c", 1))
            assert not refused.admit and "Requested: 1, Available: 0" in refused.message
            b = widget_pod("b", 1)
            ob = await restarted.container_run_options(b, b.spec.containers[0])
            assert ob.envs == (KeyValue("WIDGETS", "w1"),)
        finally:
            await back.stop()


async def test_corrupt_checkpoint_is_ignored(plugins_dir: Path) -> None:
    raw = checkpoint.encode(
        checkpoint.CheckpointData(
            entries=(checkpoint.PodDevicesEntry("u", "c", RESOURCE, {-1: ("w0",)}, b""),)
        )
    )
    (plugins_dir / CHECKPOINT_NAME).write_bytes(raw.replace(b"w0", b"w9"))
    async with DeviceManager(plugins_dir=plugins_dir, clock=FakeClock()) as dm:
        assert dm.pod_devices("u") == {}
        assert dm.resources() == []


async def test_metrics_with_the_kubelets_names(setup: Setup, plugins_dir: Path) -> None:
    dm, _ = await setup()
    refused = FakePlugin(plugins_dir, "other.sock")
    await refused.start()
    try:
        with pytest.raises(grpc.aio.AioRpcError):
            await refused.register(dm.socket_path, resource="other")
    finally:
        await refused.stop()
    pod = widget_pod("a", 1)
    await dm.container_run_options(pod, pod.spec.containers[0])
    await dm.container_run_options(pod, pod.spec.containers[0])  # reused: not counted
    reg = dm.metrics.registry
    assert (
        reg.get_sample_value(
            "kubelet_device_plugin_registration_total", {"resource_name": RESOURCE}
        )
        == 1
    )
    assert (
        reg.get_sample_value("kubelet_device_plugin_registration_total", {"resource_name": "other"})
        == 1
    )
    assert (
        reg.get_sample_value(
            "kubelet_device_plugin_alloc_duration_seconds_count", {"resource_name": RESOURCE}
        )
        == 1
    )


def test_every_rpc_is_served_or_called() -> None:
    """The SDK serves every DevicePlugin RPC, the manager serves Registration, and
    the manager calls every DevicePlugin RPC but GetDevicePluginOptions (it takes
    the options from the RegisterRequest, as the kubelet does)."""
    import inspect

    from kubelet_kit.cm.devicemanager import manager
    from kubelet_kit.deviceplugin import plugin

    services = pb.DESCRIPTOR.services_by_name
    for method in services["DevicePlugin"].methods:
        assert callable(getattr(plugin._Servicer, method.name, None)), method.name
    for method in services["Registration"].methods:
        assert callable(getattr(manager._Registration, method.name, None)), method.name
    source = inspect.getsource(manager)
    not_called = {"GetDevicePluginOptions"}
    for method in services["DevicePlugin"].methods:
        assert (f"stub.{method.name}(" in source) != (method.name in not_called), method.name
