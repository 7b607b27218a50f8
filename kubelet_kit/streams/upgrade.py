"""Taking over the connection of an aiohttp request after ``101 Switching Protocols``.

The streaming protocols (SPDY/3.1, WebSocket) start as an HTTP request that asks to
upgrade; after the server's ``101`` the connection carries the new protocol's raw
bytes. :func:`accept_upgrade` answers the 101 and hands the handler the raw
connection as a reader and a writer; :func:`proxy_upgrade` relays an upgrade
request to another server (a CRI runtime's streaming URL) and, on its 101, pipes
the bytes both ways, as the kubelet does.

How the takeover works with aiohttp: the handler installs its own payload parser
on the request's protocol (``RequestHandler.set_parser``, the hook aiohttp's own
WebSocket response uses), so every byte that arrives afterwards, and any aiohttp
already buffered behind an upgrade it recognised, goes to an
``asyncio.StreamReader``. The 101 response has no body, so aiohttp neither chunks
nor frames what follows; writes go to the transport as they are. Keep-alive is off,
so when the handler returns aiohttp closes the connection instead of waiting for a
next request, and its keep-alive timer never fires while the handler runs.

aiohttp's request parser switches protocols only for upgrades it knows
(``websocket``); for any other (``SPDY/3.1``), bytes the client sends *before* the
101 reaches it are parsed as HTTP and lost. SPDY clients (Go's round tripper in
kubectl and the API server) wait for the 101 before they send, as the protocol
expects.

A handler that took the connection over returns :func:`upgraded_response` (or
``writer.response``), which aiohttp finishes without writing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as ssl_module
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol, cast
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

__all__ = [
    "UpgradedWriter",
    "accept_upgrade",
    "proxy_upgrade",
    "upgraded_response",
]

_log = logging.getLogger(__name__)

# The reader pauses the transport when this much is buffered twice over.
_READ_LIMIT: Final = 1 << 18
_COPY_CHUNK: Final = 1 << 16
# How long proxy_upgrade waits to connect to the target and for its answer's head.
_CONNECT_TIMEOUT: Final = 30.0
# A non-101 answer's body is relayed up to this size (errors are short).
_MAX_RELAYED_BODY: Final = 4 << 20
# Headers of the client's request that reach the target.
_FORWARDED: Final = frozenset({"upgrade", "connection", "x-stream-protocol-version"})
# Hop-by-hop headers of a non-101 answer that aiohttp sets again itself.
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "upgrade",
        "te",
        "trailer",
        "proxy-authenticate",
        "proxy-authorization",
    }
)


class _RawFeeder:
    # aiohttp's payload parser interface (feed_data/feed_eof), turned into a
    # StreamReader of the raw bytes.

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.closed = asyncio.Event()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data and not self._reader.at_eof() and not self.closed.is_set():
            self._reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        # aiohttp calls this when the connection is lost.
        if not self.closed.is_set():
            self.closed.set()
            if not self._reader.at_eof():
                self._reader.feed_eof()

    def eof_received(self) -> bool:
        # The client half-closed: its bytes end, ours may go on (aiohttp's own
        # protocol would close the transport here).
        if not self._reader.at_eof():
            self._reader.feed_eof()
        return True


class _TakenOverProtocol(asyncio.Protocol):
    def __init__(self, inner: asyncio.Protocol, feeder: _RawFeeder) -> None:
        self._inner = inner
        self._feeder = feeder

    def data_received(self, data: bytes) -> None:
        self._feeder.feed_data(data)

    def eof_received(self) -> bool:
        return self._feeder.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._feeder.feed_eof()
        self._inner.connection_lost(exc)


class UpgradedWriter:
    """The outgoing side of a taken-over connection: raw bytes, no HTTP framing.

    Has the ``asyncio.StreamWriter`` methods a byte-stream protocol needs.

    Attributes:
        response: The prepared 101 response (a handler may return it to aiohttp).
    """

    def __init__(
        self,
        transport: asyncio.Transport,
        payload_writer: AbstractStreamWriter,
        response: web.StreamResponse,
        feeder: _RawFeeder,
    ) -> None:
        self._transport = transport
        self._payload_writer = payload_writer
        self._feeder = feeder
        self.response = response

    @property
    def transport(self) -> asyncio.Transport:
        """The connection's transport."""
        return self._transport

    def write(self, data: bytes) -> None:
        """Queue ``data``; does not block.

        Raises:
            ConnectionResetError: The connection is closed.
        """
        if self._transport.is_closing():
            raise ConnectionResetError("the upgraded connection is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's buffer is full.

        Raises:
            ConnectionResetError: The connection is closed.
        """
        if self._transport.is_closing():
            raise ConnectionResetError("the upgraded connection is closed")
        await self._payload_writer.drain()

    def can_write_eof(self) -> bool:
        """Whether :meth:`write_eof` can half-close (not over TLS)."""
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        """Half-close: no more bytes from us; the peer may go on sending."""
        if not self._transport.is_closing():
            self._transport.write_eof()

    def is_closing(self) -> bool:
        """Whether the connection is closed or closing."""
        return self._transport.is_closing()

    def close(self) -> None:
        """Close the connection (buffered bytes are still sent). Idempotent."""
        self._transport.close()

    async def wait_closed(self) -> None:
        """Wait until the connection is gone."""
        await self._feeder.closed.wait()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's extra information (``peername``, ``sslcontext``...)."""
        return self._transport.get_extra_info(name, default)


class _TakenOverResponse(web.StreamResponse):
    # What a handler returns once it has answered and taken the connection over:
    # aiohttp's "prepare, then write_eof" finds nothing left to write.

    def __init__(self) -> None:
        super().__init__(status=101)
        self.force_close()

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


def upgraded_response() -> web.StreamResponse:
    """The response a handler returns after :func:`accept_upgrade` (aiohttp then
    closes the connection without writing anything more)."""
    return _TakenOverResponse()


async def _take_over(
    request: web.Request, status: int, reason: str | None, headers: Iterable[tuple[str, str]]
) -> tuple[asyncio.StreamReader, UpgradedWriter]:
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("the client's connection is already closed")
    response = web.StreamResponse(status=status, reason=reason)
    for name, value in headers:
        response.headers.add(name, value)
    response.force_close()
    reader = asyncio.StreamReader(limit=_READ_LIMIT)
    reader.set_transport(transport)
    feeder = _RawFeeder(reader)
    protocol = request.protocol
    # Installed before the 101 leaves, so every byte the client sends after it
    # (and anything aiohttp held back behind a websocket upgrade) comes to us.
    protocol.set_parser(cast(Any, feeder))
    protocol.keep_alive(False)
    # From here on the transport talks to a protocol of ours that hands the bytes
    # straight to the reader, and keeps the connection open for writing when the
    # client half-closes (aiohttp's would close it); aiohttp's protocol still
    # hears about flow control and the connection's end, for its own cleanup.
    transport.set_protocol(_TakenOverProtocol(protocol, feeder))
    payload_writer = await response.prepare(request)
    assert payload_writer is not None
    await payload_writer.drain()
    return reader, UpgradedWriter(transport, payload_writer, response, feeder)


async def accept_upgrade(
    request: web.Request, protocol: str, headers: Mapping[str, str]
) -> tuple[asyncio.StreamReader, UpgradedWriter]:
    """Answer ``101 Switching Protocols`` and take the connection over.

    The caller has checked that the request asks for ``protocol``. Afterwards the
    handler reads and writes the raw connection and returns
    :func:`upgraded_response`; aiohttp closes the connection when it returns.

    Args:
        request: The upgrade request.
        protocol: The value of the answer's ``Upgrade`` header (``SPDY/3.1``).
        headers: More headers of the answer (``X-Stream-Protocol-Version``...).

    Returns:
        A reader of the bytes the client sends after its request (``b""`` /
        ``IncompleteReadError`` once it closes) and a writer of raw bytes to it.

    Raises:
        ConnectionResetError: The client is already gone.
    """
    return await _take_over(
        request,
        101,
        "Switching Protocols",
        [("Connection", "Upgrade"), ("Upgrade", protocol), *headers.items()],
    )


class _Sink(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def can_write_eof(self) -> bool: ...

    def write_eof(self) -> None: ...

    def close(self) -> None: ...


async def _pipe(source: asyncio.StreamReader, sink: _Sink) -> None:
    # One direction of the relay; at the source's end the sink is half-closed so
    # the other direction can still finish.
    while data := await source.read(_COPY_CHUNK):
        sink.write(data)
        await sink.drain()
    if sink.can_write_eof():
        sink.write_eof()
    else:
        sink.close()


def _parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1 status line: {lines[0][:100]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"malformed header line: {line[:100]!r}")
        headers.append((name.strip(), value.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers


async def _read_body(
    reader: asyncio.StreamReader, status: int, method: str, headers: list[tuple[str, str]]
) -> bytes:
    fields = {name.lower(): value for name, value in headers}
    if method == "HEAD" or status < 200 or status in (204, 304):
        return b""
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                # Trailers, up to the empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return bytes(body)
            if len(body) + size > _MAX_RELAYED_BODY:
                raise ValueError("the answer's body is too large to relay")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    if "content-length" in fields:
        length = int(fields["content-length"])
        if length > _MAX_RELAYED_BODY:
            raise ValueError("the answer's body is too large to relay")
        return await reader.readexactly(length)
    # Neither length nor chunks: the body ends with the connection.
    rest = bytearray()
    while chunk := await reader.read(_COPY_CHUNK):
        rest += chunk
        if len(rest) > _MAX_RELAYED_BODY:
            raise ValueError("the answer's body is too large to relay")
    return bytes(rest)


async def proxy_upgrade(
    request: web.Request, target_url: str, *, ssl: ssl_module.SSLContext | None = None
) -> web.StreamResponse:
    """Relay an upgrade request to ``target_url`` and, on its 101, the connection.

    The request goes to the target with the method of ``request``, the path and
    query of ``target_url``, and the client's ``Upgrade``, ``Connection``,
    ``X-Stream-Protocol-Version`` and ``Sec-WebSocket-*`` headers. The target's
    status line and headers come back as they are. After a 101 the bytes are
    copied both ways (an end in one direction half-closes the other) until both
    sides have closed; any other answer is relayed as an ordinary response.

    Args:
        request: The client's upgrade request.
        target_url: ``http://`` or ``https://`` URL of the target.
        ssl: TLS settings for an ``https`` target (default: the system's).

    Returns:
        The response for aiohttp: the relayed answer, or (after a 101) one that
        writes nothing more. A target that cannot be reached or answers garbage
        gives a 502.
    """
    url = urlsplit(target_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"proxy_upgrade: {target_url!r} is not an http(s) URL")
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    context = (ssl or ssl_module.create_default_context()) if secure else None
    host_header = url.netloc.rpartition("@")[2]
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    lines = [f"{request.method} {path} HTTP/1.1", f"Host: {host_header}"]
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in _FORWARDED or lower.startswith("sec-websocket-"):
            lines.append(f"{name}: {value}")
    head_out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    try:
        target_reader, target_writer = await asyncio.wait_for(
            asyncio.open_connection(url.hostname, port, ssl=context, limit=_READ_LIMIT),
            _CONNECT_TIMEOUT,
        )
    except (OSError, TimeoutError) as exc:
        return web.Response(
            status=502, text=f"unable to reach the streaming server {url.hostname}:{port}: {exc}\n"
        )
    try:
        target_writer.write(head_out)
        await target_writer.drain()
        head = await asyncio.wait_for(target_reader.readuntil(b"\r\n\r\n"), _CONNECT_TIMEOUT)
        status, reason, headers = _parse_head(head)
        if status != 101:
            body = await asyncio.wait_for(
                _read_body(target_reader, status, request.method, headers), _CONNECT_TIMEOUT
            )
            target_writer.close()
            relayed = web.Response(status=status, reason=reason or None, body=body)
            for name, value in headers:
                if name.lower() not in _HOP_BY_HOP:
                    relayed.headers.add(name, value)
            return relayed
    except (
        OSError,
        TimeoutError,
        ValueError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
    ) as exc:
        target_writer.close()
        return web.Response(
            status=502, text=f"bad answer from the streaming server: {exc or type(exc).__name__}\n"
        )
    except BaseException:
        target_writer.close()
        raise

    try:
        client_reader, client_writer = await _take_over(request, 101, reason or None, headers)
    except BaseException:
        target_writer.close()
        raise
    # What the target sent after its head is still in target_reader's buffer, and
    # goes to the client first.
    tasks = [
        asyncio.create_task(_pipe(client_reader, target_writer)),
        asyncio.create_task(_pipe(target_reader, client_writer)),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                _log.debug("upgrade proxy to %s ended: %r", target_url, task.exception())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        target_writer.close()
        client_writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(target_writer.wait_closed(), 5.0)
    return upgraded_response()
