"""A CRI runtime's streaming server: one-time URLs for exec, attach and
port-forward sessions, served for a :class:`~kubelet_kit.container.streams.StreamingRuntime`.

This is the URL contract of the kubelet's streaming package, which CRI runtimes
(containerd among them) implement: the runtime's ``Exec``/``Attach``/
``PortForward`` RPC stores the request under a random token and answers with
``http://ADDRESS/exec/TOKEN`` (``/attach/``, ``/portforward/``); the client (a
kubelet, ``crictl``) upgrades that URL within a minute, once. The session's
options come from the stored request, not from the URL's query.

:class:`StreamingServer` is also a :class:`~kubelet_kit.container.streams.StreamURLRuntime`,
so a runtime that serves streams itself can be offered the way containerd offers
its own (the project's CRI server does this).
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Sequence
from typing import Any, Final

import attrs
from aiohttp import web

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamingRuntime, StreamIO
from kubelet_kit.errors import ResourceExhaustedError
from kubelet_kit.streams.portforward import serve_port_forward
from kubelet_kit.streams.remotecommand import ExecOptions, serve_remote_command

__all__ = ["MAX_IN_FLIGHT", "TOKEN_TTL", "StreamingServer"]

#: How long a URL stays valid (the kubelet's streaming cache TTL).
TOKEN_TTL: Final = 60.0
#: How many URLs may wait to be used at once.
MAX_IN_FLIGHT: Final = 1000


@attrs.frozen
class _Pending:
    kind: str  # "exec", "attach" or "portforward"
    target: str  # container or sandbox id
    options: ExecOptions
    expires: float


def _token() -> str:
    # 8 random bytes, URL-safe base64 without padding, as the kubelet's cache makes.
    return base64.urlsafe_b64encode(os.urandom(8)).rstrip(b"=").decode("ascii")


class StreamingServer:
    """Serves streams for ``runtime`` at one-time URLs.

    Args:
        runtime: Runs the sessions.
        address: Address to listen on (loopback by default: the URLs are for a
            kubelet on this machine).
        port: Port (0: any free one; see :attr:`base_url` once started).
        clock: Token expiry.
        token_ttl: Seconds a URL stays valid.
        max_in_flight: Unused URLs kept at most.
    """

    def __init__(
        self,
        runtime: StreamingRuntime,
        *,
        address: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
        token_ttl: float = TOKEN_TTL,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.runtime = runtime
        self.address = address
        self.port = port
        self.clock = clock or RealClock()
        self.token_ttl = token_ttl
        self.max_in_flight = max_in_flight
        self._pending: dict[str, _Pending] = {}
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """``http://ADDRESS:PORT`` (the bound port once started)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}"

    # -- the URL side --------------------------------------------------------------

    def _add(self, kind: str, target: str, options: ExecOptions) -> str:
        now = self.clock.monotonic()
        for token in [t for t, p in self._pending.items() if p.expires <= now]:
            del self._pending[token]
        if len(self._pending) >= self.max_in_flight:
            raise ResourceExhaustedError(
                f"maximum number of in-flight streaming requests exceeded ({self.max_in_flight})"
            )
        token = _token()
        self._pending[token] = _Pending(kind, target, options, now + self.token_ttl)
        return f"{self.base_url}/{kind}/{token}"

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
        """A one-time URL for an exec of ``cmd`` in the container."""
        return self._add(
            "exec",
            container_id,
            ExecOptions(command=tuple(cmd), stdin=stdin, stdout=stdout, stderr=stderr, tty=tty),
        )

    async def get_attach_url(
        self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool
    ) -> str:
        """A one-time URL for an attach to the container."""
        return self._add(
            "attach", container_id, ExecOptions(stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
        )

    async def get_port_forward_url(self, sandbox_id: str, ports: Sequence[int]) -> str:
        """A one-time URL for a port-forward into the sandbox."""
        return self._add("portforward", sandbox_id, ExecOptions())

    def _take(self, kind: str, token: str) -> _Pending | None:
        pending = self._pending.pop(token, None)
        if pending is None or pending.kind != kind or pending.expires <= self.clock.monotonic():
            return None
        return pending

    # -- the HTTP side -------------------------------------------------------------

    async def _remote_command(self, request: web.Request) -> web.StreamResponse:
        kind = request.match_info["kind"]
        pending = self._take(kind, request.match_info["token"])
        if pending is None:
            return web.Response(status=404, text="invalid or expired streaming token\n")
        runtime, target, options = self.runtime, pending.target, pending.options

        async def run(io: StreamIO) -> int | None:
            if kind == "exec":
                return await runtime.exec_stream(target, options.command, io)
            await runtime.attach_stream(target, io)
            return None

        return await serve_remote_command(request, options, run)

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        pending = self._take("portforward", request.match_info["token"])
        if pending is None:
            return web.Response(status=404, text="invalid or expired streaming token\n")
        runtime, sandbox = self.runtime, pending.target

        async def forward(port: int, source: ByteSource, sink: ByteSink) -> None:
            await runtime.port_forward_stream(sandbox, port, source, sink)

        return await serve_port_forward(request, forward)

    async def start(self) -> None:
        """Listen. Raises OSError when the address cannot be bound."""
        app = web.Application()
        for method in ("GET", "POST"):
            app.router.add_route(method, "/{kind:exec|attach}/{token}", self._remote_command)
            app.router.add_route(method, "/portforward/{token}", self._port_forward)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.address, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        server: Any = site._server
        if self.port == 0 and server is not None and server.sockets:
            self.port = int(server.sockets[0].getsockname()[1])
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening and end open sessions. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                await runner.cleanup()
        self._pending.clear()

    async def __aenter__(self) -> StreamingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
