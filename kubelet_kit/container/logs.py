"""The CRI container log format: one small writer and one reader.

Every CRI runtime (containerd, CRI-O) writes a container's stdout and stderr to
the file the kubelet names, one record per line::

    2016-10-06T00:17:09.669794202Z stdout P log content 1
    2016-10-06T00:17:09.669794203Z stderr F log content 2

The fields are an RFC 3339 timestamp with up to nanosecond precision (Go's
``time.RFC3339Nano``: trailing zeros of the fraction are dropped), the stream
(``stdout`` or ``stderr``), a tag and the text. The tag's first ``:``-separated
part is ``F`` for a record that ends a line of the container's output and ``P``
for a partial one: a line longer than the runtime's maximum is split into ``P``
records followed by a final ``F``, and output that ends without a newline is
written as ``P``. A reader gives back the container's bytes by appending
``"\\n"`` after every ``F`` record's text.

:class:`CRILogWriter` turns a byte stream into such records the way containerd
does (``\\n`` and ``\\r\\n`` both end a line; lines over ``max_line_size`` bytes
are split); :func:`parse_line` reads one record the way the kubelet does, with
the kubelet's error messages; :func:`read_log` reads a whole file, skipping
records it cannot parse (as the kubelet does); :func:`tail_start` finds where
the last lines of a file begin, without reading the rest.

Only the standard library and attrs are used, so the host runtime's shim
process can import this module cheaply.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

__all__ = [
    "DEFAULT_MAX_LINE_SIZE",
    "TAG_DELIMITER",
    "TAG_FULL",
    "TAG_PARTIAL",
    "CRILogWriter",
    "LogRecord",
    "LogStream",
    "format_timestamp",
    "join_output",
    "parse_line",
    "parse_timestamp",
    "read_log",
    "tail_start",
]

#: containerd's default ``max_container_log_line_size``: a longer line is split.
DEFAULT_MAX_LINE_SIZE = 16 * 1024

TAG_PARTIAL = "P"
TAG_FULL = "F"
#: Separates several tags in the tag field; only the first is interpreted.
TAG_DELIMITER = ":"

_NS = 1_000_000_000


class LogStream(enum.Enum):
    """Which of the container's output streams a record came from."""

    STDOUT = "stdout"
    STDERR = "stderr"


@attrs.frozen
class LogRecord:
    """One parsed line of a CRI log file.

    Attributes:
        timestamp_ns: When the runtime read the text, in nanoseconds since the epoch.
        stream: The stream the text was written to.
        partial: True for a ``P`` record (the container's line continues in the
            next record of the same stream, or the output ended without a newline).
        text: The text as the container wrote it, without the line terminator.
    """

    timestamp_ns: int
    stream: LogStream
    partial: bool
    text: bytes

    @property
    def timestamp(self) -> float:
        """The timestamp in seconds since the epoch (loses sub-microsecond precision)."""
        return self.timestamp_ns / _NS

    @property
    def content(self) -> bytes:
        """The container's bytes this record stands for: the text, plus ``\\n`` if full."""
        return self.text if self.partial else self.text + b"\n"

    def encode(self) -> bytes:
        """The record as one line of a CRI log file, newline included."""
        tag = TAG_PARTIAL if self.partial else TAG_FULL
        head = f"{format_timestamp(self.timestamp_ns)} {self.stream.value} {tag} "
        return head.encode("ascii") + self.text + b"\n"


# ---------------------------------------------------------------------- timestamps


def format_timestamp(timestamp_ns: int) -> str:
    """Format nanoseconds since the epoch as Go's ``time.RFC3339Nano`` in UTC.

    The fraction keeps at most nine digits and drops trailing zeros (and the dot
    when it is zero), exactly as Go prints it: ``2016-10-20T18:39:20.57606443Z``.
    """
    seconds, nanos = divmod(timestamp_ns, _NS)
    base = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"


_TIMESTAMP_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(text: str) -> int:
    """Parse an RFC 3339 timestamp with up to nine fraction digits into nanoseconds.

    Accepts ``Z`` or a ``+hh:mm``/``-hh:mm`` offset, as Go's RFC3339Nano parser does.

    Raises:
        ValueError: ``text`` is not such a timestamp.
    """
    m = _TIMESTAMP_RE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7) or "", m.group(8)
    if zone == "Z":
        tz = _dt.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = _dt.datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp: {exc}") from None
    # Whole seconds through integer arithmetic, so no float rounding touches the nanos.
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    whole = (moment - epoch) // _dt.timedelta(seconds=1)
    return whole * _NS + int(fraction.ljust(9, "0") if fraction else 0)


# -------------------------------------------------------------------------- parsing


