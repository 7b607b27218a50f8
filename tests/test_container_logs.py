"""The CRI log format: containerd's writer behaviour and the kubelet's parser."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest

from kubelet_kit.container.logs import (
    DEFAULT_MAX_LINE_SIZE,
    CRILogWriter,
    LogRecord,
    LogStream,
    format_timestamp,
    join_output,
    parse_line,
    parse_timestamp,
    read_log,
)

BUF = 4096  # containerd's read buffer size, which its test table is built around
MAX = BUF * 4

# containerd internal/cri/io/logger_test.go TestRedirectLogs, as data:
# (description, input, max line size, [(tag, content length or text), ...])
REDIRECT_CASES = [
    (
        "stdout log",
        b"test stdout log 1\ntest stdout log 2\n",
        MAX,
        [("F", b"test stdout log 1"), ("F", b"test stdout log 2")],
    ),
    (
        "log ends without newline",
        b"test stderr log 1\ntest stderr log 2",
        MAX,
        [("F", b"test stderr log 1"), ("P", b"test stderr log 2")],
    ),
    (
        "log length equal to buffer size",
        b"a" * BUF + b"\n" + b"a" * BUF + b"\n",
        MAX,
        [("F", BUF), ("F", BUF)],
    ),
    (
        "log length longer than buffer size",
        b"a" * (BUF * 2 + 10) + b"\n" + b"a" * (BUF * 2 + 20) + b"\n",
        MAX,
        [("F", BUF * 2 + 10), ("F", BUF * 2 + 20)],
    ),
    (
        "log length equal to max length",
        b"a" * MAX + b"\n" + b"a" * MAX + b"\n",
        MAX,
        [("F", MAX), ("F", MAX)],
    ),
    (
        "log length exceed max length by 1",
        b"a" * (MAX + 1) + b"\n" + b"a" * (MAX + 1) + b"\n",
        MAX,
        [("P", MAX), ("F", 1), ("P", MAX), ("F", 1)],
    ),
    (
        "log length longer than max length",
        b"a" * (MAX * 2) + b"\n" + b"a" * (MAX * 2 + 1) + b"\n",
        MAX,
        [("P", MAX), ("F", MAX), ("P", MAX), ("P", MAX), ("F", 1)],
    ),
    (
        "max length shorter than buffer size",
        b"a" * (BUF * 3 // 2 + 10) + b"\n" + b"a" * (BUF * 3 // 2 + 20) + b"\n",
        BUF // 2,
        [("P", BUF // 2)] * 3 + [("F", 10)] + [("P", BUF // 2)] * 3 + [("F", 20)],
    ),
    (
        "max length not a multiple of the buffer size",
        b"a" * (BUF * 2 + 10) + b"\n" + b"a" * (BUF * 2 + 20) + b"\n",
        BUF * 3 // 2,
        [("P", BUF * 3 // 2), ("F", BUF // 2 + 10), ("P", BUF * 3 // 2), ("F", BUF // 2 + 20)],
    ),
    (
        "no limit if max length is 0",
        b"a" * (BUF * 10 + 10) + b"\n" + b"a" * (BUF * 10 + 20) + b"\n",
        0,
        [("F", BUF * 10 + 10), ("F", BUF * 10 + 20)],
    ),
    (
        "no limit if max length is negative",
        b"a" * (BUF * 10 + 10) + b"\n" + b"a" * (BUF * 10 + 20) + b"\n",
        -1,
        [("F", BUF * 10 + 10), ("F", BUF * 10 + 20)],
    ),
    (
        "trailing \\r\\n is dropped",
        b"a" * (BUF - 1) + b"\r\n" + b"a" * (BUF - 1) + b"\r\n",
        -1,
        [("F", BUF - 1), ("F", BUF - 1)],
    ),
    ("empty line is a full record", b"\n\n", MAX, [("F", b""), ("F", b"")]),
]


def _run_writer(data: bytes, max_len: int, chunk: int | None) -> list[bytes]:
    out: list[bytes] = []
    ticks = itertools.count(1_000_000_000_000_000_000)
    w = CRILogWriter(LogStream.STDOUT, out.append, lambda: next(ticks), max_len)
    if chunk is None:
        w.write(data)
    else:
        for i in range(0, len(data), chunk):
            w.write(data[i : i + chunk])
    w.close()
    return out


@pytest.mark.parametrize("chunk", [None, 1000, 4097])
@pytest.mark.parametrize(
    ("desc", "data", "max_len", "expected"), REDIRECT_CASES, ids=[c[0] for c in REDIRECT_CASES]
)
def test_writer_matches_containerd_table(
    desc: str,
    data: bytes,
    max_len: int,
    expected: list[tuple[str, bytes | int]],
    chunk: int | None,
) -> None:
    lines = _run_writer(data, max_len, chunk)
    got = []
    for line in lines:
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        stamp, stream, tag, text = line[:-1].split(b" ", 3)
        parse_timestamp(stamp.decode())
        assert stream == b"stdout"
        got.append((tag.decode(), text))
    want = [(t, c if isinstance(c, bytes) else b"a" * c) for t, c in expected]
    assert got == want


def test_writer_holds_an_unfinished_line_until_its_newline() -> None:
    out: list[bytes] = []
    w = CRILogWriter(LogStream.STDERR, out.append, lambda: 0)
    w.write(b"hel")
    assert out == []
    w.write(b"lo\nwor")
    assert [parse_line(x).text for x in out] == [b"hello"]
    w.close()
    w.close()  # idempotent
    records = [parse_line(x) for x in out]
    assert [(r.stream, r.partial, r.text) for r in records] == [
        (LogStream.STDERR, False, b"hello"),
        (LogStream.STDERR, True, b"wor"),
    ]
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")


def test_default_max_line_size_is_containerds() -> None:
    assert DEFAULT_MAX_LINE_SIZE == 16 * 1024


# kubelet pkg/kubelet/kuberuntime/logs/logs_test.go TestParseLog (CRI cases), as data.
PARSE_CASES = [
    (
        b"2016-10-20T18:39:20.57606443Z stdout F cri stdout test log\n",
        LogStream.STDOUT,
        b"cri stdout test log\n",
    ),
    (
        b"2016-10-20T18:39:20.57606443Z stderr F cri stderr test log\n",
        LogStream.STDERR,
        b"cri stderr test log\n",
    ),
    (
        b"2016-10-20T18:39:20.57606443Z stdout P cri stdout partial test log\n",
        LogStream.STDOUT,
        b"cri stdout partial test log",
    ),
    (
        b"2016-10-20T18:39:20.57606443Z stdout P:TAG1:TAG2 cri stdout partial test log\n",
        LogStream.STDOUT,
        b"cri stdout partial test log",
    ),
]


@pytest.mark.parametrize(("line", "stream", "content"), PARSE_CASES)
def test_parse_line_kubelet_table(line: bytes, stream: LogStream, content: bytes) -> None:
    record = parse_line(line)
    assert record.timestamp_ns == parse_timestamp("2016-10-20T18:39:20.57606443Z")
    assert record.stream is stream
    assert record.content == content


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"unsupported log format test log\n", "timestamp format"),
        (b"nospace", "timestamp is not found"),
        (b"2016-10-20T18:39:20Z stdout", "stream type is not found"),
        (b"2016-10-20T18:39:20Z stdin F x", 'unexpected stream type "stdin"'),
        (b"2016-10-20T18:39:20Z stdout F", "log tag is not found"),
        (b"2016-13-20T18:39:20Z stdout F x", "timestamp format"),
    ],
)
def test_parse_line_errors_use_the_kubelets_words(line: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_line(line)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        # Go: time.Unix(1234, 43210).UTC().Format(time.RFC3339Nano)
        (1234 * 10**9 + 43210, "1970-01-01T00:20:34.00004321Z"),
        (1476988760 * 10**9 + 576064430, "2016-10-20T18:39:20.57606443Z"),
        (1476988760 * 10**9, "2016-10-20T18:39:20Z"),
        (1476988760 * 10**9 + 1, "2016-10-20T18:39:20.000000001Z"),
    ],
)
def test_timestamps_round_trip_like_go(ns: int, text: str) -> None:
    assert format_timestamp(ns) == text
    assert parse_timestamp(text) == ns


def test_parse_timestamp_accepts_offsets() -> None:
    assert parse_timestamp("2016-10-20T20:39:20.5+02:00") == parse_timestamp(
        "2016-10-20T18:39:20.5Z"
    )


def test_read_log_skips_bad_lines_and_rebuilds_output(tmp_path: Path) -> None:
    out: list[bytes] = []
    now = itertools.count(10**18)
    stdout = CRILogWriter(LogStream.STDOUT, out.append, lambda: next(now), max_line_size=4)
    stderr = CRILogWriter(LogStream.STDERR, out.append, lambda: next(now))
    stdout.write(b"abcdefg\r\nxy")
    stderr.write(b"oops\n")
    stdout.close()
    path = tmp_path / "0.log"
    path.write_bytes(out[0] + b"garbage line\n\n" + b"".join(out[1:]))
    errors: list[bytes] = []
    records = list(read_log(path, on_error=lambda raw, exc: errors.append(raw)))
    assert errors == [b"garbage line\n"]
    assert join_output(r for r in records if r.stream is LogStream.STDOUT) == b"abcdefg\nxy"
    assert list(read_log(io.BytesIO(path.read_bytes()), stream=LogStream.STDERR)) == [
        LogRecord(records[2].timestamp_ns, LogStream.STDERR, False, b"oops")
    ]
    assert records == sorted(records, key=lambda r: r.timestamp_ns)


def test_all_is_honest() -> None:
    import kubelet_kit.container.logs as logs

    missing = [name for name in logs.__all__ if not hasattr(logs, name)]
    assert missing == []
