"""``/containerLogs``: the kubelet's log options and the reading of CRI log files.

Options are the kubelet's (``PodLogOptions``): ``tailLines`` (>= 0), ``limitBytes``
(> 0), ``sinceSeconds`` (> 0) or ``sinceTime`` (RFC 3339; not both),
``timestamps``, ``previous`` and ``follow``. Files are found where the kubelet puts
them: ``<podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log``; the
highest restart count is the current container, the one before it the previous.

The tail is taken first, then the since filter, then the byte limit, as the
kubelet's log reader does. With ``timestamps`` each record is prefixed by its
time in RFC 3339 with nine fraction digits (the kubelet's RFC3339NanoFixed).

A log directory may be writable by the container (a hostPath mount of the pod
log directory), so a log file is opened as hostile input: never through a
symbolic link, never waiting on a FIFO, only if it is a regular file that really
lies under the pod log directory (:func:`open_log_file`). A tail is found by
reading backwards from the end, and the file is read in bounded chunks, so
neither time nor memory grows with the size of the log.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
import re
import stat
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import BinaryIO

import attrs

from kubelet_kit.clock import Clock
from kubelet_kit.container.logs import LogRecord, parse_line, parse_timestamp, tail_start
from kubelet_kit.errors import FieldError

__all__ = [
    "LogOptions",
    "RefusedLogFileError",
    "container_log_dir",
    "find_log_file",
    "format_fixed_timestamp",
    "open_log_file",
    "parse_log_options",
    "stream_log",
]

_NS = 1_000_000_000
_LOG_NAME = re.compile(r"^(\d+)\.log$")
# Longest record line read at once: containerd splits lines at 16 KiB, so anything
# longer is not a record of a CRI runtime.
_MAX_LINE = 1 << 20
# What is read from the file in one go: in a worker thread for what the log holds
# when the request comes, on the loop (a few hundred microseconds at most) for
# each poll of a follow.
_READ_CHUNK = 1 << 20
_FOLLOW_CHUNK = 64 << 10

log = logging.getLogger("kubelet_kit.server")


@attrs.frozen
class LogOptions:
    """How to read a container's log (the kubelet's PodLogOptions).

    Attributes:
        tail_lines: Only the last this many records (None: all).
        limit_bytes: Stop after this many bytes of output (None: no limit).
        since_ns: Only records at or after this time, in ns since the epoch.
        timestamps: Prefix each record with its timestamp.
        previous: Read the previous (terminated) container instead of the current.
        follow: Keep streaming new records while the container runs.
    """

    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_ns: int | None = None
    timestamps: bool = False
    previous: bool = False
    follow: bool = False


def _parse_bool(name: str, value: str, errors: list[FieldError]) -> bool:
    lowered = value.lower()
    if lowered in ("", "1", "t", "true"):
        return True
    if lowered in ("0", "f", "false"):
        return False
    errors.append(FieldError(name, f'Invalid value: "{value}": not a boolean'))
    return False


def _parse_int(name: str, value: str, errors: list[FieldError]) -> int | None:
    try:
        return int(value, 10)
    except ValueError:
        errors.append(FieldError(name, f'Invalid value: "{value}": not an integer'))
        return None


def parse_log_options(query: Mapping[str, str], now: float) -> tuple[LogOptions, list[FieldError]]:
    """Read the query parameters of a ``/containerLogs`` request.

    Args:
        query: The query parameters.
        now: The current time (epoch seconds), for ``sinceSeconds``.

    Returns:
        The options and every problem found (each naming its parameter); the
        options are meaningful only when there is no problem.
    """
    errors: list[FieldError] = []
    tail = limit = since_seconds = None
    since_ns: int | None = None
    if "tailLines" in query:
        tail = _parse_int("tailLines", query["tailLines"], errors)
        if tail is not None and tail < 0:
            errors.append(
                FieldError(
                    "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0"
                )
            )
    if "limitBytes" in query:
        limit = _parse_int("limitBytes", query["limitBytes"], errors)
        if limit is not None and limit < 1:
            errors.append(
                FieldError("limitBytes", f"Invalid value: {limit}: must be greater than 0")
            )
    if "sinceSeconds" in query:
        since_seconds = _parse_int("sinceSeconds", query["sinceSeconds"], errors)
        if since_seconds is not None:
            if since_seconds < 1:
                errors.append(
                    FieldError(
                        "sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0"
                    )
                )
            else:
                since_ns = int((now - since_seconds) * _NS)
    if "sinceTime" in query:
        if "sinceSeconds" in query:
            errors.append(
                FieldError("", "at most one of `sinceTime` or `sinceSeconds` may be specified")
            )
        try:
            since_ns = parse_timestamp(query["sinceTime"])
        except ValueError as exc:
            errors.append(FieldError("sinceTime", f"Invalid value: {exc}"))
    opts = LogOptions(
        tail_lines=tail,
        limit_bytes=limit,
        since_ns=since_ns,
        timestamps=_parse_bool("timestamps", query.get("timestamps", "false"), errors),
        previous=_parse_bool("previous", query.get("previous", "false"), errors),
        follow=_parse_bool("follow", query.get("follow", "false"), errors),
    )
    return opts, errors


def format_fixed_timestamp(timestamp_ns: int) -> str:
    """RFC 3339 in UTC with exactly nine fraction digits (Go's RFC3339NanoFixed)."""
    seconds, nanos = divmod(timestamp_ns, _NS)
    base = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}Z"


