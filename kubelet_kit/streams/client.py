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
Each takes ``protocol``: ``"websocket"`` (``v5``/``v4.channel.k8s.io``, what
kubectl 1.30 and later try first) or ``"spdy"`` (SPDY/3.1, ``v4.channel.k8s.io``
and ``portforward.k8s.io``, what every kubelet speaks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl as _ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import aiohttp
import attrs

from kubelet_kit.container.streams import ByteSink, ByteSource
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.streams.portforward import PORT_FORWARD_PROTOCOL
from kubelet_kit.streams.remotecommand import SPDY_PROTOCOLS
from kubelet_kit.streams.spdy import SpdySession, SpdyStream
from kubelet_kit.streams.status import exit_code_of
from kubelet_kit.streams.websocket import EXEC_PROTOCOLS, PORT_FORWARD_PROTOCOLS, ChannelConnection

__all__ = [
    "ExecOutput",
    "ExecSession",
    "PortConnection",
    "StreamError",
    "attach_url",
    "exec_command",
    "node_exec_url",
    "open_exec",
    "open_port_forward",
    "open_port_forward_url",
    "port_forward_url",
]

Protocol = Literal["websocket", "spdy"]


class StreamError(KubeletKitError):
    """The node refused the session, or it failed (the message says why).

    Attributes:
        status: The HTTP status of a refused upgrade (None otherwise).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _node_url(
    base: str,
    kind: str,
    namespace: str,
    pod: str,
    *rest: str,
    query: Sequence[tuple[str, str]] = (),
) -> str:
    path = "/".join(urllib.parse.quote(p, safe="") for p in (namespace, pod, *rest))
    q = urllib.parse.urlencode(list(query))
    return f"{base.rstrip('/')}/{kind}/{path}" + (f"?{q}" if q else "")


def _flags(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> list[tuple[str, str]]:
    out = []
    for name, on in (("input", stdin), ("output", stdout), ("error", stderr), ("tty", tty)):
        if on:
            out.append((name, "1"))
    return out


def node_exec_url(
    base: str,
    namespace: str,
    pod: str,
    container: str,
    command: Sequence[str],
    *,
    stdin: bool = False,
    stdout: bool = True,
    stderr: bool = True,
    tty: bool = False,
) -> str:
    """The node API's ``/exec`` URL (``base`` like ``https://node:10250``)."""
    query = [("command", c) for c in command] + _flags(stdin, stdout, stderr and not tty, tty)
    return _node_url(base, "exec", namespace, pod, container, query=query)


def attach_url(
    base: str,
    namespace: str,
    pod: str,
    container: str,
    *,
    stdin: bool = False,
    stdout: bool = True,
    stderr: bool = True,
    tty: bool = False,
) -> str:
    """The node API's ``/attach`` URL."""
    return _node_url(
        base,
        "attach",
        namespace,
        pod,
        container,
        query=_flags(stdin, stdout, stderr and not tty, tty),
    )


def port_forward_url(base: str, namespace: str, pod: str, ports: Sequence[int] = ()) -> str:
    """The node API's ``/portForward`` URL (WebSocket takes the ports in it)."""
    return _node_url(base, "portForward", namespace, pod, query=[("port", str(p)) for p in ports])


@attrs.frozen
class ExecOutput:
    """What a finished exec gave: its exit code and output."""

    exit_code: int
    stdout: bytes
    stderr: bytes


class _Empty:
    """A source that has nothing (a stream the session does not have)."""

    async def read(self, n: int = 65536) -> bytes:
        return b""


class ExecSession:
    """A running exec or attach: write ``stdin``, read ``stdout``/``stderr``,
    :meth:`resize`, and :meth:`wait` for the exit code. Each source has one reader."""

    def __init__(
        self,
        *,
        stdin: ByteSink | None,
        stdout: ByteSource | None,
        stderr: ByteSource | None,
        error: ByteSource,
        resize: ByteSink | None,
        close: Callable[[], Awaitable[None]],
        tty: bool,
        protocol: str,
    ) -> None:
        self.stdin = stdin
        self.stdout: ByteSource = stdout or _Empty()
        self.stderr: ByteSource = stderr or _Empty()
        self._error = error
        self._resize = resize
        self._close = close
        self.tty = tty
        #: The negotiated protocol version (e.g. ``v4.channel.k8s.io``).
        self.protocol = protocol

    async def resize(self, width: int, height: int) -> None:
        """Tell the terminal its new size (tty sessions; ignored otherwise)."""
        if self._resize is not None:
            await self._resize.write(json.dumps({"Width": width, "Height": height}).encode())

    async def wait(self) -> int:
        """The exit code, once the session ends.

        Raises:
            StreamError: It ended with a failure that is not an exit code.
        """
        chunks = []
        while chunk := await self._error.read():
            chunks.append(chunk)
        status = b"".join(chunks)
        code = exit_code_of(status)
        if code is None:
            if not status and not self.protocol.startswith(("v4.", "v5.")):
                return 0  # older protocols say nothing on success
            if not status:
                raise StreamError(f"the session ({self.protocol}) ended without a status")
            try:
                message = json.loads(status).get("message", status.decode())
            except (ValueError, AttributeError):
                message = status.decode("utf-8", "replace")
            raise StreamError(str(message))
        return code

    async def close(self) -> None:
        """End the session (closes the connection)."""
        await self._close()


# -- WebSocket -------------------------------------------------------------------------


async def _ws_connect(
    http: aiohttp.ClientSession,
    url: str,
    protocols: Sequence[str],
    headers: Mapping[str, str] | None,
    ssl: Any,
    channels: int,
) -> ChannelConnection:
    ws_url = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    try:
        ws = await http.ws_connect(
            ws_url,
            protocols=tuple(protocols),
            headers=headers,
            ssl=True if ssl is None else ssl,
            max_msg_size=0,
            autoping=True,
        )
    except aiohttp.WSServerHandshakeError as exc:
        raise StreamError(f"{url}: {exc.status} {exc.message}", status=exc.status) from None
    protocol = ws.protocol or ""
    if protocol not in protocols:
        await ws.close()
        raise StreamError(f"{url}: the node chose no subprotocol of {list(protocols)}", status=101)
    conn = ChannelConnection(ws, protocol, channels=channels)
    conn.start()
    return conn


# -- SPDY ------------------------------------------------------------------------------


async def _spdy_connect(
    url: str,
    versions: Sequence[str],
    headers: Mapping[str, str] | None,
    ssl: Any,
    timeout: float = 30.0,
) -> tuple[SpdySession, str]:
    """Upgrade ``url`` to SPDY/3.1 (a POST, as kubectl sends it) and start a client
    session; returns it and the version the node chose.

    Raises:
        StreamError: The node answered something else than 101 (its status and text).
    """
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if secure else 80)
    context: _ssl.SSLContext | None = None
    if secure:
        if isinstance(ssl, _ssl.SSLContext):
            context = ssl
        else:
            context = _ssl.create_default_context()
            if ssl is False:  # aiohttp's "do not verify"
                context.check_hostname = False
                context.verify_mode = _ssl.CERT_NONE
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None
        )
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"POST {target} HTTP/1.1",
            f"Host: {parts.netloc}",
            "Connection: Upgrade",
            "Upgrade: SPDY/3.1",
            "Content-Length: 0",
            "User-Agent: kubelet-kit",
        ]
        lines += [f"X-Stream-Protocol-Version: {v}" for v in versions]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = status_line.split(" ", 2)
    status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    got = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            got[name.strip().lower()] = value.strip()
    if status != 101:
        body = b""
        with contextlib.suppress(Exception):
            length = int(got.get("content-length", "0") or 0)
            body = await asyncio.wait_for(reader.readexactly(min(length, 65536)), 5)
        writer.close()
        raise StreamError(
            f"{url}: {status} {body.decode('utf-8', 'replace').strip()}", status=status
        )
    session = SpdySession(reader, writer, server=False)
    await session.__aenter__()
    return session, got.get("x-stream-protocol-version", "")


