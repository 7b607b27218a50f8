"""CRIServer: serve any :class:`~kubelet_kit.container.Runtime` over runtime.v1 and v1alpha2.

A fake, the host-process runtime or your own Runtime becomes a CRI endpoint that
crictl, a kubelet or a :class:`~kubelet_kit.cri.CRIRuntime` can drive::

    async with CRIServer(FakeRuntime(events=True), "/run/my-runtime.sock"):
        ...

Both services are registered with every RPC of the protocol, under runtime.v1 and
again under runtime.v1alpha2 (the CRI of kubelets before 1.23: the same messages
under other service names, see ``api_v1alpha2.proto``), so one socket serves old
and new kubelets and crictl alike. The RPCs listed in
:data:`SERVED_RPCS` call the runtime; the others (checkpoints, metrics, runtime
configuration) answer UNIMPLEMENTED with a message naming the method, as a CRI
runtime does for what it lacks. ``Exec``, ``Attach`` and ``PortForward`` answer
with a URL of the server's streaming server (:mod:`kubelet_kit.streams.server`)
when the runtime serves streams itself, and UNIMPLEMENTED when it serves none.
Errors the runtime raises become status codes in
:func:`kubelet_kit.cri.errors.to_status`, so a CRIRuntime on the other side
raises the same error class again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import grpc
import grpc.aio

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container import optional
from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerInfo,
    ImageFsReporter,
    LogReopener,
    PodSandbox,
    PodSandboxFilter,
    Runtime,
    RuntimeCore,
)
from kubelet_kit.container.streams import StreamURLRuntime, stream_mode
from kubelet_kit.cri import convert
from kubelet_kit.cri.errors import to_status
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.cri.gen import api_v1alpha2_pb2 as pb_v1alpha2
from kubelet_kit.errors import (
    ConfigurationError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

__all__ = ["SERVED_RPCS", "UNSERVED_RPCS", "CRIServer"]

#: The CRI versions served, each with the module of its service descriptors.
_API_VERSIONS: dict[str, Any] = {"v1": pb, "v1alpha2": pb_v1alpha2}

#: RPCs answered UNIMPLEMENTED, each with the reason it is not served.
UNSERVED_RPCS: dict[str, str] = {
    # The Runtime protocol has no such operation.
    "CheckpointContainer": "no checkpoints in the Runtime protocol",
    "ListMetricDescriptors": "no pod metrics in the Runtime protocol",
    "ListPodSandboxMetrics": "no pod metrics in the Runtime protocol",
    "StreamPodSandboxMetrics": "no pod metrics in the Runtime protocol",
    "RuntimeConfig": "no cgroup driver report in the Runtime protocol",
    "UpdatePodSandboxResources": "no pod-level resources in the Runtime protocol",
}

#: The CRI version string answered in VersionResponse.version.
_API_VERSION = "0.1.0"

_Handler = Callable[[Any, grpc.aio.ServicerContext], Any]


def _services(api_version: str) -> list[Any]:
    """The RuntimeService and ImageService descriptors of one CRI version."""
    services = _API_VERSIONS[api_version].DESCRIPTOR.services_by_name
    return [services["RuntimeService"], services["ImageService"]]


class _Servicer:
    """The RPC bodies: a protobuf request in, a protobuf response out."""

    def __init__(
        self,
        runtime: Runtime,
        clock: Clock,
        urls: StreamURLRuntime | None = None,
        api_version: str = "v1",
    ) -> None:
        self.rt = runtime
        self.clock = clock
        self.urls = urls
        self.api_version = api_version

    # -------------------------------------------------------------- streaming

    def _streams(self, what: str) -> StreamURLRuntime:
        if self.urls is None:
            raise UnimplementedError(f"{what}: {type(self.rt).__name__} serves no streams")
        return self.urls

    @staticmethod
    def _check_streams(what: str, req: Any) -> None:
        # The kubelet's streaming server refuses these before handing out a URL.
        if not (req.stdin or req.stdout or req.stderr):
            raise InvalidArgumentError(f"{what}: one of stdin, stdout, or stderr must be set")
        if req.tty and req.stderr:
            raise InvalidArgumentError(f"{what}: tty and stderr cannot both be true")

    async def Exec(self, req: Any) -> Any:
        if not req.cmd:
            raise InvalidArgumentError("Exec: cmd is empty")
        self._check_streams("Exec", req)
        url = await self._streams("Exec").get_exec_url(
            req.container_id,
            list(req.cmd),
            tty=req.tty,
            stdin=req.stdin,
            stdout=req.stdout,
            stderr=req.stderr,
        )
        return pb.ExecResponse(url=url)

    async def Attach(self, req: Any) -> Any:
        self._check_streams("Attach", req)
        url = await self._streams("Attach").get_attach_url(
            req.container_id, tty=req.tty, stdin=req.stdin, stdout=req.stdout, stderr=req.stderr
        )
        return pb.AttachResponse(url=url)

    async def PortForward(self, req: Any) -> Any:
        url = await self._streams("PortForward").get_port_forward_url(
            req.pod_sandbox_id, list(req.port)
        )
        return pb.PortForwardResponse(url=url)

    # ----------------------------------------------------------- runtime info

    async def Version(self, req: Any) -> Any:
        v = await self.rt.version()
        msg = convert.version_to_pb(v)
        msg.version = _API_VERSION
        # The version the client called: a v1alpha2 kubelet refuses a runtime that
        # answers its Version call with anything but "v1alpha2".
        msg.runtime_api_version = self.api_version
        return msg

    async def Status(self, req: Any) -> Any:
        return pb.StatusResponse(status=convert.runtime_status_to_pb(await self.rt.status()))

    async def UpdateRuntimeConfig(self, req: Any) -> Any:
        # The kubelet sends the pod CIDR at start; a Runtime has no use for it, and
        # refusing would fail the kubelet's start-up, so it is accepted and ignored.
        return pb.UpdateRuntimeConfigResponse()

    # -------------------------------------------------------------- sandboxes

    async def RunPodSandbox(self, req: Any) -> Any:
        config = convert.sandbox_config_from_pb(req.config, req.runtime_handler)
        return pb.RunPodSandboxResponse(pod_sandbox_id=await self.rt.run_pod_sandbox(config))

    async def StopPodSandbox(self, req: Any) -> Any:
        await self.rt.stop_pod_sandbox(req.pod_sandbox_id)
        return pb.StopPodSandboxResponse()

    async def RemovePodSandbox(self, req: Any) -> Any:
        await self.rt.remove_pod_sandbox(req.pod_sandbox_id)
        return pb.RemovePodSandboxResponse()

    async def PodSandboxStatus(self, req: Any) -> Any:
        status = await self.rt.pod_sandbox_status(req.pod_sandbox_id)
        return pb.PodSandboxStatusResponse(
            status=convert.sandbox_status_to_pb(status),
            timestamp=convert.seconds_to_ns(self.clock.now()),
        )

    def _sandbox_filter(self, req: Any) -> PodSandboxFilter | None:
        return convert.sandbox_filter_from_pb(req.filter) if req.HasField("filter") else None

    async def ListPodSandbox(self, req: Any) -> Any:
        items = await self.rt.list_pod_sandboxes(self._sandbox_filter(req))
        return pb.ListPodSandboxResponse(items=[convert.sandbox_to_pb(s) for s in items])

    async def StreamPodSandboxes(self, req: Any) -> AsyncIterator[Any]:
        items = await self.rt.list_pod_sandboxes(self._sandbox_filter(req))
        if items:  # each response carries at least one item
            yield pb.StreamPodSandboxesResponse(
                pod_sandboxes=[convert.sandbox_to_pb(s) for s in items]
            )

    # ------------------------------------------------------------- containers

    async def CreateContainer(self, req: Any) -> Any:
        cid = await self.rt.create_container(
            req.pod_sandbox_id,
            convert.container_config_from_pb(req.config),
            convert.sandbox_config_from_pb(req.sandbox_config),
        )
        return pb.CreateContainerResponse(container_id=cid)

    async def StartContainer(self, req: Any) -> Any:
        await self.rt.start_container(req.container_id)
        return pb.StartContainerResponse()

    async def StopContainer(self, req: Any) -> Any:
        await self.rt.stop_container(req.container_id, float(req.timeout))
        return pb.StopContainerResponse()

    async def RemoveContainer(self, req: Any) -> Any:
        await self.rt.remove_container(req.container_id)
        return pb.RemoveContainerResponse()

    def _container_filter(self, req: Any) -> ContainerFilter | None:
        return convert.container_filter_from_pb(req.filter) if req.HasField("filter") else None

    async def ListContainers(self, req: Any) -> Any:
        items = await self.rt.list_containers(self._container_filter(req))
        return pb.ListContainersResponse(containers=[convert.container_to_pb(c) for c in items])

    async def StreamContainers(self, req: Any) -> AsyncIterator[Any]:
        items = await self.rt.list_containers(self._container_filter(req))
        if items:
            yield pb.StreamContainersResponse(
                containers=[convert.container_to_pb(c) for c in items]
            )

    async def ContainerStatus(self, req: Any) -> Any:
        status = await self.rt.container_status(req.container_id)
        return pb.ContainerStatusResponse(status=convert.container_status_to_pb(status))

    async def UpdateContainerResources(self, req: Any) -> Any:
        await self.rt.update_container_resources(
            req.container_id, convert.resources_from_pb(req.linux)
        )
        return pb.UpdateContainerResourcesResponse()

    async def ExecSync(self, req: Any) -> Any:
        result = await self.rt.exec_sync(
            req.container_id, list(req.cmd), float(req.timeout) if req.timeout else None
        )
        return pb.ExecSyncResponse(
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code
        )

    # ------------------------------------------------------------------ stats

    # A Runtime's stats carry ids only; the CRI's carry the attributes of what they
    # are about (a kubelet's /stats/summary names containers by them), so they are
    # looked up here, one listing per call.

    async def _containers_by_id(self, flt: ContainerFilter | None) -> dict[str, ContainerInfo]:
        return {c.id: c for c in await self.rt.list_containers(flt)}

    async def _container_stats(self, flt: ContainerFilter | None) -> list[Any]:
        stats = await self.rt.list_container_stats(flt)
        found = await self._containers_by_id(flt) if stats else {}
        return [convert.container_stats_to_pb(s, found.get(s.container_id)) for s in stats]

    async def ContainerStats(self, req: Any) -> Any:
        stats = await self.rt.container_stats(req.container_id)
        found = await self._containers_by_id(ContainerFilter(id=req.container_id))
        return pb.ContainerStatsResponse(
            stats=convert.container_stats_to_pb(stats, found.get(stats.container_id))
        )

    async def ListContainerStats(self, req: Any) -> Any:
        return pb.ListContainerStatsResponse(
            stats=await self._container_stats(self._container_filter(req))
        )

    async def StreamContainerStats(self, req: Any) -> AsyncIterator[Any]:
        stats = await self._container_stats(self._container_filter(req))
        if stats:
            yield pb.StreamContainerStatsResponse(container_stats=stats)

    async def _one_sandbox_stats(
        self, sandbox: PodSandbox, containers: dict[str, ContainerInfo] | None = None
    ) -> Any:
        stats = await self.rt.pod_sandbox_stats(sandbox.id)
        if containers is None:
            containers = await self._containers_by_id(ContainerFilter(pod_sandbox_id=sandbox.id))
        return convert.sandbox_stats_to_pb(stats, sandbox, containers)

    async def PodSandboxStats(self, req: Any) -> Any:
        sandboxes = await self.rt.list_pod_sandboxes(PodSandboxFilter(id=req.pod_sandbox_id))
        if not sandboxes:
            # The runtime's own error for an unknown id.
            stats = await self.rt.pod_sandbox_stats(req.pod_sandbox_id)
            return pb.PodSandboxStatsResponse(stats=convert.sandbox_stats_to_pb(stats))
        return pb.PodSandboxStatsResponse(stats=await self._one_sandbox_stats(sandboxes[0]))

    async def _sandbox_stats(self, req: Any) -> list[Any]:
        flt = None
        if req.HasField("filter"):
            flt = PodSandboxFilter(
                id=req.filter.id or None, label_selector=dict(req.filter.label_selector)
            )
        out = []
        sandboxes = await self.rt.list_pod_sandboxes(flt)
        # One container listing for every sandbox's stats, not one per sandbox.
        containers = await self._containers_by_id(None) if sandboxes else {}
        for sandbox in sandboxes:
            # A sandbox removed between the list and its stats is simply left out.
            with contextlib.suppress(NotFoundError):
                out.append(await self._one_sandbox_stats(sandbox, containers))
        return out

    async def ListPodSandboxStats(self, req: Any) -> Any:
        return pb.ListPodSandboxStatsResponse(stats=await self._sandbox_stats(req))

    async def StreamPodSandboxStats(self, req: Any) -> AsyncIterator[Any]:
        stats = await self._sandbox_stats(req)
        if stats:
            yield pb.StreamPodSandboxStatsResponse(pod_sandbox_stats=stats)

    # ----------------------------------------------------------------- events

    async def GetContainerEvents(self, req: Any) -> AsyncIterator[Any]:
        async for event in self.rt.get_container_events():
            yield convert.container_event_to_pb(event)

    # ----------------------------------------------------------------- images

    async def _images(self, req: Any) -> list[Any]:
        wanted = req.filter.image.image if req.HasField("filter") else ""
        if wanted:
            one = await self.rt.image_status(convert.image_spec_from_pb(req.filter.image))
            return [convert.image_to_pb(one)] if one is not None else []
        return [convert.image_to_pb(i) for i in await self.rt.list_images()]

    async def ListImages(self, req: Any) -> Any:
        return pb.ListImagesResponse(images=await self._images(req))

    async def StreamImages(self, req: Any) -> AsyncIterator[Any]:
        images = await self._images(req)
        if images:
            yield pb.StreamImagesResponse(images=images)

    async def ImageStatus(self, req: Any) -> Any:
        image = await self.rt.image_status(convert.image_spec_from_pb(req.image))
        if image is None:
            return pb.ImageStatusResponse()  # absent: no image field, not an error
        return pb.ImageStatusResponse(image=convert.image_to_pb(image))

    async def PullImage(self, req: Any) -> Any:
        sandbox = (
            convert.sandbox_config_from_pb(req.sandbox_config)
            if req.HasField("sandbox_config")
            else None
        )
        # An absent auth field is an anonymous pull, not empty credentials.
        auth = convert.auth_config_from_pb(req.auth) if req.HasField("auth") else None
        ref = await self.rt.pull_image(convert.image_spec_from_pb(req.image), sandbox, auth)
        return pb.PullImageResponse(image_ref=ref)

    async def ReopenContainerLog(self, req: Any) -> Any:
        if not isinstance(self.rt, LogReopener):
            raise UnimplementedError("ReopenContainerLog: the runtime cannot reopen container logs")
        await self.rt.reopen_container_log(req.container_id)
        return pb.ReopenContainerLogResponse()

    async def ImageFsInfo(self, req: Any) -> Any:
        if not isinstance(self.rt, ImageFsReporter):
            raise UnimplementedError(
                "ImageFsInfo: the runtime does not report its image filesystem"
            )
        usage = await self.rt.image_fs_info()
        return pb.ImageFsInfoResponse(
            image_filesystems=[convert.filesystem_usage_to_pb(u) for u in usage]
        )

    async def RemoveImage(self, req: Any) -> Any:
        await self.rt.remove_image(convert.image_spec_from_pb(req.image))
        return pb.RemoveImageResponse()


#: RPCs that call the runtime (every RPC of both services but :data:`UNSERVED_RPCS`).
SERVED_RPCS: frozenset[str] = frozenset(
    m.name for service in _services("v1") for m in service.methods if m.name not in UNSERVED_RPCS
)


def _unary(body: Callable[[Any], Awaitable[Any]]) -> _Handler:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await body(request)
        except Exception as exc:
            code, details = to_status(exc)
        await context.abort(code, details)

    return handle


def _stream(body: Callable[[Any], AsyncIterator[Any]]) -> _Handler:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in body(request):
                yield item
            return
        except Exception as exc:
            code, details = to_status(exc)
        await context.abort(code, details)

    return handle


def _unimplemented(name: str, reason: str, streaming: bool) -> _Handler:
    details = f"runtime.v1 {name} is not served by kubelet-kit's CRI server ({reason})"

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, details)

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, details)
        yield  # pragma: no cover - makes this an async generator

    return stream if streaming else unary


#: The optional capability each RPC needs (:mod:`kubelet_kit.container.optional`); an
#: RPC of one the runtime does not offer answers UNIMPLEMENTED naming it, without
#: calling the runtime. Exec, Attach and PortForward answer so when there are no streams.
_RPC_CAPABILITY: dict[str, str] = {
    "ExecSync": optional.EXEC,
    "UpdateContainerResources": optional.UPDATE_RESOURCES,
    "ReopenContainerLog": optional.LOG_REOPEN,
    "GetContainerEvents": optional.EVENTS,
    "ImageFsInfo": optional.IMAGE_FS,
    **dict.fromkeys(
        ("ListImages", "StreamImages", "ImageStatus", "PullImage", "RemoveImage"), optional.IMAGES
    ),
    **dict.fromkeys(
        (
            "ContainerStats",
            "ListContainerStats",
            "StreamContainerStats",
            "PodSandboxStats",
            "ListPodSandboxStats",
            "StreamPodSandboxStats",
        ),
        optional.STATS,
    ),
}


def _not_offered(runtime: Any, capability: str, streaming: bool) -> _Handler:
    async def refuse(request: Any) -> Any:
        raise optional.not_offered(runtime, capability)

    async def refuse_stream(request: Any) -> AsyncIterator[Any]:
        raise optional.not_offered(runtime, capability)
        yield  # pragma: no cover - makes this an async generator

    return _stream(refuse_stream) if streaming else _unary(refuse)


def _generic_handler(service: Any, servicer: _Servicer) -> grpc.GenericRpcHandler:
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    offered = optional.runtime_capabilities(servicer.rt)
    for method in service.methods:
        # Every version's RPCs carry runtime.v1 messages (api_v1alpha2.proto).
        request_cls = getattr(pb, method.input_type.name)
        response_cls = getattr(pb, method.output_type.name)
        streaming = method.server_streaming
        needs = _RPC_CAPABILITY.get(method.name)
        if method.name in UNSERVED_RPCS:
            fn = _unimplemented(method.name, UNSERVED_RPCS[method.name], streaming)
        elif needs is not None and needs not in offered:
            fn = _not_offered(servicer.rt, needs, streaming)
        elif streaming:
            fn = _stream(getattr(servicer, method.name))
        else:
            fn = _unary(getattr(servicer, method.name))
        make = grpc.unary_stream_rpc_method_handler
        if not streaming:
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            fn,
            request_deserializer=request_cls.FromString,
            response_serializer=response_cls.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


class CRIServer:
    """Serves a Runtime as the CRI's RuntimeService and ImageService on a unix socket.

    Both ``runtime.v1`` and ``runtime.v1alpha2`` are answered on the one socket.

    Nothing starts in ``__init__``. :meth:`start` binds the socket (replacing a
    stale socket file left by a crashed server); :meth:`stop` closes it;
    :meth:`run` serves until stopped. Also an async context manager.

    Args:
        runtime: Any implementation of :class:`kubelet_kit.container.RuntimeCore`;
            the RPCs of a capability it does not offer (exec, images, stats,
            events, ...) answer UNIMPLEMENTED naming it.
        socket_path: Path of the unix socket to listen on.
        clock: Source of wall time for response timestamps.
        max_message_bytes: Largest message accepted or sent (the kubelet's 16 MiB).
        interceptors: ``grpc.aio.ServerInterceptor``s (logging, metrics, auth).
        streaming_address: Where the streaming server listens for a runtime that
            serves streams itself (:class:`~kubelet_kit.container.streams.StreamingRuntime`):
            ``Exec``, ``Attach`` and ``PortForward`` answer with its one-time URLs.
            A runtime with URLs of its own has them passed on.
        streaming_port: Its port (0: any free one).
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        socket_path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
        interceptors: Sequence[Any] = (),
        streaming_address: str = "127.0.0.1",
        streaming_port: int = 0,
    ) -> None:
        # The servicer calls optional methods only for the capabilities the
        # runtime offers (the others answer UNIMPLEMENTED): typed as the whole.
        self._runtime = cast(Runtime, runtime)
        self._streaming_address = streaming_address
        self._streaming_port = streaming_port
        self._streaming: Any = None
        self._path = Path(socket_path)
        if not self._path.is_absolute():
            raise ConfigurationError(f"socket_path: {str(self._path)!r} is not absolute")
        self._clock: Clock = clock or RealClock()
        self._max = max_message_bytes
        self._interceptors = list(interceptors)
        self._server: grpc.aio.Server | None = None

    @property
    def socket_path(self) -> Path:
        """Where the server listens."""
        return self._path

    @property
    def endpoint(self) -> str:
        """The endpoint for a client: ``unix:///path``."""
        return f"unix://{self._path}"

    async def start(self) -> None:
        """Bind the socket and start serving. Idempotent.

        Raises:
            ConfigurationError: the socket cannot be bound (the message names it).
        """
        if self._server is not None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if self._path.is_socket():
                self._path.unlink()
        server = grpc.aio.server(
            interceptors=self._interceptors or None,
            options=[
                ("grpc.max_receive_message_length", self._max),
                ("grpc.max_send_message_length", self._max),
            ],
        )
        urls: StreamURLRuntime | None = None
        mode = stream_mode(self._runtime)
        if mode == "direct":
            from kubelet_kit.streams.server import StreamingServer

            streaming = StreamingServer(
                self._runtime,  # type: ignore[arg-type]  # stream_mode checked it
                address=self._streaming_address,
                port=self._streaming_port,
                clock=self._clock,
            )
            await streaming.start()
            self._streaming = urls = streaming
        elif mode == "url":
            urls = self._runtime  # type: ignore[assignment]  # stream_mode checked it
        server.add_generic_rpc_handlers(
            tuple(
                _generic_handler(service, _Servicer(self._runtime, self._clock, urls, version))
                for version in _API_VERSIONS
                for service in _services(version)
            )
        )
        try:
            server.add_insecure_port(self.endpoint)
        except RuntimeError as exc:
            raise ConfigurationError(f"socket_path: cannot listen on {self._path}: {exc}") from None
        await server.start()
        self._server = server

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls in flight get ``grace`` seconds. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()
        streaming, self._streaming = self._streaming, None
        if streaming is not None:
            await streaming.stop()

    async def run(self) -> None:
        """Start (if needed) and serve until :meth:`stop` is called."""
        await self.start()
        server = self._server
        if server is not None:
            await server.wait_for_termination()

    async def __aenter__(self) -> CRIServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