def parse_line(line: bytes) -> LogRecord:
    """Parse one line of a CRI log file, as the kubelet's log reader does.

    A trailing ``\\n`` (the file's own line terminator) is dropped. Tags after
    the first (``P:TAG1:TAG2``) are ignored, for forward compatibility.

    Raises:
        ValueError: with the kubelet's message (``timestamp is not found``,
            ``unexpected stream type "x"``, ``log tag is not found``...).
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    stamp, sep, rest = line.partition(b" ")
    if not sep:
        raise ValueError("timestamp is not found")
    try:
        timestamp_ns = parse_timestamp(stamp.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f'unexpected timestamp format "RFC3339Nano": {exc}') from None
    stream_name, sep, rest = rest.partition(b" ")
    if not sep:
        raise ValueError("stream type is not found")
    try:
        stream = LogStream(stream_name.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(
            f'unexpected stream type "{stream_name.decode("utf-8", "replace")}"'
        ) from None
    tags, sep, text = rest.partition(b" ")
    if not sep:
        raise ValueError("log tag is not found")
    partial = tags.split(TAG_DELIMITER.encode())[0] == TAG_PARTIAL.encode()
    return LogRecord(timestamp_ns=timestamp_ns, stream=stream, partial=partial, text=text)


def read_log(
    source: str | Path | BinaryIO,
    *,
    stream: LogStream | None = None,
    on_error: Callable[[bytes, ValueError], object] | None = None,
) -> Iterator[LogRecord]:
    """Yield the records of a CRI log file in order.

    Lines that do not parse are skipped, as the kubelet skips them; pass
    ``on_error`` to see them. This reads what is in the file now; it does not
    follow a growing file.

    Args:
        source: A path, or a binary file object positioned where reading starts.
        stream: Only records of this stream; None for both.
        on_error: Called with the raw line and the error for each unparsable line.

    Raises:
        OSError: the file cannot be opened or read.
    """
    if isinstance(source, str | Path):
        with open(source, "rb") as f:
            yield from read_log(f, stream=stream, on_error=on_error)
        return
    for raw in source:
        if not raw.strip():
            continue
        try:
            record = parse_line(raw)
        except ValueError as exc:
            if on_error is not None:
                on_error(raw, exc)
            continue
        if stream is None or record.stream is stream:
            yield record


_TAIL_BLOCK = 1024


def tail_start(f: BinaryIO, lines: int) -> int:
    """The offset where the last ``lines`` lines of ``f`` begin (the kubelet's
    ``tail.FindTailLineStartIndex``).

    Lines are counted by their ``\\n``: what follows comes from the last ``lines``
    newline-terminated lines and any text after the last ``\\n`` (a line still
    being written). Blocks are read backwards from the end, so a long file is not
    read whole. A negative ``lines`` means the whole file (offset 0).

    Raises:
        OSError: ``f`` cannot be read or seeked.
    """
    if lines < 0:
        return 0
    right = f.seek(0, 2)
    found = 0
    left = right
    block = b""
    # Walk back until more than ``lines`` newlines were seen (or the file's start).
    while right > 0 and found <= lines:
        left = max(0, right - _TAIL_BLOCK)
        f.seek(left)
        block = f.read(right - left)
        found += block.count(b"\n")
        right = left
    # Skip the extra lines at the front of the last block read.
    while found > lines:
        cut = block.index(b"\n") + 1
        block = block[cut:]
        left += cut
        found -= 1
    return left


def join_output(records: Iterable[LogRecord]) -> bytes:
    """The container's output as it wrote it, rebuilt from records.

    ``\\r\\n`` line ends come back as ``\\n``; that is all the format loses.
    """
    return b"".join(r.content for r in records)


# -------------------------------------------------------------------------- writing


class CRILogWriter:
    """Turns one stream's bytes into CRI log records, as containerd does.

    Feed it whatever a pipe read returned; every complete line becomes an ``F``
    record (``\\n`` or ``\\r\\n`` dropped), a line longer than ``max_line_size``
    bytes becomes ``P`` records of at most that size followed by the rest, and
    :meth:`close` writes what is left without a newline as a ``P`` record.
    Text is held back until its line ends, so no record is written for half a line
    that is still coming.

    Several writers (one per stream) may share one ``sink``: each record is
    handed over as one ``bytes`` object, so an ``O_APPEND`` file gets whole lines.

    Args:
        stream: The stream whose bytes this writer receives.
        sink: Called with each encoded record (one complete line of the file).
        now_ns: Source of record timestamps, in nanoseconds since the epoch.
        max_line_size: Longest text of one record; ``<= 0`` means no limit.
    """

    def __init__(
        self,
        stream: LogStream,
        sink: Callable[[bytes], object],
        now_ns: Callable[[], int],
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    ) -> None:
        self._stream = stream
        self._sink = sink
        self._now_ns = now_ns
        self._max = max_line_size
        self._pending = bytearray()
        self._closed = False

    def _emit(self, text: bytes, partial: bool) -> None:
        record = LogRecord(self._now_ns(), self._stream, partial, text)
        self._sink(record.encode())

    def write(self, data: bytes) -> None:
        """Take more of the stream's bytes; write the records they complete.

        Raises:
            ValueError: the writer was closed.
        """
        if self._closed:
            raise ValueError("write to a closed CRILogWriter")
        self._pending += data
        while True:
            end = self._pending.find(b"\n")
            if end < 0:
                break
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]
            if line.endswith(b"\r"):
                line = line[:-1]
            self._split_long(line, final=True)
        # Text without a newline yet: only cut off what is over the limit, keep the
        # rest until the line ends (a later newline makes it an F record).
        if self._max > 0:
            while len(self._pending) > self._max:
                chunk = bytes(self._pending[: self._max])
                # containerd keeps a "\r" that may begin a "\r\n" for the next read;
                # a chunk ending in "\r" is written without it and "\r" stays.
                if chunk.endswith(b"\r"):
                    chunk = chunk[:-1]
                del self._pending[: len(chunk)]
                if not chunk:
                    break
                self._emit(chunk, partial=True)

    def _split_long(self, line: bytes, *, final: bool) -> None:
        if self._max > 0:
            while len(line) > self._max:
                self._emit(line[: self._max], partial=True)
                line = line[self._max :]
        self._emit(line, partial=not final)

    def close(self) -> None:
        """Write any text left without a newline as a ``P`` record. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._pending:
            line = bytes(self._pending)
            self._pending.clear()
            self._split_long(line, final=False)
