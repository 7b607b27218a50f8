"""Exec, attach and port-forward plumbing of the host-process runtime.

:class:`~kubelet_kit.runtimes.host.HostProcessRuntime` decides *what* runs (the
container's environment, namespaces, cgroups); this module wires a running
process, a shim's attach socket or a TCP connection to a client's
:class:`~kubelet_kit.container.streams.StreamIO`, without blocking the event loop:
descriptors are non-blocking and waited on with ``loop.add_reader``/``add_writer``,
and the one blocking step of a port-forward (joining a network namespace) runs in
a thread of its own.

Terminal behaviour follows the kubelet's runtimes where they agree and a terminal
where they do not:

* exec with ``tty`` gives the command a pseudo-terminal as its controlling
  terminal (a new session), stdout only; each size from ``resize`` is applied
  with ``TIOCSWINSZ`` (which also sends the process SIGWINCH). A size that the
  client sent before the process starts is applied before it starts.
* When the client's stdin ends, a pipe is closed (the command reads EOF); a
  terminal is sent EOT (``^D``, twice when a line is pending), which a reader in
  canonical mode sees as end of file. (containerd's shim closes the terminal
  instead, which hangs the session up and loses the output still to come; EOT
  keeps that output flowing to the client.)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import signal
import socket
import struct
import termios
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO, TerminalSize
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.runtimes import _attach
from kubelet_kit.runtimes._shim import enter_netns

__all__ = [
    "Spawn",
    "attach_session",
    "exec_session",
    "forward_port",
    "set_winsize",
    "take_controlling_tty",
]

_READ_SIZE = 65536
#: How long output may still drain once the command has exited (a descendant that
#: keeps the pipe or terminal open must not hold the session forever).
DRAIN_TIMEOUT = 1.0
#: How long a tty exec waits for the client's first size before starting the
#: command: kubectl sends it right after the streams open, and a program that
#: reads its size once at start should see it. Real time: it waits on the client.
FIRST_RESIZE_WAIT = 0.2
_EOT = b"\x04"
#: How long an attach whose stdin has ended still waits for more output: the
#: container's answer to the last input, not a stream that never stops.
ATTACH_QUIET = 0.25

#: ``spawn(stdin, stdout, stderr, tty)``: start the command on those descriptors
#: (or ``asyncio.subprocess.DEVNULL``); with ``tty`` they are a terminal to make
#: the controlling one. Raises OSError when the command cannot be started.
Spawn = Callable[[int, int, int, bool], Awaitable[asyncio.subprocess.Process]]


# ---------------------------------------------------------------- descriptors


async def _wait_fd(fd: int, *, writable: bool) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writable:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writable:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _read_fd(fd: int) -> bytes:
    """Up to 64 KiB from a non-blocking descriptor; ``b""`` at its end."""
    while True:
        try:
            return os.read(fd, _READ_SIZE)
        except BlockingIOError:
            await _wait_fd(fd, writable=False)
        except OSError as exc:
            # A terminal's master side reads EIO once no process holds the slave.
            if exc.errno == errno.EIO:
                return b""
            raise


async def _write_fd(fd: int, data: bytes) -> None:
    """All of ``data`` to a non-blocking descriptor."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await _wait_fd(fd, writable=True)


def set_winsize(fd: int, size: TerminalSize) -> None:
    """Set the terminal size of the pty ``fd`` (either side) to ``size``."""
    packed = struct.pack("HHHH", max(0, size.height), max(0, size.width), 0, 0)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, packed)


