"""CRIRuntime: the Runtime protocol over the CRI (runtime.v1) with ``grpc.aio``.

Behaviour a caller relies on:

* **Deadlines.** Every call carries one (``timeout``, the kubelet's
  runtimeRequestTimeout, 2 minutes by default), sent to the runtime as the gRPC
  deadline and also enforced on the injected clock. Two calls get longer ones, as
  in the kubelet: StopContainer gets the grace period on top, ExecSync gets its
  own timeout on top (and none at all when it has none).
* **Errors.** Failed calls raise the typed errors of :mod:`kubelet_kit.errors`;
  the code -> class table lives in :mod:`kubelet_kit.cri.errors` alone.
* **Retries.** Calls that are safe to repeat (version, status, list, status of
  one object, stats, stop, remove, image status/list/remove) are retried on
  UNAVAILABLE with doubling back-off on the clock, a bounded number of times;
  then RuntimeUnavailableError. Create, start, exec, update and pull are not.
  RunPodSandbox is retried only after checking that the failed attempt did not
  create the sandbox anyway (found by the ``io.kubernetes.pod.uid`` label and
  the metadata attempt), so a retry never leaves a duplicate.
* **Memo.** Listed containers and sandboxes, and statuses of each, are
  converted once per distinct answer (:mod:`kubelet_kit.cri.memo`): a relist of
  unchanged containers costs the client a lookup each. The values are frozen
  and shared between calls; treat their mappings as read-only.
* **Readiness.** :attr:`CRIRuntime.ready` is false until a call succeeds and
  after a call finds the runtime unreachable; the channel keeps reconnecting on
  its own (with short back-off) and the next successful call sets it again.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
import grpc.aio

from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.container import labels as kubelabels
from kubelet_kit.container.interfaces import (
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerFilter,
    ContainerInfo,
    ContainerStats,
    ContainerStatus,
    ExecResult,
    FilesystemUsage,
    Image,
    ImageSpec,
    LinuxContainerResources,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxState,
    PodSandboxStats,
    PodSandboxStatus,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.cri import convert
from kubelet_kit.cri.errors import RETRYABLE_CODES, from_rpc_error
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.cri.gen import api_pb2_grpc as pb_grpc
from kubelet_kit.cri.memo import DEFAULT_MEMO_SIZE, ConversionMemo, listed_key
from kubelet_kit.errors import (
    ConfigurationError,
    DeadlineExceededError,
    NotFoundError,
    RuntimeUnavailableError,
    UnimplementedError,
)

__all__ = ["DEFAULT_ENDPOINT", "CRIRuntime", "grpc_target"]

#: The kubelet's default containerRuntimeEndpoint.
DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"

#: The CRI version string the kubelet sends in VersionRequest.
_KUBELET_API_VERSION = "0.1.0"

#: The kubelet's maximum CRI message size (16 MiB) both ways.
_MAX_MESSAGE = 16 * 1024 * 1024

T = TypeVar("T")


class _Default(enum.Enum):
    """Marks "use the client's timeout" apart from None (no deadline)."""

    TIMEOUT = enum.auto()


def grpc_target(endpoint: str) -> str:
    """The gRPC target for a kubelet-style runtime endpoint.

    Accepts ``unix:///abs/path``, a bare ``/abs/path`` and ``tcp://host:port``.

    Raises:
        ConfigurationError: any other form, naming the endpoint.
    """
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://") :]
        if path.startswith("/"):
            return f"unix://{path}"
    elif endpoint.startswith("/"):
        return f"unix://{endpoint}"
    elif endpoint.startswith("tcp://"):
        hostport = endpoint[len("tcp://") :].rstrip("/")
        host, sep, port = hostport.rpartition(":")
        if sep and host and port.isdigit():
            return hostport
    raise ConfigurationError(
        f"runtime endpoint {endpoint!r}: expected unix:///absolute/path, /absolute/path "
        "or tcp://host:port"
    )


class CRIRuntime:
    """A :class:`kubelet_kit.container.Runtime` backed by a CRI runtime over gRPC.

    Nothing connects in ``__init__``; the channel opens on :meth:`connect`, on
    ``async with`` or lazily on the first call. Use from one event loop.

    Args:
        endpoint: ``unix:///path``, ``/path`` or ``tcp://host:port``.
        clock: Source of time for deadlines and retry back-off.
        timeout: Deadline of each call in seconds (runtimeRequestTimeout).
        retries: How many times an idempotent call is repeated on UNAVAILABLE.
        backoff_initial: First back-off in seconds; doubles per retry.
        backoff_max: Longest back-off in seconds.
        channel_options: Extra gRPC channel options, appended to the defaults.
        memo_size: How many converted containers and sandboxes (and statuses of
            each) to remember by their wire bytes, so an unchanged one costs a
            dictionary lookup rather than a conversion (see
            :mod:`kubelet_kit.cri.memo`); 0 turns this off.

    Raises:
        ConfigurationError: the endpoint or a number is unusable.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        clock: Clock | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        backoff_initial: float = 0.1,
        backoff_max: float = 2.0,
        channel_options: Sequence[tuple[str, Any]] = (),
        memo_size: int = DEFAULT_MEMO_SIZE,
    ) -> None:
        if timeout <= 0:
            raise ConfigurationError(f"timeout: must be positive, got {timeout!r}")
        if retries < 0:
            raise ConfigurationError(f"retries: must not be negative, got {retries!r}")
        self._endpoint = endpoint
        self._target = grpc_target(endpoint)
        self._clock: Clock = clock or RealClock()
        self._real_clock = isinstance(self._clock, RealClock)
        self._timeout = float(timeout)
        self._retries = retries
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
            # Reconnect quickly after a runtime restart (the default waits up to 2 min).
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            *channel_options,
        ]
        if memo_size < 0:
            raise ConfigurationError(f"memo_size: must not be negative, got {memo_size!r}")
        self._channel: grpc.aio.Channel | None = None
        self._runtime: Any = None
        self._images: Any = None
        self._ready = False
        self._containers = ConversionMemo(convert.container_from_pb, memo_size, listed_key)
        self._sandboxes = ConversionMemo(convert.sandbox_from_pb, memo_size, listed_key)
        self._container_statuses = ConversionMemo(convert.container_status_from_pb, memo_size)
        self._sandbox_statuses = ConversionMemo(convert.sandbox_status_from_pb, memo_size)

    # ------------------------------------------------------------- lifecycle

    @property
    def endpoint(self) -> str:
        """The endpoint as given."""
        return self._endpoint

    @property
    def ready(self) -> bool:
        """Whether the last call reached the runtime (false before the first call)."""
        if self._channel is None:
            return False
        state = self._channel.get_state(try_to_connect=False)
        if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
            return False
        return self._ready

    async def connect(self) -> None:
        """Open the channel. Does not wait for the runtime; idempotent."""
        self._ensure_channel()

    async def close(self) -> None:
        """Close the channel, cancelling calls in flight. Idempotent."""
        channel, self._channel = self._channel, None
        self._runtime = self._images = None
        self._ready = False
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> CRIRuntime:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _ensure_channel(self) -> None:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self._target, options=self._options)
            self._runtime = pb_grpc.RuntimeServiceStub(self._channel)
            self._images = pb_grpc.ImageServiceStub(self._channel)

    # -------------------------------------------------------------- plumbing

    async def _call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        target: str = "",
        timeout: float | _Default | None = _Default.TIMEOUT,
        retry: bool = False,
    ) -> Any:
        """One unary call with deadline, error mapping and (optionally) retries.

        ``timeout`` None means no deadline; by default it is the client's timeout.
        """
        deadline = self._timeout if timeout is _Default.TIMEOUT else timeout
        attempt = 0
        while True:
            # Inside the loop: a close() during a back-off reopens lazily.
            self._ensure_channel()
            fn = getattr(self._runtime if service == "runtime" else self._images, method)
            try:
                if self._real_clock:
                    # gRPC enforces the deadline itself (DEADLINE_EXCEEDED is mapped
                    # like the timeout below); a second timer per call only costs time.
                    response = await fn(request, timeout=deadline)
                else:
                    # An injected clock must be able to expire the call without waiting.
                    response = await wait_for(self._clock, fn(request, timeout=deadline), deadline)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in RETRYABLE_CODES:
                    self._ready = False
                    if retry and attempt < self._retries:
                        await self._clock.sleep(self._backoff(attempt))
                        attempt += 1
                        continue
                raise from_rpc_error(exc, method, target) from None
            except TimeoutError:
                where = f"{method} {target}".strip()
                raise DeadlineExceededError(
                    f"{where}: no answer from {self._endpoint} within {deadline:g}s"
                ) from None
            self._ready = True
            return response

    def _backoff(self, attempt: int) -> float:
        return float(min(self._backoff_initial * (2**attempt), self._backoff_max))

    # ---------------------------------------------------------- runtime info

    async def version(self) -> VersionInfo:
        """Name and version of the runtime. Retried on UNAVAILABLE.

        Raises:
            UnimplementedError: the runtime does not serve runtime.v1 (for
                example one that only speaks the retired v1alpha2).
            RuntimeUnavailableError: the runtime cannot be reached.
        """
        try:
            resp = await self._call(
                "runtime", "Version", pb.VersionRequest(version=_KUBELET_API_VERSION), retry=True
            )
        except UnimplementedError as exc:
            raise UnimplementedError(
                f"the runtime at {self._endpoint} does not serve the CRI v1 API "
                f"(runtime.v1.RuntimeService/Version is unimplemented): {exc}"
            ) from None
        return convert.version_from_pb(resp)

    async def status(self) -> RuntimeStatus:
        """Runtime conditions. Retried on UNAVAILABLE."""
        resp = await self._call("runtime", "Status", pb.StatusRequest(), retry=True)
        return convert.runtime_status_from_pb(resp.status)

    # ------------------------------------------------------------- sandboxes

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create and start a sandbox; returns its id.

        Not idempotent on the wire, so after an UNAVAILABLE answer it first looks
        for a sandbox of the same pod uid and attempt (the failed call may have
        created it before the connection broke). A ready one is returned; one
        that is not ready (the runtime died while making it: its pause process or
        network may be missing) is stopped and removed, never handed on, and
        RunPodSandbox is sent again, as when there is none.

        Raises:
            RuntimeUnavailableError: still unreachable after the retries.
            InvalidArgumentError: the configuration was refused.
        """
        request = pb.RunPodSandboxRequest(
            config=convert.sandbox_config_to_pb(config), runtime_handler=config.runtime_handler
        )
        target = f"{config.metadata.namespace}/{config.metadata.name}"
        lookup = False
        attempt = 0
        while True:
            try:
                if lookup:
                    found = await self._find_sandbox(config)
                    if found is not None:
                        if found.state is PodSandboxState.READY:
                            return found.id
                        # Its name (pod and attempt) is taken until it is gone.
                        await self.stop_pod_sandbox(found.id)
                        await self.remove_pod_sandbox(found.id)
                resp = await self._call("runtime", "RunPodSandbox", request, target=target)
                return str(resp.pod_sandbox_id)
            except RuntimeUnavailableError:
                if attempt >= self._retries:
                    raise
                lookup = True
                await self._clock.sleep(self._backoff(attempt))
                attempt += 1

    async def _find_sandbox(self, config: PodSandboxConfig) -> PodSandbox | None:
        meta = config.metadata
        selector = {kubelabels.POD_UID: meta.uid} if config.labels.get(kubelabels.POD_UID) else {}
        request = pb.ListPodSandboxRequest(
            filter=convert.sandbox_filter_to_pb(PodSandboxFilter(label_selector=selector))
        )
        resp = await self._call("runtime", "ListPodSandbox", request)
        for item in resp.items:
            got = item.metadata
            if (got.uid, got.name, got.namespace, got.attempt) == (
                meta.uid,
                meta.name,
                meta.namespace,
                meta.attempt,
            ):
                return convert.sandbox_from_pb(item)
        return None

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop the sandbox and its containers. Idempotent; retried on UNAVAILABLE."""
        await self._call(
            "runtime",
            "StopPodSandbox",
            pb.StopPodSandboxRequest(pod_sandbox_id=pod_sandbox_id),
            target=pod_sandbox_id,
            retry=True,
        )

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Remove the sandbox and its containers. Idempotent: an unknown id succeeds."""
        with contextlib.suppress(NotFoundError):
            await self._call(
                "runtime",
                "RemovePodSandbox",
                pb.RemovePodSandboxRequest(pod_sandbox_id=pod_sandbox_id),
                target=pod_sandbox_id,
                retry=True,
            )

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""
        resp = await self._call(
            "runtime",
            "PodSandboxStatus",
            pb.PodSandboxStatusRequest(pod_sandbox_id=pod_sandbox_id),
            target=pod_sandbox_id,
            retry=True,
        )
        return self._sandbox_statuses.of_message(resp.status)

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``. Retried on UNAVAILABLE."""
        resp = await self._call(
            "runtime",
            "ListPodSandbox",
            pb.ListPodSandboxRequest(filter=convert.sandbox_filter_to_pb(filter)),
            retry=True,
        )
        memo = self._sandboxes.of_message
        return [memo(item) for item in resp.items]

    # ------------------------------------------------------------ containers

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Create a container in a sandbox; returns its id. Not retried.

        Raises:
            NotFoundError: unknown sandbox (or image).
            ContainerStartError: the runtime could not create it.
        """
        resp = await self._call(
            "runtime",
            "CreateContainer",
            pb.CreateContainerRequest(
                pod_sandbox_id=pod_sandbox_id,
                config=convert.container_config_to_pb(config, sandbox_config),
                sandbox_config=convert.sandbox_config_to_pb(sandbox_config),
            ),
            target=f"{pod_sandbox_id}/{config.metadata.name}",
        )
        return str(resp.container_id)

    async def start_container(self, container_id: str) -> None:
        """Start a created container. Not retried. Raises ContainerStartError."""
        await self._call(
            "runtime",
            "StartContainer",
            pb.StartContainerRequest(container_id=container_id),
            target=container_id,
        )

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """Stop with ``timeout`` seconds of grace (whole seconds on the wire, rounded
        up). The call's deadline is the grace period plus the usual timeout.
        Idempotent; retried on UNAVAILABLE."""
        grace = max(0, math.ceil(timeout))
        await self._call(
            "runtime",
            "StopContainer",
            pb.StopContainerRequest(container_id=container_id, timeout=grace),
            target=container_id,
            timeout=self._timeout + grace,
            retry=True,
        )

    async def remove_container(self, container_id: str) -> None:
        """Remove a container. Idempotent: an unknown id succeeds."""
        with contextlib.suppress(NotFoundError):
            await self._call(
                "runtime",
                "RemoveContainer",
                pb.RemoveContainerRequest(container_id=container_id),
                target=container_id,
                retry=True,
            )

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``. Retried on UNAVAILABLE."""
        resp = await self._call(
            "runtime",
            "ListContainers",
            pb.ListContainersRequest(filter=convert.container_filter_to_pb(filter)),
            retry=True,
        )
        memo = self._containers.of_message
        return [memo(c) for c in resp.containers]

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""
        resp = await self._call(
            "runtime",
            "ContainerStatus",
            pb.ContainerStatusRequest(container_id=container_id),
            target=container_id,
            retry=True,
        )
        return self._container_statuses.of_message(resp.status)

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` in the container and wait for it. Not retried.

        The runtime gets ``timeout`` in whole seconds (rounded up); the call's own
        deadline is that plus the usual timeout, leaving the runtime time to kill
        the command and answer. Without ``timeout`` neither side sets a limit.

        Raises:
            DeadlineExceededError: the command ran longer than ``timeout``.
            NotFoundError: unknown container.
        """
        seconds = math.ceil(timeout) if timeout else 0
        try:
            resp = await self._call(
                "runtime",
                "ExecSync",
                pb.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=seconds),
                target=container_id,
                timeout=self._timeout + seconds if seconds else None,
            )
        except DeadlineExceededError as exc:
            raise DeadlineExceededError(
                f"ExecSync {container_id}: command {' '.join(cmd)!r} timed out "
                f"after {timeout:g}s ({exc})"
            ) from None
        return convert.exec_result_from_pb(resp)

    async def get_exec_url(
        self,
        container_id: str,
        cmd: Sequence[str],
        *,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    ) -> str:
        """The runtime's streaming URL for one exec session (CRI ``Exec``; see
        :class:`~kubelet_kit.container.streams.StreamURLRuntime`). Not retried.

        Raises:
            NotFoundError: unknown container.
        """
        resp = await self._call(
            "runtime",
            "Exec",
            pb.ExecRequest(
                container_id=container_id,
                cmd=list(cmd),
                tty=tty,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
            ),
            target=container_id,
        )
        return str(resp.url)

    async def get_attach_url(
        self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool
    ) -> str:
        """The runtime's streaming URL for one attach session (CRI ``Attach``).

        Raises:
            NotFoundError: unknown container.
        """
        resp = await self._call(
            "runtime",
            "Attach",
            pb.AttachRequest(
                container_id=container_id, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
            ),
            target=container_id,
        )
        return str(resp.url)

    async def get_port_forward_url(self, sandbox_id: str, ports: Sequence[int]) -> str:
        """The runtime's streaming URL for one port-forward session (CRI
        ``PortForward``).

        Raises:
            NotFoundError: unknown sandbox.
        """
        resp = await self._call(
            "runtime",
            "PortForward",
            pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=list(ports)),
            target=sandbox_id,
        )
        return str(resp.url)

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Change a container's Linux resources. Not retried."""
        await self._call(
            "runtime",
            "UpdateContainerResources",
            pb.UpdateContainerResourcesRequest(
                container_id=container_id, linux=convert.resources_to_pb(resources)
            ),
            target=container_id,
        )

    async def container_stats(self, container_id: str) -> ContainerStats:
        """Resource usage of one container. Retried on UNAVAILABLE."""
        resp = await self._call(
            "runtime",
            "ContainerStats",
            pb.ContainerStatsRequest(container_id=container_id),
            target=container_id,
            retry=True,
        )
        return convert.container_stats_from_pb(resp.stats)

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Resource usage of the containers matching ``filter``. Retried on UNAVAILABLE.

        The CRI's stats filter has no state; a state in ``filter`` is applied here
        by listing the containers in that state.
        """
        resp = await self._call(
            "runtime",
            "ListContainerStats",
            pb.ListContainerStatsRequest(filter=convert.container_stats_filter_to_pb(filter)),
            retry=True,
        )
        stats = [convert.container_stats_from_pb(s) for s in resp.stats]
        if filter is not None and filter.state is not None:
            ids = {c.id for c in await self.list_containers(filter)}
            stats = [s for s in stats if s.container_id in ids]
        return stats

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Resource usage of a sandbox and its containers. Retried on UNAVAILABLE."""
        resp = await self._call(
            "runtime",
            "PodSandboxStats",
            pb.PodSandboxStatsRequest(pod_sandbox_id=pod_sandbox_id),
            target=pod_sandbox_id,
            retry=True,
        )
        return convert.sandbox_stats_from_pb(resp.stats)

    # ---------------------------------------------------------------- images

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Pull an image, with ``auth`` as the request's credentials when given;
        returns the runtime's image reference. Not retried.

        Raises:
            ImageNotFoundError: the reference does not exist.
            ImagePullError: any other pull failure (ErrImagePull).
            RuntimeUnavailableError: the runtime cannot be reached.
        """
        request = pb.PullImageRequest(image=convert.image_spec_to_pb(image))
        if sandbox_config is not None:
            request.sandbox_config.CopyFrom(convert.sandbox_config_to_pb(sandbox_config))
        if auth is not None:
            request.auth.CopyFrom(convert.auth_config_to_pb(auth))
        resp = await self._call("image", "PullImage", request, target=image.image)
        return str(resp.image_ref)

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image, or None if the runtime does not have it. Retried on UNAVAILABLE."""
        resp = await self._call(
            "image",
            "ImageStatus",
            pb.ImageStatusRequest(image=convert.image_spec_to_pb(image)),
            target=image.image,
            retry=True,
        )
        return convert.image_from_pb(resp.image) if resp.HasField("image") else None

    async def reopen_container_log(self, container_id: str) -> None:
        """Ask the runtime to start a new log file for the container
        (ReopenContainerLog). Not retried.

        Raises:
            NotFoundError: unknown container.
        """
        await self._call(
            "runtime",
            "ReopenContainerLog",
            pb.ReopenContainerLogRequest(container_id=container_id),
            target=container_id,
        )

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """The filesystems the runtime keeps images on (ImageFsInfo). Retried on
        UNAVAILABLE."""
        resp = await self._call("image", "ImageFsInfo", pb.ImageFsInfoRequest(), retry=True)
        return [convert.filesystem_usage_from_pb(u) for u in resp.image_filesystems]

    async def list_images(self) -> list[Image]:
        """Every image the runtime holds. Retried on UNAVAILABLE."""
        resp = await self._call("image", "ListImages", pb.ListImagesRequest(), retry=True)
        return [convert.image_from_pb(i) for i in resp.images]

    async def remove_image(self, image: ImageSpec) -> None:
        """Remove an image. Idempotent: a missing image succeeds."""
        with contextlib.suppress(NotFoundError):
            await self._call(
                "image",
                "RemoveImage",
                pb.RemoveImageRequest(image=convert.image_spec_to_pb(image)),
                target=image.image,
                retry=True,
            )

    # ---------------------------------------------------------------- events

    async def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """Stream the runtime's container events (GetContainerEvents).

        Nothing is sent until iteration starts. The stream has no deadline; it
        ends when the runtime closes it or the iteration is abandoned. Single
        consumer per call. Events of a type this version does not know are
        skipped.

        Raises:
            UnimplementedError: the runtime has no event stream (containerd 1.6),
                raised at the first ``__anext__``.
            RuntimeUnavailableError: the runtime is unreachable or went away.
        """
        self._ensure_channel()
        call = self._runtime.GetContainerEvents(pb.GetEventsRequest())
        try:
            async for msg in call:
                self._ready = True
                try:
                    event = convert.container_event_from_pb(msg)
                except ValueError:
                    continue
                yield event
        except grpc.aio.AioRpcError as exc:
            if exc.code() in RETRYABLE_CODES:
                self._ready = False
            raise from_rpc_error(exc, "GetContainerEvents") from None
        finally:
            call.cancel()

    # ------------------------------------------------------------ raw access

    @property
    def runtime_stub(self) -> Any:
        """The generated ``RuntimeServiceStub`` on this client's channel, for RPCs
        the Runtime protocol does not cover (opens the channel if needed)."""
        self._ensure_channel()
        return self._runtime

    @property
    def image_stub(self) -> Any:
        """The generated ``ImageServiceStub`` on this client's channel."""
        self._ensure_channel()
        return self._images

    def __repr__(self) -> str:
        return f"CRIRuntime({self._endpoint!r}, timeout={self._timeout:g})"
