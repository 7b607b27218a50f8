"""DevicePlugin: the plugin side of the device plugin API v1beta1.

A plugin offers devices of one extended resource to the kubelet of its node. It
serves the ``DevicePlugin`` service on a unix socket in the plugins directory,
then calls ``Register`` on the kubelet's socket there. The kubelet connects back,
follows ``ListAndWatch`` for the devices and their health, and calls
``Allocate`` when a container that asked for devices is about to be created.

A user fills in a subclass::

    class Widgets(DevicePlugin):
        async def list_devices(self) -> list[Device]:
            return [Device("w0"), Device("w1")]

        async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
            return ContainerAllocation(envs={"WIDGETS": ",".join(device_ids)})

    await Widgets("example.com/widget").run()

``get_preferred_allocation`` and ``pre_start_container`` are offered to the
kubelet only when a subclass overrides them (or ``pre_start_required`` is set).
When the kubelet restarts it clears the directory, so the plugin's socket
vanishes and its own socket is made anew: :meth:`DevicePlugin.run` notices either
and serves and registers again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import grpc

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm.devicemanager.constants import (
    DEVICE_PLUGIN_PATH,
    HEALTHY,
    KUBELET_SOCKET,
    UNHEALTHY,
    VERSION,
)
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.errors import ConfigurationError

__all__ = ["ContainerAllocation", "Device", "DevicePlugin", "DeviceSpec", "Mount"]

log = logging.getLogger(__name__)

_REGISTER_TIMEOUT = 10.0  # seconds for the Register call (it dials back to us)


@attrs.frozen
class Device:
    """One device as the plugin reports it.

    Attributes:
        id: Unique among this plugin's devices, at most 63 characters.
        health: ``"Healthy"`` or ``"Unhealthy"``.
        numa_nodes: NUMA nodes the device is attached to (empty: unknown).
    """

    id: str
    health: str = attrs.field(default=HEALTHY)
    numa_nodes: tuple[int, ...] = ()

    @health.validator
    def _check_health(self, _: object, value: str) -> None:
        if value not in (HEALTHY, UNHEALTHY):
            raise ValueError(f"health: {value!r} is neither {HEALTHY!r} nor {UNHEALTHY!r}")


@attrs.frozen
class Mount:
    """A host path to mount into the container."""

    container_path: str
    host_path: str
    read_only: bool = False


@attrs.frozen
class DeviceSpec:
    """A host device node to expose in the container; permissions of "rwm"."""

    container_path: str
    host_path: str
    permissions: str = "rwm"


@attrs.frozen
class ContainerAllocation:
    """What the runtime must add to a container for its devices.

    Attributes:
        envs: Environment variables.
        mounts: Host paths to mount.
        devices: Device nodes.
        annotations: Container annotations for the runtime.
        cdi_devices: Fully qualified CDI device names (``vendor.com/class=name``).
    """

    envs: Mapping[str, str] = attrs.field(factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    cdi_devices: tuple[str, ...] = ()

    def to_proto(self) -> Any:
        """The ``ContainerAllocateResponse`` message."""
        return pb.ContainerAllocateResponse(
            envs=dict(self.envs),
            mounts=[
                pb.Mount(
                    container_path=m.container_path, host_path=m.host_path, read_only=m.read_only
                )
                for m in self.mounts
            ],
            devices=[
                pb.DeviceSpec(
                    container_path=d.container_path,
                    host_path=d.host_path,
                    permissions=d.permissions,
                )
                for d in self.devices
            ],
            annotations=dict(self.annotations),
            cdi_devices=[pb.CDIDevice(name=n) for n in self.cdi_devices],
        )


class DevicePlugin:
    """A device plugin for one extended resource; subclass and fill in.

    Override :meth:`list_devices` (or pass ``devices``) and :meth:`allocate`;
    optionally :meth:`get_preferred_allocation` and :meth:`pre_start_container`.
    Report changes with :meth:`set_devices` / :meth:`set_health` (or
    :meth:`refresh`, which calls :meth:`list_devices` again).

    Args:
        resource_name: The extended resource (``vendor-domain/name``).
        devices: Initial devices, returned by the default :meth:`list_devices`.
        plugins_dir: The kubelet's device plugins directory.
        socket_name: File name of this plugin's socket there (default derived
            from the resource name).
        pre_start_required: Ask the kubelet for PreStartContainer before each
            start (default: whether a subclass overrides :meth:`pre_start_container`).
        clock: Time for the watch loop of :meth:`run`.
        watch_interval: Seconds between checks for a restarted kubelet.
    """

    def __init__(
        self,
        resource_name: str,
        *,
        devices: Sequence[Device] = (),
        plugins_dir: str | os.PathLike[str] = DEVICE_PLUGIN_PATH,
        socket_name: str | None = None,
        pre_start_required: bool | None = None,
        clock: Clock | None = None,
        watch_interval: float = 1.0,
    ) -> None:
        self.resource_name = resource_name
        self.plugins_dir = Path(plugins_dir)
        self.socket_name = socket_name or (
            resource_name.replace("/", "-").replace(".", "_") + ".sock"
        )
        if "/" in self.socket_name:
            raise ConfigurationError(f"socket_name: {self.socket_name!r} must be a file name")
        overridden = type(self).pre_start_container is not DevicePlugin.pre_start_container
        self.pre_start_required = overridden if pre_start_required is None else pre_start_required
        self.preferred_allocation_available = (
            type(self).get_preferred_allocation is not DevicePlugin.get_preferred_allocation
        )
        self.clock: Clock = clock or RealClock()
        self.watch_interval = watch_interval
        self._initial = tuple(devices)
        self._devices: dict[str, Device] = {}
        self._changed = asyncio.Event()
        self._server: grpc.aio.Server | None = None
        self._socket_id: tuple[int, int] | None = None
        self._kubelet_id: tuple[int, int] | None = None
        self._stopping = asyncio.Event()
        #: How many times this plugin registered successfully.
        self.registrations = 0

    # ------------------------------------------------------------------ to fill in

    async def list_devices(self) -> Sequence[Device]:
        """The devices now. Called when serving starts and by :meth:`refresh`.
        The default returns the ``devices`` given to the constructor."""
        return self._initial

    async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        """Prepare ``device_ids`` for one container; returns what the runtime adds.
        Raising fails the kubelet's Allocate call with the exception's message.
        The default adds nothing."""
        return ContainerAllocation()

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> Sequence[str]:
        """Which ``size`` devices of ``available`` (with all of ``must_include``)
        to give. Offered to the kubelet only when overridden."""
        return [*must_include, *[d for d in available if d not in must_include]][:size]

    async def pre_start_container(self, device_ids: Sequence[str]) -> None:
        """Called before each start of a container holding ``device_ids`` (e.g. to
        reset them). Offered to the kubelet when overridden."""

    # ------------------------------------------------------------------ devices

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices as last reported, in id order."""
        return tuple(self._devices[k] for k in sorted(self._devices))

    def set_devices(self, devices: Sequence[Device]) -> None:
        """Replace the device list; the kubelet hears of it at once."""
        ids = [d.id for d in devices]
        if len(set(ids)) != len(ids):
            raise ValueError(f"devices: duplicate ids in {ids}")
        self._devices = {d.id: d for d in devices}
        self._wake()

    def set_health(self, device_id: str, health: str) -> None:
        """Change one device's health; the kubelet hears of it at once.

        Raises:
            KeyError: No device ``device_id``.
        """
        dev = self._devices[device_id]
        self._devices[device_id] = attrs.evolve(dev, health=health)
        self._wake()

    async def refresh(self) -> None:
        """Ask :meth:`list_devices` again and report the result."""
        self.set_devices(await self.list_devices())

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ paths

    @property
    def socket_path(self) -> Path:
        """This plugin's socket."""
        return self.plugins_dir / self.socket_name

    @property
    def kubelet_socket(self) -> Path:
        """The kubelet's Registration socket."""
        return self.plugins_dir / KUBELET_SOCKET

    # ------------------------------------------------------------------ lifecycle

    async def serve(self) -> None:
        """Serve the DevicePlugin service on :attr:`socket_path` (a stale file there
        is replaced). Idempotent while serving.

        Raises:
            ConfigurationError: The socket cannot be bound.
        """
        if self._server is not None:
            return
        if not self._devices:
            self.set_devices(await self.list_devices())
        self.socket_path.unlink(missing_ok=True)
        server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(_Servicer(self), server)
        try:
            server.add_insecure_port(f"unix://{self.socket_path}")
        except RuntimeError as exc:
            raise ConfigurationError(f"device plugin socket {self.socket_path}: {exc}") from None
        await server.start()
        self._server = server
        self._socket_id = _identity(self.socket_path)

    async def register(self) -> None:
        """Register with the kubelet (which then connects back). Serve first.

        Raises:
            ConnectionError: The kubelet's socket is absent or does not answer
                (retry later).
            ConfigurationError: The kubelet refused the registration (its reason).
        """
        identity = _identity(self.kubelet_socket)
        if identity is None:
            raise ConnectionError(f"no kubelet socket at {self.kubelet_socket}")
        request = pb.RegisterRequest(
            version=VERSION,
            endpoint=self.socket_name,
            resource_name=self.resource_name,
            options=pb.DevicePluginOptions(
                pre_start_required=self.pre_start_required,
                get_preferred_allocation_available=self.preferred_allocation_available,
            ),
        )
        async with grpc.aio.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
            try:
                await pb_grpc.RegistrationStub(channel).Register(request, timeout=_REGISTER_TIMEOUT)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise ConnectionError(
                        f"kubelet at {self.kubelet_socket}: {exc.details()}"
                    ) from None
                raise ConfigurationError(
                    f"registration of {self.resource_name} refused: {exc.details()}"
                ) from None
        self._kubelet_id = identity
        self.registrations += 1
        log.info("device plugin %s registered at %s", self.resource_name, self.kubelet_socket)

    async def close(self) -> None:
        """Stop serving; open ListAndWatch streams end. Idempotent."""
        server, self._server = self._server, None
        self._kubelet_id = None
        self._wake()
        if server is not None:
            await server.stop(grace=None)
        if self._socket_id is not None and _identity(self.socket_path) == self._socket_id:
            self.socket_path.unlink(missing_ok=True)
        self._socket_id = None

    async def run(self) -> None:
        """Serve, register, and keep registered: serve again when the socket is
        removed (the kubelet restarted) and register again when the kubelet's
        socket is new or the kubelet could not be reached. Returns after
        :meth:`stop`.

        Raises:
            ConfigurationError: The kubelet refused the registration.
        """
        self._stopping = asyncio.Event()
        try:
            while not self._stopping.is_set():
                await self._check()
                sleeper = asyncio.ensure_future(self.clock.sleep(self.watch_interval))
                stopper = asyncio.ensure_future(self._stopping.wait())
                try:
                    await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for t in (sleeper, stopper):
                        t.cancel()
        finally:
            await self.close()

    async def _check(self) -> None:
        current = _identity(self.socket_path)
        # Gone, or another file: also when it vanished before serve() could note
        # it (the kubelet clearing its directory as it starts), so both are None.
        if self._server is not None and (current is None or current != self._socket_id):
            log.info(
                "device plugin %s: socket %s removed, serving again",
                self.resource_name,
                self.socket_path,
            )
            await self.close()
        await self.serve()
        kubelet = _identity(self.kubelet_socket)
        if kubelet is not None and kubelet != self._kubelet_id:
            try:
                await self.register()
            except ConnectionError as exc:
                log.info("device plugin %s: %s; retrying", self.resource_name, exc)

    def stop(self) -> None:
        """Make :meth:`run` return. Idempotent."""
        self._stopping.set()

    async def __aenter__(self) -> DevicePlugin:
        await self.serve()
        await self.register()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ RPC helpers

    def _list_response(self) -> Any:
        return pb.ListAndWatchResponse(
            devices=[
                pb.Device(
                    ID=d.id,
                    health=d.health,
                    topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in d.numa_nodes])
                    if d.numa_nodes
                    else None,
                )
                for d in self.devices
            ]
        )

    async def _watch(self) -> AsyncIterator[Any]:
        while self._server is not None:
            changed = self._changed
            yield self._list_response()
            await changed.wait()

    def _unknown(self, ids: Sequence[str]) -> list[str]:
        return [i for i in ids if i not in self._devices]