def take_controlling_tty() -> None:
    """``preexec_fn`` of a command on a terminal: make its stdin (the terminal) the
    controlling terminal of the new session the child leads (``setsid`` ran just
    before). Only a C call, as is safe between fork and exec."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class _Fds:
    """Descriptors a session owns, each closed exactly once."""

    def __init__(self) -> None:
        self._open: set[int] = set()

    def add(self, *fds: int) -> None:
        self._open.update(fds)

    def close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)

    def close_all(self) -> None:
        for fd in list(self._open):
            self.close(fd)


async def _close_sink(sink: ByteSink | None) -> None:
    if sink is not None:
        with contextlib.suppress(OSError):
            await sink.close()


async def _copy_out(fd: int, sink: ByteSink | None) -> None:
    """Copy ``fd`` to ``sink`` until its end. A client that went away stops
    receiving, but the descriptor is still drained, so the command never blocks
    on a full pipe or terminal."""
    alive = sink is not None
    while data := await _read_fd(fd):
        if alive and sink is not None:
            try:
                await sink.write(data)
            except OSError:
                alive = False


async def _next_size(sizes: AsyncIterator[TerminalSize]) -> TerminalSize | None:
    try:
        return await anext(sizes)
    except StopAsyncIteration:
        return None


async def _follow_sizes(
    sizes: AsyncIterator[TerminalSize],
    apply: Callable[[TerminalSize], None],
    first: asyncio.Future[TerminalSize | None] | None,
) -> None:
    if first is not None:
        size = await first
        if size is None:
            return
        apply(size)
    async for size in sizes:
        apply(size)


async def _first_size_then_follow(
    sizes: AsyncIterator[TerminalSize] | None, apply: Callable[[TerminalSize], None]
) -> asyncio.Task[None] | None:
    """Apply the client's first size if it comes within :data:`FIRST_RESIZE_WAIT`;
    return the task that applies the rest (None without sizes)."""
    if sizes is None:
        return None
    first: asyncio.Future[TerminalSize | None] = asyncio.ensure_future(_next_size(sizes))
    await asyncio.wait({first}, timeout=FIRST_RESIZE_WAIT)
    if first.done():
        size = first.result()
        if size is None:
            return None
        apply(size)
        return asyncio.ensure_future(_follow_sizes(sizes, apply, None))
    return asyncio.ensure_future(_follow_sizes(sizes, apply, first))


async def _cancel(*tasks: asyncio.Future[Any] | None) -> None:
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    await asyncio.gather(*live, return_exceptions=True)


def _exit_code(returncode: int | None) -> int:
    code = returncode or 0
    # asyncio says -N for a process killed by signal N; a shell and the CRI say 128 + N.
    return 128 - code if code < 0 else code


# ----------------------------------------------------------------------- exec


async def exec_session(spawn: Spawn, argv0: str, io: StreamIO) -> int:
    """Run one exec on ``io`` and return its exit code once its output is written.

    The command is started by ``spawn`` on pipes (stdin only if ``io.stdin``; a
    stream without a client side goes to /dev/null) or, with ``io.tty``, on a new
    pseudo-terminal. A command that cannot be started exits 127 (not found) or
    126, with a shell's message on its error stream (stdout with a tty). Closes
    ``io.stdout`` and ``io.stderr``. Cancelling the session kills the command's
    process group (its session).
    """
    fds = _Fds()
    proc: asyncio.subprocess.Process | None = None
    tasks: list[asyncio.Future[None]] = []
    stdin_task: asyncio.Task[None] | None = None
    resize_task: asyncio.Task[None] | None = None
    devnull = asyncio.subprocess.DEVNULL
    try:
        if io.tty:
            master, slave = os.openpty()
            fds.add(master, slave)
            os.set_blocking(master, False)
            resize_task = await _first_size_then_follow(
                io.resize, lambda size: set_winsize(master, size)
            )
            try:
                proc = await spawn(slave, slave, slave, True)
            except OSError as exc:
                return await _start_failed(exc, argv0, io.stdout)
            finally:
                # Only the command holds the slave now, so its end is the master's EIO.
                fds.close(slave)
            tasks.append(asyncio.ensure_future(_copy_out(master, io.stdout)))
            if io.stdin is not None:
                stdin_task = asyncio.ensure_future(_copy_in(io.stdin, master, fds, tty=True))
        else:
            child_ends: list[int] = []
            ends: list[int] = []
            ours: list[int | None] = []
            for wanted, reading in ((io.stdin, False), (io.stdout, True), (io.stderr, True)):
                if wanted is None:
                    ends.append(devnull)
                    ours.append(None)
                    continue
                r, w = os.pipe()
                fds.add(r, w)
                mine, theirs = (r, w) if reading else (w, r)
                os.set_blocking(mine, False)
                child_ends.append(theirs)
                ends.append(theirs)
                ours.append(mine)
            try:
                proc = await spawn(ends[0], ends[1], ends[2], False)
            except OSError as exc:
                return await _start_failed(exc, argv0, io.stderr)
            finally:
                for fd in child_ends:
                    fds.close(fd)
            in_fd, out_fd, err_fd = ours
            if io.stdin is not None and in_fd is not None:
                stdin_task = asyncio.ensure_future(_copy_in(io.stdin, in_fd, fds, tty=False))
            for out, sink in ((out_fd, io.stdout), (err_fd, io.stderr)):
                if out is not None:
                    tasks.append(asyncio.ensure_future(_copy_out(out, sink)))
        await proc.wait()
        await _cancel(stdin_task, resize_task)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=DRAIN_TIMEOUT)
            await _cancel(*late)
        return _exit_code(proc.returncode)
    finally:
        if proc is not None and proc.returncode is None:
            # The session was cancelled (the client went away): end the command too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        await _cancel(stdin_task, resize_task, *tasks)
        fds.close_all()
        await _close_sink(io.stdout)
        await _close_sink(io.stderr)


async def _copy_in(source: ByteSource, fd: int, fds: _Fds, *, tty: bool) -> None:
    """Copy the client's stdin to the command until it ends, then end the
    command's stdin: close the pipe, or send EOT on a terminal."""
    last = b"\n"
    try:
        while data := await source.read(_READ_SIZE):
            await _write_fd(fd, data)
            last = data[-1:]
        if tty:
            # EOT at the start of a line is end of file; after a partial line it only
            # hands that line to the reader, so a second one is needed.
            await _write_fd(fd, _EOT if last in (b"\n", b"\r") else _EOT * 2)
    except OSError:
        pass  # the command closed its stdin or exited: nothing more to give it
    finally:
        if not tty:
            fds.close(fd)


