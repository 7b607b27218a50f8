"""The Kubernetes channel protocol over WebSocket (``channel.k8s.io``).

Each binary message begins with one byte naming its channel (exec and attach: 0
stdin, 1 stdout, 2 stderr, 3 error, 4 resize); ``v5.channel.k8s.io`` adds the
message ``[255, n]`` that closes channel ``n`` (how a client says its stdin
ended). The ``base64.`` variants carry text messages: the channel as an ASCII
digit, then the data in base64. The server opens with an empty message on the
lowest channel it writes, so the client knows the session stands.

:class:`ChannelConnection` turns one WebSocket (aiohttp's, either side) into
per-channel byte streams: :meth:`~ChannelConnection.source` (what the peer sends
on a channel) and :meth:`~ChannelConnection.sink` (what we send on one). One
reader task per connection feeds the sources; each source has one consumer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "BASE64_PROTOCOLS",
    "CLOSE_CHANNEL",
    "EXEC_PROTOCOLS",
    "PORT_FORWARD_PROTOCOLS",
    "ChannelConnection",
    "ChannelSink",
    "ChannelSource",
]

#: Subprotocols for exec and attach, the server's preference first.
EXEC_PROTOCOLS: Final = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
    "channel.k8s.io",
)
#: Subprotocols for port-forward over plain WebSocket channels.
PORT_FORWARD_PROTOCOLS: Final = (
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
    "channel.k8s.io",
)
#: The text (base64) variants.
BASE64_PROTOCOLS: Final = frozenset(p for p in EXEC_PROTOCOLS if "base64" in p)
#: v5's control channel: ``[255, n]`` closes channel ``n``.
CLOSE_CHANNEL: Final = 255


class ChannelSource:
    """Bytes the peer sends on one channel (a :class:`ByteSource`)."""

    def __init__(self) -> None:
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffer = b""
        self._ended = False

    def _feed(self, data: bytes) -> None:
        if not self._ended and data:
            self._chunks.put_nowait(data)

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._chunks.put_nowait(b"")

    async def read(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes; ``b""`` once the channel is closed (or the connection)."""
        if not self._buffer:
            chunk = await self._chunks.get()
            if not chunk:
                self._chunks.put_nowait(b"")  # every later read sees the end too
                return b""
            self._buffer = chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


class ChannelSink:
    """Bytes we send on one channel (a :class:`ByteSink`)."""

    def __init__(self, conn: ChannelConnection, channel: int) -> None:
        self._conn = conn
        self.channel = channel
        self._closed = False

    async def write(self, data: bytes) -> None:
        """Send ``data`` as one message on this channel (nothing for ``b""``)."""
        if self._closed:
            raise ConnectionError(f"channel {self.channel} is closed")
        if data:
            await self._conn.send(self.channel, data)

    async def close(self) -> None:
        """v5: tell the peer this channel ends; older versions have no way to."""
        if self._closed:
            return
        self._closed = True
        if self._conn.protocol.startswith("v5."):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._conn.send_raw(bytes([CLOSE_CHANNEL, self.channel]))


class ChannelConnection:
    """One WebSocket carrying numbered channels.

    Args:
        ws: An aiohttp ``WebSocketResponse`` (server) or ``ClientWebSocketResponse``
            (client), already open.
        protocol: The negotiated subprotocol.
        channels: How many channels there may be (messages on others are dropped).
    """

    def __init__(self, ws: Any, protocol: str, channels: int = 5) -> None:
        self.ws = ws
        self.protocol = protocol
        self.base64 = protocol in BASE64_PROTOCOLS or "base64" in protocol
        self._sources = [ChannelSource() for _ in range(channels)]
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None

    def source(self, channel: int) -> ChannelSource:
        """What the peer sends on ``channel``."""
        return self._sources[channel]

    def sink(self, channel: int) -> ChannelSink:
        """A sink sending on ``channel``."""
        return ChannelSink(self, channel)

    def start(self) -> None:
        """Start reading the peer's messages into the sources (idempotent)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_loop(), name="ws-channels")

    async def send(self, channel: int, data: bytes) -> None:
        """Send ``data`` on ``channel`` (one message)."""
        if self.base64:
            text = str(channel) + base64.b64encode(data).decode("ascii")
            async with self._lock:
                await self.ws.send_str(text)
        else:
            await self.send_raw(bytes([channel]) + data)

    async def send_raw(self, message: bytes) -> None:
        """Send one binary message as it is."""
        async with self._lock:
            await self.ws.send_bytes(message)

    async def _read_loop(self) -> None:
        from aiohttp import WSMsgType

        try:
            async for msg in self.ws:
                if msg.type is WSMsgType.BINARY:
                    data: bytes = msg.data
                elif msg.type is WSMsgType.TEXT and self.base64:
                    text: str = msg.data
                    if not text or not text[0].isdigit():
                        continue
                    try:
                        data = bytes([int(text[0])]) + base64.b64decode(text[1:])
                    except ValueError:
                        continue
                else:
                    if msg.type in (
                        WSMsgType.CLOSE,
                        WSMsgType.CLOSING,
                        WSMsgType.CLOSED,
                        WSMsgType.ERROR,
                    ):
                        break
                    continue
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel == CLOSE_CHANNEL and self.protocol.startswith("v5."):
                    if payload and payload[0] < len(self._sources):
                        self._sources[payload[0]]._end()
                elif channel < len(self._sources):
                    self._sources[channel]._feed(payload)
        finally:
            for source in self._sources:
                source._end()

    async def close(self, code: int = 1000) -> None:
        """Close the WebSocket and end every source. Idempotent."""
        with contextlib.suppress(Exception):
            await self.ws.close(code=code)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for source in self._sources:
            source._end()


def pick_protocol(offered: Sequence[str], supported: Sequence[str]) -> str | None:
    """The first of ``supported`` that the client ``offered`` (None: no match)."""
    offered_set = {p.strip() for p in offered}
    return next((p for p in supported if p in offered_set), None)
