"""SPDY/3.1 sessions: our client against our server over a socket pair, raw frames
against our server (a peer that never counts windows, malformed frames), and
kubectl (Go's spdystream) against a tiny API server speaking through them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import socket
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from kubelet_kit.container.streams import ByteSink, ByteSource
from kubelet_kit.streams.spdy import (
    HEADER_DICTIONARY,
    FrameType,
    SpdyProtocolError,
    SpdySession,
    SpdyStream,
)
from kubelet_kit.streams.upgrade import accept_upgrade, upgraded_response

WAIT = 20.0


async def bounded(awaitable: object, timeout: float = WAIT) -> object:
    return await asyncio.wait_for(awaitable, timeout)  # type: ignore[arg-type]


async def _connected_pair() -> tuple[
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
]:
    a, b = socket.socketpair()
    return await asyncio.open_connection(sock=a), await asyncio.open_connection(sock=b)


@contextlib.asynccontextmanager
async def sessions(**kwargs: object) -> AsyncIterator[tuple[SpdySession, SpdySession]]:
    """A client and a server session connected to each other."""
    (cr, cw), (sr, sw) = await _connected_pair()
    server_kwargs = {k[7:]: v for k, v in kwargs.items() if k.startswith("server_")}
    client_kwargs = {k[7:]: v for k, v in kwargs.items() if k.startswith("client_")}
    async with (
        SpdySession(cr, cw, server=False, **client_kwargs) as client,
        SpdySession(sr, sw, server=True, **server_kwargs) as server,
    ):
        yield client, server


async def read_all(stream: SpdyStream) -> bytes:
    out = bytearray()
    while chunk := await stream.read():
        out += chunk
    return bytes(out)


def test_dictionary_is_the_spdy3_one() -> None:
    assert len(HEADER_DICTIONARY) == 1423
    assert hashlib.sha256(HEADER_DICTIONARY).hexdigest() == (
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"
    )


async def test_headers_round_trip_and_stream_ids() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(
            client.open_stream({"streamtype": "stdout", "X-Mixed-Case": "Value", "empty": ""})
        )
        accepted = await bounded(server.accept_stream())
        stream = await bounded(opened)
        assert isinstance(accepted, SpdyStream) and isinstance(stream, SpdyStream)
        assert accepted.id == stream.id == 1
        assert dict(accepted.headers) == {
            "streamtype": "stdout",
            "x-mixed-case": "Value",
            "empty": "",
        }
        # Later streams reuse the compression context (and get higher odd ids).
        for i in range(1, 20):
            opened = asyncio.create_task(client.open_stream({"streamtype": f"s{i}" * i}))
            accepted = await bounded(server.accept_stream())
            assert accepted.headers["streamtype"] == f"s{i}" * i  # type: ignore[union-attr]
            assert (await bounded(opened)).id == 1 + 2 * i  # type: ignore[union-attr]


async def test_streams_satisfy_the_byte_protocols() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "stdin"}))
        accepted = await bounded(server.accept_stream())
        stream = await bounded(opened)
        source: ByteSource = accepted  # type: ignore[assignment]
        sink: ByteSink = stream  # type: ignore[assignment]
        await sink.write(b"abc")
        await sink.close()
        assert await source.read() == b"abc"
        assert await source.read() == b""


async def test_many_streams_echo_concurrently() -> None:
    async with sessions() as (client, server):

        async def serve() -> None:
            async def echo(stream: SpdyStream) -> None:
                await stream.write(await read_all(stream))
                await stream.close()

            async with asyncio.TaskGroup() as group:
                for _ in range(60):
                    group.create_task(echo(await server.accept_stream()))

        async def one(i: int) -> None:
            stream = await client.open_stream({"n": str(i)})
            payload = f"stream {i} ".encode() * (i * 50 + 1)
            await stream.write(payload)
            await stream.close()
            assert await read_all(stream) == payload
            assert stream.fin_received

        server_task = asyncio.create_task(serve())
        await bounded(asyncio.gather(*(one(i) for i in range(60))))
        await bounded(server_task)


async def test_half_close_keeps_the_other_direction_open() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "stdin"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        await stream.write(b"question")
        await stream.close()
        await stream.close()  # idempotent
        with pytest.raises(BrokenPipeError):
            await stream.write(b"more")
        assert await bounded(read_all(accepted)) == b"question"
        assert accepted.fin_received
        # The server's half is still open after the client's FIN.
        await accepted.write(b"answer 1, ")
        assert await bounded(stream.read()) == b"answer 1, "
        await accepted.write(b"answer 2")
        await accepted.close()
        assert await bounded(read_all(stream)) == b"answer 2"
        assert stream.fin_received and not stream.is_reset


@pytest.mark.parametrize("flow_control", [None, False])
async def test_ten_megabytes_each_way_at_once(flow_control: bool | None) -> None:
    size = 10 * 1024 * 1024
    up = os.urandom(size)
    down = bytes(reversed(up))
    async with sessions(client_flow_control=flow_control, server_flow_control=flow_control) as (
        client,
        server,
    ):
        opened = asyncio.create_task(client.open_stream({"streamtype": "data"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        if flow_control is None:
            # Two of our sessions find out that both count windows.
            assert client._enforce_windows() and server._enforce_windows()

        async def send(s: SpdyStream, data: bytes) -> None:
            for i in range(0, len(data), 1 << 20):
                await s.write(data[i : i + (1 << 20)])
            await s.close()

        results = await bounded(
            asyncio.gather(
                send(stream, up), send(accepted, down), read_all(accepted), read_all(stream)
            ),
            60,
        )
        assert results[2] == up  # type: ignore[index]
        assert results[3] == down  # type: ignore[index]


async def test_a_slow_reader_holds_back_the_sender() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "data"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        writing = asyncio.create_task(stream.write(b"x" * (1 << 20)))
        await asyncio.sleep(0.2)  # bounded: lets the writer run into the window
        assert not writing.done()
        assert len(accepted._buffer) <= 65536
        assert len(await bounded(read_exactly(accepted, 1 << 20))) == 1 << 20  # type: ignore[arg-type]
        await bounded(writing)


async def read_exactly(stream: SpdyStream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = await stream.read(n - len(out))
        assert chunk
        out += chunk
    return bytes(out)


async def test_ping_both_ways() -> None:
    async with sessions() as (client, server):
        assert await bounded(client.ping()) >= 0  # type: ignore[operator]
        assert await bounded(server.ping()) >= 0  # type: ignore[operator]
        assert await bounded(client.ping()) >= 0  # type: ignore[operator]


async def test_reset_ends_both_sides() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "stdout"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        pending_read = asyncio.create_task(accepted.read())
        await stream.reset()
        await stream.reset()  # idempotent
        assert await bounded(pending_read) == b""
        assert accepted.is_reset and not accepted.fin_received
        with pytest.raises(ConnectionResetError, match="reset by the peer"):
            await accepted.write(b"late")
        await accepted.close()  # no-op after a reset
        # The session goes on.
        opened = asyncio.create_task(client.open_stream({"streamtype": "next"}))
        assert (await bounded(server.accept_stream())).id == 3  # type: ignore[union-attr]
        await bounded(opened)


async def test_what_arrived_before_the_peers_reset_stays_readable() -> None:
    # Go's streaming servers end an exec by writing its Status on the error stream
    # and resetting that stream (CANCEL), without a FIN: the Status must survive.
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "error"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        await accepted.write(b'{"status":"Failure","reason":"NonZeroExitCode"}')
        await accepted.reset()
        await bounded(_until(lambda: stream.is_reset))
        assert await bounded(read_all(stream)) == b'{"status":"Failure","reason":"NonZeroExitCode"}'


async def _until(predicate: object) -> None:
    while not predicate():  # type: ignore[operator]
        await asyncio.sleep(0.01)


async def test_refused_stream_fails_open_stream() -> None:
    async with sessions(server_max_pending=0) as (client, _server):
        with pytest.raises(ConnectionResetError, match="REFUSED_STREAM"):
            await bounded(client.open_stream({"streamtype": "error"}))


async def test_goaway_ends_accept_and_open() -> None:
    async with sessions() as (client, server):
        opened = asyncio.create_task(client.open_stream({"streamtype": "error"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        await bounded(opened)
        await client.close()
        await client.close()  # idempotent
        with pytest.raises(EOFError):
            await bounded(server.accept_stream())
        with pytest.raises(ConnectionError):
            await server.open_stream({"streamtype": "x"})
        assert await bounded(accepted.read()) == b""
        await bounded(server.wait_closed())


async def test_peer_vanishing_mid_stream_ends_everything() -> None:
    (cr, cw), (sr, sw) = await _connected_pair()
    async with SpdySession(cr, cw, server=False) as client:
        server = SpdySession(sr, sw, server=True)
        server_task = asyncio.create_task(server.run())
        opened = asyncio.create_task(client.open_stream({"streamtype": "stdout"}))
        accepted: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        stream: SpdyStream = await bounded(opened)  # type: ignore[assignment]
        await accepted.write(b"partial")
        assert await bounded(stream.read()) == b"partial"
        pending_read = asyncio.create_task(stream.read())
        pending_accept = asyncio.create_task(client.accept_stream())
        sw.transport.abort()  # the server's side disappears without GOAWAY or FIN
        assert await bounded(pending_read) == b""
        assert not stream.fin_received
        with pytest.raises((ConnectionError, EOFError)):
            await bounded(pending_accept)
        with pytest.raises(ConnectionError):
            await bounded(stream.write(b"x" * 100000))
        with pytest.raises(ConnectionError):
            await bounded(client.ping())
        await bounded(client.wait_closed())
        await bounded(asyncio.gather(server_task, return_exceptions=True))


# -- raw frames against our server -----------------------------------------------------


def control(ftype: int, flags: int, payload: bytes, version: int = 3) -> bytes:
    return struct.pack(">HHI", 0x8000 | version, ftype, (flags << 24) | len(payload)) + payload


def header_block(compressor: zlib._Compress, headers: dict[str, str]) -> bytes:
    raw = struct.pack(">I", len(headers))
    for name, value in headers.items():
        raw += struct.pack(">I", len(name)) + name.encode()
        raw += struct.pack(">I", len(value)) + value.encode()
    return compressor.compress(raw) + compressor.flush(zlib.Z_SYNC_FLUSH)


async def read_frame(reader: asyncio.StreamReader) -> tuple[bool, int, int, bytes]:
    """(control, type or stream id, flags, payload)."""
    first, second = struct.unpack(">II", await reader.readexactly(8))
    payload = await reader.readexactly(second & 0xFFFFFF)
    if first & 0x80000000:
        return True, first & 0xFFFF, second >> 24, payload
    return False, first & 0x7FFFFFFF, second >> 24, payload


async def test_a_peer_that_never_sends_window_updates_is_not_stalled() -> None:
    # spdystream neither sends WINDOW_UPDATE nor SETTINGS: our server must not
    # wait for windows it will never get.
    (cr, cw), (sr, sw) = await _connected_pair()
    async with SpdySession(sr, sw, server=True) as server:
        compressor = zlib.compressobj(zdict=HEADER_DICTIONARY)
        cw.write(
            control(
                FrameType.SYN_STREAM,
                0,
                struct.pack(">IIBB", 1, 0, 0, 0)
                + header_block(compressor, {"streamtype": "stdout"}),
            )
        )
        stream: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        size = 3 * 1024 * 1024
        writing = asyncio.create_task(stream.write(b"y" * size))
        received = 0
        seen_types: set[int] = set()
        while received < size:
            is_control, kind, _flags, payload = await bounded(read_frame(cr))  # type: ignore[misc]
            if is_control:
                seen_types.add(kind)
            else:
                assert kind == 1
                received += len(payload)
        await bounded(writing)
        assert FrameType.SETTINGS in seen_types and FrameType.SYN_REPLY in seen_types
        cw.close()


async def test_window_updates_are_sent_as_data_is_consumed() -> None:
    (cr, cw), (sr, sw) = await _connected_pair()
    async with SpdySession(sr, sw, server=True) as server:
        compressor = zlib.compressobj(zdict=HEADER_DICTIONARY)
        # A peer that counts windows says so (SETTINGS with its initial window).
        cw.write(control(FrameType.SETTINGS, 0, struct.pack(">III", 1, 7, 65536)))
        cw.write(
            control(
                FrameType.SYN_STREAM,
                0,
                struct.pack(">IIBB", 1, 0, 0, 0)
                + header_block(compressor, {"streamtype": "stdin"}),
            )
        )
        stream: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        for _ in range(4):
            cw.write(struct.pack(">II", 1, 16384) + b"z" * 16384)
        assert len(await bounded(read_exactly(stream, 65536))) == 65536  # type: ignore[arg-type]
        updates: dict[int, int] = {}
        while sum(updates.values()) < 2 * 65536:
            is_control, kind, _flags, payload = await bounded(read_frame(cr))  # type: ignore[misc]
            if is_control and kind == FrameType.WINDOW_UPDATE:
                sid, delta = struct.unpack(">II", payload)
                updates[sid] = updates.get(sid, 0) + delta
        assert updates == {0: 65536, 1: 65536}
        cw.close()


async def test_no_window_updates_to_a_peer_that_does_not_count_windows() -> None:
    # Go's spdystream ignores them; one sent after it closed the connection would
    # draw a TCP reset that discards the last frames it sent (an exec's Status).
    (cr, cw), (sr, sw) = await _connected_pair()
    async with SpdySession(sr, sw, server=True) as server:
        compressor = zlib.compressobj(zdict=HEADER_DICTIONARY)
        cw.write(
            control(
                FrameType.SYN_STREAM,
                0,
                struct.pack(">IIBB", 1, 0, 0, 0)
                + header_block(compressor, {"streamtype": "stdin"}),
            )
        )
        stream: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        for _ in range(8):
            cw.write(struct.pack(">II", 1, 16384) + b"z" * 16384)
        assert len(await bounded(read_exactly(stream, 131072))) == 131072  # type: ignore[arg-type]
        await stream.write(b"done")
        kinds = []
        while True:
            is_control, kind, _flags, payload = await bounded(read_frame(cr))  # type: ignore[misc]
            if not is_control:
                assert payload == b"done"
                break
            kinds.append(kind)
        assert FrameType.WINDOW_UPDATE not in kinds
        cw.close()


def _syn(stream_id: int, block: bytes) -> bytes:
    return control(FrameType.SYN_STREAM, 0, struct.pack(">IIBB", stream_id, 0, 0, 0) + block)


MALFORMED: dict[str, tuple[Callable[[zlib._Compress], bytes], str]] = {
    "version 2": (lambda c: control(FrameType.PING, 0, b"\0\0\0\1", version=2), "version 2"),
    "short RST_STREAM": (
        lambda c: control(FrameType.RST_STREAM, 0, b"\0\0\0\1"),
        "RST_STREAM frame of 4 bytes",
    ),
    "RST_STREAM status 0": (lambda c: control(FrameType.RST_STREAM, 0, bytes(8)), "status 0"),
    "short SYN_STREAM": (
        lambda c: control(FrameType.SYN_STREAM, 0, b"\0\0\0\1"),
        "SYN_STREAM frame of 4 bytes",
    ),
    "not zlib": (lambda c: _syn(1, b"definitely not deflate"), "does not decompress"),
    "upper-case name": (lambda c: _syn(1, header_block(c, {"StreamType": "x"})), "not lower case"),
    "truncated block": (
        lambda c: _syn(1, c.compress(b"\0\0\0\5\0\0") + c.flush(zlib.Z_SYNC_FLUSH)),
        "truncated",
    ),
    "data for stream 0": (lambda c: struct.pack(">II", 0, 3) + b"abc", "stream 0"),
    "bad SETTINGS": (
        lambda c: control(FrameType.SETTINGS, 0, struct.pack(">I", 2)),
        "SETTINGS frame of 4 bytes for 2 entries",
    ),
    "cut off": (lambda c: control(FrameType.PING, 0, b"\0\0\0\1")[:10], "inside a frame"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_malformed_frames_end_the_session_with_a_clear_error(case: str) -> None:
    build, message = MALFORMED[case]
    (cr, cw), (sr, sw) = await _connected_pair()
    server = SpdySession(sr, sw, server=True)
    cw.write(build(zlib.compressobj(zdict=HEADER_DICTIONARY)))
    if case == "cut off":
        cw.write_eof()
    with pytest.raises(SpdyProtocolError, match=message):
        await bounded(server.run())
    with pytest.raises(SpdyProtocolError, match=message):
        await server.accept_stream()
    if case != "cut off":
        # The peer is told why: GOAWAY with PROTOCOL_ERROR.
        frames = []
        while True:
            try:
                frames.append(await bounded(read_frame(cr)))
            except asyncio.IncompleteReadError:
                break
        goaways = [f for f in frames if f[0] and f[1] == FrameType.GOAWAY]
        assert goaways and struct.unpack(">II", goaways[0][3])[1] == 1
    await server.close()
    cw.close()


async def test_unknown_control_frames_and_bad_stream_ids_do_not_end_the_session() -> None:
    (cr, cw), (sr, sw) = await _connected_pair()
    async with SpdySession(sr, sw, server=True) as server:
        compressor = zlib.compressobj(zdict=HEADER_DICTIONARY)
        cw.write(control(10, 0, b"credential, ignored"))
        # An even id is the server's to use: refused with PROTOCOL_ERROR.
        cw.write(_syn(2, header_block(compressor, {"streamtype": "bad"})))
        cw.write(_syn(5, header_block(compressor, {"streamtype": "good"})))
        stream: SpdyStream = await bounded(server.accept_stream())  # type: ignore[assignment]
        assert stream.id == 5 and stream.headers["streamtype"] == "good"
        while True:
            is_control, kind, _flags, payload = await bounded(read_frame(cr))  # type: ignore[misc]
            if is_control and kind == FrameType.RST_STREAM:
                assert struct.unpack(">II", payload) == (2, 1)
                break
        cw.close()


# -- kubectl (Go's spdystream) against a tiny API server ------------------------------

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Running"},
}


DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get", "list"],
                "shortNames": ["po"],
            },
            {
                "name": "pods/exec",
                "singularName": "",
                "namespaced": True,
                "kind": "PodExecOptions",
                "verbs": ["create", "get"],
            },
        ],
    },
}


@functools.cache
def _kubectl() -> Path:
    """kubectl of ``$KUBELET_KIT_KUBERNETES_BIN``, or of the cache scripts/kubernetes
    builds into (asked with ``--bin-dir``, which builds nothing)."""
    base = os.environ.get("KUBELET_KIT_KUBERNETES_BIN")
    if not base:
        script = Path(__file__).resolve().parents[1] / "scripts" / "kubernetes"
        base = subprocess.run(
            ["bash", str(script), "--bin-dir"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    return Path(base) / "kubectl"


async def _exec_handler(request: web.Request) -> web.StreamResponse:
    offered = request.headers.getall("X-Stream-Protocol-Version", [])
    if "v4.channel.k8s.io" not in offered:
        return web.Response(status=403, text=f"no common protocol in {offered}")
    query = request.query
    reader, writer = await accept_upgrade(
        request, "SPDY/3.1", {"X-Stream-Protocol-Version": "v4.channel.k8s.io"}
    )
    wanted = {"error", "stdout", "stderr"} | ({"stdin"} if query.get("stdin") == "true" else set())
    async with SpdySession(reader, writer, server=True) as session:
        streams: dict[str, SpdyStream] = {}
        while not wanted <= streams.keys():
            stream = await asyncio.wait_for(session.accept_stream(), WAIT)
            streams[stream.headers["streamtype"]] = stream
        if "stdin" in streams:
            while chunk := await streams["stdin"].read():
                await streams["stdout"].write(chunk)
        else:
            await streams["stdout"].write(b"hello\n")
        await streams["stdout"].close()
        await streams["stderr"].close()
        await streams["error"].write(b'{"metadata":{},"status":"Success"}')
        await streams["error"].close()
        # kubectl hangs up once it has read everything.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(session.wait_closed(), WAIT)
    return upgraded_response()


@contextlib.asynccontextmanager
async def fake_api_server(tmp_path: Path) -> AsyncIterator[Path]:
    app = web.Application()

    async def pod(request: web.Request) -> web.Response:
        return web.json_response(POD)

    async def discovery(request: web.Request) -> web.Response:
        # kubectl maps "pods" to a resource through discovery first.
        return web.json_response(DISCOVERY[request.path])

    for path in DISCOVERY:
        app.router.add_get(path, discovery)
    app.router.add_get("/api/v1/namespaces/default/pods/p", pod)
    app.router.add_route("*", "/api/v1/namespaces/default/pods/p/exec", _exec_handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}
                ],
            }
        )
    )
    try:
        yield kubeconfig
    finally:
        await runner.cleanup()


async def _run_kubectl(
    tmp_path: Path, kubeconfig: Path, *args: str, stdin: bytes | None = None
) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        str(_kubectl()),
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--request-timeout",
        "60s",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), 90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_kubectl_exec_through_our_spdy_server(
    tmp_path: Path, require_real: Callable[[bool, str], None]
) -> None:
    require_real(_kubectl().is_file(), f"kubectl at {_kubectl()}")
    async with fake_api_server(tmp_path) as kubeconfig:
        code, out, err = await _run_kubectl(tmp_path, kubeconfig, "exec", "p", "--", "echo")
    assert (code, out) == (0, b"hello\n"), err.decode()


async def test_kubectl_exec_stdin_ten_megabytes_round_trip(
    tmp_path: Path, require_real: Callable[[bool, str], None]
) -> None:
    require_real(_kubectl().is_file(), f"kubectl at {_kubectl()}")
    data = os.urandom(10 * 1024 * 1024)
    async with fake_api_server(tmp_path) as kubeconfig:
        code, out, err = await _run_kubectl(
            tmp_path, kubeconfig, "exec", "-i", "p", "--", "cat", stdin=data
        )
    assert code == 0, err.decode()
    assert len(out) == len(data) and out == data
