"""Taking over upgraded aiohttp connections, and relaying them to another server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

import aiohttp
from aiohttp import web

from kubelet_kit.streams.spdy import SpdySession
from kubelet_kit.streams.upgrade import accept_upgrade, proxy_upgrade, upgraded_response

WAIT = 20.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serve(routes: dict[str, Handler], **runner_kwargs: object) -> AsyncIterator[int]:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    runner = web.AppRunner(app, **runner_kwargs)  # type: ignore[arg-type]
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def echo_handler(request: web.Request) -> web.StreamResponse:
    """Upgrades to SPDY/3.1 and echoes raw bytes until the client half-closes."""
    reader, writer = await accept_upgrade(
        request, "SPDY/3.1", {"X-Stream-Protocol-Version": "v4.channel.k8s.io"}
    )
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.write(b"<bye>")
    await writer.drain()
    return upgraded_response()


def upgrade_request(path: str, protocol: str = "SPDY/3.1", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
        f"Upgrade: {protocol}\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
        f"X-Stream-Protocol-Version: channel.k8s.io\r\n{extra}\r\n"
    ).encode()


async def open_upgraded(
    port: int, path: str, *, protocol: str = "SPDY/3.1", extra: str = "", early: bytes = b""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade_request(path, protocol, extra) + early)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    return reader, writer, head.decode("latin-1")


async def read_to_eof(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), WAIT)


async def test_accept_upgrade_answers_101_and_carries_raw_bytes() -> None:
    async with serve({"/x": echo_handler}) as port:
        reader, writer, head = await open_upgraded(port, "/x")
        lines = head.lower().split("\r\n")
        assert lines[0] == "http/1.1 101 switching protocols"
        assert "connection: upgrade" in lines and "upgrade: spdy/3.1" in lines
        assert "x-stream-protocol-version: v4.channel.k8s.io" in lines
        assert not any(line.startswith(("transfer-encoding", "content-length")) for line in lines)
        payload = os.urandom(2 * 1024 * 1024)
        writer.write(payload)
        writer.write_eof()
        # Echoed without chunked framing, then the connection ends when the handler
        # returns.
        assert await read_to_eof(reader) == payload + b"<bye>"
        writer.close()


async def test_keep_alive_timer_does_not_close_an_upgraded_connection() -> None:
    async with serve({"/x": echo_handler}, keepalive_timeout=0.1) as port:
        reader, writer, head = await open_upgraded(port, "/x")
        assert " 101 " in head
        await asyncio.sleep(0.5)  # bounded: several keep-alive periods pass idle
        writer.write(b"still here")
        assert await asyncio.wait_for(reader.readexactly(10), WAIT) == b"still here"
        writer.write_eof()
        assert await read_to_eof(reader) == b"<bye>"
        writer.close()


async def test_bytes_buffered_behind_a_websocket_upgrade_are_not_lost() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        reader, writer = await accept_upgrade(request, "websocket", {})
        writer.write(await reader.readexactly(11))
        await writer.drain()
        return upgraded_response()

    async with serve({"/ws": handler}) as port:
        # Sent with the request, before the 101: aiohttp holds them for us.
        reader, writer, head = await open_upgraded(
            port,
            "/ws",
            protocol="websocket",
            extra="Sec-WebSocket-Version: 13\r\n",
            early=b"early bytes",
        )
        assert " 101 " in head
        assert await read_to_eof(reader) == b"early bytes"
        writer.close()


async def test_a_spdy_session_over_an_accepted_upgrade() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        reader, writer = await accept_upgrade(request, "SPDY/3.1", {})
        async with SpdySession(reader, writer, server=True) as session:
            stream = await session.accept_stream()
            data = b""
            while chunk := await stream.read():
                data += chunk
            await stream.write(data.upper())
            await stream.close()
            await asyncio.wait_for(session.wait_closed(), WAIT)
        return upgraded_response()

    async with serve({"/spdy": handler}) as port:
        reader, writer, head = await open_upgraded(port, "/spdy")
        assert " 101 " in head
        async with SpdySession(reader, writer, server=False) as client:
            stream = await asyncio.wait_for(client.open_stream({"streamtype": "stdin"}), WAIT)
            await stream.write(b"shout this")
            await stream.close()
            assert await asyncio.wait_for(stream.read(), WAIT) == b"SHOUT THIS"


async def test_proxy_upgrade_relays_the_101_and_pipes_both_ways() -> None:
    seen: dict[str, object] = {}

    async def target(request: web.Request) -> web.StreamResponse:
        seen["path_qs"] = request.path_qs
        seen["versions"] = request.headers.getall("X-Stream-Protocol-Version")
        seen["method"] = request.method
        return await echo_handler(request)

    async with serve({"/cri/exec/{token}": target}) as target_port:
        url = f"http://127.0.0.1:{target_port}/cri/exec/abc?tty=1"

        async def front(request: web.Request) -> web.StreamResponse:
            return await proxy_upgrade(request, url)

        async with serve({"/exec/{tail:.*}": front}) as front_port:
            reader, writer, head = await open_upgraded(front_port, "/exec/ns/pod/c?command=x")
            lines = head.lower().split("\r\n")
            assert lines[0] == "http/1.1 101 switching protocols"
            assert "x-stream-protocol-version: v4.channel.k8s.io" in lines
            payload = os.urandom(1024 * 1024)
            writer.write(payload)
            writer.write_eof()
            assert await read_to_eof(reader) == payload + b"<bye>"
            writer.close()
    assert seen == {
        "path_qs": "/cri/exec/abc?tty=1",
        "method": "POST",
        "versions": ["v4.channel.k8s.io", "channel.k8s.io"],
    }


async def test_proxy_upgrade_relays_a_refusal_as_a_plain_response() -> None:
    async def target(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="no such session", headers={"X-Why": "gone"})

    async with serve({"/cri/exec/{token}": target}) as target_port:
        url = f"http://127.0.0.1:{target_port}/cri/exec/expired"

        async def front(request: web.Request) -> web.StreamResponse:
            return await proxy_upgrade(request, url)

        async with serve({"/exec": front}) as front_port:
            status, headers, text = await post_upgrade(front_port)
    assert (status, headers["X-Why"], text) == (404, "gone", "no such session")


async def test_proxy_upgrade_to_nothing_is_a_bad_gateway() -> None:
    with socketserver_port() as dead_port:

        async def front(request: web.Request) -> web.StreamResponse:
            return await proxy_upgrade(request, f"http://127.0.0.1:{dead_port}/x")

        async with serve({"/exec": front}) as front_port:
            status, _headers, text = await post_upgrade(front_port)
    assert status == 502 and "unable to reach" in text


async def post_upgrade(port: int) -> tuple[int, Mapping[str, str], str]:
    """An upgrade request through aiohttp's client, for answers that are not 101."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"http://127.0.0.1:{port}/exec",
            headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1"},
        ) as resp,
    ):
        return resp.status, resp.headers, await resp.text()


@contextlib.contextmanager
def socketserver_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    yield port


async def test_websocket_through_proxy_upgrade() -> None:
    async def ws_target(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(request)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(message.data[::-1])
            elif message.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(message.data)
        return ws

    async with serve({"/ws": ws_target}) as target_port:

        async def front(request: web.Request) -> web.StreamResponse:
            return await proxy_upgrade(request, f"http://127.0.0.1:{target_port}/ws")

        async with (
            serve({"/front": front}) as front_port,
            aiohttp.ClientSession() as http,
            http.ws_connect(
                f"http://127.0.0.1:{front_port}/front",
                protocols=("v4.channel.k8s.io",),
                timeout=aiohttp.ClientWSTimeout(ws_close=WAIT),
            ) as ws,
        ):
            assert ws.protocol == "v4.channel.k8s.io"
            await ws.send_str("olleh")
            reply = await ws.receive(timeout=WAIT)
            assert reply.data == "hello"
            blob = os.urandom(300_000)
            await ws.send_bytes(blob)
            assert (await ws.receive(timeout=WAIT)).data == blob
            await ws.close()