def container_log_dir(
    pod_logs_dir: Path, namespace: str, name: str, uid: str, container: str
) -> Path:
    """Where the kubelet keeps one container's log files.

    Raises:
        ValueError: the result would lie outside ``pod_logs_dir`` (a part holds a
            path separator or is ``.``/``..``).
    """
    for part in (namespace, name, uid, container):
        if not part or "/" in part or "\0" in part or part in (".", ".."):
            raise ValueError(f"{part!r} cannot be part of a log path")
    root = pod_logs_dir.resolve()
    path = (root / f"{namespace}_{name}_{uid}" / container).resolve()
    if root not in path.parents:
        raise ValueError(f"{path} is outside the pod log directory")
    return path


def find_log_file(directory: Path, previous: bool) -> Path | None:
    """The current (highest restart count) or previous log file in ``directory``."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    counts = sorted(int(m.group(1)) for n in names if (m := _LOG_NAME.match(n)))
    index = -2 if previous else -1
    if len(counts) < (2 if previous else 1):
        return None
    return directory / f"{counts[index]}.log"


class RefusedLogFileError(OSError):
    """A log path names something that must not be served: a symbolic link, a
    FIFO, a device, a directory, or a file outside the pod log directory."""


def _opened_path(fd: int, path: Path) -> Path:
    """The path of the file open as ``fd``, with every link resolved."""
    try:
        # Linux names the very file opened, so a directory swapped after the open
        # cannot fool the check.
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return Path(os.path.realpath(path))


def open_log_file(path: Path, root: Path) -> BinaryIO:
    """Open a container's log file for reading, as hostile input.

    The open does not follow a symbolic link in the last part of ``path`` and
    does not wait (a FIFO with no writer opens at once, then is refused); the
    open file must be a regular file whose resolved path lies under ``root``.

    Args:
        path: The log file.
        root: The pod log directory.

    Returns:
        The file, unbuffered (each read is one bounded system call).

    Raises:
        RefusedLogFileError: ``path`` is a link, not a regular file, or outside
            ``root``; the message says which, and never where a link points.
        OSError: the file cannot be opened (FileNotFoundError: it does not exist).
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):  # ELOOP, or EMLINK on some BSDs
            raise RefusedLogFileError(exc.errno, "is a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedLogFileError("not a regular file")
        real_root = Path(os.path.realpath(root))
        if real_root not in _opened_path(fd, path).parents:
            raise RefusedLogFileError("outside the pod log directory")
        return open(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _render(record: LogRecord, timestamps: bool) -> bytes:
    if timestamps:
        return format_fixed_timestamp(record.timestamp_ns).encode() + b" " + record.content
    return record.content


@attrs.define
class _Reader:
    """One open log file read forward from ``offset`` in bounded chunks; complete
    lines become rendered records, an unfinished last line waits in ``pending``."""

    file: BinaryIO
    offset: int
    opts: LogOptions
    pending: bytes = b""

    def read(self, size: int) -> tuple[bytes, int]:
        """Read at most ``size`` bytes; return the output they complete and how
        many bytes were read (0: at the end of the file)."""
        data = os.pread(self.file.fileno(), size, self.offset)
        self.offset += len(data)
        *complete, self.pending = (self.pending + data).split(b"\n")
        if len(self.pending) >= _MAX_LINE:
            self.pending = b""  # not a record: drop it rather than grow without bound
        out = bytearray()
        for raw in complete:
            try:
                record = parse_line(raw)
            except ValueError:
                continue  # the kubelet skips lines it cannot parse
            if self.opts.since_ns is None or record.timestamp_ns >= self.opts.since_ns:
                out += _render(record, self.opts.timestamps)
        return bytes(out), len(data)

    def rotated(self, path: Path) -> bool:
        """Whether ``path`` now names another file than the open one (it was
        rotated: renamed, and a new log begun under its name)."""
        try:
            # lstat: a link put in the log's place is another file, to be refused
            # by the reopen, never followed.
            now = os.lstat(path)
        except FileNotFoundError:
            return False  # renamed, the new one not made yet: keep reading the old
        mine = os.fstat(self.file.fileno())
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def reopen(self, file: BinaryIO) -> None:
        """Go on with ``file`` from its start; the old file's unfinished line is lost."""
        self.file.close()
        self.file, self.offset, self.pending = file, 0, b""


def _start(path: Path, root: Path, opts: LogOptions) -> tuple[_Reader, int]:
    """Open the log and find where reading starts; also the file's size now, where
    the reading of what is present stops (a follow goes on from there)."""
    f = open_log_file(path, root)
    try:
        end = os.fstat(f.fileno()).st_size
        start = 0 if opts.tail_lines is None else tail_start(f, opts.tail_lines)
    except BaseException:
        f.close()
        raise
    return _Reader(f, start, opts), end


async def stream_log(
    path: Path,
    opts: LogOptions,
    *,
    clock: Clock,
    running: Callable[[], Awaitable[bool]],
    poll_interval: float = 0.2,
    max_follow: float = 4 * 3600.0,
    client_alive: Callable[[], bool] = lambda: True,
    root: Path | None = None,
) -> AsyncGenerator[bytes, None]:
    """Yield the log's output chunk by chunk, as the options ask.

    The file is opened with :func:`open_log_file`. What it holds when asked is
    read in a worker thread, a chunk at a time, from the start of the tail (found
    from the end, so ``tailLines`` costs the same on any size of log); a follow
    then polls with one small read per wake-up of ``clock``. A follow ends when
    ``running()`` says the container stopped (after reading what it wrote last),
    when the byte limit is reached, after ``max_follow`` seconds, when
    ``client_alive()`` turns False, when the consumer stops iterating, or when
    the file put in the log's place by a rotation is refused.

    Args:
        root: The pod log directory the file must lie under (None: the directory
            holding ``path``).

    Raises:
        RefusedLogFileError: the log path is a link, a FIFO, ... (see
            :func:`open_log_file`); raised before anything is yielded.
        OSError: the file cannot be opened or read.
    """
    root = path.parent if root is None else root
    remaining = opts.limit_bytes

    def clip(data: bytes) -> bytes:
        nonlocal remaining
        if remaining is None:
            return data
        data = data[:remaining]
        remaining -= len(data)
        return data

    reader, end = await asyncio.to_thread(_start, path, root, opts)
    try:
        # An unterminated last line is still being written: it stays pending, for
        # the follow.
        # The end is checked here rather than in the thread, so that once the
        # present is read no further hop to a thread delays the follow.
        while reader.offset < end:
            out, n = await asyncio.to_thread(reader.read, min(_READ_CHUNK, end - reader.offset))
            if not n:
                break  # truncated meanwhile
            chunk = clip(out)
            if chunk:
                yield chunk
            if remaining == 0:
                return
        if not opts.follow:
            return
        deadline = clock.monotonic() + max_follow
        stopped = False
        while (
            (remaining is None or remaining > 0) and clock.monotonic() < deadline and client_alive()
        ):
            # Inline: a bounded read of a file known to be regular does not wait.
            out, n = reader.read(_FOLLOW_CHUNK)
            if out:
                chunk = clip(out)
                if chunk:
                    yield chunk
                continue  # more may be waiting: read again before sleeping
            if n == _FOLLOW_CHUNK:
                await asyncio.sleep(0)  # nothing to show yet, more to read: let others run
                continue
            if stopped:
                return
            if not n and reader.rotated(path):
                # Log rotation renamed the file and the runtime opened a new one:
                # what the old one held is read; go on with the new one, as the
                # kubelet's follow does.
                try:
                    reader.reopen(open_log_file(path, root))
                except FileNotFoundError:
                    pass  # gone again already: poll on
                except OSError as exc:
                    log.warning("log follow of %s ended: %s", path, exc)
                    return
                else:
                    continue
            if not n and not await running():
                # Read once more: the container may have written just before it exited.
                stopped = True
                continue
            await clock.sleep(poll_interval)
    finally:
        reader.file.close()