# -- exec and attach -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_exec(
    http: aiohttp.ClientSession,
    url: str,
    *,
    stdin: bool = False,
    tty: bool = False,
    headers: Mapping[str, str] | None = None,
    ssl: Any = None,
    protocol: Protocol = "websocket",
    protocols: Sequence[str] | None = None,
    stdout: bool | None = None,
    stderr: bool | None = None,
) -> AsyncIterator[ExecSession]:
    """Open an exec or attach session at ``url`` (whose query says which streams).

    Args:
        http: The HTTP client session (WebSocket; SPDY opens its own connection).
        url: From :func:`node_exec_url` or :func:`attach_url`, or a runtime's
            streaming URL (CRI ``Exec``/``Attach``), whose session options were
            fixed when it was handed out: pass ``stdout``/``stderr`` for those.
        stdin, tty: As in the URL.
        headers: Extra request headers (``Authorization``).
        ssl: An ``ssl.SSLContext``, False to skip verification, or None.
        protocol: ``"websocket"`` or ``"spdy"``.
        protocols: The versions to offer (default: every one, newest first).
        stdout, stderr: Whether the session has those streams (None: as the
            URL's ``output``/``error`` query flags say).

    Raises:
        StreamError: The node refused (its status and message).
    """
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    wants = {k: query.get(k, ["0"])[0] in ("1", "true") for k in ("output", "error")}
    if stdout is not None:
        wants["output"] = stdout
    if stderr is not None:
        wants["error"] = stderr
    if protocol == "spdy":
        session, version = await _spdy_connect(url, protocols or SPDY_PROTOCOLS, headers, ssl)
        try:

            async def open_(kind: str) -> SpdyStream:
                return await session.open_stream({"streamtype": kind})

            error = await open_("error")
            stdin_stream = await open_("stdin") if stdin else None
            stdout_stream = await open_("stdout") if wants["output"] else None
            stderr_stream = await open_("stderr") if wants["error"] and not tty else None
            resize_stream = (
                await open_("resize")
                if tty and version not in ("channel.k8s.io", "v2.channel.k8s.io")
                else None
            )
        except BaseException:
            await session.close()
            raise
        exec_session = ExecSession(
            stdin=stdin_stream,
            stdout=stdout_stream,
            stderr=stderr_stream,
            error=error,
            resize=resize_stream,
            close=session.close,
            tty=tty,
            protocol=version,
        )
    else:
        conn = await _ws_connect(http, url, protocols or EXEC_PROTOCOLS, headers, ssl, 5)
        exec_session = ExecSession(
            stdin=conn.sink(0) if stdin else None,
            stdout=conn.source(1),
            stderr=conn.source(2),
            error=conn.source(3),
            resize=conn.sink(4) if tty else None,
            close=conn.close,
            tty=tty,
            protocol=conn.protocol,
        )
    try:
        yield exec_session
    finally:
        await exec_session.close()


