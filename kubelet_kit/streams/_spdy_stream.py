"""One stream of a SPDY session: a bidirectional byte stream with its buffer.

:class:`SpdyStream` is what :meth:`~kubelet_kit.streams.spdy.SpdySession.open_stream`
and :meth:`~kubelet_kit.streams.spdy.SpdySession.accept_stream` return: the reading
side buffers what the session's read loop hands it, the writing side sends through
the session (its windows and its connection). The session keeps the protocol; a
stream keeps its own state only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from kubelet_kit.streams._spdy_frames import RstStatus

if TYPE_CHECKING:
    from kubelet_kit.streams.spdy import SpdySession

__all__ = ["SpdyStream"]


class SpdyStream:
    """One stream of a :class:`SpdySession`: a :class:`ByteSource` and :class:`ByteSink`.

    Attributes:
        id: The stream id (odd: opened by the client; even: by the server).
        headers: The headers of its ``SYN_STREAM`` (names lower case; several values
            of one name joined by NUL).
        reply_headers: The headers of the peer's ``SYN_REPLY`` (streams we opened).
    """

    def __init__(
        self, session: SpdySession, stream_id: int, headers: Mapping[str, str], *, send_window: int
    ) -> None:
        self.id = stream_id
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers))
        self.reply_headers: Mapping[str, str] = MappingProxyType({})
        self._session = session
        self._buffer = bytearray()
        self._readable = asyncio.Event()
        self._drained = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._send_window = send_window
        self._unacked = 0
        self._remote_closed = False
        self._local_closed = False
        self._reset = False
        self._reset_reason = ""
        self._fin_received = False
        self._reply: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"<SpdyStream {self.id} {dict(self.headers)!r}>"

    @property
    def fin_received(self) -> bool:
        """Whether the peer ended its half with FIN (False after a reset or a lost
        connection, which also end :meth:`read` with ``b""``)."""
        return self._fin_received

    @property
    def is_reset(self) -> bool:
        """Whether the stream was reset (by either side)."""
        return self._reset

    async def read(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes the peer sent; blocks until some arrive.

        Returns:
            ``b""`` once the peer's FIN arrived and everything before it was read,
            or right away after a reset or once the session has ended.
        """
        if n <= 0:
            return b""
        while not self._buffer:
            if self._remote_closed or self._reset:
                return b""
            self._readable.clear()
            await self._readable.wait()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        if len(self._buffer) <= self._session._max_buffer:
            self._drained.set()
        self._session._consumed(self, len(data))
        return data

    async def write(self, data: bytes) -> None:
        """Send ``data`` as data frames, waiting for the peer's window when it counts
        windows and for the connection to drain.

        Raises:
            ConnectionResetError: The stream was reset, or the session has ended.
            BrokenPipeError: Our half is already closed.
        """
        view = memoryview(data)
        async with self._write_lock:
            while view:
                self._check_writable()
                size = await self._session._reserve(self, len(view))
                self._check_writable()
                self._session._send_data(self, view[:size], fin=False)
                view = view[size:]
                await self._session._drain()

    async def close(self) -> None:
        """Half-close: send FIN; the peer may go on sending. Idempotent; does nothing
        once the stream was reset or the session has ended."""
        async with self._write_lock:
            if self._local_closed or self._reset:
                return
            self._local_closed = True
            if self._session._dead:
                return
            self._session._send_data(self, b"", fin=True)
            self._session._forget_if_done(self)
            with contextlib.suppress(ConnectionError):
                await self._session._drain()

    async def reset(self) -> None:
        """Abort the stream both ways (``RST_STREAM`` with CANCEL). Idempotent."""
        self._session._reset_stream(self, RstStatus.CANCEL, "reset locally")
        with contextlib.suppress(ConnectionError):
            await self._session._drain()

    def _check_writable(self) -> None:
        if self._reset:
            raise ConnectionResetError(f"SPDY stream {self.id} was reset ({self._reset_reason})")
        if self._local_closed:
            raise BrokenPipeError(f"SPDY stream {self.id} is closed for writing")
        if self._session._dead:
            raise ConnectionResetError(f"SPDY session ended ({self._session._end_reason()})")

    def _wake(self) -> None:
        self._readable.set()
        self._drained.set()
