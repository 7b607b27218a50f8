"""Exec and attach sessions, server side, over SPDY/3.1 or WebSocket, as the
kubelet's streaming server speaks them (``remotecommand`` upstream).

:func:`serve_remote_command` answers one upgrade request: it negotiates the
protocol, gathers the client's streams (stdin, stdout, stderr, resize, error),
runs the session through a callback that gets a
:class:`~kubelet_kit.container.streams.StreamIO`, and ends it with a Status on the
error stream. Whatever serves the request (the node API, the CRI streaming
server) decides first which container it is and only then calls this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs
from aiohttp import web

from kubelet_kit.container.streams import ByteSource, StreamIO, TerminalSize
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.streams.status import status_exit, status_failure, status_success
from kubelet_kit.streams.websocket import EXEC_PROTOCOLS, ChannelConnection, pick_protocol

__all__ = [
    "SPDY_PROTOCOLS",
    "STREAM_CREATION_TIMEOUT",
    "ExecOptions",
    "RunSession",
    "options_from_query",
    "resize_events",
    "serve_remote_command",
]

log = logging.getLogger(__name__)

#: SPDY stream protocol versions, the server's preference first.
SPDY_PROTOCOLS: Final = (
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
#: How long the client has to open its streams (the kubelet's default).
STREAM_CREATION_TIMEOUT: Final = 30.0

#: Runs one session on the client's streams; returns the exit code (exec) or None
#: (attach). Raising a KubeletKitError ends the session with its message.
RunSession = Callable[[StreamIO], Awaitable[int | None]]

_TRUE = ("1", "true", "True", "t")


@attrs.frozen(kw_only=True)
class ExecOptions:
    """What the client asked for (the query of ``/exec`` and ``/attach``)."""

    command: tuple[str, ...] = ()
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False
    tty: bool = False


def options_from_query(query: Mapping[str, str] | Any, *, exec_: bool) -> ExecOptions:
    """Read ``command`` (repeated), ``input``, ``output``, ``error`` and ``tty``.

    Args:
        query: The request's query (a multidict: ``getall`` gives every
            ``command``).
        exec_: Whether it is an exec (which needs a command).

    Raises:
        ValueError: No stream asked for, or an exec without a command; the
            message is the kubelet's.
    """

    def flag(name: str) -> bool:
        return str(query.get(name, "")) in _TRUE

    command = (
        tuple(query.getall("command", ()))
        if hasattr(query, "getall")
        else tuple(query.get("command", ()) or ())
    )
    options = ExecOptions(
        command=command,
        stdin=flag("input"),
        stdout=flag("output"),
        stderr=flag("error"),
        tty=flag("tty"),
    )
    if not (options.stdin or options.stdout or options.stderr):
        raise ValueError("you must specify at least 1 of stdin, stdout, stderr")
    if exec_ and not options.command:
        raise ValueError("you must specify a command")
    return options


async def resize_events(source: ByteSource) -> AsyncIterator[TerminalSize]:
    """The terminal sizes in a resize stream: JSON ``{"Width":W,"Height":H}``
    objects, one after another, as Go's encoder writes them."""
    decoder = json.JSONDecoder()
    buffer = ""
    while True:
        chunk = await source.read()
        if not chunk:
            return
        buffer += chunk.decode("utf-8", "replace")
        while True:
            stripped = buffer.lstrip()
            if not stripped:
                buffer = ""
                break
            try:
                value, end = decoder.raw_decode(stripped)
            except ValueError:
                buffer = stripped
                break  # an object split across chunks: wait for the rest
            buffer = stripped[end:]
            if isinstance(value, dict):
                try:
                    yield TerminalSize(
                        width=int(value.get("Width", 0)), height=int(value.get("Height", 0))
                    )
                except (TypeError, ValueError):
                    continue


def _offered(request: web.Request, header: str) -> list[str]:
    values: list[str] = []
    for raw in request.headers.getall(header, ()):
        values.extend(v.strip() for v in raw.split(",") if v.strip())
    return values


async def serve_remote_command(
    request: web.Request, options: ExecOptions, run: RunSession
) -> web.StreamResponse:
    """Answer one exec or attach request on whichever protocol it asks for.

    A WebSocket request whose subprotocols we do not speak, and a request without
    an upgrade, get a plain error answer (never a 101), so a client can fall back.
    """
    upgrade = request.headers.get("Upgrade", "").lower()
    if upgrade == "websocket":
        protocol = pick_protocol(_offered(request, "Sec-WebSocket-Protocol"), EXEC_PROTOCOLS)
        if protocol is None:
            return web.Response(
                status=400,
                text="unable to upgrade: no supported "
                f"WebSocket subprotocol (supported: {', '.join(EXEC_PROTOCOLS)})",
            )
        return await _serve_websocket(request, protocol, options, run)
    if upgrade.startswith("spdy/3.1"):
        offered = _offered(request, "X-Stream-Protocol-Version")
        protocol = pick_protocol(offered, SPDY_PROTOCOLS) if offered else "channel.k8s.io"
        if protocol is None:
            return web.Response(
                status=403,
                text="unable to upgrade: unable to negotiate protocol: client "
                f"supports {offered}, server accepts {list(SPDY_PROTOCOLS)}",
            )
        return await _serve_spdy(request, protocol, options, run)
    return web.Response(status=400, text="Upgrade request required")


