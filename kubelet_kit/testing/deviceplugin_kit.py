"""The conformance kit of a device plugin (the v1beta1 ``DevicePlugin`` service).

The kit speaks to the plugin as the kubelet's device manager does: over gRPC on
the plugin's unix socket. What the manager relies on:

* ``GetDevicePluginOptions`` answers (and, for a plugin of the project's SDK,
  says what the plugin registers with);
* ``ListAndWatch`` sends the full device list at once (ids unique, health
  ``Healthy`` or ``Unhealthy``), and the full list again on every health change;
  a new stream (a restarted manager reconnecting) gets the list again; the
  stream ends when the plugin stops, so the manager can mark its devices gone;
* ``Allocate`` answers one response per container request, and fails for
  device ids the plugin does not have;
* ``GetPreferredAllocation``, when offered, answers ``size`` of the available
  ids with every one it must include; ``PreStartContainer``, when required,
  answers.

The subject is a :class:`kubelet_kit.deviceplugin.DevicePlugin` (the kit serves
it on a socket in a directory of its own and closes it afterwards), or the path
of the socket of a plugin already serving. The health check flips a device with
``set_health(id, health)`` on an SDK plugin, or with the ``set_health`` option
(``set_health(subject, device_id, health)``, may be async); without either it is
skipped. The ``timeout`` option bounds each wait for an answer (real seconds,
default 5). For example::

    from kubelet_kit.testing.deviceplugin_kit import DevicePluginConformance

    class TestGadgets(DevicePluginConformance):
        def make(self):
            return GadgetPlugin()
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

from kubelet_kit.cm.devicemanager.constants import HEALTHY, UNHEALTHY
from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb
from kubelet_kit.cm.devicemanager.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.deviceplugin.plugin import DevicePlugin
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "DevicePluginConformance", "check_device_plugin"]


class _Conn:
    """The kit's connection to the plugin under test."""

    def __init__(self, ctx: KitContext[Any]) -> None:
        self.ctx = ctx
        self.timeout = float(ctx.options.get("timeout", 5.0))
        self.stub: Any = None

    async def open(self) -> _Conn:
        subject = self.ctx.subject
        if isinstance(subject, DevicePlugin):
            # Unix socket paths are short: a directory of its own under /tmp.
            directory = tempfile.mkdtemp(prefix="kit-dp-")
            self.ctx.defer(lambda: shutil.rmtree(directory, ignore_errors=True))
            subject.plugins_dir = Path(directory)
            self.ctx.defer(subject.close)
            await subject.serve()
            socket = subject.socket_path
        else:
            socket = Path(subject)
        channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self.ctx.defer(channel.close)
        self.stub = pb_grpc.DevicePluginStub(channel)
        return self

    async def options(self) -> Any:
        return await self.stub.GetDevicePluginOptions(pb.Empty(), timeout=self.timeout)

    def watch(self) -> Any:
        stream = self.stub.ListAndWatch(pb.Empty())
        self.ctx.defer(stream.cancel)
        return stream

    async def read(self, stream: Any, what: str) -> list[tuple[str, str]]:
        try:
            resp = await asyncio.wait_for(stream.read(), self.timeout)
        except TimeoutError:
            self.ctx.fail(f"no ListAndWatch response within {self.timeout:g}s: {what}")
        except grpc.aio.AioRpcError as exc:
            self.ctx.fail(f"ListAndWatch failed: {exc.code().name}: {exc.details()}")
        if resp is grpc.aio.EOF:
            self.ctx.fail(f"ListAndWatch ended: {what}")
        return [(d.ID, d.health) for d in resp.devices]

    async def allocate(self, *requests: Sequence[str]) -> Any:
        return await self.stub.Allocate(
            pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=r) for r in requests]
            ),
            timeout=self.timeout,
        )

    async def set_health(self, device_id: str, health: str) -> None:
        setter = self.ctx.options.get("set_health")
        subject = self.ctx.subject
        if setter is not None:
            outcome = setter(subject, device_id, health)
            if inspect.isawaitable(outcome):
                await outcome
        elif isinstance(subject, DevicePlugin):
            subject.set_health(device_id, health)
        else:
            self.ctx.skip("needs the set_health option to change a device's health")