async def _start_failed(exc: OSError, argv0: str, sink: ByteSink | None) -> int:
    # What a shell says and returns for a command it cannot run.
    if sink is not None:
        with contextlib.suppress(OSError):
            await sink.write(f"{argv0}: {exc.strerror}\n".encode())
    return 127 if isinstance(exc, FileNotFoundError) else 126


# ------------------------------------------------------------------ port-forward


async def _netns_socket(netns: str, family: socket.AddressFamily) -> socket.socket:
    """A new TCP socket of the network namespace bind-mounted at ``netns``.

    ``setns`` moves only the calling thread, and a socket stays in the namespace it
    was made in: a thread of its own joins the namespace, makes the socket and
    ends (so no thread of a pool is ever left in the pod's network)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[socket.socket] = loop.create_future()

    def deliver(sock: socket.socket | None, exc: BaseException | None) -> None:
        if done.cancelled():
            if sock is not None:
                sock.close()
        elif exc is not None:
            done.set_exception(exc)
        elif sock is not None:
            done.set_result(sock)

    def work() -> None:
        try:
            enter_netns(netns)
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            loop.call_soon_threadsafe(deliver, None, exc)
            return
        loop.call_soon_threadsafe(deliver, sock, None)

    threading.Thread(target=work, name="netns-socket", daemon=True).start()
    return await done


async def _connect(netns: str, port: int) -> socket.socket:
    """A connection to ``localhost:port`` in ``netns`` ("": this process's network),
    over IPv4, else IPv6, as containerd tries them.

    Raises:
        OSError: neither address could be connected to (the IPv4 error).
    """
    loop = asyncio.get_running_loop()
    first: OSError | None = None
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            sock = (
                await _netns_socket(netns, family)
                if netns
                else socket.socket(family, socket.SOCK_STREAM)
            )
        except OSError as exc:
            first = first or exc
            continue
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (host, port))
        except OSError as exc:
            sock.close()
            first = first or exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    assert first is not None
    raise first


async def forward_port(
    netns: str, port: int, source: ByteSource, sink: ByteSink, *, where: str
) -> None:
    """Connect to ``localhost:port`` in ``netns`` and copy bytes both ways.

    The client's end of input half-closes the connection (the server still
    answers); the session ends when the server closes its side, either side
    fails, or the client stops receiving. Closes ``sink``.

    Raises:
        ContainerRuntimeError: the connection failed (nothing listens there);
            the message names ``where`` and the port.
    """
    try:
        sock = await _connect(netns, port)
    except OSError as exc:
        await _close_sink(sink)
        raise ContainerRuntimeError(
            f"port-forward to {where}: failed to connect to localhost:{port}: {exc.strerror or exc}"
        ) from None
    reader, writer = await asyncio.open_connection(sock=sock)

    async def upstream() -> None:
        while data := await source.read(_READ_SIZE):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def downstream() -> None:
        while data := await reader.read(_READ_SIZE):
            await sink.write(data)

    up = asyncio.ensure_future(upstream())
    down = asyncio.ensure_future(downstream())
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if up in done and up.exception() is None:
            # The client is done sending; the server may still be answering.
            await asyncio.wait({down})
    finally:
        await _cancel(up, down)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        await _close_sink(sink)


# ------------------------------------------------------------------------ attach


async def attach_session(
    state_dir: Path, io: StreamIO, *, stdin: bool, stdin_once: bool, tty: bool, where: str
) -> None:
    """Attach ``io`` to a container through its shim's attach socket.

    ``stdin``, ``stdin_once`` and ``tty`` are the container's own settings (the
    kubelet uses the container's ``tty``, whatever the client asked for). The
    client's stdin is sent only to a container with ``stdin``. The session ends
    when the container exits (the shim closes the socket), when the client's
    stdin has ended and the output has gone quiet for :data:`ATTACH_QUIET`
    (except with ``stdin_once``: the container's stdin is closed then, and its
    output keeps coming until it exits), or on cancellation. Closes
    ``io.stdout`` and ``io.stderr``.

    Raises:
        ContainerRuntimeError: the shim offers no attach socket (``where`` names
            the container).
    """
    dir_fd = os.open(state_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        reader, writer = await asyncio.open_unix_connection(_attach.socket_path(dir_fd))
    except OSError as exc:
        await _close_sink(io.stdout)
        await _close_sink(io.stderr)
        raise ContainerRuntimeError(
            f"attach to {where}: its shim offers no attach socket ({exc.strerror or exc}); "
            "it was started by an older runtime, or has just exited"
        ) from None
    finally:
        os.close(dir_fd)
    source = io.stdin if stdin else None
    lock = asyncio.Lock()  # frames from the stdin and resize tasks must not interleave

    async def send(data: bytes) -> None:
        async with lock:
            writer.write(data)
            await writer.drain()

    flowing = asyncio.Event()  # set by each chunk of output

    async def output() -> None:
        sinks = {_attach.STDOUT: io.stdout, _attach.STDERR: None if tty else io.stderr}
        header = _attach.header_size()
        while True:
            try:
                kind, length = _attach.parse_header(await reader.readexactly(header))
                payload = await reader.readexactly(length)
            except (asyncio.IncompleteReadError, _attach.FrameError, OSError):
                return  # the container exited (or its shim did)
            sink = sinks.get(kind)
            if sink is not None:
                flowing.set()
                try:
                    await sink.write(payload)
                except OSError:
                    return  # the client went away

    async def input_() -> None:
        assert source is not None
        while data := await source.read(_READ_SIZE):
            await send(_attach.frame(_attach.STDIN, data))
        await send(_attach.frame(_attach.STDIN_EOF))

    async def sizes() -> None:
        assert io.resize is not None
        async for size in io.resize:
            await send(_attach.resize_frame(size.width, size.height))

    tasks: list[asyncio.Future[None]] = []
    try:
        await send(_attach.frame(_attach.HELLO, bytes([_attach.HELLO_STDIN if source else 0])))
        out = asyncio.ensure_future(output())
        tasks.append(out)
        in_task = asyncio.ensure_future(input_()) if source is not None else None
        if in_task is not None:
            tasks.append(in_task)
        if tty and io.resize is not None:
            tasks.append(asyncio.ensure_future(sizes()))
        waiting = {out} if in_task is None else {out, in_task}
        while waiting:
            done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if out in done:
                break
            if in_task in done and in_task.exception() is not None:
                break  # the shim went away
            if in_task in done and not stdin_once:
                # The client's stdin is over, and with it this attach, once the
                # answer to its last input has come (the output goes quiet).
                while not out.done():
                    flowing.clear()
                    await asyncio.wait({out}, timeout=ATTACH_QUIET)
                    if not flowing.is_set():
                        break
                break
    except OSError:
        pass  # the shim went away mid-write: the container is ending
    finally:
        await _cancel(*tasks)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        await _close_sink(io.stdout)
        await _close_sink(io.stderr)
