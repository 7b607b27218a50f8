"""The node API's streaming endpoints: ``/exec``, ``/attach`` and ``/portForward``.

As the kubelet: the pod and container are found first (404 otherwise), then the
runtime decides how the session runs. A runtime that serves streams itself
(:class:`~kubelet_kit.container.streams.StreamingRuntime`, the embedded
host-process runtime) gets the client's streams from
:mod:`kubelet_kit.streams`, which speaks SPDY/3.1 and WebSocket here. A runtime
with its own streaming server
(:class:`~kubelet_kit.container.streams.StreamURLRuntime`, containerd over CRI)
hands out a URL, and the client's upgraded connection is proxied to it (not
redirected: the 1.20 API server follows a redirect only to the same host).

The routes sit behind the secure port's authentication and authorization (the
``proxy`` subresource) and are debugging handlers: ``enableDebuggingHandlers:
false`` turns them off.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubelet_kit.container import PodSandboxFilter, PodSandboxState, labels
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO, stream_mode
from kubelet_kit.errors import ContainerRuntimeError, KubeletKitError

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.server.server import KubeletServer

__all__ = ["STREAM_PATH_PREFIXES", "StreamEndpoints"]

log = logging.getLogger("kubelet_kit.server")

#: Paths whose requests are long-lived streams (not bounded by the request timeout).
STREAM_PATH_PREFIXES = ("/exec/", "/attach/", "/portForward/")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


class StreamEndpoints:
    """The streaming handlers of one :class:`~kubelet_kit.server.KubeletServer`."""

    def __init__(self, server: KubeletServer) -> None:
        self.server = server

    def routes(self) -> list[tuple[str, str, Handler]]:
        """``(method, path, handler)`` for every streaming route (GET and POST, with
        and without the pod uid)."""
        out: list[tuple[str, str, Handler]] = []
        for method in ("GET", "POST"):
            for kind, handler in (("exec", self.exec), ("attach", self.attach)):
                out.append((method, f"/{kind}/{{namespace}}/{{pod}}/{{container}}", handler))
                out.append(
                    (method, f"/{kind}/{{namespace}}/{{pod}}/{{uid}}/{{container}}", handler)
                )
            out.append((method, "/portForward/{namespace}/{pod}", self.port_forward))
            out.append((method, "/portForward/{namespace}/{pod}/{uid}", self.port_forward))
        return out

    @property
    def runtime(self) -> Any:
        return self.server.kubelet.runtime

    async def _pod(self, request: web.Request) -> Pod | web.Response:
        bad = self.server._validate_path(request)
        if bad is not None:
            return bad
        m = request.match_info
        pod = self.server._find_pod(m["namespace"], m["pod"], m.get("uid"))
        if pod is None:
            return _text(404, f'pod "{m["pod"]}" in namespace "{m["namespace"]}" not found')
        return pod

    async def _container(self, request: web.Request) -> tuple[str, Pod] | web.Response:
        pod = await self._pod(request)
        if isinstance(pod, web.Response):
            return pod
        name = request.match_info["container"]
        if name not in {c.name for c in pod.spec.all_containers()}:
            return _text(404, f'container "{name}" not found in pod "{pod.metadata.name}"')
        try:
            container_id = await self.server._running_container(pod, name)
        except ContainerRuntimeError as exc:
            return _text(500, f"listing the runtime's containers failed: {exc}")
        if container_id is None:
            return _text(404, f'container "{name}" in pod "{pod.metadata.name}" is not running')
        return container_id, pod

    async def exec(self, request: web.Request) -> web.StreamResponse:
        """``/exec/{namespace}/{pod}[/{uid}]/{container}?command=...``."""
        return await self._remote_command(request, exec_=True)

    async def attach(self, request: web.Request) -> web.StreamResponse:
        """``/attach/{namespace}/{pod}[/{uid}]/{container}``."""
        return await self._remote_command(request, exec_=False)

    async def _remote_command(self, request: web.Request, *, exec_: bool) -> web.StreamResponse:
        from kubelet_kit.streams.remotecommand import options_from_query, serve_remote_command

        found = await self._container(request)
        if isinstance(found, web.Response):
            return found
        container_id, _pod = found
        try:
            options = options_from_query(request.query, exec_=exec_)
        except ValueError as exc:
            return _text(400, str(exc))
        runtime = self.runtime
        mode = stream_mode(runtime)
        if mode == "url":
            try:
                if exec_:
                    url = await runtime.get_exec_url(
                        container_id,
                        options.command,
                        tty=options.tty,
                        stdin=options.stdin,
                        stdout=options.stdout,
                        stderr=options.stderr,
                    )
                else:
                    url = await runtime.get_attach_url(
                        container_id,
                        tty=options.tty,
                        stdin=options.stdin,
                        stdout=options.stdout,
                        stderr=options.stderr,
                    )
            except KubeletKitError as exc:
                return _text(500, f"{'exec' if exec_ else 'attach'}: {exc}")
            return await self._proxy(request, url)
        if mode is None:
            return _text(501, "this node's runtime serves no exec or attach streams")

        async def run(io: StreamIO) -> int | None:
            if exec_:
                code: int = await runtime.exec_stream(container_id, options.command, io)
                return code
            await runtime.attach_stream(container_id, io)
            return None

        self.server.open_streams += 1
        try:
            return await serve_remote_command(request, options, run)
        finally:
            self.server.open_streams -= 1

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        """``/portForward/{namespace}/{pod}[/{uid}]``."""
        from kubelet_kit.streams.portforward import ports_from_query, serve_port_forward

        pod = await self._pod(request)
        if isinstance(pod, web.Response):
            return pod
        runtime = self.runtime
        try:
            sandboxes = await runtime.list_pod_sandboxes(
                PodSandboxFilter(
                    state=PodSandboxState.READY, label_selector={labels.POD_UID: pod.metadata.uid}
                )
            )
        except ContainerRuntimeError as exc:
            return _text(500, f"listing the runtime's sandboxes failed: {exc}")
        if not sandboxes:
            return _text(404, f'pod "{pod.metadata.name}" has no running sandbox')
        sandbox_id = max(sandboxes, key=lambda s: s.created_at).id
        mode = stream_mode(runtime)
        if mode == "url":
            try:
                ports = ports_from_query(request.query)
                url = await runtime.get_port_forward_url(sandbox_id, ports)
            except ValueError as exc:
                return _text(400, str(exc))
            except KubeletKitError as exc:
                return _text(500, f"port-forward: {exc}")
            return await self._proxy(request, url)
        if mode is None:
            return _text(501, "this node's runtime serves no port-forward streams")

        async def forward(port: int, source: ByteSource, sink: ByteSink) -> None:
            await runtime.port_forward_stream(sandbox_id, port, source, sink)

        self.server.open_streams += 1
        try:
            return await serve_port_forward(request, forward)
        finally:
            self.server.open_streams -= 1

    async def _proxy(self, request: web.Request, url: str) -> web.StreamResponse:
        from kubelet_kit.streams.upgrade import proxy_upgrade

        self.server.open_streams += 1
        try:
            return await proxy_upgrade(request, url)
        finally:
            self.server.open_streams -= 1
