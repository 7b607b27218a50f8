"""The node API's /exec, /attach and /portForward over WebSocket, with the SDK's
client, on a runtime that serves streams itself (a scripted one here; the
host-process runtime and containerd have their own tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO
from kubelet_kit.server import Authenticator, KubeletServer, load_token_file
from kubelet_kit.server.config import ensure_self_signed
from kubelet_kit.streams.client import (
    StreamError,
    attach_url,
    exec_command,
    node_exec_url,
    open_exec,
    open_port_forward,
)
from kubelet_kit.testing import FakeRuntime
from kubelet_kit.testing.env import KubeletEnv

TOKEN = "stream-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
    "spec": {
        "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}]
    },
}


async def _copy(source: ByteSource, sink: ByteSink) -> None:
    while chunk := await source.read():
        await sink.write(chunk)


class ScriptedStreams(FakeRuntime):
    """A FakeRuntime whose streams do what the command says."""

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        await self.container_status(container_id)  # NotFoundError for an unknown id
        try:
            if cmd[0] == "cat" and io.stdin is not None and io.stdout is not None:
                await _copy(io.stdin, io.stdout)
                return 0
            if cmd[0] == "fail":
                if io.stderr is not None:
                    await io.stderr.write(b"it failed\n")
                return int(cmd[1])
            if cmd[0] == "size" and io.resize is not None and io.stdout is not None:
                size = await anext(io.resize)
                await io.stdout.write(f"{size.height} {size.width}\r\n".encode())
                return 0
            if io.stdout is not None:
                await io.stdout.write(" ".join(cmd).encode() + b"\n")
            return 0
        finally:
            for sink in (io.stdout, io.stderr):
                if sink is not None:
                    await sink.close()

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        if io.stdout is not None:
            await io.stdout.write(b"attached\n")
            if io.stdin is not None:
                await _copy(io.stdin, io.stdout)
            await io.stdout.close()

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        from kubelet_kit.errors import ContainerRuntimeError

        if port != 8080:
            raise ContainerRuntimeError(f"connection refused on port {port}")
        while chunk := await source.read():
            await sink.write(b"pong:" + chunk)


class Node:
    def __init__(self, env: KubeletEnv, server: KubeletServer) -> None:
        self.env = env
        self.server = server
        self.base = f"https://127.0.0.1:{server.port}"


@pytest.fixture
async def node(tmp_path: Path, require_real: Any) -> AsyncIterator[Node]:
    import shutil

    require_real(shutil.which("openssl") is not None, "openssl")
    cert, key = ensure_self_signed(tmp_path / "pki", "fake-node")
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f'{TOKEN},alice,1001,"admins"\n')
    runtime = ScriptedStreams()
    async with KubeletEnv(runtime=runtime) as env:
        env.add_pod(POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(
            env.kubelet,
            address="127.0.0.1",
            port=0,
            tls_cert_file=cert,
            tls_private_key_file=key,
            read_only_port=None,
            healthz_port=None,
            authenticator=Authenticator(tokens=load_token_file(tokens)),
        )
        async with server:
            yield Node(env, server)


@pytest.fixture(params=["websocket", "spdy"])
def protocol(request: pytest.FixtureRequest) -> Any:
    """Each session test runs over both wire protocols."""
    return request.param


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_exec_runs_the_command_and_reports_success(
    node: Node, http: aiohttp.ClientSession, protocol: Any
) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["echo", "hello world"])
    out = await exec_command(http, url, headers=AUTH, ssl=False, protocol=protocol)
    assert (out.exit_code, out.stdout, out.stderr) == (0, b"echo hello world\n", b"")


async def test_exec_with_stdin(node: Node, http: aiohttp.ClientSession, protocol: Any) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["cat"], stdin=True)
    out = await exec_command(
        http, url, input=b"line one\nline two\n", headers=AUTH, ssl=False, protocol=protocol
    )
    assert out.stdout == b"line one\nline two\n"


async def test_a_non_zero_exit_comes_back_as_its_code(
    node: Node, http: aiohttp.ClientSession, protocol: Any
) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["fail", "3"])
    out = await exec_command(http, url, headers=AUTH, ssl=False, protocol=protocol)
    assert (out.exit_code, out.stderr) == (3, b"it failed\n")


async def test_a_tty_session_gets_its_size(
    node: Node, http: aiohttp.ClientSession, protocol: Any
) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["size"], stdin=True, tty=True)
    async with open_exec(
        http, url, stdin=True, tty=True, headers=AUTH, ssl=False, protocol=protocol
    ) as session:
        await session.resize(132, 43)
        assert await asyncio.wait_for(session.stdout.read(), 10) == b"43 132\r\n"
        assert await asyncio.wait_for(session.wait(), 10) == 0


async def test_attach(node: Node, http: aiohttp.ClientSession, protocol: Any) -> None:
    url = attach_url(node.base, "default", "web", "main", stdin=True)
    async with open_exec(
        http, url, stdin=True, headers=AUTH, ssl=False, protocol=protocol
    ) as session:
        assert await asyncio.wait_for(session.stdout.read(), 10) == b"attached\n"
        assert session.stdin is not None
        await session.stdin.write(b"typed\n")
        assert await asyncio.wait_for(session.stdout.read(), 10) == b"typed\n"


async def test_port_forward(node: Node, http: aiohttp.ClientSession, protocol: Any) -> None:
    async with open_port_forward(
        http, node.base, "default", "web", 8080, headers=AUTH, ssl=False, protocol=protocol
    ) as conn:
        await conn.write(b"ping")
        assert await asyncio.wait_for(conn.read(), 10) == b"pong:ping"


async def test_port_forward_to_a_closed_port_reports_the_error(
    node: Node, http: aiohttp.ClientSession, protocol: Any
) -> None:
    async with open_port_forward(
        http, node.base, "default", "web", 9, headers=AUTH, ssl=False, protocol=protocol
    ) as conn:
        assert "connection refused on port 9" in await asyncio.wait_for(conn.error(), 10)


async def test_an_unauthenticated_exec_is_refused(
    node: Node, http: aiohttp.ClientSession, protocol: Any
) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["echo"])
    with pytest.raises(StreamError, match="401"):
        await exec_command(http, url, ssl=False, protocol=protocol)
    assert node.env.runtime.calls_to("exec_stream") == []


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/exec/default/nope/main?command=ls&output=1", 404),
        ("/exec/default/web/nope?command=ls&output=1", 404),
        ("/exec/default/web/main?command=ls", 400),  # no stream asked for
        ("/exec/default/web/main?output=1", 400),  # no command
        ("/exec/default/web/main?command=ls&output=1", 400),  # no upgrade
    ],
)
async def test_bad_requests_get_plain_answers(
    node: Node, http: aiohttp.ClientSession, path: str, status: int
) -> None:
    async with http.post(node.base + path, headers=AUTH, ssl=False) as resp:
        assert resp.status == status, await resp.text()


async def test_an_unknown_websocket_subprotocol_is_refused_before_upgrading(
    node: Node, http: aiohttp.ClientSession
) -> None:
    url = node_exec_url(node.base, "default", "web", "main", ["echo"])
    with pytest.raises(StreamError, match="400"):
        async with open_exec(http, url, headers=AUTH, ssl=False, protocols=("v9.channel.k8s.io",)):
            pass


async def test_a_runtime_without_streams_answers_501(
    node: Node, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    # A runtime with neither kind of streams (the agent's wrapper forwards both).
    monkeypatch.setattr(node.env.kubelet.runtime, "inner", types.SimpleNamespace())
    monkeypatch.setattr(
        node.server.kubelet.runtime, "list_containers", node.env.runtime.list_containers
    )
    async with http.post(
        node.base + "/exec/default/web/main?command=ls&output=1",
        headers={**AUTH, "Connection": "Upgrade", "Upgrade": "websocket"},
        ssl=False,
    ) as resp:
        assert resp.status == 501


async def test_stdin_over_websocket_needs_v5_and_falls_back_to_spdy(
    node: Node, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A node without v5 (as the 1.20 kubelet) cannot be told that stdin ended over
    # WebSocket: the client, like kubectl, asks for v5 alone and speaks SPDY instead.
    import kubelet_kit.streams.remotecommand as remotecommand

    monkeypatch.setattr(remotecommand, "EXEC_PROTOCOLS", ("v4.channel.k8s.io",))
    url = node_exec_url(node.base, "default", "web", "main", ["cat"], stdin=True)
    out = await exec_command(
        http, url, input=b"to the end\n", headers=AUTH, ssl=False, protocol="websocket", timeout=20
    )
    assert out.stdout == b"to the end\n"
