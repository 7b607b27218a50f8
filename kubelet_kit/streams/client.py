"""A client for exec, attach and port-forward against any kubelet's node API (the
real kubelet's or kubelet-kit's), over WebSocket or SPDY/3.1.

::

    async with aiohttp.ClientSession() as http:
        out = await exec_command(http, node_exec_url("https://node:10250", "default",
                                                      "web", "main", ["ls", "/"]),
                                 headers={"Authorization": "Bearer ..."}, ssl=False)
        print(out.exit_code, out.stdout.decode())

:func:`open_exec` gives the streams of a running session (stdin, stdout, stderr,
resize) for interactive use; :func:`open_port_forward` one forwarded connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

import aiohttp
import attrs

from kubelet_kit.container.streams import ByteSink, ByteSource
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.streams.status import exit_code_of
from kubelet_kit.streams.websocket import EXEC_PROTOCOLS, PORT_FORWARD_PROTOCOLS, ChannelConnection

__all__ = [
    "ExecOutput",
    "ExecSession",
    "StreamError",
    "attach_url",
    "exec_command",
    "node_exec_url",
    "open_exec",
    "open_port_forward",
    "port_forward_url",
]

Protocol = Literal["websocket", "spdy"]


class StreamError(KubeletKitError):
    """The node refused the session, or it failed (the message says why)."""


def _node_url(base: str, kind: str, namespace: str, pod: str, *rest: str,
              query: Sequence[tuple[str, str]] = ()) -> str:
    path = "/".join(urllib.parse.quote(p, safe="") for p in (namespace, pod, *rest))
    q = urllib.parse.urlencode(list(query))
    return f"{base.rstrip('/')}/{kind}/{path}" + (f"?{q}" if q else "")


def _flags(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> list[tuple[str, str]]:
    out = []
    for name, on in (("input", stdin), ("output", stdout), ("error", stderr), ("tty", tty)):
        if on:
            out.append((name, "1"))
    return out


def node_exec_url(base: str, namespace: str, pod: str, container: str,
                  command: Sequence[str], *, stdin: bool = False, stdout: bool = True,
                  stderr: bool = True, tty: bool = False) -> str:
    """The node API's ``/exec`` URL (``base`` like ``https://node:10250``)."""
    query = [("command", c) for c in command] + _flags(stdin, stdout, stderr and not tty, tty)
    return _node_url(base, "exec", namespace, pod, container, query=query)


def attach_url(base: str, namespace: str, pod: str, container: str, *, stdin: bool = False,
               stdout: bool = True, stderr: bool = True, tty: bool = False) -> str:
    """The node API's ``/attach`` URL."""
    return _node_url(base, "attach", namespace, pod, container,
                     query=_flags(stdin, stdout, stderr and not tty, tty))


def port_forward_url(base: str, namespace: str, pod: str, ports: Sequence[int] = ()) -> str:
    """The node API's ``/portForward`` URL (WebSocket takes the ports in it)."""
    return _node_url(base, "portForward", namespace, pod,
                     query=[("port", str(p)) for p in ports])


@attrs.frozen
class ExecOutput:
    """What a finished exec gave: its exit code and output."""

    exit_code: int
    stdout: bytes
    stderr: bytes


class ExecSession:
    """A running exec or attach: write ``stdin``, read ``stdout``/``stderr``,
    :meth:`resize`, and :meth:`wait` for the exit code. Each source has one reader."""

    def __init__(self, conn: ChannelConnection, *, stdin: bool, tty: bool) -> None:
        self._conn = conn
        self.stdin: ByteSink | None = conn.sink(0) if stdin else None
        self.stdout: ByteSource = conn.source(1)
        self.stderr: ByteSource = conn.source(2)
        self.tty = tty

    async def resize(self, width: int, height: int) -> None:
        """Tell the terminal its new size (tty sessions)."""
        await self._conn.send(4, json.dumps({"Width": width, "Height": height}).encode())

    async def wait(self) -> int:
        """The exit code, once the session ends.

        Raises:
            StreamError: It ended with a failure that is not an exit code.
        """
        chunks = []
        while chunk := await self._conn.source(3).read():
            chunks.append(chunk)
        status = b"".join(chunks)
        code = exit_code_of(status)
        if code is None:
            if not status:
                return 0  # older protocols say nothing on success
            try:
                message = json.loads(status).get("message", status.decode())
            except (ValueError, AttributeError):
                message = status.decode("utf-8", "replace")
            raise StreamError(str(message))
        return code

    async def close(self) -> None:
        """End the session (closes the connection)."""
        await self._conn.close()


