"""SPDY/3.1 sessions over an asyncio byte stream, as the kubelet's streaming protocols
(exec, attach, port-forward) speak them through an ``Upgrade: SPDY/3.1`` connection.

One :class:`SpdySession` runs one connection, in either role; each
:class:`SpdyStream` is one bidirectional byte stream in it. In Kubernetes the
client opens every stream (``SYN_STREAM`` with a header such as ``streamtype:
stdout``) and the server answers each with ``SYN_REPLY``::

    async with SpdySession(reader, writer, server=True) as session:
        stream = await session.accept_stream()     # SYN_REPLY is sent here
        await stream.write(b"hello")
        await stream.close()                       # FIN: our half is done

Wire facts this module keeps (checked against moby/spdystream, which kubectl,
the API server and the kubelet use):

* Frames are SPDY version 3. Header blocks are zlib-compressed with the SPDY/3
  dictionary, one compression context per direction for the whole session, each
  block ended by a sync flush; the name/value block uses 32-bit lengths, names are
  lower case, several values of one name are joined by NUL.
* Stream ids: odd for streams the client opens, even for the server's; each new id
  is higher than the last one in its direction. Ping ids follow the same parity.
* **Flow control.** SPDY/3.1 has a window per stream and one for the session (64
  KiB at the start). spdystream implements neither: it never sends
  ``WINDOW_UPDATE`` or ``SETTINGS`` and ignores both when it receives them. So:

  - Receiving, this session sends ``WINDOW_UPDATE`` as data is consumed (a peer
    that counts windows never stalls) but does not reject a peer that overruns the
    window; instead, when one stream holds more than ``max_buffer`` unread bytes
    the session stops reading the connection until the stream's reader catches up
    (TCP then slows the peer down, as spdystream itself does).
  - Sending, the peer's windows are respected only once the peer shows it counts
    them (it sent a ``SETTINGS`` or ``WINDOW_UPDATE`` frame), or always/never when
    ``flow_control`` says so. This session sends ``SETTINGS`` as its first frame,
    so two of these sessions find each other before any stream exists, while a Go
    peer gets data unthrottled, as Go peers send it to each other.
* ``GOAWAY``: no new streams after it in either direction; the connection usually
  closes right after. spdystream stops reading when it receives one, so
  :meth:`SpdySession.close` is for the end of the conversation only.

Single-consumer rules: each stream has at most one reader task and one writer
task at a time (writes on one stream are also serialised by a lock, so a
concurrent :meth:`SpdyStream.close` waits for a write in progress);
:meth:`SpdySession.accept_stream` has one caller at a time. Different streams are
used from different tasks freely.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Final, Protocol

from kubelet_kit.streams._spdy_frames import (
    DEFAULT_WINDOW,
    FLAG_FIN,
    FLAG_UNIDIRECTIONAL,
    HEADER_DICTIONARY,
    MAX_WINDOW,
    SETTINGS_INITIAL_WINDOW_SIZE,
    VERSION,
    FrameType,
    GoAwayStatus,
    HeaderCodec,
    RstStatus,
    SpdyProtocolError,
    control_frame,
    data_frame,
)
from kubelet_kit.streams._spdy_stream import SpdyStream

__all__ = [
    "DEFAULT_WINDOW",
    "HEADER_DICTIONARY",
    "VERSION",
    "ByteReader",
    "ByteWriter",
    "FrameType",
    "GoAwayStatus",
    "RstStatus",
    "SpdyProtocolError",
    "SpdySession",
    "SpdyStream",
]

_log = logging.getLogger(__name__)

_MAX_STREAM_ID: Final = 0x7FFFFFFF
# Data frames we send are at most this big: small enough to interleave streams
# fairly, big enough to keep the per-frame cost low.
_MAX_SEND_FRAME: Final = 32768
# How long close() waits for the GOAWAY to leave before it closes anyway.
_CLOSE_DRAIN_TIMEOUT: Final = 5.0


class ByteReader(Protocol):
    """Where a session reads the connection's bytes (an ``asyncio.StreamReader``)."""

    async def readexactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes; raises ``asyncio.IncompleteReadError`` at the end."""
        ...


class ByteWriter(Protocol):
    """Where a session writes (an ``asyncio.StreamWriter`` or
    :class:`~kubelet_kit.streams.upgrade.UpgradedWriter`)."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` for sending; does not block."""

    async def drain(self) -> None:
        """Wait until the queue is small; raises ConnectionError once the peer is gone."""

    def close(self) -> None:
        """Close the connection."""


