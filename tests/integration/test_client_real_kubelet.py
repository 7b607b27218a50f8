"""The SDK's streaming client (:mod:`kubelet_kit.streams.client`) against a node API,
over WebSocket and over SPDY/3.1: the same tests against the real kubelet 1.20.2
and against ``kubelet-kit run``, both standalone on the session's containerd and
letting in only the test's client certificate.

Both nodes hand the upgraded connection on to containerd's streaming server, so
both answer alike: exec and attach over WebSocket choose ``v4.channel.k8s.io``
(no v5, hence no way to end stdin there), over SPDY ``v4.channel.k8s.io``;
port-forward over WebSocket chooses ``v4.channel.k8s.io``, over SPDY
``portforward.k8s.io``.

One static pod per node serves every test: ``main`` idles (exec), ``reader``
answers each line on its stdin (attach), ``web`` is busybox's httpd on a free
loopback port (port-forward; the pod is on the host's network). Every wait is
bounded in real time.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Literal

import aiohttp
import attrs
import pytest

from kubelet_kit.streams.client import (
    attach_url,
    exec_command,
    node_exec_url,
    open_exec,
    open_port_forward,
)

from .kube_apiserver import free_port
from .real_kubelet import StandaloneNode, busybox_container, static_pod

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

Protocol = Literal["websocket", "spdy"]
PROTOCOLS: tuple[Protocol, ...] = ("websocket", "spdy")
PAGE = b"served-through-port-forward\n"
NAMESPACE = "default"


@attrs.frozen
class Pod:
    """The test pod on one node."""

    name: str
    web_port: int


@attrs.frozen
class Target:
    """A node with the test pod running, and how to reach its node API."""

    node: StandaloneNode
    pod: Pod
    http: aiohttp.ClientSession
    ssl: ssl.SSLContext

    @property
    def base(self) -> str:
        return self.node.url

    def exec_url(
        self, command: list[str], *, container: str = "main", stdin: bool = False, tty: bool = False
    ) -> str:
        return node_exec_url(
            self.base, NAMESPACE, self.pod.name, container, command, stdin=stdin, tty=tty
        )


@pytest.fixture(scope="module")
def streams_pod(standalone_node_env: StandaloneNode | str) -> Pod | None:
    """The test pod on the module's node, running (None where there is no node)."""
    if isinstance(standalone_node_env, str):
        return None
    port = free_port()
    www = f"/tmp/www-{port}"  # inside the container's own filesystem
    name = standalone_node_env.add_pod(
        static_pod(
            "streams",
            busybox_container("main", "sleep 3600"),
            # stdin stays open across attaches (no stdinOnce): each protocol's attach
            # gets its own answer.
            busybox_container(
                "reader", "while read line; do echo got:$line; done; sleep 3600", stdin=True
            ),
            busybox_container(
                "web",
                f"mkdir -p {www} && echo {PAGE.decode().strip()} > "
                f"{www}/index.html && "
                f"exec httpd -f -p 127.0.0.1:{port} -h {www}",
            ),
        )
    )
    standalone_node_env.wait_running(name)
    return Pod(name, port)


@pytest.fixture
async def target(standalone_node: StandaloneNode, streams_pod: Pod | None) -> AsyncIterator[Target]:
    assert streams_pod is not None
    async with aiohttp.ClientSession() as http:
        yield Target(standalone_node, streams_pod, http, standalone_node.ssl_context())


def _why(target: Target) -> str:
    return f"{target.node.kind} log (tail):\n{target.node.log_tail(40)}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_exec_gives_stdout_stderr_and_the_exit_code(
    target: Target, protocol: Protocol
) -> None:
    out = await exec_command(
        target.http,
        target.exec_url(["sh", "-c", "echo out; echo err >&2; exit 3"]),
        ssl=target.ssl,
        protocol=protocol,
        timeout=60,
    )
    assert (out.exit_code, out.stdout, out.stderr) == (3, b"out\n", b"err\n"), _why(target)
    ok = await exec_command(
        target.http,
        target.exec_url(["echo", "fine"]),
        ssl=target.ssl,
        protocol=protocol,
        timeout=60,
    )
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, b"fine\n", b""), _why(target)


