"""FakeRuntime's StreamingRuntime: scripted exec, attach and port-forward in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import attrs
import pytest
from test_fake_runtime import container_config, sandbox_config

from kubelet_kit.container import ContainerConfig, ContainerState, ExecResult
from kubelet_kit.container.streams import (
    ByteSink,
    ByteSource,
    StreamingRuntime,
    StreamIO,
    TerminalSize,
    stream_mode,
)
from kubelet_kit.errors import ContainerRuntimeError, InvalidArgumentError, NotFoundError
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.fake_runtime import STREAMING_METHODS

pytestmark = pytest.mark.timeout(10)


class Sink:
    def __init__(self) -> None:
        self.data = b""
        self.closed = False

    async def write(self, data: bytes) -> None:
        self.data += data

    async def close(self) -> None:
        self.closed = True


class Source:
    def __init__(self, *chunks: bytes) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        for chunk in chunks:
            self.queue.put_nowait(chunk)

    async def read(self, n: int = 65536) -> bytes:
        return await self.queue.get()


async def sizes(*items: TerminalSize) -> AsyncIterator[TerminalSize]:
    for item in items:
        yield item


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock)


async def start(rt: FakeRuntime, script: str | None = None, **config: object) -> tuple[str, str]:
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    cfg = container_config("app", script)
    if config:
        cfg = attrs.evolve(cfg, **config)
    assert isinstance(cfg, ContainerConfig)
    cid = await rt.create_container(sid, cfg, sc)
    await rt.start_container(cid)
    return sid, cid


def test_streaming_methods_are_the_protocols() -> None:
    assert {
        name
        for name in vars(StreamingRuntime)
        if not name.startswith("_") and callable(vars(StreamingRuntime)[name])
    } == STREAMING_METHODS


async def test_the_fake_offers_streams_directly(rt: FakeRuntime) -> None:
    assert isinstance(rt, StreamingRuntime)
    assert stream_mode(rt) == "direct"


async def test_exec_echoes_stdin_by_default_and_records_the_call(rt: FakeRuntime) -> None:
    _, cid = await start(rt)
    out, err = Sink(), Sink()
    io = StreamIO(stdin=Source(b"ping ", b"pong", b""), stdout=out, stderr=err)
    assert await rt.exec_stream(cid, ["cat"], io) == 0
    assert out.data == b"ping pong" and out.closed and err.closed
    (call,) = rt.calls_to("exec_stream")
    assert call.kwargs == {"container_id": cid, "cmd": ("cat",), "io": io}


async def test_exec_without_stdin_runs_the_shell_as_exec_sync_does(rt: FakeRuntime) -> None:
    _, cid = await start(rt)
    out, err = Sink(), Sink()
    code = await rt.exec_stream(
        cid, ["sh", "-c", "echo out; echo err >&2; exit 3"], StreamIO(stdout=out, stderr=err)
    )
    assert (code, out.data, err.data) == (3, b"out\n", b"err\n")
    # On a terminal there is one stream, its lines ending in CR LF.
    out = Sink()
    await rt.exec_stream(
        cid, ["sh", "-c", "echo out; echo err >&2"], StreamIO(stdout=out, tty=True)
    )
    assert out.data == b"out\r\nerr\r\n"


async def test_an_exec_handler_runs_the_session(rt: FakeRuntime) -> None:
    _, cid = await start(rt)
    seen: list[tuple[str, Sequence[str]]] = []

    async def handler(container_id: str, cmd: Sequence[str], io: StreamIO) -> int | None:
        seen.append((container_id, cmd))
        if cmd[0] == "cat":
            return None
        assert io.stdout is not None
        await io.stdout.write(b"scripted\n")
        return 7

    rt.set_exec_stream_handler(handler)
    out = Sink()
    assert await rt.exec_stream(cid, ["anything"], StreamIO(stdout=out)) == 7
    assert out.data == b"scripted\n" and out.closed
    assert await rt.exec_stream(cid, ["cat"], StreamIO(stdin=Source(b"x", b""), stdout=Sink())) == 0
    assert seen == [(cid, ("anything",)), (cid, ("cat",))]


async def test_exec_sync_handler_answers_a_stream_exec_too(rt: FakeRuntime) -> None:
    _, cid = await start(rt)
    rt.set_exec_handler(lambda c, cmd: ExecResult(5, b"from exec_sync\n", b""))
    out = Sink()
    assert await rt.exec_stream(cid, ["probe"], StreamIO(stdout=out)) == 5
    assert out.data == b"from exec_sync\n"


async def test_terminal_sizes_are_recorded(rt: FakeRuntime) -> None:
    _, cid = await start(rt)

    async def handler(container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        await asyncio.sleep(0)  # the sizes are read beside the session
        return 0

    rt.set_exec_stream_handler(handler)
    await rt.exec_stream(
        cid, ["sh"], StreamIO(tty=True, resize=sizes(TerminalSize(80, 24), TerminalSize(100, 40)))
    )
    assert rt.terminal_sizes(cid) == [TerminalSize(80, 24), TerminalSize(100, 40)]


async def test_exec_errors_are_the_real_runtimes(rt: FakeRuntime) -> None:
    _, cid = await start(rt, "exit 0")
    with pytest.raises(NotFoundError):
        await rt.exec_stream("nope", ["true"], StreamIO())
    with pytest.raises(InvalidArgumentError):
        await rt.exec_stream(cid, [], StreamIO())
    assert (await rt.container_status(cid)).state is ContainerState.EXITED
    with pytest.raises(ContainerRuntimeError, match="EXITED"):
        await rt.exec_stream(cid, ["true"], StreamIO())


async def test_injected_faults_and_latency_apply_to_streams(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    _, cid = await start(rt)
    boom = ContainerRuntimeError("boom")
    rt.inject_error("exec_stream", boom)
    with pytest.raises(ContainerRuntimeError) as excinfo:
        await rt.exec_stream(cid, ["true"], StreamIO())
    assert excinfo.value is boom
    rt.set_latency("port_forward_stream", 2.0)
    sid = (await rt.list_pod_sandboxes())[0].id
    session = asyncio.ensure_future(rt.port_forward_stream(sid, 80, Source(b""), Sink()))
    await clock.settle()
    assert not session.done()
    await clock.run_for(2.0)
    with pytest.raises(ContainerRuntimeError, match="refused"):
        await session  # nothing listens on port 80


async def test_exec_stdin_reaches_cat_and_its_end_ends_it(rt: FakeRuntime) -> None:
    _, cid = await start(rt)
    out, err = Sink(), Sink()
    io = StreamIO(stdin=Source(b"one\n", b"two", b""), stdout=out, stderr=err)
    code = await rt.exec_stream(cid, ["sh", "-c", "cat; echo done >&2; exit 4"], io)
    assert (code, out.data, err.data) == (4, b"one\ntwo", b"done\n")


async def test_attach_streams_new_output_and_feeds_stdin(rt: FakeRuntime, clock: FakeClock) -> None:
    _, cid = await start(
        rt,
        "echo before; sleep 1; echo after; cat; echo oops >&2; sleep 1; exit 0",
        stdin=True,
        stdin_once=True,
    )
    out, err = Sink(), Sink()
    src = Source(b"typed\n", b"")
    session = asyncio.ensure_future(
        rt.attach_stream(cid, StreamIO(stdin=src, stdout=out, stderr=err))
    )
    await clock.run_for(1.0)
    await clock.run_for(1.0)
    await asyncio.wait_for(session, 5)  # the container exited
    # The container's cat read what was typed once it ran, then its end.
    assert out.data == b"after\ntyped\n" and err.data == b"oops\n"
    assert out.closed and err.closed


async def test_attach_ends_with_stdin_unless_stdin_once(rt: FakeRuntime) -> None:
    _, plain = await start(rt, stdin=True)
    await asyncio.wait_for(
        rt.attach_stream(plain, StreamIO(stdin=Source(b"a", b""), stdout=Sink())), 5
    )
    assert not rt.stdin_closed(plain)
    sc = sandbox_config(name="other", uid="uid-2")
    sid = await rt.run_pod_sandbox(sc)
    cfg = attrs.evolve(container_config("once"), stdin=True, stdin_once=True)
    once = await rt.create_container(sid, cfg, sc)
    await rt.start_container(once)
    session = asyncio.ensure_future(
        rt.attach_stream(once, StreamIO(stdin=Source(b"a", b""), stdout=Sink()))
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert rt.stdin_closed(once) and not session.done()
    rt.exit_container(once, 0)
    await asyncio.wait_for(session, 5)


async def test_attach_errors_and_handler(rt: FakeRuntime) -> None:
    with pytest.raises(NotFoundError):
        await rt.attach_stream("nope", StreamIO())
    _, cid = await start(rt)
    seen: list[str] = []

    async def session(container_id: str, io: StreamIO) -> None:
        seen.append(container_id)

    rt.set_attach_handler(lambda container_id, io: session(container_id, io))
    out = Sink()
    await rt.attach_stream(cid, StreamIO(stdout=out))
    assert seen == [cid] and out.closed
    rt.exit_container(cid, 1)
    with pytest.raises(ContainerRuntimeError):
        await rt.attach_stream(cid, StreamIO())


async def test_port_forward_reaches_httpd_by_default_and_takes_a_handler(
    rt: FakeRuntime,
) -> None:
    sid, _ = await start(rt, "echo hi > /www/index.html; exec httpd -f -p 8080 -h /www")
    sink = Sink()
    await rt.port_forward_stream(sid, 8080, Source(b"GET / HTTP/1.0\r\n\r\n", b""), sink)
    assert sink.data.startswith(b"HTTP/1.1 200 OK\r\n") and sink.data.endswith(b"\r\n\r\nhi\n")
    assert sink.closed
    assert rt.calls_to("port_forward_stream")[0].kwargs["port"] == 8080
    with pytest.raises(ContainerRuntimeError, match="refused"):
        await rt.port_forward_stream(sid, 8081, Source(b""), Sink())

    async def refuse(sandbox_id: str, port: int, source: ByteSource, sink: ByteSink) -> None:
        raise ContainerRuntimeError(f"nothing listens on port {port}")

    rt.set_port_forward_handler(refuse)
    sink = Sink()
    with pytest.raises(ContainerRuntimeError, match="9090"):
        await rt.port_forward_stream(sid, 9090, Source(), sink)
    assert sink.closed


async def test_port_forward_errors(rt: FakeRuntime) -> None:
    sid, _ = await start(rt)
    with pytest.raises(NotFoundError):
        await rt.port_forward_stream("nope", 80, Source(), Sink())
    with pytest.raises(InvalidArgumentError):
        await rt.port_forward_stream(sid, 0, Source(), Sink())
    await rt.stop_pod_sandbox(sid)
    with pytest.raises(ContainerRuntimeError, match="not ready"):
        await rt.port_forward_stream(sid, 80, Source(), Sink())
