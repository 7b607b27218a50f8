"""A Runtime that counts its calls under the kubelet's runtime operation metrics.

:class:`InstrumentedRuntime` wraps any Runtime: each call counts in
``kubelet_runtime_operations_total`` and ``kubelet_runtime_operations_duration_seconds``
(by ``operation_type``, with the kubelet's names: ``run_podsandbox``,
``list_containers``, ``exec_sync``, ...), and a call that raises also in
``kubelet_runtime_operations_errors_total``. The wiring root wraps every agent's
runtime in one, as the kubelet wraps its runtime service.

The wrapper offers what the runtime it wraps offers (its :attr:`capabilities`);
a call of a capability the runtime does not offer raises UnimplementedError
(``runtime ToyRuntime does not offer exec``) without reaching it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import TypeVar, cast

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.interfaces import (
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerFilter,
    ContainerInfo,
    ContainerStats,
    ContainerStatus,
    EventRuntime,
    ExecResult,
    ExecRuntime,
    FilesystemUsage,
    Image,
    ImageFsReporter,
    ImageService,
    ImageSpec,
    LinuxContainerResources,
    LogReopener,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxStats,
    PodSandboxStatus,
    ResourceUpdater,
    RuntimeCore,
    RuntimeStatus,
    StatsRuntime,
    VersionInfo,
)
from kubelet_kit.container.optional import (
    EVENTS,
    EXEC,
    IMAGE_FS,
    IMAGES,
    LOG_REOPEN,
    STATS,
    UPDATE_RESOURCES,
    not_offered,
    runtime_capabilities,
)
from kubelet_kit.container.streams import (
    ByteSink,
    ByteSource,
    StreamingRuntime,
    StreamIO,
    StreamURLRuntime,
)
from kubelet_kit.errors import UnimplementedError
from kubelet_kit.node.metrics import KubeletMetrics

__all__ = ["InstrumentedRuntime"]

T = TypeVar("T")


class InstrumentedRuntime:
    """A Runtime that forwards every call and records it in :class:`KubeletMetrics`.

    Each call counts in ``kubelet_runtime_operations_total`` and
    ``kubelet_runtime_operations_duration_seconds`` under the kubelet's operation
    name; a call that raises also counts in ``kubelet_runtime_operations_errors_total``.
    Errors pass through unchanged. Durations come from ``clock``. A capability
    the wrapped runtime does not offer raises UnimplementedError, uncounted.

    Args:
        runtime: The runtime to wrap (any :class:`~kubelet_kit.container.RuntimeCore`).
        metrics: Where to record.
        clock: Source of durations; default the real clock.

    Raises:
        ConfigurationError: the runtime declares a capability it lacks the
            methods of (:func:`~kubelet_kit.container.runtime_capabilities`).
    """

    def __init__(
        self, runtime: RuntimeCore, metrics: KubeletMetrics, clock: Clock | None = None
    ) -> None:
        self.inner = runtime
        self.metrics = metrics
        self.clock: Clock = clock or RealClock()
        #: What the wrapped runtime offers beside the core (forwarded as is).
        self.capabilities: frozenset[str] = runtime_capabilities(runtime)

    def _need(self, capability: str) -> object:
        """The wrapped runtime, if it offers ``capability``."""
        if capability not in self.capabilities:
            raise not_offered(self.inner, capability)
        return self.inner

    async def _record(self, operation: str, call: Awaitable[T]) -> T:
        start = self.clock.monotonic()
        try:
            result = await call
        except Exception:
            self.metrics.record_operation(operation, self.clock.monotonic() - start, True)
            raise
        except BaseException:
            # Cancellation is the caller giving up, not the runtime failing.
            self.metrics.record_operation(operation, self.clock.monotonic() - start, False)
            raise
        self.metrics.record_operation(operation, self.clock.monotonic() - start, False)
        return result

    async def version(self) -> VersionInfo:
        """Forwarded (``version``)."""
        return await self._record("version", self.inner.version())

    async def status(self) -> RuntimeStatus:
        """Forwarded (``status``)."""
        return await self._record("status", self.inner.status())

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Forwarded (``run_podsandbox``)."""
        return await self._record("run_podsandbox", self.inner.run_pod_sandbox(config))

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Forwarded (``stop_podsandbox``)."""
        await self._record("stop_podsandbox", self.inner.stop_pod_sandbox(pod_sandbox_id))

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Forwarded (``remove_podsandbox``)."""
        await self._record("remove_podsandbox", self.inner.remove_pod_sandbox(pod_sandbox_id))

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Forwarded (``podsandbox_status``)."""
        return await self._record(
            "podsandbox_status", self.inner.pod_sandbox_status(pod_sandbox_id)
        )

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Forwarded (``list_podsandbox``)."""
        return await self._record("list_podsandbox", self.inner.list_pod_sandboxes(filter))

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Forwarded (``create_container``)."""
        return await self._record(
            "create_container", self.inner.create_container(pod_sandbox_id, config, sandbox_config)
        )

    async def start_container(self, container_id: str) -> None:
        """Forwarded (``start_container``)."""
        await self._record("start_container", self.inner.start_container(container_id))

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """Forwarded (``stop_container``)."""
        await self._record("stop_container", self.inner.stop_container(container_id, timeout))

    async def remove_container(self, container_id: str) -> None:
        """Forwarded (``remove_container``)."""
        await self._record("remove_container", self.inner.remove_container(container_id))

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Forwarded (``list_containers``)."""
        return await self._record("list_containers", self.inner.list_containers(filter))

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Forwarded (``container_status``)."""
        return await self._record("container_status", self.inner.container_status(container_id))

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Forwarded (``exec_sync``)."""
        inner = cast(ExecRuntime, self._need(EXEC))
        return await self._record("exec_sync", inner.exec_sync(container_id, cmd, timeout))

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Forwarded (``update_container``)."""
        inner = cast(ResourceUpdater, self._need(UPDATE_RESOURCES))
        await self._record(
            "update_container", inner.update_container_resources(container_id, resources)
        )

    async def container_stats(self, container_id: str) -> ContainerStats:
        """Forwarded (``container_stats``)."""
        inner = cast(StatsRuntime, self._need(STATS))
        return await self._record("container_stats", inner.container_stats(container_id))

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Forwarded (``list_container_stats``)."""
        inner = cast(StatsRuntime, self._need(STATS))
        return await self._record("list_container_stats", inner.list_container_stats(filter))

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Forwarded (``podsandbox_stats``)."""
        inner = cast(StatsRuntime, self._need(STATS))
        return await self._record("podsandbox_stats", inner.pod_sandbox_stats(pod_sandbox_id))

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Forwarded (``pull_image``), credentials and all."""
        inner = cast(ImageService, self._need(IMAGES))
        return await self._record("pull_image", inner.pull_image(image, sandbox_config, auth))

    async def image_status(self, image: ImageSpec) -> Image | None:
        """Forwarded (``image_status``)."""
        inner = cast(ImageService, self._need(IMAGES))
        return await self._record("image_status", inner.image_status(image))

    async def list_images(self) -> list[Image]:
        """Forwarded (``list_images``)."""
        inner = cast(ImageService, self._need(IMAGES))
        return await self._record("list_images", inner.list_images())

    async def remove_image(self, image: ImageSpec) -> None:
        """Forwarded (``remove_image``)."""
        inner = cast(ImageService, self._need(IMAGES))
        await self._record("remove_image", inner.remove_image(image))

    async def reopen_container_log(self, container_id: str) -> None:
        """Forwarded (``reopen_container_log``) when the runtime can reopen logs
        (:class:`~kubelet_kit.container.LogReopener`).

        Raises:
            UnimplementedError: it cannot.
        """
        inner = cast(LogReopener, self._need(LOG_REOPEN))
        await self._record("reopen_container_log", inner.reopen_container_log(container_id))

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """Forwarded (``image_fs_info``) when the runtime reports its image
        filesystem (:class:`~kubelet_kit.container.ImageFsReporter`); else empty."""
        if IMAGE_FS not in self.capabilities:
            return []
        inner = cast(ImageFsReporter, self.inner)
        return await self._record("image_fs_info", inner.image_fs_info())

    # -- streams: forwarded when the wrapped runtime has them ----------------------

    def _streaming(self, what: str) -> StreamingRuntime:
        if not isinstance(self.inner, StreamingRuntime):
            raise UnimplementedError(f"{what}: {type(self.inner).__name__} serves no streams")
        return self.inner

    def _stream_urls(self, what: str) -> StreamURLRuntime:
        if not isinstance(self.inner, StreamURLRuntime):
            raise UnimplementedError(
                f"{what}: {type(self.inner).__name__} hands out no streaming URLs"
            )
        return self.inner

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Forwarded and counted as ``exec`` (the session's whole length).

        Raises:
            UnimplementedError: the runtime serves no streams itself.
        """
        return await self._record(
            "exec", self._streaming("exec").exec_stream(container_id, cmd, io)
        )

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Forwarded and counted as ``attach``."""
        await self._record("attach", self._streaming("attach").attach_stream(container_id, io))

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Forwarded and counted as ``port_forward``."""
        await self._record(
            "port_forward",
            self._streaming("port_forward").port_forward_stream(sandbox_id, port, source, sink),
        )

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
        """Forwarded and counted as ``exec``.

        Raises:
            UnimplementedError: the runtime hands out no streaming URLs.
        """
        return await self._record(
            "exec",
            self._stream_urls("exec").get_exec_url(
                container_id, cmd, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
            ),
        )

    async def get_attach_url(
        self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool
    ) -> str:
        """Forwarded and counted as ``attach``."""
        return await self._record(
            "attach",
            self._stream_urls("attach").get_attach_url(
                container_id, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
            ),
        )

    async def get_port_forward_url(self, sandbox_id: str, ports: Sequence[int]) -> str:
        """Forwarded and counted as ``port_forward``."""
        return await self._record(
            "port_forward",
            self._stream_urls("port_forward").get_port_forward_url(sandbox_id, ports),
        )

    def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """Forwarded; the stream itself is counted once, as ``get_container_events``,
        when it ends (as the kubelet counts its long-lived call). Without an event
        stream, UnimplementedError is raised when iteration starts."""
        return self._events()

    async def _events(self) -> AsyncIterator[ContainerEvent]:
        inner = cast(EventRuntime, self._need(EVENTS))
        start = self.clock.monotonic()
        failed = False
        try:
            async for event in inner.get_container_events():
                yield event
        except Exception:
            failed = True
            raise
        finally:
            self.metrics.record_operation(
                "get_container_events", self.clock.monotonic() - start, failed
            )

    async def close(self) -> None:
        """Close the wrapped runtime if it has a ``close()``."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            await close()