def _final_status(
    protocol: str, code: int | None, error: BaseException | None, cmd: Sequence[str]
) -> bytes:
    """What the error stream carries at the end: a Status (v4 and later) or, for
    older protocols, just an error's message (nothing on success)."""
    if protocol.startswith(("v4.", "v5.")):
        if error is not None:
            status = status_failure(str(error))
        elif code:
            status = status_exit(code, cmd)
        else:
            status = status_success()
        return json.dumps(status, separators=(",", ":")).encode()
    if error is not None:
        return str(error).encode()
    if code:
        return f"command terminated with non-zero exit code: exit code {code}".encode()
    return b""


async def _run_session(run: RunSession, io: StreamIO) -> tuple[int | None, BaseException | None]:
    try:
        return await run(io), None
    except KubeletKitError as exc:
        return None, exc
    except (ConnectionError, OSError) as exc:  # the client went away
        log.debug("stream session ended: %s", exc)
        return None, exc


# -- WebSocket -----------------------------------------------------------------------

_STDIN, _STDOUT, _STDERR, _ERROR, _RESIZE = range(5)


async def _serve_websocket(
    request: web.Request, protocol: str, options: ExecOptions, run: RunSession
) -> web.StreamResponse:
    ws = web.WebSocketResponse(protocols=(protocol,), max_msg_size=0)
    await ws.prepare(request)
    conn = ChannelConnection(ws, protocol)
    conn.start()
    try:
        # The session stands: an empty message on the lowest channel we write.
        first = _STDOUT if options.stdout else _STDERR if options.stderr else _ERROR
        await conn.send(first, b"") if conn.base64 else await conn.send_raw(bytes([first]))
        io = StreamIO(
            stdin=conn.source(_STDIN) if options.stdin else None,
            stdout=conn.sink(_STDOUT) if options.stdout else None,
            stderr=conn.sink(_STDERR) if options.stderr and not options.tty else None,
            tty=options.tty,
            resize=resize_events(conn.source(_RESIZE)) if options.tty else None,
        )
        code, error = await _run_session(run, io)
        message = _final_status(protocol, code, error, options.command)
        with contextlib.suppress(ConnectionError, RuntimeError):
            if message:
                await conn.send(_ERROR, message)
    finally:
        await conn.close()
    return ws


# -- SPDY ----------------------------------------------------------------------------


async def _serve_spdy(
    request: web.Request, protocol: str, options: ExecOptions, run: RunSession
) -> web.StreamResponse:
    from kubelet_kit.streams.spdy import SpdySession
    from kubelet_kit.streams.upgrade import accept_upgrade

    reader, writer = await accept_upgrade(
        request, "SPDY/3.1", {"X-Stream-Protocol-Version": protocol}
    )
    session = SpdySession(reader, writer, server=True)
    async with session:
        wanted = {"error"}
        if options.stdin:
            wanted.add("stdin")
        if options.stdout:
            wanted.add("stdout")
        if options.stderr and not options.tty:
            wanted.add("stderr")
        if options.tty and protocol != "v2.channel.k8s.io" and protocol != "channel.k8s.io":
            wanted.add("resize")
        streams: dict[str, Any] = {}

        async def gather() -> None:
            while not wanted <= streams.keys():
                stream = await session.accept_stream()
                kind = stream.headers.get("streamtype", "")
                if kind in ("error", "stdin", "stdout", "stderr", "resize"):
                    streams[kind] = stream
                else:
                    await stream.reset()

        try:
            await asyncio.wait_for(gather(), STREAM_CREATION_TIMEOUT)
        except (TimeoutError, ConnectionError, EOFError) as exc:
            log.info(
                "exec/attach: the client's streams did not arrive: %s", exc or type(exc).__name__
            )
            return _upgraded_response()
        io = StreamIO(
            stdin=streams.get("stdin"),
            stdout=streams.get("stdout"),
            stderr=streams.get("stderr"),
            tty=options.tty,
            resize=resize_events(streams["resize"]) if "resize" in streams else None,
        )
        code, error = await _run_session(run, io)
        message = _final_status(protocol, code, error, options.command)
        error_stream = streams["error"]
        with contextlib.suppress(ConnectionError, OSError, EOFError):
            if message:
                await error_stream.write(message)
            await error_stream.close()
            for name in ("stdout", "stderr"):
                if name in streams:
                    await streams[name].close()
    return _upgraded_response()


def _upgraded_response() -> web.StreamResponse:
    # The connection was taken over; aiohttp is told it is finished.
    from kubelet_kit.streams.upgrade import upgraded_response

    return upgraded_response()