class SpdySession:
    """A SPDY/3.1 session over one connection (see the module's docstring).

    Lifecycle: ``async with`` starts the read loop as a task of the session and
    closes it at the end; or call :meth:`run` yourself (it returns when the
    connection ends). Nothing is started in ``__init__``.

    Args:
        reader: The connection's incoming bytes.
        writer: The connection's outgoing side.
        server: Our role; it decides stream and ping id parity.
        flow_control: Respect the peer's windows when sending: True always, False
            never, None (default) once the peer sends SETTINGS or WINDOW_UPDATE.
        initial_window: The receive window we give each stream (and the session).
        max_buffer: Unread bytes one stream may hold before the session stops reading
            the connection until that stream is read.
        max_pending: Streams the peer opened that may wait for
            :meth:`accept_stream`; more are refused.
    """

    def __init__(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        *,
        server: bool,
        flow_control: bool | None = None,
        initial_window: int = DEFAULT_WINDOW,
        max_buffer: int = 1 << 20,
        max_pending: int = 128,
    ) -> None:
        if not 1 <= initial_window <= MAX_WINDOW:
            raise ValueError(f"initial_window: {initial_window} is not in 1..2^31-1")
        self._reader = reader
        self._writer = writer
        self._server = server
        self._flow_control = flow_control
        self._peer_counts_windows = False
        self._recv_window = initial_window
        self._max_buffer = max_buffer
        self._max_pending = max_pending
        self._next_id = 2 if server else 1
        self._next_ping = 2 if server else 1
        self._last_peer_id = 0
        self._streams: dict[int, SpdyStream] = {}
        self._incoming: deque[SpdyStream] = deque()
        self._incoming_event = asyncio.Event()
        self._peer_initial_window = DEFAULT_WINDOW
        self._send_window = DEFAULT_WINDOW
        self._session_unacked = 0
        self._window_event = asyncio.Event()
        self._header_codec = HeaderCodec()
        self._drain_lock = asyncio.Lock()
        self._pings: dict[int, asyncio.Future[None]] = {}
        self._started = False
        self._running = False
        self._closed = False
        self._writer_closed = False
        self._dead = False
        self._goaway_received = False
        self._goaway_sent = False
        self._error: BaseException | None = None
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------

    async def __aenter__(self) -> SpdySession:
        if self._task is None and not self._running:
            self._task = asyncio.create_task(self.run(), name="spdy-session")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def run(self) -> None:
        """Read and handle frames until the connection ends.

        Returns when the peer closes the connection (or after :meth:`close`).

        Raises:
            SpdyProtocolError: The peer sent a malformed frame; a GOAWAY with
                PROTOCOL_ERROR was sent and the connection closed.
            RuntimeError: The session is already running.
        """
        if self._running or self._dead:
            raise RuntimeError("SpdySession.run: already running or ended")
        self._running = True
        self._start()
        error: BaseException | None = None
        try:
            await self._read_loop()
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                error = SpdyProtocolError(
                    f"connection ended inside a frame ({len(exc.partial)} of {exc.expected} bytes)"
                )
        except SpdyProtocolError as exc:
            error = exc
            _log.warning("SPDY session: %s", exc)
            self._send_quiet(
                control_frame(
                    FrameType.GOAWAY,
                    0,
                    struct.pack(">II", self._last_peer_id, GoAwayStatus.PROTOCOL_ERROR),
                )
            )
        except (ConnectionError, OSError) as exc:
            error = ConnectionResetError(f"connection lost: {exc}")
        except asyncio.CancelledError:
            self._end(None)
            raise
        self._end(error)
        if isinstance(error, SpdyProtocolError):
            raise error

    async def wait_closed(self) -> None:
        """Wait until the session has ended (the connection closed or failed)."""
        await self._done.wait()

    async def close(self) -> None:
        """Send GOAWAY and close the connection. Idempotent; the streams end (reads
        return ``b""``, writes raise ConnectionResetError)."""
        if not self._closed:
            self._closed = True
            if not self._dead and not self._goaway_sent:
                self._goaway_sent = True
                self._send_quiet(
                    control_frame(
                        FrameType.GOAWAY, 0, struct.pack(">II", self._last_peer_id, GoAwayStatus.OK)
                    )
                )
                with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                    await asyncio.wait_for(self._drain(), _CLOSE_DRAIN_TIMEOUT)
            self._end(None)
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            # The read loop's own error was already handed to accept_stream() and
            # the streams; close() itself does not raise it again.
            await asyncio.gather(task, return_exceptions=True)
        wait_closed = getattr(self._writer, "wait_closed", None)
        if wait_closed is not None:
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(wait_closed(), _CLOSE_DRAIN_TIMEOUT)

    # -- streams -----------------------------------------------------------------

    async def open_stream(self, headers: Mapping[str, str]) -> SpdyStream:
        """Open a stream (SYN_STREAM) and wait for the peer's SYN_REPLY.

        Args:
            headers: The stream's headers; names are sent lower case.

        Returns:
            The open stream.

        Raises:
            ConnectionError: The session has ended or is going away, or the peer
                refused or reset the stream (ConnectionResetError).
            ValueError: A header name is empty or repeated.
        """
        self._check_can_open()
        self._start()
        stream_id = self._next_id
        if stream_id > _MAX_STREAM_ID:
            raise ConnectionError("SPDY session: stream ids exhausted")
        self._next_id += 2
        block = self._header_codec.encode(headers)
        stream = SpdyStream(
            self,
            stream_id,
            {k.lower(): v for k, v in headers.items()},
            send_window=self._peer_initial_window,
        )
        stream._reply = asyncio.get_running_loop().create_future()
        self._streams[stream_id] = stream
        # Priority 0 and slot 0, as spdystream sends them.
        self._send(
            control_frame(FrameType.SYN_STREAM, 0, struct.pack(">IIBB", stream_id, 0, 0, 0) + block)
        )
        try:
            await self._drain()
            await stream._reply
        except asyncio.CancelledError:
            self._reset_stream(stream, RstStatus.CANCEL, "opening cancelled")
            raise
        return stream

    async def accept_stream(self, *, reply_headers: Mapping[str, str] | None = None) -> SpdyStream:
        """The next stream the peer opened, answered with SYN_REPLY.

        Args:
            reply_headers: Headers of the SYN_REPLY (none by default, as the kubelet).

        Returns:
            The stream; its data may already be waiting.

        Raises:
            EOFError: The session ended cleanly (or the peer sent GOAWAY) and no
                stream is waiting.
            ConnectionError: The session ended with an error
                (:class:`SpdyProtocolError` for a malformed frame).
        """
        while True:
            while not self._incoming or self._dead:
                if self._dead or self._goaway_received:
                    if isinstance(self._error, ConnectionError):
                        raise self._error
                    raise EOFError(f"SPDY session ended ({self._end_reason()})")
                self._incoming_event.clear()
                await self._incoming_event.wait()
            stream = self._incoming.popleft()
            if stream._reset:
                continue
            block = self._header_codec.encode(reply_headers or {})
            self._send(control_frame(FrameType.SYN_REPLY, 0, struct.pack(">I", stream.id) + block))
            await self._drain()
            return stream

    async def ping(self) -> float:
        """Send a PING and wait for its answer (bound it with a timeout).

        Returns:
            The round-trip time in seconds.

        Raises:
            ConnectionError: The session ended first.
        """
        if self._dead:
            raise ConnectionResetError(f"SPDY session ended ({self._end_reason()})")
        self._start()
        ping_id = self._next_ping
        self._next_ping = ping_id + 2 if ping_id < 0x7FFFFFFD else ping_id % 2 or 2
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pings[ping_id] = waiter
        started = time.monotonic()
        try:
            self._send(control_frame(FrameType.PING, 0, struct.pack(">I", ping_id)))
            await self._drain()
            await waiter
        finally:
            self._pings.pop(ping_id, None)
        return time.monotonic() - started

    # -- sending -----------------------------------------------------------------

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        # SETTINGS first: it tells a peer like us that we count windows, before any
        # stream exists (spdystream ignores it).
        settings = struct.pack(">III", 1, SETTINGS_INITIAL_WINDOW_SIZE, self._recv_window)
        self._send_quiet(control_frame(FrameType.SETTINGS, 0, settings))
        if self._recv_window > DEFAULT_WINDOW:
            self._send_window_update(0, self._recv_window - DEFAULT_WINDOW, always=True)

    def _send(self, frame: bytes) -> None:
        if self._writer_closed:
            raise ConnectionResetError(f"SPDY session ended ({self._end_reason()})")
        self._writer.write(frame)

    def _send_quiet(self, frame: bytes) -> None:
        # For frames the read loop sends on its own (answers, window updates): a
        # connection that is gone is noticed by the read loop itself.
        if not self._writer_closed:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self._writer.write(frame)

    async def _drain(self) -> None:
        async with self._drain_lock:
            await self._writer.drain()

    def _send_data(self, stream: SpdyStream, data: bytes | memoryview, *, fin: bool) -> None:
        self._send(data_frame(stream.id, FLAG_FIN if fin else 0, data))
        # Counted always, enforced only when the peer counts windows (see _reserve).
        stream._send_window -= len(data)
        self._send_window -= len(data)

    def _send_window_update(self, stream_id: int, delta: int, *, always: bool = False) -> None:
        # Only to a peer that counts windows: Go's spdystream ignores them, and a
        # frame sent after it closed the connection makes the kernel answer with a
        # reset that discards what it sent last (an exec's final Status) unread.
        if not always and not self._enforce_windows():
            return
        self._send_quiet(
            control_frame(FrameType.WINDOW_UPDATE, 0, struct.pack(">II", stream_id, delta))
        )

    def _enforce_windows(self) -> bool:
        if self._flow_control is not None:
            return self._flow_control
        return self._peer_counts_windows

    async def _reserve(self, stream: SpdyStream, wanted: int) -> int:
        """How many bytes ``stream`` may send now (waits while a window is shut)."""
        while True:
            stream._check_writable()
            if not self._enforce_windows():
                return min(wanted, _MAX_SEND_FRAME)
            available = min(stream._send_window, self._send_window)
            if available > 0:
                return min(wanted, available, _MAX_SEND_FRAME)
            await self._window_event.wait()

    def _windows_changed(self) -> None:
        self._window_event.set()
        self._window_event = asyncio.Event()

    def _consumed(self, stream: SpdyStream, n: int) -> None:
        # The session window is given back as frames arrive (see _on_data); the
        # stream's as its reader consumes, so an unread stream holds one window.
        if n <= 0 or stream._remote_closed or stream._reset or self._dead:
            return
        stream._unacked += n
        if stream._unacked >= self._recv_window // 2:
            self._send_window_update(stream.id, stream._unacked)
            stream._unacked = 0

    def _reset_stream(self, stream: SpdyStream, status: RstStatus, reason: str) -> None:
        if stream._reset or (stream._local_closed and stream._remote_closed):
            return
        self._mark_reset(stream, reason)
        self._send_quiet(
            control_frame(FrameType.RST_STREAM, 0, struct.pack(">II", stream.id, status))
        )

    def _mark_reset(self, stream: SpdyStream, reason: str, *, keep_received: bool = False) -> None:
        stream._reset = True
        stream._reset_reason = reason
        if not keep_received:
            stream._buffer.clear()
        stream._wake()
        if stream._reply is not None and not stream._reply.done():
            stream._reply.set_exception(
                ConnectionResetError(f"SPDY stream {stream.id} was {reason}")
            )
        self._streams.pop(stream.id, None)
        self._windows_changed()

    def _forget_if_done(self, stream: SpdyStream) -> None:
        if stream._local_closed and stream._remote_closed:
            self._streams.pop(stream.id, None)

    def _check_can_open(self) -> None:
        if self._dead or self._closed:
            raise ConnectionResetError(f"SPDY session ended ({self._end_reason()})")
        if self._goaway_received:
            raise ConnectionRefusedError("SPDY session: the peer sent GOAWAY")

    def _end_reason(self) -> str:
        if self._error is not None:
            return str(self._error)
        if self._closed:
            return "closed locally"
        return "the peer closed the connection"

    def _end(self, error: BaseException | None) -> None:
        if self._dead:
            return
        self._dead = True
        if self._error is None:
            self._error = error
        for stream in list(self._streams.values()):
            stream._remote_closed = True
            stream._wake()
            if stream._reply is not None and not stream._reply.done():
                stream._reply.set_exception(
                    ConnectionResetError(f"SPDY session ended ({self._end_reason()})")
                )
        for stream in self._incoming:
            stream._remote_closed = True
            stream._wake()
        for waiter in self._pings.values():
            if not waiter.done():
                waiter.set_exception(
                    ConnectionResetError(f"SPDY session ended ({self._end_reason()})")
                )
        self._incoming_event.set()
        self._windows_changed()
        if not self._writer_closed:
            self._writer_closed = True
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self._writer.close()
        self._done.set()

    # -- receiving ---------------------------------------------------------------

    async def _read_loop(self) -> None:
        read = self._reader.readexactly
        while True:
            first, second = struct.unpack(">II", await read(8))
            length = second & 0xFFFFFF
            flags = second >> 24
            payload = await read(length) if length else b""
            if first & 0x80000000:
                version = (first >> 16) & 0x7FFF
                if version != VERSION:
                    raise SpdyProtocolError(
                        f"control frame of SPDY version {version}; this session speaks 3"
                    )
                self._on_control(first & 0xFFFF, flags, payload)
            else:
                stream = self._on_data(first & 0x7FFFFFFF, flags, payload)
                if stream is not None and len(stream._buffer) > self._max_buffer:
                    # The peer does not count windows (or overran ours): stop
                    # reading until this stream's reader catches up.
                    stream._drained.clear()
                    await stream._drained.wait()

    def _on_data(self, stream_id: int, flags: int, payload: bytes) -> SpdyStream | None:
        if stream_id == 0:
            raise SpdyProtocolError("DATA frame for stream 0")
        self._session_unacked += len(payload)
        if self._session_unacked >= self._recv_window // 2:
            self._send_window_update(0, self._session_unacked)
            self._session_unacked = 0
        stream = self._streams.get(stream_id)
        if stream is None or stream._reset or stream._remote_closed:
            # Data in flight for a stream already reset or finished: dropped.
            _log.debug("SPDY: %d bytes for stream %d dropped", len(payload), stream_id)
            return None
        if payload:
            stream._buffer += payload
            stream._readable.set()
        if flags & FLAG_FIN:
            self._remote_fin(stream)
        return stream

    def _remote_fin(self, stream: SpdyStream) -> None:
        stream._remote_closed = True
        stream._fin_received = True
        stream._readable.set()
        self._forget_if_done(stream)

    def _on_control(self, ftype: int, flags: int, payload: bytes) -> None:
        try:
            kind = FrameType(ftype)
        except ValueError:
            # Unknown control frames are ignored, as the draft asks.
            _log.debug("SPDY: control frame type %d ignored", ftype)
            return
        name = kind.name
        fixed = {
            FrameType.RST_STREAM: 8,
            FrameType.PING: 4,
            FrameType.GOAWAY: 8,
            FrameType.WINDOW_UPDATE: 8,
        }
        minimum = {
            FrameType.SYN_STREAM: 10,
            FrameType.SYN_REPLY: 4,
            FrameType.HEADERS: 4,
            FrameType.SETTINGS: 4,
        }
        if kind in fixed and len(payload) != fixed[kind]:
            raise SpdyProtocolError(f"{name} frame of {len(payload)} bytes (must be {fixed[kind]})")
        if kind in minimum and len(payload) < minimum[kind]:
            raise SpdyProtocolError(
                f"{name} frame of {len(payload)} bytes (at least {minimum[kind]})"
            )
        if kind is FrameType.SYN_STREAM:
            self._on_syn_stream(flags, payload)
        elif kind is FrameType.SYN_REPLY or kind is FrameType.HEADERS:
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            headers = self._header_codec.decode(f"{name} for stream {stream_id}", payload[4:])
            if stream_id == 0:
                raise SpdyProtocolError(f"{name} frame for stream 0")
            stream = self._streams.get(stream_id)
            if stream is None:
                return
            if (
                kind is FrameType.SYN_REPLY
                and stream._reply is not None
                and not stream._reply.done()
            ):
                stream.reply_headers = MappingProxyType(headers)
                stream._reply.set_result(None)
            if flags & FLAG_FIN:
                self._remote_fin(stream)
        elif kind is FrameType.RST_STREAM:
            stream_id, status = struct.unpack(">II", payload)
            stream_id &= 0x7FFFFFFF
            if stream_id == 0 or status == 0:
                raise SpdyProtocolError(f"RST_STREAM for stream {stream_id} with status {status}")
            stream = self._streams.get(stream_id)
            if stream is not None:
                try:
                    reason = RstStatus(status).name
                except ValueError:
                    reason = str(status)
                # What the peer sent before its reset stays readable: Go's
                # streaming servers send an exec's final Status on the error stream
                # and then reset it (CANCEL) rather than sending a FIN.
                self._mark_reset(stream, f"reset by the peer ({reason})", keep_received=True)
        elif kind is FrameType.SETTINGS:
            self._on_settings(payload)
        elif kind is FrameType.PING:
            (ping_id,) = struct.unpack(">I", payload)
            if ping_id % 2 != self._next_ping % 2:
                self._send_quiet(control_frame(FrameType.PING, 0, payload))
            else:
                waiter = self._pings.get(ping_id)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
        elif kind is FrameType.GOAWAY:
            last_good, _status = struct.unpack(">II", payload)
            last_good &= 0x7FFFFFFF
            self._goaway_received = True
            self._incoming_event.set()
            for stream in list(self._streams.values()):
                # Streams we opened that the peer never saw will never be answered.
                if stream.id % 2 == self._next_id % 2 and stream.id > last_good:
                    self._mark_reset(stream, "refused by the peer's GOAWAY")
        elif kind is FrameType.WINDOW_UPDATE:
            stream_id, delta = struct.unpack(">II", payload)
            stream_id &= 0x7FFFFFFF
            delta &= 0x7FFFFFFF
            self._peer_counts_windows = True
            if delta == 0:
                return
            if stream_id == 0:
                self._send_window = min(self._send_window + delta, MAX_WINDOW)
            else:
                stream = self._streams.get(stream_id)
                if stream is None:
                    return
                stream._send_window += delta
                if stream._send_window > MAX_WINDOW:
                    self._reset_stream(
                        stream, RstStatus.FLOW_CONTROL_ERROR, "reset: the peer's window overflowed"
                    )
            self._windows_changed()

    def _on_syn_stream(self, flags: int, payload: bytes) -> None:
        stream_id, _assoc, _priority, _slot = struct.unpack(">IIBB", payload[:10])
        stream_id &= 0x7FFFFFFF
        # Decompress first in any case: the zlib context spans every header block.
        headers = self._header_codec.decode(f"SYN_STREAM {stream_id}", payload[10:])
        if stream_id == 0:
            raise SpdyProtocolError("SYN_STREAM for stream 0")
        peer_parity = 1 if self._server else 0
        if stream_id % 2 != peer_parity or stream_id <= self._last_peer_id:
            # Like spdystream: the stream is refused, the session goes on.
            _log.warning("SPDY: SYN_STREAM with invalid id %d refused", stream_id)
            self._send_quiet(
                control_frame(
                    FrameType.RST_STREAM, 0, struct.pack(">II", stream_id, RstStatus.PROTOCOL_ERROR)
                )
            )
            return
        self._last_peer_id = stream_id
        if self._closed or self._goaway_sent or len(self._incoming) >= self._max_pending:
            self._send_quiet(
                control_frame(
                    FrameType.RST_STREAM, 0, struct.pack(">II", stream_id, RstStatus.REFUSED_STREAM)
                )
            )
            return
        stream = SpdyStream(self, stream_id, headers, send_window=self._peer_initial_window)
        stream._local_closed = bool(flags & FLAG_UNIDIRECTIONAL)
        self._streams[stream_id] = stream
        if flags & FLAG_FIN:
            self._remote_fin(stream)
        self._incoming.append(stream)
        self._incoming_event.set()

    def _on_settings(self, payload: bytes) -> None:
        (count,) = struct.unpack(">I", payload[:4])
        if len(payload) != 4 + 8 * count:
            raise SpdyProtocolError(f"SETTINGS frame of {len(payload)} bytes for {count} entries")
        self._peer_counts_windows = True
        for i in range(count):
            id_flags, value = struct.unpack(">II", payload[4 + 8 * i : 12 + 8 * i])
            if id_flags & 0xFFFFFF != SETTINGS_INITIAL_WINDOW_SIZE:
                continue
            if value > MAX_WINDOW:
                raise SpdyProtocolError(f"SETTINGS: initial window {value} over 2^31-1")
            delta = value - self._peer_initial_window
            self._peer_initial_window = value
            for stream in self._streams.values():
                stream._send_window += delta
        self._windows_changed()