async def exec_command(
    http: aiohttp.ClientSession,
    url: str,
    *,
    input: bytes | None = None,
    tty: bool = False,
    headers: Mapping[str, str] | None = None,
    ssl: Any = None,
    timeout: float = 300.0,
    protocol: Protocol = "websocket",
) -> ExecOutput:
    """Run one exec to the end: send ``input`` (then end stdin), collect the output.

    Raises:
        StreamError: The node refused, or the session failed.
        TimeoutError: It took longer than ``timeout`` seconds.
    """
    if protocol == "websocket" and input is not None:
        # Only v5 can tell the command its stdin ended; like kubectl 1.30 and later,
        # ask for v5 alone and speak SPDY to a node that does not have it.
        try:
            return await _exec_to_end(
                http,
                url,
                input=input,
                tty=tty,
                headers=headers,
                ssl=ssl,
                timeout=timeout,
                protocol="websocket",
                protocols=("v5.channel.k8s.io",),
            )
        except _Refused:
            protocol = "spdy"
    return await _exec_to_end(
        http,
        url,
        input=input,
        tty=tty,
        headers=headers,
        ssl=ssl,
        timeout=timeout,
        protocol=protocol,
        protocols=None,
    )


class _Refused(StreamError):
    """The node would not upgrade to the protocol asked for."""


