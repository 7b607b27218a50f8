"""Container log options and reading, as the kubelet's /containerLogs does them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from fifo import unblock_fifo_later

from kubelet_kit.container.logs import LogRecord, LogStream
from kubelet_kit.server.logs import (
    LogOptions,
    container_log_dir,
    find_log_file,
    format_fixed_timestamp,
    parse_log_options,
    stream_log,
)
from kubelet_kit.testing import FakeClock

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def write_log(path: Path, records: list[tuple[int, str, bool, bytes]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        for ts, stream, partial, text in records:
            f.write(LogRecord(ts, LogStream(stream), partial, text).encode())


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "0.log"
    write_log(
        path,
        [
            (T0 + 0 * NS, "stdout", False, b"first"),
            (T0 + 1 * NS, "stderr", False, b"second"),
            (T0 + 2 * NS, "stdout", True, b"thi"),
            (T0 + 2 * NS + 5, "stdout", False, b"rd"),
        ],
    )
    with open(path, "ab") as f:
        f.write(b"not a cri line\n")
    return path


async def read_all(path: Path, opts: LogOptions, root: Path | None = None) -> bytes:
    async def running() -> bool:
        return False

    out = b""
    extra = {} if root is None else {"root": root}
    async for chunk in stream_log(path, opts, clock=FakeClock(), running=running, **extra):
        out += chunk
    return out


@pytest.mark.parametrize(
    ("opts", "expected"),
    [
        (LogOptions(), b"first\nsecond\nthird\n"),
        # The tail counts lines of the file: partial records and unparsable lines too.
        (LogOptions(tail_lines=2), b"rd\n"),
        (LogOptions(tail_lines=3), b"third\n"),
        (LogOptions(tail_lines=4), b"second\nthird\n"),
        (LogOptions(tail_lines=0), b""),
        (LogOptions(tail_lines=100), b"first\nsecond\nthird\n"),
        (LogOptions(limit_bytes=8), b"first\nse"),
        (LogOptions(limit_bytes=1000), b"first\nsecond\nthird\n"),
        (LogOptions(since_ns=T0 + NS), b"second\nthird\n"),
        (LogOptions(since_ns=T0 + 3 * NS), b""),
        (LogOptions(tail_lines=3, since_ns=T0 + 2 * NS, limit_bytes=4), b"thir"),
    ],
)
async def test_read_options(log_file: Path, opts: LogOptions, expected: bytes) -> None:
    # The unparsable line is skipped, as the kubelet skips it.
    assert await read_all(log_file, opts) == expected


async def test_timestamps_are_fixed_width(log_file: Path) -> None:
    out = await read_all(log_file, LogOptions(timestamps=True, tail_lines=3))
    assert out == (b"2023-11-14T22:13:22.000000000Z thi2023-11-14T22:13:22.000000005Z rd\n")
    assert format_fixed_timestamp(T0 + 120) == "2023-11-14T22:13:20.000000120Z"


async def test_follow_reads_appended_records_until_the_container_stops(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_log(path, [(T0, "stdout", False, b"a")])
    clock = FakeClock()
    alive = True

    async def running() -> bool:
        return alive

    stream = stream_log(
        path, LogOptions(follow=True), clock=clock, running=running, poll_interval=1.0
    )
    assert await anext(stream) == b"a\n"
    with open(path, "ab") as f:
        f.write(LogRecord(T0 + NS, LogStream.STDOUT, False, b"b").encode()[:10])  # half
    task = asyncio.ensure_future(anext(stream))
    await clock.run_for(3)
    assert not task.done()  # half a line is not a record yet
    with open(path, "ab") as f:
        f.write(LogRecord(T0 + NS, LogStream.STDOUT, False, b"b").encode()[10:])
    await clock.run_for(2)
    assert await task == b"b\n"
    # The container writes its last line and stops: the follow delivers it, then ends.
    write_log(path, [(T0 + 2 * NS, "stdout", False, b"c")])
    alive = False
    rest = [chunk async for chunk in stream]
    assert rest == [b"c\n"]


async def test_follow_goes_on_across_a_log_rotation(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_log(path, [(T0, "stdout", False, b"before")])
    clock = FakeClock()
    alive = True

    async def running() -> bool:
        return alive

    stream = stream_log(
        path, LogOptions(follow=True), clock=clock, running=running, poll_interval=1.0
    )
    assert await anext(stream) == b"before\n"
    # The last line of the old file, then rotation (rename), then the new file.
    write_log(path, [(T0 + NS, "stdout", False, b"last-of-old")])
    path.rename(tmp_path / "0.log.20261203-000000")
    task = asyncio.ensure_future(anext(stream))
    await clock.run_for(1)
    assert await task == b"last-of-old\n"
    task = asyncio.ensure_future(anext(stream))
    await clock.run_for(2)  # renamed, no new file yet: nothing lost, nothing ends
    assert not task.done()
    write_log(path, [(T0 + 2 * NS, "stdout", False, b"first-of-new")])
    await clock.run_for(2)
    assert await task == b"first-of-new\n"
    alive = False
    write_log(path, [(T0 + 3 * NS, "stdout", False, b"end")])
    rest = [chunk async for chunk in stream]
    assert rest == [b"end\n"]


async def test_follow_stops_at_the_byte_limit(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_log(path, [(T0, "stdout", False, b"abc")])

    async def running() -> bool:
        return True

    chunks = [
        c
        async for c in stream_log(
            path, LogOptions(follow=True, limit_bytes=4), clock=FakeClock(), running=running
        )
    ]
    assert chunks == [b"abc\n"]


def test_parse_options_accepts_the_kubelet_parameters() -> None:
    opts, errors = parse_log_options(
        {
            "tailLines": "5",
            "limitBytes": "10",
            "sinceSeconds": "30",
            "timestamps": "true",
            "previous": "1",
            "follow": "t",
        },
        now=1_000.0,
    )
    assert errors == []
    assert opts == LogOptions(
        tail_lines=5, limit_bytes=10, since_ns=970 * NS, timestamps=True, previous=True, follow=True
    )
    opts, errors = parse_log_options({"sinceTime": "2023-11-14T22:13:21Z"}, now=0)
    assert errors == [] and opts.since_ns == T0 + NS


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"tailLines": "-1"}, "tailLines", "must be greater than or equal to 0"),
        ({"tailLines": "x"}, "tailLines", "not an integer"),
        ({"limitBytes": "0"}, "limitBytes", "must be greater than 0"),
        ({"sinceSeconds": "0"}, "sinceSeconds", "must be greater than 0"),
        (
            {"sinceSeconds": "5", "sinceTime": "2023-11-14T22:13:21Z"},
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
        ({"sinceTime": "yesterday"}, "sinceTime", "not an RFC 3339 timestamp"),
        ({"follow": "maybe"}, "follow", "not a boolean"),
    ],
)
def test_parse_options_errors_name_the_parameter(
    query: dict[str, str], field: str, message: str
) -> None:
    _, errors = parse_log_options(query, now=0)
    assert any(e.path == field and message in e.message for e in errors), errors


def test_log_paths(tmp_path: Path) -> None:
    d = container_log_dir(tmp_path, "default", "web", "uid-1", "app")
    assert d == tmp_path.resolve() / "default_web_uid-1" / "app"
    for bad in ("..", ".", "a/b", "", "x\0"):
        with pytest.raises(ValueError):
            container_log_dir(tmp_path, "default", "web", "uid-1", bad)
    d.mkdir(parents=True)
    assert find_log_file(d, previous=False) is None
    for n in (0, 1, 10, 2):
        (d / f"{n}.log").write_text("")
    (d / "x.log").write_text("")
    assert find_log_file(d, previous=False) == d / "10.log"
    assert find_log_file(d, previous=True) == d / "2.log"


# ------------------------------------------------------- a hostile container's log


SECRET = b"root:$6$hostsecret:19000:0:99999:7:::"


def host_file(tmp_path: Path) -> Path:
    """A host file outside the pod log directory that holds log-shaped lines."""
    path = tmp_path / "host" / "shadow"
    write_log(path, [(T0, "stdout", False, SECRET)])
    return path


async def test_a_symlink_at_the_log_path_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = root / "ns_pod_uid" / "app" / "0.log"
    path.parent.mkdir(parents=True)
    path.symlink_to(host_file(tmp_path))
    for opts in (LogOptions(), LogOptions(follow=True), LogOptions(tail_lines=1)):
        with pytest.raises(OSError, match="symbolic link"):
            await read_all(path, opts, root=root)


async def test_a_log_reached_through_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    # The file itself is regular, but it does not lie under the pod log directory.
    root = tmp_path / "logs"
    root.mkdir()
    (root / "ns_pod_uid").symlink_to(host_file(tmp_path).parent, target_is_directory=True)
    with pytest.raises(OSError, match="outside the pod log directory"):
        await read_all(root / "ns_pod_uid" / "shadow", LogOptions(), root=root)


async def test_a_fifo_at_the_log_path_is_refused_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    os.mkfifo(path)
    # An open that waits for a writer blocks the loop; this writer, 3 s later, frees
    # it so that such a reader fails the test instead of hanging it.
    with unblock_fifo_later(path) as unblocked:
        with pytest.raises(OSError, match="not a regular file"):
            await read_all(path, LogOptions(follow=True))
        assert not unblocked.is_set()


async def test_a_symlink_swapped_in_during_a_follow_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_log(path, [(T0, "stdout", False, b"mine")])
    secret = host_file(tmp_path)
    clock = FakeClock()

    async def running() -> bool:
        return True

    stream = stream_log(
        path, LogOptions(follow=True), clock=clock, running=running, poll_interval=1.0
    )
    assert await anext(stream) == b"mine\n"
    # The container replaces its log by a link to a host file, as a rotation would.
    path.unlink()
    path.symlink_to(secret)
    # The follow ends, without waiting for the clock, rather than read the link.
    assert SECRET not in await asyncio.wait_for(_drain(stream), 10)


async def _drain(stream: AsyncGenerator[bytes, None]) -> bytes:
    return b"".join([chunk async for chunk in stream])


def _bytes_read() -> int:
    """Bytes this process has read with read(2) and friends, all threads together."""
    with open("/proc/self/io", "rb") as f:
        for line in f:
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def big_log(path: Path, size: int) -> list[bytes]:
    """A CRI log of about ``size`` bytes; returns the text of its records."""
    texts = [b"line %07d " % i + b"x" * 60 for i in range(size // 100)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(
            b"".join(
                LogRecord(T0 + i, LogStream.STDOUT, False, t).encode() for i, t in enumerate(texts)
            )
        )
    return texts


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
@pytest.mark.parametrize("follow", [False, True])
async def test_a_tail_reads_only_the_end_of_a_big_log(tmp_path: Path, follow: bool) -> None:
    path = tmp_path / "0.log"
    texts = big_log(path, 16 << 20)
    clock = FakeClock()

    async def running() -> bool:
        return False

    before = _bytes_read()
    out = b""
    async for chunk in stream_log(
        path, LogOptions(tail_lines=10, follow=follow), clock=clock, running=running
    ):
        out += chunk
    read = _bytes_read() - before
    assert out == b"".join(t + b"\n" for t in texts[-10:])
    assert read < 256 << 10, f"read {read} bytes of a 16 MiB log for 10 lines"


async def test_follow_after_a_tail_goes_on_across_rotation(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    texts = big_log(path, 1 << 20)
    clock = FakeClock()
    alive = True

    async def running() -> bool:
        return alive

    stream = stream_log(
        path,
        LogOptions(tail_lines=2, follow=True),
        clock=clock,
        running=running,
        poll_interval=1.0,
        root=tmp_path,
    )
    assert await anext(stream) == texts[-2] + b"\n" + texts[-1] + b"\n"
    path.rename(tmp_path / "0.log.20261203-000000")
    write_log(path, [(T0 + NS, "stdout", False, b"new")])
    task = asyncio.ensure_future(anext(stream))
    await clock.run_for(2)
    assert await task == b"new\n"
    alive = False
    assert [chunk async for chunk in stream] == []