async def _devices(ctx: KitContext[Any], conn: _Conn) -> list[tuple[str, str]]:
    stream = conn.watch()
    devices = await conn.read(stream, "the first device list")
    stream.cancel()
    ctx.expect(bool(devices), "the plugin offers no device (the kit needs one)")
    return devices


async def _check_options_answer(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    ctx.at("GetDevicePluginOptions")
    options = await conn.options()
    subject = ctx.subject
    if isinstance(subject, DevicePlugin):
        ctx.expect_eq(
            "pre_start_required (as registered)",
            options.pre_start_required,
            subject.pre_start_required,
        )
        ctx.expect_eq(
            "get_preferred_allocation_available (as registered)",
            options.get_preferred_allocation_available,
            subject.preferred_allocation_available,
        )


async def _check_list_and_watch_sends_the_list_at_once(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    ctx.at("ListAndWatch: the first response")
    devices = await conn.read(conn.watch(), "the first device list")
    ids = [d for d, _ in devices]
    ctx.expect(bool(ids), "the first response lists no device")
    ctx.expect(len(ids) == len(set(ids)), f"device ids repeat: {ids}")
    bad = [(d, h) for d, h in devices if h not in (HEALTHY, UNHEALTHY)]
    ctx.expect(not bad, f"health neither {HEALTHY} nor {UNHEALTHY}: {bad}")


async def _check_list_and_watch_resends_on_health_change(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    stream = conn.watch()
    ctx.at("ListAndWatch: the first response")
    first = dict(await conn.read(stream, "the first device list"))
    ctx.expect(bool(first), "the plugin offers no device (the kit needs one)")
    target = sorted(first)[0]
    for health in (UNHEALTHY, HEALTHY):
        ctx.at(f"make {target} {health}")
        await conn.set_health(target, health)
        got = dict(await conn.read(stream, f"the list after {target} became {health}"))
        ctx.expect_eq("devices listed (the full list)", sorted(got), sorted(first))
        ctx.expect_eq(f"{target}'s health", got[target], health)
        others = {d: h for d, h in got.items() if d != target}
        ctx.expect_eq(
            "the other devices' health", others, {d: h for d, h in first.items() if d != target}
        )


async def _check_a_new_watch_gets_the_list(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    ctx.at("a first ListAndWatch, then cancelled")
    first = await _devices(ctx, conn)
    ctx.at("a second ListAndWatch")
    again = await conn.read(conn.watch(), "the list on a new stream")
    ctx.expect_eq("devices on the new stream", sorted(again), sorted(first))


async def _check_allocate_answers_each_container(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    ids = sorted(d for d, h in await _devices(ctx, conn) if h == HEALTHY)
    ctx.expect(bool(ids), "the plugin offers no healthy device (the kit needs one)")
    requests = [[ids[0]], [ids[1]]] if len(ids) > 1 else [[ids[0]]]
    ctx.at(f"Allocate for {len(requests)} containers {requests}")
    try:
        resp = await conn.allocate(*requests)
    except grpc.aio.AioRpcError as exc:
        ctx.fail(f"Allocate failed: {exc.code().name}: {exc.details()}")
    ctx.expect_eq("container responses", len(resp.container_responses), len(requests))


async def _check_allocate_of_unknown_devices_fails(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    known = sorted(d for d, _ in await _devices(ctx, conn))
    ctx.at("Allocate a device the plugin does not have")
    try:
        await conn.allocate([known[0], "kit-no-such-device"])
    except grpc.aio.AioRpcError as exc:
        ctx.expect(exc.code() != grpc.StatusCode.OK, "an error with status OK")
    else:
        ctx.fail("Allocate of kit-no-such-device succeeded")


async def _check_preferred_allocation_follows_the_request(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    if not (await conn.options()).get_preferred_allocation_available:
        ctx.skip("the plugin does not offer GetPreferredAllocation")
    available = sorted(d for d, h in await _devices(ctx, conn) if h == HEALTHY)
    size = min(2, len(available))
    must = available[-1:]
    ctx.at(f"GetPreferredAllocation of {size} from {available}, with {must}")
    resp = await conn.stub.GetPreferredAllocation(
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available,
                    must_include_deviceIDs=must,
                    allocation_size=size,
                )
            ]
        ),
        timeout=conn.timeout,
    )
    ctx.expect_eq("container responses", len(resp.container_responses), 1)
    chosen = list(resp.container_responses[0].deviceIDs)
    ctx.expect_eq("how many devices are preferred", len(chosen), size)
    ctx.expect(set(chosen) <= set(available), f"{chosen} are not all available")
    ctx.expect(set(must) <= set(chosen), f"{chosen} leave out {must}, which must be included")


async def _check_pre_start_container_answers(ctx: KitContext[Any]) -> None:
    conn = await _Conn(ctx).open()
    if not (await conn.options()).pre_start_required:
        ctx.skip("the plugin does not require PreStartContainer")
    first = sorted(d for d, _ in await _devices(ctx, conn))[0]
    ctx.at(f"PreStartContainer for {first}")
    await conn.stub.PreStartContainer(
        pb.PreStartContainerRequest(devices_ids=[first]), timeout=conn.timeout
    )


async def _check_stop_ends_list_and_watch(ctx: KitContext[Any]) -> None:
    subject = ctx.subject
    if not isinstance(subject, DevicePlugin):
        ctx.skip("the kit can stop only a plugin of the project's SDK")
    conn = await _Conn(ctx).open()
    stream = conn.watch()
    await conn.read(stream, "the first device list")
    ctx.at("close the plugin")
    await subject.close()
    ctx.at("read the stream")
    with contextlib.suppress(grpc.aio.AioRpcError):
        try:
            resp = await asyncio.wait_for(stream.read(), conn.timeout)
        except TimeoutError:
            ctx.fail(f"ListAndWatch still open {conn.timeout:g}s after the plugin stopped")
        ctx.expect(resp is grpc.aio.EOF, f"ListAndWatch sent {resp} after the plugin stopped")


#: The kit's checks by name, in the order they run.
CHECKS: dict[str, KitCheck[Any]] = {
    "options_answer": _check_options_answer,
    "list_and_watch_sends_the_list_at_once": _check_list_and_watch_sends_the_list_at_once,
    "list_and_watch_resends_on_health_change": _check_list_and_watch_resends_on_health_change,
    "a_new_watch_gets_the_list": _check_a_new_watch_gets_the_list,
    "allocate_answers_each_container": _check_allocate_answers_each_container,
    "allocate_of_unknown_devices_fails": _check_allocate_of_unknown_devices_fails,
    "preferred_allocation_follows_the_request": _check_preferred_allocation_follows_the_request,
    "pre_start_container_answers": _check_pre_start_container_answers,
    "stop_ends_list_and_watch": _check_stop_ends_list_and_watch,
}


async def check_device_plugin(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the device plugin kit against plugins made by ``factory``.

    Args:
        factory: Builds a fresh subject per check: a
            :class:`~kubelet_kit.deviceplugin.DevicePlugin` (not serving yet), or
            the socket path of a plugin serving (called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` if it takes an argument;
            may be async).
        names: The checks to run (default: all of :data:`CHECKS`).
        **options: ``set_health``, ``timeout``; see the module.

    Returns:
        The report of every check.

    Raises:
        ConformanceFailure: A check failed.
    """
    report = await run_kit(CHECKS, factory, names=names, options=options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it and define ``make(self[, ctx])`` returning
#: a DevicePlugin (or a serving plugin's socket path).
DevicePluginConformance = kit_test_class(
    "DevicePluginConformance",
    CHECKS,
    doc="""Conformance of a device plugin: one test case per check of
    :mod:`kubelet_kit.testing.deviceplugin_kit`. Define ``make(self)`` (or
    ``make(self, ctx)``) returning a fresh
    :class:`~kubelet_kit.deviceplugin.DevicePlugin` or a serving plugin's socket
    path.""",
)
