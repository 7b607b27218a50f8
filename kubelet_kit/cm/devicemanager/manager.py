"""DeviceManager: the kubelet's side of the device plugin API v1beta1.

What it does, as upstream's ``pkg/kubelet/cm/devicemanager`` does:

- :meth:`DeviceManager.start` clears the plugins directory (every file but the
  checkpoint: a plugin that sees its socket vanish knows the kubelet restarted
  and registers again), reads the checkpoint and serves the ``Registration``
  service on ``kubelet.sock`` there.
- ``Register`` checks the version and the resource name, connects back to the
  plugin's socket and follows its ``ListAndWatch`` stream. A plugin registering
  again for the same resource replaces the old connection.
- Capacity counts every device of a resource, allocatable the healthy ones.
  When a plugin's stream ends its devices all count as unhealthy; after
  :data:`ENDPOINT_STOP_GRACE_PERIOD` without a new registration the resource is
  dropped.
- :meth:`DeviceManager.admit` refuses a pod asking for more devices than are
  healthy and free (``UnexpectedAdmissionError``, upstream's message) and
  reserves the count for it.
- :meth:`DeviceManager.container_run_options` picks the devices of a container
  on its first start (asking ``GetPreferredAllocation`` when the plugin offers
  it, handing an init container's devices on to later containers), calls
  ``Allocate``, stores the answer in the checkpoint, calls
  ``PreStartContainer`` when the plugin asked for it, and returns the envs,
  mounts, devices and annotations for the runtime.
- Devices are freed when a pod is removed (:meth:`DeviceManager.remove_pod`,
  :meth:`DeviceManager.retain_pods`).

One difference from upstream, by design: the kubelet calls ``Allocate`` while
admitting a pod, but admission in the ContainerManager protocol never blocks, so
here admission reserves the device count and ``Allocate`` is called just before
the container is first created; a plugin that fails it leaves the container
waiting with ``CreateContainerConfigError`` (retried on the next sync) instead
of failing the pod.

The gRPC calls run in real time (their deadlines are gRPC's); the grace period
reads the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import grpc

from kubelet_kit.api import Container, Pod, Quantity
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm.devicemanager import checkpoint
from kubelet_kit.cm.devicemanager.constants import (
    CHECKPOINT_NAME,
    DEVICE_PLUGIN_PATH,
    ENDPOINT_STOP_GRACE_PERIOD,
    HEALTHY,
    KUBELET_SOCKET,
    PRE_START_CONTAINER_TIMEOUT,
    SUPPORTED_VERSIONS,
)
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.cm.devicemanager.logic import (
    choose_devices,
    container_device_requests,
    is_extended_resource_name,
    pod_device_needs,
    shortage_message,
)
from kubelet_kit.cm.devicemanager.metrics import DeviceManagerMetrics
from kubelet_kit.cm.interfaces import ContainerRunOptions
from kubelet_kit.container import Device, KeyValue, Mount
from kubelet_kit.errors import ConfigurationError, KubeletKitError, PodSyncError

__all__ = ["DeviceManager", "PluginInfo", "PluginUnreachableError"]

log = logging.getLogger(__name__)

#: The kubelet's reason for a container whose config could not be made.
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
#: The kubelet's reason for a pod refused because an allocation failed.
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"

_CONNECT_TIMEOUT = 10.0  # seconds to reach a registering plugin's socket (upstream: 10 s)
_CALL_TIMEOUT = 60.0  # seconds for GetPreferredAllocation and Allocate


@attrs.frozen
class PluginInfo:
    """What the device manager knows of one resource's plugin.

    Attributes:
        resource_name: The extended resource.
        endpoint: The plugin's socket path ("" for a resource known only from the
            checkpoint).
        pre_start_required: The plugin wants PreStartContainer before each start.
        get_preferred_allocation_available: The plugin answers GetPreferredAllocation.
        connected: Its ListAndWatch stream is open.
    """

    resource_name: str
    endpoint: str
    pre_start_required: bool
    get_preferred_allocation_available: bool
    connected: bool


class _Endpoint:
    """One registered plugin: its channel, stub, options and stream task."""

    def __init__(self, resource: str, path: str, options: Any = None) -> None:
        self.resource = resource
        self.path = path  # "" for a resource known only from the checkpoint
        self.pre_start_required = bool(options is not None and options.pre_start_required)
        self.preferred_available = bool(
            options is not None and options.get_preferred_allocation_available
        )
        self.channel: grpc.aio.Channel | None = None
        self.stub: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stopped_at: float | None = None

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.channel is not None:
            await self.channel.close()


@attrs.define
class _Assignment:
    ids: tuple[str, ...]
    resp: bytes


class DeviceManager:
    r"""The kubelet's device manager (see the module docstring).

    A ContainerManager holds one and forwards to it; used alone, a test or an
    agent calls :meth:`start`, :meth:`admit`, :meth:`container_run_options` and
    :meth:`remove_pod` itself.

    Args:
        plugins_dir: Directory of the sockets and the checkpoint (upstream's
            ``/var/lib/kubelet/device-plugins/``).
        clock: Time for the grace period of a plugin that went away.
        endpoint_stop_grace_period: Seconds a departed plugin's resource stays.
        metrics: Where the kubelet's device plugin metrics are counted (default:
            a registry of its own, :attr:`metrics`\ ``.registry``).
    """

    def __init__(
        self,
        *,
        plugins_dir: str | os.PathLike[str] = DEVICE_PLUGIN_PATH,
        clock: Clock | None = None,
        endpoint_stop_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD,
        metrics: DeviceManagerMetrics | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else DeviceManagerMetrics()
        self.plugins_dir = Path(plugins_dir)
        self.clock: Clock = clock or RealClock()
        self.endpoint_stop_grace_period = endpoint_stop_grace_period
        self._endpoints: dict[str, _Endpoint] = {}
        self._healthy: dict[str, set[str]] = {}
        self._unhealthy: dict[str, set[str]] = {}
        # pod uid -> container name -> resource -> assignment
        self._pod_devices: dict[str, dict[str, dict[str, _Assignment]]] = {}
        # pod uid -> resource -> devices admitted (a reservation until assigned)
        self._reserved: dict[str, dict[str, int]] = {}
        self._server: grpc.aio.Server | None = None
        self._alloc_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ paths

    @property
    def socket_path(self) -> Path:
        """The Registration socket (``<plugins_dir>/kubelet.sock``)."""
        return self.plugins_dir / KUBELET_SOCKET

    @property
    def checkpoint_path(self) -> Path:
        """The checkpoint file (``<plugins_dir>/kubelet_internal_checkpoint``)."""
        return self.plugins_dir / CHECKPOINT_NAME

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Clear the directory, read the checkpoint, serve Registration. Idempotent.

        A corrupt checkpoint is logged and ignored (the kubelet goes on without it).

        Raises:
            ConfigurationError: The directory cannot be made or the socket not bound.
        """
        if self._server is not None:
            return
        try:
            await asyncio.to_thread(self._prepare_dir)
        except OSError as exc:
            raise ConfigurationError(
                f"device plugins directory {self.plugins_dir}: {exc.strerror or exc}"
            ) from None
        try:
            data = await asyncio.to_thread(checkpoint.read, self.checkpoint_path)
        except ConfigurationError as exc:
            log.error(
                "continuing without the device checkpoint, device assignments may "
                "be out of date: %s",
                exc,
            )
            data = None
        if data is not None:
            self._restore(data)
        server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        try:
            server.add_insecure_port(f"unix://{self.socket_path}")
        except RuntimeError as exc:
            raise ConfigurationError(
                f"device plugin registration socket {self.socket_path}: {exc}"
            ) from None
        await server.start()
        self._server = server
        log.info("device manager: Registration served on %s", self.socket_path)

    def _prepare_dir(self) -> None:
        self.plugins_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        for entry in self.plugins_dir.iterdir():
            if entry.name == CHECKPOINT_NAME or entry.is_dir():
                continue
            entry.unlink(missing_ok=True)

    async def stop(self) -> None:
        """Stop serving and close every plugin connection. Idempotent; assignments
        stay in the checkpoint."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        for ep in list(self._endpoints.values()):
            await ep.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def __aenter__(self) -> DeviceManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ registration

    async def register(self, request: Any) -> str | None:
        """Handle a RegisterRequest: returns the refusal message, or None once the
        plugin is connected and its stream followed. Used by the Registration service.

        Raises:
            PluginUnreachableError: the plugin's socket is missing or does not
                answer (the plugin may try again: it was, for example, removed
                when this manager started and cleared the directory).
        """
        self.metrics.registrations.labels(request.resource_name).inc()
        if request.version not in SUPPORTED_VERSIONS:
            return (
                f"requested API version {request.version!r} is not supported by kubelet. "
                f"Supported versions are {list(SUPPORTED_VERSIONS)!r}"
            )
        resource = request.resource_name
        if not is_extended_resource_name(resource):
            return f"the ResourceName {resource!r} is invalid"
        endpoint = request.endpoint
        if not endpoint or "/" in endpoint:
            return f"the endpoint {endpoint!r} is not a file name in {self.plugins_dir}"
        ep = _Endpoint(resource, str(self.plugins_dir / endpoint), request.options)
        if not os.path.exists(ep.path):
            # Fail at once: dialling a missing socket would wait out the timeout.
            raise PluginUnreachableError(f"failed to dial device plugin {ep.path}: no such socket")
        channel = grpc.aio.insecure_channel(f"unix://{ep.path}")
        try:
            await asyncio.wait_for(channel.channel_ready(), _CONNECT_TIMEOUT)
        except (TimeoutError, grpc.aio.AioRpcError) as exc:
            await channel.close()
            raise PluginUnreachableError(
                f"failed to dial device plugin {ep.path}: {exc or 'timed out'}"
            ) from None
        ep.channel = channel
        ep.stub = pb_grpc.DevicePluginStub(channel)
        old = self._endpoints.get(resource)
        self._endpoints[resource] = ep
        self._healthy.setdefault(resource, set())
        self._unhealthy.setdefault(resource, set())
        if old is not None:
            await old.close()
        self._notify()
        ep.task = asyncio.get_running_loop().create_task(
            self._watch(ep), name=f"device-plugin-{resource}"
        )
        log.info("device manager: plugin for %s registered at %s", resource, ep.path)
        return None

    async def _watch(self, ep: _Endpoint) -> None:
        try:
            call = ep.stub.ListAndWatch(pb.Empty())
            async for resp in call:
                if self._endpoints.get(ep.resource) is not ep:
                    return
                await self._update_devices(ep.resource, resp.devices)
        except grpc.aio.AioRpcError as exc:
            log.info(
                "device manager: ListAndWatch of %s ended: %s",
                ep.resource,
                exc.details() or exc.code().name,
            )
        finally:
            if self._endpoints.get(ep.resource) is ep:
                # The plugin is gone: its devices stay in capacity, none allocatable,
                # until it registers again or the grace period runs out.
                ep.stopped_at = self.clock.monotonic()
                self._unhealthy[ep.resource] = self._unhealthy.get(
                    ep.resource, set()
                ) | self._healthy.get(ep.resource, set())
                self._healthy[ep.resource] = set()
                self._notify()

    async def _update_devices(self, resource: str, devices: Iterable[Any]) -> None:
        healthy: set[str] = set()
        unhealthy: set[str] = set()
        for dev in devices:
            (healthy if dev.health == HEALTHY else unhealthy).add(dev.ID)
        self._healthy[resource] = healthy
        self._unhealthy[resource] = unhealthy
        self._notify()
        await self._write_checkpoint()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_changed(self) -> None:
        """Wait until a plugin registers, leaves or reports its devices. Blocks."""
        await self._changed.wait()

    # ------------------------------------------------------------------ capacity

    def _expire(self) -> None:
        now = self.clock.monotonic()
        for resource, ep in list(self._endpoints.items()):
            if ep.stopped_at is not None and now - ep.stopped_at > self.endpoint_stop_grace_period:
                log.info(
                    "device manager: plugin of %s gone for longer than %gs, resource removed",
                    resource,
                    self.endpoint_stop_grace_period,
                )
                del self._endpoints[resource]
                self._healthy.pop(resource, None)
                self._unhealthy.pop(resource, None)

    def capacity(self) -> dict[str, int]:
        """Devices per resource, healthy or not. Never blocks."""
        self._expire()
        return {
            r: len(self._healthy.get(r, ())) + len(self._unhealthy.get(r, ()))
            for r in sorted(self._endpoints)
        }

    def allocatable(self) -> dict[str, int]:
        """Healthy devices per resource. Never blocks."""
        self._expire()
        return {r: len(self._healthy.get(r, ())) for r in sorted(self._endpoints)}

    def capacity_quantities(self) -> dict[str, Quantity]:
        """:meth:`capacity` as Quantities, to merge into node capacity."""
        return {r: Quantity.from_int(n) for r, n in self.capacity().items()}

    def allocatable_quantities(self) -> dict[str, Quantity]:
        """:meth:`allocatable` as Quantities, to merge into node allocatable."""
        return {r: Quantity.from_int(n) for r, n in self.allocatable().items()}

    def resources(self) -> list[str]:
        """Resource names served by a device plugin (or known from the checkpoint)."""
        return sorted(self._endpoints)

    def healthy_devices(self, resource: str) -> set[str]:
        """Ids of the healthy devices of ``resource``."""
        return set(self._healthy.get(resource, ()))

    def plugin(self, resource: str) -> PluginInfo | None:
        """What is known of the plugin serving ``resource`` (None: unknown)."""
        if resource not in self._endpoints:
            return None
        ep = self._endpoints[resource]
        return PluginInfo(
            resource,
            ep.path,
            ep.pre_start_required,
            ep.preferred_available,
            ep.stopped_at is None and ep.task is not None and not ep.task.done(),
        )

    def pod_devices(self, pod_uid: str) -> dict[str, dict[str, tuple[str, ...]]]:
        """Devices held by a pod: container name -> resource -> device ids."""
        return {
            c: {r: a.ids for r, a in by_res.items()}
            for c, by_res in self._pod_devices.get(pod_uid, {}).items()
        }

    # ------------------------------------------------------------------ admission

    def _held(self, pod_uid: str, resource: str) -> set[str]:
        return {
            i
            for by_res in self._pod_devices.get(pod_uid, {}).values()
            for i in (by_res[resource].ids if resource in by_res else ())
        }

    def _free(self, resource: str, pod_uid: str) -> int:
        """Healthy devices neither held nor reserved by pods other than ``pod_uid``."""
        taken: set[str] = set()
        pending = 0
        for uid in set(self._pod_devices) | set(self._reserved):
            if uid == pod_uid:
                continue
            held = self._held(uid, resource)
            taken |= held
            pending += max(0, self._reserved.get(uid, {}).get(resource, 0) - len(held))
        return len(self._healthy.get(resource, set()) - taken) - pending

    def admit(self, pod: Pod) -> AdmitResult:
        """Whether the pod's devices are free; reserves them for it. Never blocks.

        Only resources served by a device plugin are looked at. A pod already
        holding devices (after an agent restart) keeps them.
        """
        needs = pod_device_needs(pod, self._endpoints)
        for resource, n in needs.items():
            want = n - len(self._held(pod.uid, resource))
            if want <= 0:
                continue
            free = max(0, self._free(resource, pod.uid))
            if want > free:
                return AdmitResult.refuse(
                    UNEXPECTED_ADMISSION_ERROR,
                    f"Allocate failed due to {shortage_message(resource, want, free)}, "
                    "which is unexpected",
                )
        if needs:
            self._reserved[pod.uid] = needs
        return AdmitResult.ok()

    def forget_reservation(self, pod_uid: str) -> None:
        """Drop what :meth:`admit` reserved for a pod that another check refused
        (devices it already holds stay). Never blocks."""
        self._reserved.pop(pod_uid, None)

    # ------------------------------------------------------------------ allocation

    async def container_run_options(self, pod: Pod, container: Container) -> ContainerRunOptions:
        """Devices for one container before it is created (see the module docstring).

        Raises:
            PodSyncError: ``CreateContainerConfigError`` naming the resource when
                too few devices are healthy and free, or a plugin call fails.
        """
        requests = container_device_requests(container, self._endpoints)
        if not requests:
            return ContainerRunOptions()
        assignments: list[tuple[str, _Assignment]] = []
        changed = False
        async with self._alloc_lock:
            for resource, n in sorted(requests.items()):
                by_res = self._pod_devices.setdefault(pod.uid, {}).setdefault(container.name, {})
                found = by_res.get(resource)
                if found is None:
                    started = self.clock.monotonic()
                    found = await self._allocate(pod, container, resource, n)
                    self.metrics.alloc_duration.labels(resource).observe(
                        self.clock.monotonic() - started
                    )
                    by_res[resource] = found
                    changed = True
                assignments.append((resource, found))
        if changed:
            await self._write_checkpoint()
        for resource, assignment in assignments:
            await self._pre_start(container, resource, assignment)
        return _run_options(assignments)

    def _fail(self, container: Container, message: str) -> PodSyncError:
        return PodSyncError(CREATE_CONTAINER_CONFIG_ERROR, message, container=container.name)

    async def _allocate(self, pod: Pod, container: Container, resource: str, n: int) -> _Assignment:
        ep = self._endpoints.get(resource)
        if ep is None or ep.stopped_at is not None:
            raise self._fail(
                container,
                f"device plugin of {resource} is not registered, cannot allocate its devices",
            )
        healthy = self._healthy.get(resource, set())
        # Devices of this pod's finished-style init containers are handed on.
        init_names = {c.name for c in pod.spec.init_containers if not c.is_sidecar}
        mine = self._pod_devices.get(pod.uid, {})
        reusable = sorted(
            {
                i
                for name, by_res in mine.items()
                if name in init_names and name != container.name and resource in by_res
                for i in by_res[resource].ids
            }
            & healthy
        )
        in_use: set[str] = set()
        for uid, containers in self._pod_devices.items():
            for name, by_res in containers.items():
                if resource in by_res and not (uid == pod.uid and name in init_names):
                    in_use |= set(by_res[resource].ids)
        must = reusable[:n]
        available = sorted(healthy - in_use - set(must))
        if len(available) + len(must) < n:
            raise self._fail(container, shortage_message(resource, n - len(must), len(available)))
        preferred: list[str] | None = None
        if ep.preferred_available and len(available) + len(must) > n:
            try:
                resp = await ep.stub.GetPreferredAllocation(
                    pb.PreferredAllocationRequest(
                        container_requests=[
                            pb.ContainerPreferredAllocationRequest(
                                available_deviceIDs=[*must, *available],
                                must_include_deviceIDs=must,
                                allocation_size=n,
                            )
                        ]
                    ),
                    timeout=_CALL_TIMEOUT,
                )
            except grpc.aio.AioRpcError as exc:
                raise self._fail(
                    container,
                    f"GetPreferredAllocation of {resource} failed: "
                    f"{exc.details() or exc.code().name}",
                ) from None
            if resp.container_responses:
                preferred = list(resp.container_responses[0].deviceIDs)
        ids = choose_devices(available, n, must_include=must, preferred=preferred)
        try:
            answer = await ep.stub.Allocate(
                pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]
                ),
                timeout=_CALL_TIMEOUT,
            )
        except grpc.aio.AioRpcError as exc:
            raise self._fail(
                container,
                f"Allocate of {resource} devices {ids} failed: {exc.details() or exc.code().name}",
            ) from None
        if len(answer.container_responses) != 1:
            raise self._fail(
                container,
                f"Allocate of {resource}: the plugin answered "
                f"{len(answer.container_responses)} container responses "
                "for 1 request",
            )
        return _Assignment(tuple(ids), answer.container_responses[0].SerializeToString())

    async def _pre_start(self, container: Container, resource: str, a: _Assignment) -> None:
        ep = self._endpoints.get(resource)
        if ep is None or not ep.pre_start_required:
            return
        try:
            await ep.stub.PreStartContainer(
                pb.PreStartContainerRequest(devices_ids=list(a.ids)),
                timeout=PRE_START_CONTAINER_TIMEOUT,
            )
        except grpc.aio.AioRpcError as exc:
            raise self._fail(
                container,
                f"PreStartContainer of {resource} devices "
                f"{list(a.ids)} failed: "
                f"{exc.details() or exc.code().name}",
            ) from None

    # ------------------------------------------------------------------ release

    async def remove_pod(self, pod_uid: str) -> None:
        """Free the devices and the reservation of a pod. Idempotent."""
        held = self._pod_devices.pop(pod_uid, None)
        self._reserved.pop(pod_uid, None)
        if held:
            await self._write_checkpoint()

    async def retain_pods(self, active_pod_uids: Iterable[str]) -> list[str]:
        """Free the devices of every pod not in ``active_pod_uids``; returns their uids."""
        active = set(active_pod_uids)
        gone = sorted((set(self._pod_devices) | set(self._reserved)) - active)
        for uid in gone:
            log.info("device manager: pod %s is not active, its devices are freed", uid)
            await self.remove_pod(uid)
        return gone

    # ------------------------------------------------------------------ checkpoint

    def _snapshot(self) -> checkpoint.CheckpointData:
        entries = [
            checkpoint.PodDevicesEntry(
                pod_uid=uid,
                container_name=name,
                resource_name=resource,
                device_ids={checkpoint.NO_TOPOLOGY: a.ids},
                alloc_resp=a.resp,
            )
            for uid, containers in sorted(self._pod_devices.items())
            for name, by_res in sorted(containers.items())
            for resource, a in sorted(by_res.items())
        ]
        return checkpoint.CheckpointData(
            entries=tuple(entries),
            registered_devices={r: tuple(sorted(ids)) for r, ids in self._healthy.items()},
        )

    async def _write_checkpoint(self) -> None:
        async with self._write_lock:
            data = self._snapshot()
            try:
                await asyncio.to_thread(checkpoint.write, self.checkpoint_path, data)
            except OSError as exc:
                log.error("device manager: writing %s failed: %s", self.checkpoint_path, exc)

    def _restore(self, data: checkpoint.CheckpointData) -> None:
        for e in data.entries:
            self._pod_devices.setdefault(e.pod_uid, {}).setdefault(e.container_name, {})[
                e.resource_name
            ] = _Assignment(e.all_ids(), e.alloc_resp)
        resources = set(data.registered_devices) | {e.resource_name for e in data.entries}
        now = self.clock.monotonic()
        for resource in resources:
            # Known, with no devices until its plugin registers again, and dropped
            # after the grace period if it does not.
            ep = _Endpoint(resource, "")
            ep.stopped_at = now
            self._endpoints.setdefault(resource, ep)
            self._healthy.setdefault(resource, set())
            self._unhealthy.setdefault(resource, set())


def _run_options(assignments: Iterable[tuple[str, _Assignment]]) -> ContainerRunOptions:
    """Merge the plugins' answers; a later env wins, mounts and devices are kept
    once per container path (as upstream merges them)."""
    envs: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    devices: dict[str, Device] = {}
    annotations: dict[str, str] = {}
    for resource, a in assignments:
        resp = pb.ContainerAllocateResponse.FromString(a.resp)
        for key in sorted(resp.envs):
            if key in envs and envs[key] != resp.envs[key]:
                log.warning(
                    "device manager: env %s of %s overrides an earlier value", key, resource
                )
            envs[key] = resp.envs[key]
        for m in resp.mounts:
            mounts.setdefault(
                m.container_path, Mount(m.container_path, m.host_path, readonly=m.read_only)
            )
        for d in resp.devices:
            devices.setdefault(
                d.container_path, Device(d.container_path, d.host_path, d.permissions or "rwm")
            )
        annotations.update(_annotations(resp.annotations))
    return ContainerRunOptions(
        envs=tuple(KeyValue(k, v) for k, v in envs.items()),
        mounts=tuple(mounts.values()),
        devices=tuple(devices.values()),
        annotations=annotations,
    )


def _annotations(values: Mapping[str, str]) -> dict[str, str]:
    return {k: values[k] for k in sorted(values)}


class PluginUnreachableError(KubeletKitError):
    """A registering device plugin's socket is missing or does not answer."""


class _Registration:
    """The Registration service (one RPC) over a DeviceManager."""

    def __init__(self, manager: DeviceManager) -> None:
        self._manager = manager

    async def Register(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Register a plugin, or fail the call with the reason: code UNKNOWN (as a
        Go error returned from a handler) for a refused request, UNAVAILABLE when
        the plugin could not be reached (it may register again)."""
        try:
            refusal = await self._manager.register(request)
        except PluginUnreachableError as exc:
            log.info("device manager: registration of %s failed: %s", request.resource_name, exc)
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        if refusal is not None:
            log.info(
                "device manager: registration of %s refused: %s", request.resource_name, refusal
            )
            await context.abort(grpc.StatusCode.UNKNOWN, refusal)
        return pb.Empty()
