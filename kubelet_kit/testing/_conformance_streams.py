"""The conformance checks of streaming: exec and attach sessions, port-forward.

Sessions run the way the runtime offers them (:func:`~kubelet_kit.container.streams.stream_mode`):
a :class:`~kubelet_kit.container.streams.StreamingRuntime` is handed in-memory
streams; a :class:`~kubelet_kit.container.streams.StreamURLRuntime` (a CRI
runtime) hands out a URL that the project's streams client connects to over
SPDY/3.1, which every runtime's streaming server speaks and which, unlike the
WebSocket protocols before ``v5.channel.k8s.io``, can tell a command that its
stdin ended. The client (and aiohttp with it) is imported only when a check
needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import attrs

from kubelet_kit.container.interfaces import ContainerState, PortMapping
from kubelet_kit.container.streams import (
    ByteSink,
    ByteSource,
    StreamIO,
    stream_mode,
)
from kubelet_kit.errors import DeadlineExceededError
from kubelet_kit.testing._conformance_context import _CheckFailed, _Ctx, _Skip, _wait_state

_READ = 65536
#: Seconds an exec_sync may run past its timeout before it has given up.
_TIMEOUT_SLACK = 5.0


class _Pipe:
    """An in-memory byte stream: one side writes (a ByteSink), the other reads
    (a ByteSource); ``b""`` once closed."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._closed = False

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionError("the stream is closed")
        if data:
            self._queue.put_nowait(data)

    async def close(self) -> None:
        self.close_nowait()

    def close_nowait(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(b"")

    async def read(self, n: int = _READ) -> bytes:
        data = await self._queue.get()
        if not data:
            self._queue.put_nowait(b"")  # every later read sees the end too
        return data


@attrs.define
class _Session:
    """One exec or attach: write ``stdin``, read ``stdout``/``stderr``, ``end()``
    for the exit code (None for an attach)."""

    stdin: ByteSink | None
    stdout: ByteSource
    stderr: ByteSource
    end: Callable[[], Awaitable[int | None]]


class _Streams:
    """Opens sessions the way the runtime under test serves them."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx
        mode = stream_mode(ctx.runtime)
        if mode is None:
            raise _Skip(
                "the runtime serves no streams (neither StreamingRuntime nor StreamURLRuntime)"
            )
        self.mode = mode
        self.rt: Any = ctx.runtime
        self._stack = contextlib.AsyncExitStack()
        self._http: Any = None

    async def __aenter__(self) -> _Streams:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _client(self) -> Any:
        if self._http is None:
            import aiohttp

            self._http = await self._stack.enter_async_context(aiohttp.ClientSession())
        return self._http

    async def exec(
        self, cid: str, cmd: Sequence[str], *, stdin: bool = False, tty: bool = False
    ) -> _Session:
        """Start ``cmd`` in the container (stdout always; stderr unless ``tty``)."""
        if self.mode == "direct":
            pipes = _Pipes(stdin, tty)
            return self._run_direct(self.rt.exec_stream(cid, list(cmd), pipes.io), pipes)
        url = await self.rt.get_exec_url(
            cid, list(cmd), tty=tty, stdin=stdin, stdout=True, stderr=not tty
        )
        return await self._open_url(url, stdin=stdin, tty=tty)

    async def attach(self, cid: str, *, stdin: bool = True, tty: bool = False) -> _Session:
        """Attach to the container (stdout always; stderr unless ``tty``)."""
        if self.mode == "direct":
            pipes = _Pipes(stdin, tty)
            return self._run_direct(self.rt.attach_stream(cid, pipes.io), pipes)
        url = await self.rt.get_attach_url(cid, tty=tty, stdin=stdin, stdout=True, stderr=not tty)
        return await self._open_url(url, stdin=stdin, tty=tty)

    def _run_direct(self, run: Awaitable[Any], pipes: _Pipes) -> _Session:
        task: asyncio.Future[Any] = asyncio.ensure_future(run)
        self._stack.push_async_callback(_cancel, task)

        def closed(_: object) -> None:
            # A session that failed before closing its streams still ends them.
            pipes.stdout.close_nowait()
            pipes.stderr.close_nowait()

        task.add_done_callback(closed)

        async def end() -> int | None:
            code: int | None = await task
            return code

        return _Session(pipes.stdin, pipes.stdout, pipes.stderr, end)

    async def _open_url(self, url: str, *, stdin: bool, tty: bool) -> _Session:
        from kubelet_kit.streams.client import open_exec

        http = await self._client()
        session = await self._stack.enter_async_context(
            open_exec(http, url, stdin=stdin, tty=tty, protocol="spdy", stdout=True, stderr=not tty)
        )
        return _Session(session.stdin, session.stdout, session.stderr, session.wait)

    @contextlib.asynccontextmanager
    async def port(self, sid: str, port: int) -> AsyncIterator[_Connection]:
        """One forwarded connection to ``port`` in the sandbox."""
        if self.mode == "direct":
            up, down = _Pipe(), _Pipe()
            task: asyncio.Future[None] = asyncio.ensure_future(
                self.rt.port_forward_stream(sid, port, up, down)
            )
            task.add_done_callback(lambda _: down.close_nowait())

            async def error() -> str:
                try:
                    await task
                except Exception as exc:
                    return f"{type(exc).__name__}: {exc}"
                return ""

            try:
                yield _Connection(up.write, down.read, error)
            finally:
                up.close_nowait()
                await _cancel(task)
            return
        from kubelet_kit.streams.client import open_port_forward_url

        http = await self._client()
        url = await self.rt.get_port_forward_url(sid, [port])
        async with open_port_forward_url(http, url, port, protocol="spdy") as conn:
            yield _Connection(conn.write, conn.read, conn.error)


@attrs.define
class _Connection:
    write: Callable[[bytes], Awaitable[None]]
    read: Callable[[], Awaitable[bytes]]
    error: Callable[[], Awaitable[str]]


class _Pipes:
    """The streams of a direct session: the runtime reads ``stdin`` and writes
    ``stdout`` and ``stderr`` (none with a tty: it stays empty)."""

    def __init__(self, stdin: bool, tty: bool) -> None:
        self.stdin = _Pipe() if stdin else None
        self.stdout = _Pipe()
        self.stderr = _Pipe()
        self.io = StreamIO(
            stdin=self.stdin, stdout=self.stdout, stderr=None if tty else self.stderr, tty=tty
        )


async def _cancel(task: asyncio.Future[Any]) -> None:
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# ------------------------------------------------------------------- helpers


async def _bounded(ctx: _Ctx, what: str, coro: Awaitable[Any]) -> Any:
    result, _ = await ctx.run_while_waiting(what, _as_coro(coro), ctx.timeout)
    return result


async def _as_coro(aw: Awaitable[Any]) -> Any:
    return await aw


async def _read_until(ctx: _Ctx, source: ByteSource, want: bytes, what: str) -> bytes:
    """Read ``source`` until ``want`` appears in it; what was read so far."""
    seen = bytearray()

    async def read() -> bytes:
        while want not in seen:
            chunk = await source.read(_READ)
            if not chunk:
                break
            seen.extend(chunk)
        return bytes(seen)

    try:
        got: bytes = await _bounded(ctx, what, read())
    except _CheckFailed as exc:
        raise _CheckFailed(f"{exc} (read so far: {bytes(seen)!r})") from None
    if want not in got:
        ctx.fail(f"{what}: the stream ended without {want!r} (read {got!r})")
    return got


async def _read_all(ctx: _Ctx, source: ByteSource, what: str) -> bytes:
    async def read() -> bytes:
        parts = []
        while chunk := await source.read(_READ):
            parts.append(chunk)
        return b"".join(parts)

    got: bytes = await _bounded(ctx, what, read())
    return got


async def _running(ctx: _Ctx, name: str, script: str, **fields: Any) -> tuple[str, str]:
    """A sandbox with one running container ``name`` (``fields`` evolve its config)."""
    sid, sandbox = await ctx.run_sandbox()
    config = attrs.evolve(ctx.container_config(sandbox, name, script), **fields)
    ctx.at(f"create_container({name})")
    cid = await ctx.runtime.create_container(sid, config, sandbox)
    ctx.at(f"start_container({name})")
    await ctx.runtime.start_container(cid)
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    return sid, cid


# -------------------------------------------------------------------- checks


async def _check_exec_stream(ctx: _Ctx) -> None:
    async with _Streams(ctx) as streams:
        _, cid = await _running(ctx, "exec", "sleep 3600")

        ctx.at("exec stream: stdout and stderr apart, exit code 3")
        s = await streams.exec(cid, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        out, err, code = await asyncio.gather(
            _read_all(ctx, s.stdout, "stdout"),
            _read_all(ctx, s.stderr, "stderr"),
            _bounded(ctx, "the session's end", s.end()),
        )
        ctx.expect_eq("stdout of `echo out; echo err >&2; exit 3`", out, b"out\n")
        ctx.expect_eq("stderr of `echo out; echo err >&2; exit 3`", err, b"err\n")
        ctx.expect_eq("exit code of `exit 3`", code, 3)

        ctx.at("exec stream with stdin: cat echoes each write while stdin is open")
        s = await streams.exec(cid, ["sh", "-c", "cat; echo after-eof >&2; exit 4"], stdin=True)
        assert s.stdin is not None
        await s.stdin.write(b"ping\n")
        await _read_until(ctx, s.stdout, b"ping\n", "cat echoing `ping` before stdin ends")
        await s.stdin.write(b"pong\n")
        await _read_until(ctx, s.stdout, b"pong\n", "cat echoing `pong` before stdin ends")
        ctx.at("exec stream with stdin: closing stdin ends cat, then the command")
        await s.stdin.close()
        rest: bytes
        rest, err, code = await asyncio.gather(
            _read_all(ctx, s.stdout, "stdout after stdin ended"),
            _read_all(ctx, s.stderr, "stderr after stdin ended"),
            _bounded(ctx, "the session's end after stdin ended", s.end()),
        )
        ctx.expect_eq("stdout after stdin ended", rest, b"")
        ctx.expect_eq("stderr of the command after cat ended", err, b"after-eof\n")
        ctx.expect_eq("exit code after stdin ended", code, 4)

        ctx.at("exec stream with tty: one stream, a terminal's line ends")
        s = await streams.exec(cid, ["sh", "-c", "echo out; echo err >&2; exit 2"], tty=True)
        out, code = await asyncio.gather(
            _read_all(ctx, s.stdout, "tty output"), _bounded(ctx, "the session's end", s.end())
        )
        ctx.expect(
            b"out\r\n" in out and b"err\r\n" in out,
            f"a tty exec's output should hold both streams with CR LF line ends, got {out!r}",
        )
        ctx.expect_eq("exit code of `exit 2` on a tty", code, 2)
        st = await ctx.runtime.container_status(cid)
        ctx.expect_eq("the container's state after the execs", st.state, ContainerState.RUNNING)


async def _check_attach(ctx: _Ctx) -> None:
    async with _Streams(ctx) as streams:
        _, cid = await _running(ctx, "attach", "cat", stdin=True)
        for round_ in ("first", "second"):
            ctx.at(f"{round_} attach: what is written reaches the container's cat")
            s = await streams.attach(cid)
            assert s.stdin is not None
            word = f"{round_}-{ctx.run_id}\n".encode()
            await s.stdin.write(word)
            await _read_until(ctx, s.stdout, word, f"{round_} attach: cat's echo of {word!r}")
            ctx.at(f"{round_} attach: closing stdin ends the attach, not the container")
            await s.stdin.close()
            await _bounded(ctx, "the attach's end after its stdin ended", s.end())
            st = await ctx.runtime.container_status(cid)
            ctx.expect_eq(
                f"state after the {round_} attach (no stdin_once: its stdin stays open)",
                st.state,
                ContainerState.RUNNING,
            )

        ctx.at("attach with stdin_once: the end of stdin closes the container's stdin")
        once_sb = ctx.sandbox_config("-once")
        config = attrs.evolve(
            ctx.container_config(once_sb, "once", "cat; echo stdin-closed"),
            stdin=True,
            stdin_once=True,
        )
        once_sid = await ctx.runtime.run_pod_sandbox(once_sb)
        ctx.sandboxes.append(once_sid)
        once = await ctx.runtime.create_container(once_sid, config, once_sb)
        await ctx.runtime.start_container(once)
        await _wait_state(ctx, once, ContainerState.RUNNING)
        ctx.at("attach with stdin_once")
        s = await streams.attach(once)
        assert s.stdin is not None
        await s.stdin.write(b"only-once\n")
        await _read_until(ctx, s.stdout, b"only-once\n", "stdin_once attach: cat's echo")
        await s.stdin.close()
        await _read_until(
            ctx, s.stdout, b"stdin-closed\n", "output after the container's stdin closed"
        )
        st = await _wait_state(ctx, once, ContainerState.EXITED)
        ctx.expect_eq("exit code of `cat; echo` once its stdin closed", st.exit_code, 0)

        ctx.at("attach to a tty container: a terminal's output")
        tty_sb = ctx.sandbox_config("-tty")
        config = attrs.evolve(ctx.container_config(tty_sb, "tty", "cat"), stdin=True, tty=True)
        tty_sid = await ctx.runtime.run_pod_sandbox(tty_sb)
        ctx.sandboxes.append(tty_sid)
        term = await ctx.runtime.create_container(tty_sid, config, tty_sb)
        await ctx.runtime.start_container(term)
        await _wait_state(ctx, term, ContainerState.RUNNING)
        s = await streams.attach(term, tty=True)
        assert s.stdin is not None
        await s.stdin.write(b"typed\n")
        await _read_until(ctx, s.stdout, b"typed\r\n", "a tty attach's output of `typed`")


#: Busybox httpd serves files; the kit's port-forward and port-mapping checks ask
#: it for one the container wrote. Named through ``busybox``, whose applet it is,
#: so it is found where the image has no ``httpd`` link.
_HTTPD = "echo {token} > /tmp/{name}; exec busybox httpd -f -p {port} -h /tmp"


async def _http_get(conn: _Connection, name: str) -> bytes:
    await conn.write(f"GET /{name} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
    parts = []
    while chunk := await conn.read():
        parts.append(chunk)
    return b"".join(parts)


def _http_ok(response: bytes, token: str) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    return (
        head.startswith(b"HTTP/1.")
        and b" 200 " in head.split(b"\r\n")[0]
        and (body == f"{token}\n".encode())
    )


async def _check_port_forward(ctx: _Ctx) -> None:
    async with _Streams(ctx) as streams:
        port = random.randint(20000, 39999)
        token = f"kk-conformance-{ctx.run_id}"
        name = f"{token}.txt"
        sid, _ = await _running(ctx, "web", _HTTPD.format(token=token, name=name, port=port))
        last: list[bytes | str] = [b""]

        async def answered() -> bool:
            async with streams.port(sid, port) as conn:
                response = await _http_get(conn, name)
                last[0] = response or await conn.error()
            return _http_ok(response, token)

        ctx.at(f"port-forward to httpd on port {port}: GET /{name}")
        try:
            await ctx.eventually(f"an HTTP 200 with {token!r} through port-forward", answered)
        except _CheckFailed as exc:
            raise _CheckFailed(f"{exc} (last answer: {last[0]!r})") from None

        ctx.at(f"port-forward to port {port + 1}, where nothing listens")
        async with streams.port(sid, port + 1) as conn:
            response = await _bounded(ctx, "port-forward to a closed port", _http_get(conn, name))
            error = await _bounded(ctx, "its error", conn.error())
        ctx.expect_eq("data from a port nothing listens on", response, b"")
        ctx.expect(bool(error), "port-forward to a port nothing listens on reported no error")


async def _check_exec_sync_timeout(ctx: _Ctx) -> None:
    rt = ctx.runtime
    _, cid = await _running(ctx, "timeout", "sleep 3600")
    ctx.at("exec_sync(echo quick, timeout=5)")
    res, _ = await ctx.run_while_waiting(
        "exec_sync", rt.exec_sync(cid, ["echo", "quick"], 5), ctx.timeout
    )
    ctx.expect_eq("exit_code of a command within its timeout", res.exit_code, 0)
    ctx.expect_eq("stdout of a command within its timeout", res.stdout, b"quick\n")
    ctx.at("exec_sync(sh -c 'sleep 1; exit 5', timeout=10)")
    res, _ = await ctx.run_while_waiting(
        "exec_sync", rt.exec_sync(cid, ["sh", "-c", "sleep 1; exit 5"], 10), ctx.timeout
    )
    ctx.expect_eq("exit_code of a command that sleeps within its timeout", res.exit_code, 5)

    ctx.at("exec_sync(sleep 30, timeout=2)")

    async def timed_out() -> bool:
        try:
            await rt.exec_sync(cid, ["sleep", "30"], 2)
        except DeadlineExceededError:
            return True
        return False

    # Within about the timeout: a runtime may round it up to whole seconds and
    # needs a moment to kill the command.
    hit, waited = await ctx.run_while_waiting(
        "exec_sync past its 2s timeout", timed_out(), 2 + _TIMEOUT_SLACK
    )
    ctx.expect(hit, "an exec running past its timeout returned instead of DeadlineExceededError")
    ctx.expect(waited >= 1.5, f"exec_sync with timeout 2s gave up after {waited:g}s")
    ctx.at("the container after an exec timed out")
    st = await rt.container_status(cid)
    ctx.expect_eq("state after an exec timed out", st.state, ContainerState.RUNNING)
    res, _ = await ctx.run_while_waiting("exec_sync", rt.exec_sync(cid, ["true"], 5), ctx.timeout)
    ctx.expect_eq("exit_code of an exec after one timed out", res.exit_code, 0)


async def _check_port_mappings(ctx: _Ctx) -> None:
    base = ctx.network_template or ctx.template
    if ctx.network_template is None and base is not None and base.namespace_options.host_network:
        raise _Skip(
            "the sandboxes share the host's network (sandbox_template): port mappings "
            "need a pod network of their own (give network_template)"
        )
    container_port = random.randint(20000, 29999)
    host_port = random.randint(30000, 39999)
    mapping = PortMapping(
        container_port=container_port, host_port=host_port, protocol="TCP", host_ip="127.0.0.1"
    )
    config = ctx.sandbox_config()
    options = attrs.evolve(config.namespace_options, host_network=False)
    if ctx.network_template is not None:
        config = attrs.evolve(
            ctx.network_template,
            metadata=config.metadata,
            log_directory=config.log_directory,
            labels={**ctx.network_template.labels, **config.labels},
            hostname=config.hostname,
        )
        options = config.namespace_options
    config = attrs.evolve(config, namespace_options=options, port_mappings=(mapping,))
    ctx.at("run_pod_sandbox with port_mappings")
    with ctx.declined_is_skip("run_pod_sandbox"):
        sid = await ctx.runtime.run_pod_sandbox(config)
    ctx.sandboxes.append(sid)
    token = f"kk-conformance-{ctx.run_id}"
    name = f"{token}.txt"
    script = _HTTPD.format(token=token, name=name, port=container_port)
    ctx.at("start the container listening on the container port")
    cid = await ctx.start_container(sid, config, "web", script)
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    last: list[bytes | str] = [b""]

    async def answered() -> bool:
        # A real connection, so real time bounds it (a runtime with a fake clock
        # publishes no host ports).
        try:
            async with asyncio.timeout(5):
                reader, writer = await asyncio.open_connection(mapping.host_ip, host_port)
        except (OSError, TimeoutError) as exc:
            last[0] = str(exc)
            return False
        try:
            async with asyncio.timeout(5):
                writer.write(f"GET /{name} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
                await writer.drain()
                response = await reader.read()
        except (OSError, TimeoutError) as exc:
            last[0] = str(exc)
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        last[0] = response
        return _http_ok(response, token)

    ctx.at(f"connect to {mapping.host_ip}:{host_port} (mapped to container port {container_port})")
    try:
        await ctx.eventually(f"an HTTP 200 with {token!r} from the host port", answered)
    except _CheckFailed as exc:
        raise _CheckFailed(f"{exc} (last answer: {last[0]!r})") from None