def _text(size: int) -> bytes:
    lines = b"".join(
        b"%06d the quick brown fox jumps over the lazy dog\n" % i for i in range(size // 50 + 1)
    )
    return lines[:size]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_exec_with_stdin_round_trips_a_few_hundred_kilobytes(
    target: Target, protocol: Protocol
) -> None:
    data = _text(300_000)
    # head ends by itself once it has every byte: no end of stdin needed, which
    # v4.channel.k8s.io cannot say (the next test).
    out = await exec_command(
        target.http,
        target.exec_url(["head", "-c", str(len(data))], stdin=True),
        input=data,
        ssl=target.ssl,
        protocol=protocol,
        timeout=120,
    )
    assert out.exit_code == 0, _why(target)
    assert len(out.stdout) == len(data) and out.stdout == data
    assert out.stderr == b""


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_exec_sees_the_end_of_stdin(target: Target, protocol: Protocol) -> None:
    data = _text(200_000)
    url = target.exec_url(["cat"], stdin=True)
    async with open_exec(
        target.http, url, stdin=True, ssl=target.ssl, protocol=protocol
    ) as session:
        if protocol == "websocket" and not session.protocol.startswith("v5."):
            # Closing a channel is v5's; before it a WebSocket client cannot end
            # stdin short of closing the whole connection.
            pytest.skip(
                f"the {target.node.kind} chose {session.protocol}, which has no "
                "way to end stdin (v5.channel.k8s.io adds it)"
            )
        assert session.stdin is not None
        await session.stdin.write(data)
        await session.stdin.close()
        out = b""
        async with asyncio.timeout(60):
            while chunk := await session.stdout.read():
                out += chunk
            code = await session.wait()
    assert code == 0, _why(target)
    assert len(out) == len(data) and out == data


async def test_exec_command_ends_stdin_over_websocket_on_any_node(target: Target) -> None:
    # exec_command asks for v5 alone when it has input to end, and speaks SPDY to a
    # node without v5 (the 1.20 kubelet, containerd's streaming server), as kubectl
    # 1.30 and later do.
    data = _text(100_000)
    out = await exec_command(
        target.http,
        target.exec_url(["cat"], stdin=True),
        input=data,
        ssl=target.ssl,
        protocol="websocket",
        timeout=60,
    )
    assert (out.exit_code, out.stdout) == (0, data), _why(target)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_exec_with_a_tty_applies_a_resize(target: Target, protocol: Protocol) -> None:
    # The command waits for a line, so the resize is applied before stty asks.
    url = target.exec_url(["sh", "-c", "read x; stty size"], stdin=True, tty=True)
    async with open_exec(
        target.http, url, stdin=True, tty=True, ssl=target.ssl, protocol=protocol
    ) as session:
        assert session.stdin is not None
        await session.resize(123, 45)
        await asyncio.sleep(0.5)  # the resize travels on its own stream
        await session.stdin.write(b"\n")
        seen = b""
        async with asyncio.timeout(30):
            while b"45 123" not in seen:
                chunk = await session.stdout.read()
                if not chunk:
                    break
                seen += chunk
            code = await session.wait()
    assert b"45 123" in seen, f"tty output {seen!r}\n{_why(target)}"
    assert code == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_attach_reaches_the_containers_stdin(target: Target, protocol: Protocol) -> None:
    url = attach_url(target.base, NAMESPACE, target.pod.name, "reader", stdin=True)
    word = f"hello-{protocol}"
    async with open_exec(
        target.http, url, stdin=True, ssl=target.ssl, protocol=protocol
    ) as session:
        assert session.stdin is not None
        seen = b""
        async with asyncio.timeout(30):
            # The first line may go before the attach is wired through to the
            # container: send again until the answer comes.
            while f"got:{word}".encode() not in seen:
                await session.stdin.write(f"{word}\n".encode())
                try:
                    chunk = await asyncio.wait_for(session.stdout.read(), 2)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                seen += chunk
    assert f"got:{word}".encode() in seen, f"attach output {seen!r}\n{_why(target)}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_port_forward_reaches_a_server_in_the_pod(target: Target, protocol: Protocol) -> None:
    async with open_port_forward(
        target.http,
        target.base,
        NAMESPACE,
        target.pod.name,
        target.pod.web_port,
        ssl=target.ssl,
        protocol=protocol,
    ) as conn:
        await conn.write(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        reply = b""
        async with asyncio.timeout(30):
            while chunk := await conn.read():
                reply += chunk
                if reply.endswith(PAGE):
                    break
    assert reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0], (
        f"reply {reply[:300]!r}\n{_why(target)}"
    )
    assert reply.endswith(PAGE), reply[-200:]