@contextlib.asynccontextmanager
async def open_exec(http: aiohttp.ClientSession, url: str, *, stdin: bool = False,
                    tty: bool = False, headers: Mapping[str, str] | None = None,
                    ssl: Any = None,
                    protocols: Sequence[str] = EXEC_PROTOCOLS) -> AsyncIterator[ExecSession]:
    """Open an exec or attach session at ``url`` over WebSocket.

    Raises:
        StreamError: The node refused (its status and message).
    """
    ws_url = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    try:
        ws = await http.ws_connect(ws_url, protocols=tuple(protocols), headers=headers,
                                   ssl=ssl, max_msg_size=0, autoping=True)
    except aiohttp.WSServerHandshakeError as exc:
        raise StreamError(f"{url}: {exc.status} {exc.message}") from None
    protocol = ws.protocol or ""
    if protocol not in protocols:
        await ws.close()
        raise StreamError(f"{url}: the node chose no subprotocol of {list(protocols)}")
    conn = ChannelConnection(ws, protocol)
    conn.start()
    session = ExecSession(conn, stdin=stdin, tty=tty)
    try:
        yield session
    finally:
        await session.close()


async def exec_command(http: aiohttp.ClientSession, url: str, *, input: bytes | None = None,
                       tty: bool = False, headers: Mapping[str, str] | None = None,
                       ssl: Any = None, timeout: float = 300.0) -> ExecOutput:
    """Run one exec to the end: send ``input`` (then end stdin), collect the output.

    Raises:
        StreamError: The node refused, or the session failed.
        TimeoutError: It took longer than ``timeout`` seconds.
    """
    async with open_exec(http, url, stdin=input is not None, tty=tty, headers=headers,
                         ssl=ssl) as session:

        async def drain(source: ByteSource) -> bytes:
            parts = []
            while chunk := await source.read():
                parts.append(chunk)
            return b"".join(parts)

        async def feed() -> None:
            if session.stdin is not None and input is not None:
                await session.stdin.write(input)
                await session.stdin.close()

        async with asyncio.timeout(timeout):
            _, out, err, code = await asyncio.gather(
                feed(), drain(session.stdout), drain(session.stderr), session.wait())
    return ExecOutput(code, out, err)


class _PortConnection:
    """One forwarded connection over WebSocket: bytes to and from the pod's port."""

    def __init__(self, conn: ChannelConnection, port: int) -> None:
        self._conn = conn
        self.port = port
        self._data = conn.source(0)
        self._skip = {0: 2, 1: 2}

    async def _skip_prefix(self, channel: int) -> bool:
        while self._skip[channel]:
            chunk = await self._conn.source(channel).read(self._skip[channel])
            if not chunk:
                return False
            self._skip[channel] -= len(chunk)
        return True

    async def read(self, n: int = 65536) -> bytes:
        """Bytes from the pod's port; ``b""`` when it closed."""
        if not await self._skip_prefix(0):
            return b""
        return await self._data.read(n)

    async def write(self, data: bytes) -> None:
        """Bytes to the pod's port."""
        await self._conn.send(0, data)

    async def error(self) -> str:
        """The error the node reported for this connection ('' when none)."""
        if not await self._skip_prefix(1):
            return ""
        parts = []
        while chunk := await self._conn.source(1).read():
            parts.append(chunk)
        return b"".join(parts).decode("utf-8", "replace")

    async def close(self) -> None:
        """End the connection."""
        await self._conn.close()


@contextlib.asynccontextmanager
async def open_port_forward(http: aiohttp.ClientSession, base_url: str, namespace: str,
                            pod: str, port: int, *, headers: Mapping[str, str] | None = None,
                            ssl: Any = None) -> AsyncIterator[_PortConnection]:
    """One connection to ``port`` inside the pod, over WebSocket.

    Raises:
        StreamError: The node refused.
    """
    url = port_forward_url(base_url, namespace, pod, [port])
    ws_url = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    try:
        ws = await http.ws_connect(ws_url, protocols=PORT_FORWARD_PROTOCOLS, headers=headers,
                                   ssl=ssl, max_msg_size=0)
    except aiohttp.WSServerHandshakeError as exc:
        raise StreamError(f"{url}: {exc.status} {exc.message}") from None
    conn = ChannelConnection(ws, ws.protocol or "v4.channel.k8s.io", channels=2)
    conn.start()
    connection = _PortConnection(conn, port)
    try:
        yield connection
    finally:
        await connection.close()


