"""``/containerLogs``: the kubelet's log options and the reading of CRI log files.

Options are the kubelet's (``PodLogOptions``): ``tailLines`` (>= 0), ``limitBytes``
(> 0), ``sinceSeconds`` (> 0) or ``sinceTime`` (RFC 3339; not both),
``timestamps``, ``previous`` and ``follow``. Files are found where the kubelet puts
them: ``<podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log``; the
highest restart count is the current container, the one before it the previous.

The tail is taken first, then the since filter, then the byte limit, as the
kubelet's log reader does. With ``timestamps`` each record is prefixed by its
time in RFC 3339 with nine fraction digits (the kubelet's RFC3339NanoFixed).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import BinaryIO

import attrs

from kubelet_kit.clock import Clock
from kubelet_kit.container.logs import LogRecord, parse_line, parse_timestamp
from kubelet_kit.errors import FieldError

__all__ = [
    "LogOptions",
    "container_log_dir",
    "find_log_file",
    "format_fixed_timestamp",
    "parse_log_options",
    "stream_log",
]

_NS = 1_000_000_000
_LOG_NAME = re.compile(r"^(\d+)\.log$")
# Longest record line read at once: containerd splits lines at 16 KiB, so anything
# longer is not a record of a CRI runtime.
_MAX_LINE = 1 << 20


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
            errors.append(FieldError("tailLines", f"Invalid value: {tail}: must be greater "
                                                  "than or equal to 0"))
    if "limitBytes" in query:
        limit = _parse_int("limitBytes", query["limitBytes"], errors)
        if limit is not None and limit < 1:
            errors.append(FieldError("limitBytes", f"Invalid value: {limit}: must be greater "
                                                   "than 0"))
    if "sinceSeconds" in query:
        since_seconds = _parse_int("sinceSeconds", query["sinceSeconds"], errors)
        if since_seconds is not None:
            if since_seconds < 1:
                errors.append(FieldError("sinceSeconds", f"Invalid value: {since_seconds}: "
                                                         "must be greater than 0"))
            else:
                since_ns = int((now - since_seconds) * _NS)
    if "sinceTime" in query:
        if "sinceSeconds" in query:
            errors.append(FieldError("", "at most one of `sinceTime` or `sinceSeconds` may be "
                                         "specified"))
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


def container_log_dir(pod_logs_dir: Path, namespace: str, name: str, uid: str,
                      container: str) -> Path:
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


def _render(record: LogRecord, timestamps: bool) -> bytes:
    if timestamps:
        return format_fixed_timestamp(record.timestamp_ns).encode() + b" " + record.content
    return record.content


def _rotated(path: Path, f: BinaryIO) -> bool:
    """Whether ``path`` now names another file than the open ``f`` (it was rotated:
    renamed, and a new log begun under its name)."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False  # renamed, the new one not made yet: keep reading the old
    mine = os.fstat(f.fileno())
    return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)


async def stream_log(
    path: Path,
    opts: LogOptions,
    *,
    clock: Clock,
    running: Callable[[], Awaitable[bool]],
    poll_interval: float = 0.2,
    max_follow: float = 4 * 3600.0,
    client_alive: Callable[[], bool] = lambda: True,
) -> AsyncGenerator[bytes, None]:
    """Yield the log's output chunk by chunk, as the options ask.

    File reads are small and local, so they run inline; a follow waits on
    ``clock`` between reads. A follow ends when ``running()`` says the
    container stopped (after reading what it wrote last), when the byte limit is
    reached, after ``max_follow`` seconds, when ``client_alive()`` turns False, or
    when the consumer stops iterating.

    Raises:
        OSError: the file cannot be opened.
    """
    remaining = opts.limit_bytes

    def clip(data: bytes) -> bytes:
        nonlocal remaining
        if remaining is None:
            return data
        data = data[:remaining]
        remaining -= len(data)
        return data

    def accept(record: LogRecord) -> bool:
        return opts.since_ns is None or record.timestamp_ns >= opts.since_ns

    f = open(path, "rb")  # noqa: SIM115  (reopened when the log is rotated)
    try:
        lines = f.readlines()
        offset = f.tell()
        # An unterminated last line is still being written: leave it for the follow.
        if lines and not lines[-1].endswith(b"\n"):
            offset -= len(lines[-1])
            lines.pop()
        if opts.tail_lines is not None:
            lines = lines[len(lines) - opts.tail_lines:] if opts.tail_lines else []
        out = bytearray()
        for raw in lines:
            try:
                record = parse_line(raw)
            except ValueError:
                continue  # the kubelet skips lines it cannot parse
            if accept(record):
                out += _render(record, opts.timestamps)
        chunk = clip(bytes(out))
        if chunk:
            yield chunk
        if not opts.follow:
            return
        deadline = clock.monotonic() + max_follow
        pending = b""
        stopped = False
        while ((remaining is None or remaining > 0) and clock.monotonic() < deadline
               and client_alive()):
            f.seek(offset)
            data = f.read(_MAX_LINE)
            offset += len(data)
            pending += data
            *complete, pending = pending.split(b"\n")
            if len(pending) >= _MAX_LINE:
                pending = b""  # not a record: drop it rather than grow without bound
            out = bytearray()
            for raw in complete:
                try:
                    record = parse_line(raw)
                except ValueError:
                    continue
                if accept(record):
                    out += _render(record, opts.timestamps)
            if out:
                chunk = clip(bytes(out))
                if chunk:
                    yield chunk
                continue  # more may be waiting: read again before sleeping
            if stopped:
                return
            if not data and _rotated(path, f):
                # Log rotation renamed the file and the runtime opened a new one:
                # what the old one held is read; go on with the new one, as the
                # kubelet's follow does.
                f.close()
                try:
                    f = open(path, "rb")  # noqa: SIM115
                except FileNotFoundError:
                    f = open(os.devnull, "rb")  # noqa: SIM115  (not there yet)
                offset = 0
                continue
            if not data and not await running():
                # Read once more: the container may have written just before it exited.
                stopped = True
                continue
            await clock.sleep(poll_interval)
    finally:
        f.close()
