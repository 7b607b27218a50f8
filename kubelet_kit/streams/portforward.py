"""Port-forward sessions, server side, over SPDY/3.1 or WebSocket, as the kubelet
speaks them (``portforward`` upstream).

SPDY (protocol ``portforward.k8s.io``): the client opens a ``data`` and an
``error`` stream per forwarded connection, both with headers ``port`` and
``requestid``; bytes on ``data`` go to the port inside the pod and back, and a
failure is reported as text on ``error``. WebSocket: the ports come in the query
(``?port=80&port=8080``); port ``i`` has data channel ``2i`` and error channel
``2i+1``, and the first message the server sends on each starts with the port, 2
bytes little-endian (the client sends data alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from aiohttp import web

from kubelet_kit.container.streams import ByteSink, ByteSource
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.streams.websocket import (
    PORT_FORWARD_PROTOCOLS,
    ChannelConnection,
    pick_protocol,
)

__all__ = ["PORT_FORWARD_PROTOCOL", "ForwardPort", "ports_from_query", "serve_port_forward"]

log = logging.getLogger(__name__)

#: The SPDY stream protocol of port-forward.
PORT_FORWARD_PROTOCOL: Final = "portforward.k8s.io"

#: Copies one forwarded connection: ``(port, source, sink)``; raises a
#: KubeletKitError (reported on the error stream) when the port cannot be reached.
ForwardPort = Callable[[int, ByteSource, ByteSink], Awaitable[None]]


def ports_from_query(query: Any) -> list[int]:
    """The ``port`` parameters (WebSocket port-forward).

    Raises:
        ValueError: A port that is not a number in 1..65535 (named).
    """
    ports = []
    for raw in query.getall("port", ()) if hasattr(query, "getall") else query.get("port", ()):
        for part in str(raw).split(","):
            try:
                port = int(part)
            except ValueError:
                raise ValueError(f"unable to parse {part!r} as a port") from None
            if not 0 < port < 65536:
                raise ValueError(f"port {port} must be between 1 and 65535")
            ports.append(port)
    return ports


async def serve_port_forward(request: web.Request, forward: ForwardPort) -> web.StreamResponse:
    """Answer one port-forward request on whichever protocol it asks for."""
    upgrade = request.headers.get("Upgrade", "").lower()
    if upgrade == "websocket":
        offered = [
            p.strip()
            for raw in request.headers.getall("Sec-WebSocket-Protocol", ())
            for p in raw.split(",")
        ]
        protocol = pick_protocol(offered, PORT_FORWARD_PROTOCOLS)
        if protocol is None:
            return web.Response(
                status=400,
                text="unable to upgrade: no supported WebSocket subprotocol for port forwarding",
            )
        try:
            ports = ports_from_query(request.query)
        except ValueError as exc:
            return web.Response(status=400, text=str(exc))
        if not ports:
            return web.Response(status=400, text='query parameter "port" is required')
        return await _serve_websocket(request, protocol, ports, forward)
    if upgrade.startswith("spdy/3.1"):
        offered = [
            p.strip()
            for raw in request.headers.getall("X-Stream-Protocol-Version", ())
            for p in raw.split(",")
        ]
        if offered and PORT_FORWARD_PROTOCOL not in offered:
            return web.Response(
                status=403,
                text="unable to upgrade: unable to negotiate "
                f"protocol: client supports {offered}, server accepts "
                f"[{PORT_FORWARD_PROTOCOL!r}]",
            )
        return await _serve_spdy(request, forward)
    return web.Response(status=400, text="Upgrade request required")


async def _one(
    forward: ForwardPort, port: int, source: ByteSource, sink: ByteSink, error: ByteSink
) -> None:
    try:
        await forward(port, source, sink)
    except KubeletKitError as exc:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            await error.write(f"error forwarding port {port}: {exc}".encode())
    except (ConnectionError, OSError) as exc:
        log.debug("port-forward to %d ended: %s", port, exc)
    finally:
        for s in (sink, error):
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                await s.close()


async def _serve_websocket(
    request: web.Request, protocol: str, ports: Sequence[int], forward: ForwardPort
) -> web.StreamResponse:
    ws = web.WebSocketResponse(protocols=(protocol,), max_msg_size=0)
    await ws.prepare(request)
    conn = ChannelConnection(ws, protocol, channels=2 * len(ports))
    conn.start()
    try:
        tasks = []
        for i, port in enumerate(ports):
            prefix = struct.pack("<H", port)
            data, error = conn.sink(2 * i), conn.sink(2 * i + 1)
            await conn.send(2 * i, prefix)
            await conn.send(2 * i + 1, prefix)
            tasks.append(asyncio.create_task(_one(forward, port, conn.source(2 * i), data, error)))
        await asyncio.gather(*tasks)
    finally:
        await conn.close()
    return ws


async def _serve_spdy(request: web.Request, forward: ForwardPort) -> web.StreamResponse:
    from kubelet_kit.streams.spdy import SpdySession
    from kubelet_kit.streams.upgrade import accept_upgrade, upgraded_response

    reader, writer = await accept_upgrade(
        request, "SPDY/3.1", {"X-Stream-Protocol-Version": PORT_FORWARD_PROTOCOL}
    )
    pending: dict[str, dict[str, Any]] = {}
    tasks: set[asyncio.Task[None]] = set()
    async with SpdySession(reader, writer, server=True) as session:
        while True:
            try:
                stream = await session.accept_stream()
            except (ConnectionError, EOFError):
                break
            kind = stream.headers.get("streamtype", "")
            request_id = stream.headers.get("requestid", "")
            try:
                port = int(stream.headers.get("port", ""))
            except ValueError:
                await stream.reset()
                continue
            if kind not in ("data", "error"):
                await stream.reset()
                continue
            pair = pending.setdefault(request_id, {})
            pair[kind] = stream
            if "data" in pair and "error" in pair:
                del pending[request_id]
                task = asyncio.create_task(
                    _one(forward, port, pair["data"], pair["data"], pair["error"])
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return upgraded_response()
