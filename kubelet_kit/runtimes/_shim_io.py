"""The shim's I/O loop: a container's output to its log and attached clients, and
the clients' stdin and terminal sizes to the container.

One ``poll`` loop, in the shim process (see :mod:`kubelet_kit.runtimes._shim`),
over the process's output descriptors (two pipes, or one terminal), its stdin
(a pipe or the same terminal) when it has one, the attach socket
(:mod:`kubelet_kit.runtimes._attach`) and each attached client. Nothing in it
blocks: a container that does not read its stdin holds the clients' input back
(up to a buffer), and a client that does not read its output is dropped once too
far behind, so neither can stop the log.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

from kubelet_kit.container.logs import CRILogWriter, LogStream
from kubelet_kit.runtimes import _attach

_READ_SIZE = 65536
#: Client input held for a container that is not reading its stdin; past it the
#: clients are not read (their writes wait) until the container catches up.
_STDIN_BUFFER = 256 * 1024
#: Output held for one attached client; a client further behind is dropped.
_CLIENT_BUFFER = 4 * 1024 * 1024
#: After the main process exits, its leftovers are killed, so the output reaches
#: its end soon; this bound only guards a descendant that escaped the process
#: group while holding the output.
_QUIET_AFTER_EXIT = 1.0
_EOT = b"\x04"
_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_OUT = select.POLLOUT | select.POLLHUP | select.POLLERR


def open_log(log_path: str) -> int | None:
    """Open (append) the CRI log file, making its directory; None without a path."""
    if not log_path:
        return None
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    return os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o640)


def kill_group(pgid: int) -> None:
    """SIGKILL a process group, if it still exists."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def has_exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited, without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def listen(state_dir: Path) -> socket.socket | None:
    """The attach socket in ``state_dir``, listening (None if it cannot be made:
    the container then runs without attach, which is said on stderr)."""
    path = state_dir / _attach.ATTACH_SOCKET
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a shim that was killed
    try:
        dir_fd = os.open(state_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(_attach.socket_path(dir_fd))
                os.chmod(path, 0o600)
                sock.listen(8)
            except OSError:
                sock.close()
                raise
        finally:
            os.close(dir_fd)
    except OSError as exc:
        print(f"attach socket {path}: {exc}", file=sys.stderr)
        return None
    sock.setblocking(False)
    return sock


class ProcessIO:
    """The descriptors the shim holds for its process.

    Attributes:
        outputs: Read ends of the process's output, with the log stream and
            frame kind of each (a terminal is one output, stdout).
        stdin: Where the container's stdin is written: a pipe's write end, the
            terminal, or None (the process has /dev/null, or a terminal without
            ``stdin``).
        terminal: The terminal's master side, for sizes (None without ``tty``).
    """

    def __init__(
        self, outputs: dict[int, tuple[LogStream, int]], stdin: int | None, terminal: int | None
    ) -> None:
        self.outputs = outputs
        self.stdin = stdin
        self.terminal = terminal


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = _attach.FrameReader()
        self.out = bytearray()
        self.has_stdin = False
        self.stdin_done = False


class Supervisor:
    """Copies a process's I/O until its output ends (see the module doc).

    Args:
        proc: The container's process.
        pio: Its descriptors (owned from now on; closed by :meth:`close`).
        log_fd: The log file (None: output is only streamed to clients).
        log_path: Where the log is opened again after SIGUSR1.
        max_line: Longest log record before a line is split.
        wakeup_fd: Readable when a signal arrived.
        take_reopen: True once per SIGUSR1 received.
        listener: The attach socket (None: no attach).
        stdin_once: Close the container's stdin when the first attached client's
            stdin ends.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        pio: ProcessIO,
        *,
        log_fd: int | None,
        log_path: str,
        max_line: int,
        wakeup_fd: int | None,
        take_reopen: Callable[[], bool],
        listener: socket.socket | None,
        stdin_once: bool,
    ) -> None:
        self._proc = proc
        self._pio = pio
        self._log = log_fd
        self._log_path = log_path
        self._wakeup = wakeup_fd
        self._take_reopen = take_reopen
        self._listener = listener
        self._stdin_once = stdin_once
        self._stdin_once_used = False
        self._stdin_pending = bytearray()
        self._stdin_closing = False
        self._last_in = b"\n"
        self._clients: dict[int, _Client] = {}
        self._writers = {
            fd: CRILogWriter(stream, self._to_log, time.time_ns, max_line)
            for fd, (stream, _) in pio.outputs.items()
        }
        self._open_outputs = set(pio.outputs)
        for fd in (*pio.outputs, *(() if pio.stdin is None else (pio.stdin,))):
            os.set_blocking(fd, False)

    # ------------------------------------------------------------------ log

    def _to_log(self, record: bytes) -> None:
        if self._log is not None:
            with contextlib.suppress(OSError):  # a full disk must not stop the drain
                os.write(self._log, record)

    def _reopen_log(self) -> None:
        try:
            new = open_log(self._log_path)
        except OSError:
            return  # keep writing to the old file
        old, self._log = self._log, new
        if old is not None:
            os.close(old)

    # ----------------------------------------------------------------- loop

    def run(self) -> None:
        """Copy until the process has exited and its output has ended."""
        try:
            pidfd: int | None = os.pidfd_open(self._proc.pid)
        except OSError:
            pidfd = None
        exited = False
        quiet_until = 0.0
        while self._open_outputs:
            if exited:
                remaining = quiet_until - time.monotonic()
                if remaining <= 0:
                    break
                timeout_ms = int(remaining * 1000) + 1
            else:
                timeout_ms = -1 if pidfd is not None else 200
            poller = select.poll()
            for fd, mask in self._interest(None if exited else pidfd).items():
                poller.register(fd, mask)
            try:
                events = poller.poll(timeout_ms)
            except InterruptedError:
                continue
            for fd, mask in events:
                if fd == self._wakeup:
                    with contextlib.suppress(OSError):
                        os.read(fd, 64)
                    if self._take_reopen():
                        self._reopen_log()
                elif fd == pidfd:
                    exited = True
                    quiet_until = time.monotonic() + _QUIET_AFTER_EXIT
                    kill_group(self._proc.pid)
                elif self._listener is not None and fd == self._listener.fileno():
                    self._accept()
                else:
                    if fd in self._open_outputs and mask & _IN and self._read_output(fd):
                        quiet_until = time.monotonic() + _QUIET_AFTER_EXIT
                    if fd == self._pio.stdin and mask & _OUT:
                        self._flush_stdin()
                    client = self._clients.get(fd)
                    if client is not None:
                        self._serve(client, mask)
            if pidfd is None and not exited and has_exited(self._proc.pid):
                exited = True
                quiet_until = time.monotonic() + _QUIET_AFTER_EXIT
                kill_group(self._proc.pid)
        for writer in self._writers.values():
            writer.close()
        if pidfd is not None:
            os.close(pidfd)

    def _interest(self, pidfd: int | None) -> dict[int, int]:
        interest: dict[int, int] = {}

        def want(fd: int, mask: int) -> None:
            interest[fd] = interest.get(fd, 0) | mask

        for fd in self._open_outputs:
            want(fd, select.POLLIN)
        for extra in (pidfd, self._wakeup):
            if extra is not None:
                want(extra, select.POLLIN)
        if self._listener is not None:
            want(self._listener.fileno(), select.POLLIN)
        if self._pio.stdin is not None and self._stdin_pending:
            want(self._pio.stdin, select.POLLOUT)
        for fd, client in self._clients.items():
            # A container not reading its stdin holds the clients' input back.
            mask = select.POLLIN if len(self._stdin_pending) < _STDIN_BUFFER else 0
            want(fd, mask | (select.POLLOUT if client.out else 0))
        return interest

    # --------------------------------------------------------------- output

    def _read_output(self, fd: int) -> bool:
        """Read one chunk of output; False at its end (the descriptor is closed)."""
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return False
            data = b""  # EIO: the terminal's last slave is closed
        if not data:
            self._open_outputs.discard(fd)
            if fd == self._pio.terminal:
                # The terminal is gone with it: nothing more to write or resize.
                self._pio.terminal = None
                if self._pio.stdin == fd:
                    self._pio.stdin = None
            os.close(fd)
            return False
        self._writers[fd].write(data)
        packet = _attach.frame(self._pio.outputs[fd][1], data)
        for client in list(self._clients.values()):
            client.out += packet
            if len(client.out) > _CLIENT_BUFFER:
                print("an attached client fell too far behind: dropped", file=sys.stderr)
                self._drop(client)
        return True

    # ---------------------------------------------------------------- stdin

    def _give_stdin(self, data: bytes) -> None:
        if self._pio.stdin is None or self._stdin_closing:
            return  # the container has no stdin (any more): the input is dropped
        self._stdin_pending += data
        self._flush_stdin()

    def _flush_stdin(self) -> None:
        fd = self._pio.stdin
        if fd is None:
            self._stdin_pending.clear()
            return
        while self._stdin_pending:
            try:
                n = os.write(fd, self._stdin_pending)
            except BlockingIOError:
                return
            except OSError:
                # The process closed its stdin or exited: it takes no more.
                self._stdin_pending.clear()
                self._end_stdin()
                return
            self._last_in = bytes(self._stdin_pending[n - 1 : n])
            del self._stdin_pending[:n]
        if self._stdin_closing:
            self._end_stdin()

    def _close_stdin(self) -> None:
        """End the container's stdin once what is pending is written: close the
        pipe, or send EOT on a terminal (twice after a partial line, since the
        first only hands that line to the reader)."""
        if self._pio.stdin is None or self._stdin_closing:
            return
        self._stdin_closing = True
        if self._pio.stdin == self._pio.terminal:
            last = self._stdin_pending[-1:] if self._stdin_pending else self._last_in
            self._stdin_pending += _EOT if last in (b"\n", b"\r") else _EOT * 2
        self._flush_stdin()

    def _end_stdin(self) -> None:
        fd, self._pio.stdin = self._pio.stdin, None
        if fd is not None and fd != self._pio.terminal and fd not in self._open_outputs:
            os.close(fd)

    def _stdin_ended(self, client: _Client) -> None:
        if client.stdin_done:
            return
        client.stdin_done = True
        if self._stdin_once and not self._stdin_once_used:
            self._stdin_once_used = True
            self._close_stdin()

    # -------------------------------------------------------------- clients

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                print(f"attach accept: {exc}", file=sys.stderr)
                return
            sock.setblocking(False)
            self._clients[sock.fileno()] = _Client(sock)

    def _drop(self, client: _Client) -> None:
        self._clients.pop(client.sock.fileno(), None)
        client.sock.close()
        if client.has_stdin:
            # An attach that ended without its stdin's end ended its stdin too.
            self._stdin_ended(client)

    def _serve(self, client: _Client, mask: int) -> None:
        if mask & select.POLLOUT and client.out:
            try:
                sent = client.sock.send(client.out)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._drop(client)
                return
            del client.out[:sent]
        if not mask & _IN:
            return
        try:
            data = client.sock.recv(_READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        try:
            frames = client.frames.feed(data)
        except _attach.FrameError as exc:
            print(f"attach client: {exc}: dropped", file=sys.stderr)
            self._drop(client)
            return
        for kind, payload in frames:
            if kind == _attach.HELLO:
                client.has_stdin = bool(payload[:1]) and bool(payload[0] & _attach.HELLO_STDIN)
            elif kind == _attach.STDIN:
                self._give_stdin(payload)
            elif kind == _attach.STDIN_EOF:
                self._stdin_ended(client)
            elif kind == _attach.RESIZE:
                self._resize(payload)

    def _resize(self, payload: bytes) -> None:
        if self._pio.terminal is None:
            return
        try:
            width, height = _attach.parse_resize(payload)
            fcntl.ioctl(
                self._pio.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0)
            )
        except (OSError, _attach.FrameError) as exc:
            print(f"attach resize: {exc}", file=sys.stderr)

    # ---------------------------------------------------------------- close

    def close(self, state_dir: Path) -> None:
        """Hand each client what it still has to receive (a bounded wait), then
        close the clients, the attach socket and every descriptor left."""
        deadline = time.monotonic() + 1.0
        for client in list(self._clients.values()):
            with contextlib.suppress(OSError):
                client.sock.settimeout(max(0.01, deadline - time.monotonic()))
                client.sock.sendall(client.out)
            client.sock.close()
        self._clients.clear()
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                (state_dir / _attach.ATTACH_SOCKET).unlink()
        for fd in {*self._open_outputs, self._pio.stdin, self._pio.terminal}:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._open_outputs.clear()
        self._pio.stdin = self._pio.terminal = None
        if self._log is not None:
            os.close(self._log)
            self._log = None
