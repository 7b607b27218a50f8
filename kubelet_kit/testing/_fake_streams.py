"""Exec, attach and port-forward streams of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` implementing the
:class:`~kubelet_kit.container.streams.StreamingRuntime` calls in memory: the
default sessions (stdin echoed back, a command's output, the lines a container
writes, an echoed connection), the handlers a test scripts them with, and the
terminal sizes and stdin ends they record.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import posixpath
from collections.abc import Awaitable, Sequence
from typing import Any

from kubelet_kit.container.interfaces import ContainerState, PodSandboxState
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO, TerminalSize
from kubelet_kit.errors import ContainerRuntimeError, InvalidArgumentError
from kubelet_kit.testing._fake_process import _ProcessPart
from kubelet_kit.testing._fake_records import (
    AttachHandler,
    ExecStreamHandler,
    PortForwardHandler,
    _Container,
)


class _StreamPart(_ProcessPart):
    """``exec_stream``, ``attach_stream``, ``port_forward_stream`` and their
    handlers and records."""

    def set_exec_stream_handler(self, handler: ExecStreamHandler | None) -> None:
        """Script :meth:`exec_stream`: ``handler(container_id, cmd, io)`` runs the
        session on ``io`` and returns the exit code (or an awaitable of it), or
        None to let the default behaviour run. The fake closes ``io.stdout`` and
        ``io.stderr`` afterwards either way."""
        self._exec_stream_handler = handler

    def set_attach_handler(self, handler: AttachHandler | None) -> None:
        """Script :meth:`attach_stream`: ``handler(container_id, io)`` returns an
        awaitable that runs the session, or None to let the default behaviour run.
        The fake closes ``io.stdout`` and ``io.stderr`` afterwards either way."""
        self._attach_handler = handler

    def set_port_forward_handler(self, handler: PortForwardHandler | None) -> None:
        """Script :meth:`port_forward_stream`: ``handler(sandbox_id, port, source,
        sink)`` returns an awaitable that serves the connection (it may raise
        ContainerRuntimeError, as for a port nothing listens on), or None to let
        the default echo run. The fake closes ``sink`` afterwards either way."""
        self._port_forward_handler = handler

    def terminal_sizes(self, container_id: str) -> list[TerminalSize]:
        """Every terminal size the exec and attach sessions of a container were
        sent, oldest first (what the client's ``resize`` stream carried)."""
        return list(self._sizes.get(container_id, ()))

    def stdin_closed(self, container_id: str) -> bool:
        """Whether the container's stdin was closed by the end of the first attach's
        stdin (a container with ``stdin_once``)."""
        return container_id in self._stdin_closed

    # ====================================================== StreamingRuntime

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Run an exec session on ``io`` in a running container; return its exit code.

        With :meth:`set_exec_stream_handler` the handler runs it. Otherwise ``cmd``
        runs as :meth:`exec_sync` runs it (its exec handler, or the shell), its
        output written to stdout and stderr as it comes (both to stdout with
        ``tty``, lines ending in CR LF as a terminal writes them) and its exit
        code returned; the shell's ``cat`` reads the client's stdin (until its
        end; at once without one). Sizes from ``io.resize`` are recorded
        (:meth:`terminal_sizes`). Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown container.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("exec_stream", (container_id, tuple(cmd), io))
        c = self._container(container_id)
        if not cmd:
            raise InvalidArgumentError(f"exec_stream: container {container_id}: cmd is empty")
        self._check_running(c, "exec_stream")
        sizes = self._record_sizes(c.id, io)
        try:
            if self._exec_stream_handler is not None:
                result = self._exec_stream_handler(c.id, tuple(cmd), io)
                if isinstance(result, Awaitable):
                    result = await result
                if result is not None:
                    return result

            async def live(stream: str, data: bytes) -> None:
                await _send(
                    io.stdout if stream == "stdout" or io.tty else io.stderr, _tty(io, data)
                )

            res = await self._exec(c, cmd, stdin=io.stdin, live=live)
            await live("stdout", res.stdout)
            await live("stderr", res.stderr)
            return res.exit_code
        finally:
            await _stop(sizes)
            await _close(io.stdout)
            await _close(io.stderr)

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Attach ``io`` to a running container until it exits, the client's stdin
        ends, or the call is cancelled.

        With :meth:`set_attach_handler` the handler runs the session. Otherwise
        each line the container writes from now on goes to ``io.stdout`` (stderr
        lines to ``io.stderr``; to stdout, ending in CR LF, when the container has
        ``tty``), and the client's stdin goes to a container with ``stdin`` (its
        shell's ``cat`` reads it; a terminal echoes it). When the client's stdin
        ends the attach ends, except for a container with ``stdin_once``: its
        stdin is closed (:meth:`stdin_closed`; ``cat`` reads its end) and the
        attach lasts until it exits. Sizes are recorded (:meth:`terminal_sizes`).
        Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("attach_stream", (container_id, io))
        c = self._container(container_id)
        self._check_running(c, "attach_stream")
        sizes = self._record_sizes(c.id, io)
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._attached.setdefault(c.id, []).append(queue)
        tasks: list[asyncio.Future[Any]] = []
        try:
            if self._attach_handler is not None:
                result = self._attach_handler(c.id, io)
                if isinstance(result, Awaitable):
                    await result
                    return
            tty = c.config.tty

            def encode(text: str) -> bytes:
                return (text + ("\r\n" if tty else "\n")).encode()

            async def lines() -> None:
                while True:
                    stream, text = await queue.get()
                    sink = io.stdout if stream == "stdout" or tty else io.stderr
                    await _send(sink, encode(text))

            async def stdin() -> None:
                assert io.stdin is not None
                while data := await io.stdin.read(65536):
                    if tty:  # the terminal echoes what is typed
                        await _send(io.stdout, data.replace(b"\n", b"\r\n"))
                    self._feed_stdin(c, data)
                if c.config.stdin_once:
                    self._stdin_closed.add(c.id)
                    self._end_stdin(c)
                    await self._sleep_while_running(c, math.inf)

            tasks.append(asyncio.ensure_future(lines()))
            ends: set[asyncio.Future[Any]] = {
                asyncio.ensure_future(self._sleep_while_running(c, math.inf))
            }
            if c.config.stdin and io.stdin is not None:
                ends.add(asyncio.ensure_future(stdin()))
            tasks.extend(ends)
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            # Lines written before the end still reach the client.
            while not queue.empty():
                stream, text = queue.get_nowait()
                await _send(io.stdout if stream == "stdout" or tty else io.stderr, encode(text))
        finally:
            listeners = self._attached[c.id]
            listeners.remove(queue)
            if not listeners:
                del self._attached[c.id]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await _stop(sizes)
            await _close(io.stdout)
            await _close(io.stderr)

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Serve one forwarded connection to ``port`` of a ready sandbox.

        With :meth:`set_port_forward_handler` the handler serves it; otherwise a
        container of the sandbox running ``httpd`` (busybox's: ``-p [ADDR:]PORT``,
        ``-h HOME``) on that port answers one HTTP GET from its files, and a
        port nothing listens on is refused. Closes ``sink``.

        Raises:
            NotFoundError: unknown sandbox.
            InvalidArgumentError: ``port`` is not in 1-65535.
            ContainerRuntimeError: the sandbox is not ready (or what the handler
                raised, e.g. for a port nothing listens on).
        """
        await self._enter("port_forward_stream", (sandbox_id, port, source, sink))
        sb = self._sandbox(sandbox_id)
        if not 0 < port < 65536:
            raise InvalidArgumentError(f"port_forward_stream: port {port} is not in 1-65535")
        if sb.state != PodSandboxState.READY:
            raise ContainerRuntimeError(
                f"port_forward_stream: pod sandbox {sandbox_id} is {sb.state.value}, not ready"
            )
        try:
            if self._port_forward_handler is not None:
                result = self._port_forward_handler(sb.id, port, source, sink)
                if isinstance(result, Awaitable):
                    await result
                    return
            server = self._listener(sb.id, port)
            if server is None:
                raise ContainerRuntimeError(
                    f"port_forward_stream: pod sandbox {sandbox_id}: failed to connect to "
                    f"localhost:{port}: connection refused"
                )
            await _serve_http(server, source, sink)
        finally:
            await _close(sink)

    def _listener(self, sandbox_id: str, port: int) -> _Container | None:
        """The running container of the sandbox whose ``httpd`` listens on ``port``."""
        for c in self._containers_by_sandbox.get(sandbox_id, {}).values():
            if c.state == ContainerState.RUNNING and _httpd_port(c.serving) == port:
                return c
        return None

    def _record_sizes(self, container_id: str, io: StreamIO) -> asyncio.Future[None] | None:
        """Start recording the session's terminal sizes; the task to stop."""
        if io.resize is None:
            return None
        sizes = io.resize
        record = self._sizes.setdefault(container_id, [])

        async def follow() -> None:
            async for size in sizes:
                record.append(size)

        return asyncio.ensure_future(follow())


async def _send(sink: ByteSink | None, data: bytes) -> None:
    if sink is not None and data:
        await sink.write(data)


async def _close(sink: ByteSink | None) -> None:
    if sink is not None:
        await sink.close()


def _tty(io: StreamIO, data: bytes) -> bytes:
    """Output as a terminal writes it (newline as CR LF) with ``io.tty``."""
    return data.replace(b"\n", b"\r\n") if io.tty else data


def _httpd_port(argv: Sequence[str]) -> int | None:
    """The port busybox ``httpd ARGS`` listens on (80 by default); None for
    another program."""
    if not argv or os.path.basename(argv[0]) != "httpd":
        return None
    port = 80
    for flag, value in itertools.pairwise(argv):
        if flag == "-p":
            try:
                port = int(value.rpartition(":")[2])
            except ValueError:
                return None
    return port


async def _serve_http(c: _Container, source: ByteSource, sink: ByteSink) -> None:
    """Answer one HTTP GET as busybox ``httpd -h HOME`` does, from ``c``'s files."""
    argv = c.serving
    home = next((v for f, v in itertools.pairwise(argv) if f == "-h"), "/")
    request = b""
    while b"\r\n\r\n" not in request and b"\n\n" not in request:
        data = await source.read(65536)
        if not data:
            break
        request += data
    words = request.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(words) < 2 or words[0] not in ("GET", "HEAD"):
        status, body = "501 Not Implemented", b"<HTML><HEAD><TITLE>501 Not Implemented</TITLE>\n"
    else:
        path = words[1].split("?", 1)[0]
        if path.endswith("/"):
            path += "index.html"
        content = c.fs.get(posixpath.normpath(f"{home}/{path}"))
        if content is None:
            status, body = "404 Not Found", b"<HTML><HEAD><TITLE>404 Not Found</TITLE>\n"
        else:
            status, body = "200 OK", content.encode()
        if words[0] == "HEAD":
            body = b""
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    await sink.write(head.encode("latin-1") + body)


async def _stop(task: asyncio.Future[None] | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