def _identity(path: Path) -> tuple[int, int] | None:
    """(inode, ctime) of a file, to tell a re-created socket from the old one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns)


class _Servicer:
    """The DevicePlugin service over a DevicePlugin object."""

    def __init__(self, plugin: DevicePlugin) -> None:
        self._p = plugin

    async def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        """The plugin's options."""
        return pb.DevicePluginOptions(
            pre_start_required=self._p.pre_start_required,
            get_preferred_allocation_available=self._p.preferred_allocation_available,
        )

    async def ListAndWatch(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """The device list, then again on every change."""
        async for resp in self._p._watch():
            yield resp

    async def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        """The plugin's preferred devices for each container request."""
        out = []
        for req in request.container_requests:
            try:
                ids = await self._p.get_preferred_allocation(
                    list(req.available_deviceIDs),
                    list(req.must_include_deviceIDs),
                    req.allocation_size,
                )
            except Exception as exc:  # the kubelet gets the message, the plugin lives on
                await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
            out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=list(ids)))
        return pb.PreferredAllocationResponse(container_responses=out)

    async def Allocate(self, request: Any, context: Any) -> Any:
        """The plugin's allocation for each container request."""
        out = []
        for req in request.container_requests:
            ids = list(req.devices_ids)
            unknown = self._p._unknown(ids)
            if unknown:
                await context.abort(
                    grpc.StatusCode.UNKNOWN,
                    f"invalid allocation request: unknown devices: {unknown}",
                )
            try:
                allocation = await self._p.allocate(ids)
            except Exception as exc:
                await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
            out.append(allocation.to_proto())
        return pb.AllocateResponse(container_responses=out)

    async def PreStartContainer(self, request: Any, context: Any) -> Any:
        """Run the plugin's pre-start step."""
        try:
            await self._p.pre_start_container(list(request.devices_ids))
        except Exception as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return pb.PreStartContainerResponse()