async def _exec_to_end(
    http: aiohttp.ClientSession,
    url: str,
    *,
    input: bytes | None,
    tty: bool,
    headers: Mapping[str, str] | None,
    ssl: Any,
    timeout: float,
    protocol: Protocol,
    protocols: Sequence[str] | None,
) -> ExecOutput:
    try:
        opened = open_exec(
            http,
            url,
            stdin=input is not None,
            tty=tty,
            headers=headers,
            ssl=ssl,
            protocol=protocol,
            protocols=protocols,
        )
        session = await opened.__aenter__()
    except StreamError as exc:
        # Refused for its protocol (not for its credentials): the caller falls back.
        if protocols is not None and exc.status not in (None, 401):
            raise _Refused(str(exc), status=exc.status) from None
        raise
    try:

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
                feed(), drain(session.stdout), drain(session.stderr), session.wait()
            )
    finally:
        await opened.__aexit__(None, None, None)
    return ExecOutput(code, out, err)


# -- port-forward ----------------------------------------------------------------------


class PortConnection:
    """One forwarded connection: bytes to and from a port inside the pod."""

    def __init__(
        self,
        data: ByteSource,
        sink: ByteSink,
        error: ByteSource,
        port: int,
        close: Callable[[], Awaitable[None]],
        skip_prefix: bool,
    ) -> None:
        self.port = port
        self._data = data
        self._sink = sink
        self._error = error
        self._close = close
        # WebSocket: the first message the node sends on each channel starts with the
        # port (2 bytes); SPDY streams carry data alone.
        self._skip = {"data": 2 if skip_prefix else 0, "error": 2 if skip_prefix else 0}

    async def _past_prefix(self, which: str, source: ByteSource) -> bool:
        while self._skip[which]:
            chunk = await source.read(self._skip[which])
            if not chunk:
                return False
            self._skip[which] -= len(chunk)
        return True

    async def read(self, n: int = 65536) -> bytes:
        """Bytes from the pod's port; ``b""`` when it closed."""
        if not await self._past_prefix("data", self._data):
            return b""
        return await self._data.read(n)

    async def write(self, data: bytes) -> None:
        """Bytes to the pod's port."""
        await self._sink.write(data)

    async def error(self) -> str:
        """The error the node reported for this connection ('' when none); waits
        until the connection ends."""
        if not await self._past_prefix("error", self._error):
            return ""
        parts = []
        while chunk := await self._error.read():
            parts.append(chunk)
        return b"".join(parts).decode("utf-8", "replace")

    async def close(self) -> None:
        """End the connection."""
        await self._close()


@contextlib.asynccontextmanager
async def open_port_forward(
    http: aiohttp.ClientSession,
    base_url: str,
    namespace: str,
    pod: str,
    port: int,
    *,
    headers: Mapping[str, str] | None = None,
    ssl: Any = None,
    protocol: Protocol = "websocket",
) -> AsyncIterator[PortConnection]:
    """One connection to ``port`` inside the pod.

    Raises:
        StreamError: The node refused.
    """
    url = port_forward_url(base_url, namespace, pod, [port] if protocol == "websocket" else [])
    async with open_port_forward_url(
        http, url, port, headers=headers, ssl=ssl, protocol=protocol
    ) as connection:
        yield connection


@contextlib.asynccontextmanager
async def open_port_forward_url(
    http: aiohttp.ClientSession,
    url: str,
    port: int,
    *,
    headers: Mapping[str, str] | None = None,
    ssl: Any = None,
    protocol: Protocol = "websocket",
) -> AsyncIterator[PortConnection]:
    """One connection to ``port`` through the port-forward session at ``url``: the
    node API's (from :func:`port_forward_url`; WebSocket needs the port in its
    query) or a runtime's streaming URL (CRI ``PortForward``; SPDY, as the
    kubelet speaks to it).

    Raises:
        StreamError: The node refused.
    """
    if protocol == "spdy":
        session, _ = await _spdy_connect(url, (PORT_FORWARD_PROTOCOL,), headers, ssl)
        try:
            fields = {"port": str(port), "requestid": "0"}
            error = await session.open_stream({"streamtype": "error", **fields})
            await error.close()  # nothing to say on it: the node reports there
            data = await session.open_stream({"streamtype": "data", **fields})
        except BaseException:
            await session.close()
            raise
        connection = PortConnection(data, data, error, port, session.close, False)
    else:
        conn = await _ws_connect(http, url, PORT_FORWARD_PROTOCOLS, headers, ssl, 2)
        connection = PortConnection(
            conn.source(0), conn.sink(0), conn.source(1), port, conn.close, True
        )
    try:
        yield connection
    finally:
        await connection.close()
