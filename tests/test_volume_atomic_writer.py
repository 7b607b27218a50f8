"""The atomic writer, on upstream's atomic_writer_test tables, and under concurrent readers."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kubelet_kit.volume.atomic_writer import (
    DATA_DIR_NAME,
    MAX_FILE_NAME_LENGTH,
    MAX_PATH_LENGTH,
    AtomicWriter,
    FileProjection,
    PayloadError,
    paths_to_remove,
    validate_path,
)

# TestValidatePath
VALIDATE_PATH = [
    ("valid 1", "i/am/well/behaved.txt", True),
    ("valid 2", "keepyourheaddownandfollowtherules.txt", True),
    ("max path length", "a" * (MAX_PATH_LENGTH + 1), False),
    ("max file length", "a" * (MAX_FILE_NAME_LENGTH + 1), False),
    ("absolute failure", "/dev/null", False),
    ("reserved path", "..sneaky.txt", False),
    ("contains doubledot 1", "hello/there/../../../../../../etc/passwd", False),
    ("contains doubledot 2", "hello/../etc/somethingbad", False),
    ("empty", "", False),
]


@pytest.mark.parametrize(
    ("name", "path", "valid"), VALIDATE_PATH, ids=[c[0] for c in VALIDATE_PATH]
)
def test_validate_path(name: str, path: str, valid: bool) -> None:
    if valid:
        validate_path(path)
    else:
        with pytest.raises(PayloadError):
            validate_path(path)


def P(data: str, mode: int = 0o644) -> FileProjection:
    return FileProjection(data.encode(), mode)


# TestPathsToRemove: (name, first payload, second payload, expected paths to remove)
PATHS_TO_REMOVE = [
    ("simple", {"foo.txt": P("foo"), "bar.txt": P("bar")}, {"foo.txt": P("foo")}, {"bar.txt"}),
    (
        "simple 2",
        {"foo.txt": P("foo"), "zip/bar.txt": P("zip/b}ar")},
        {"foo.txt": P("foo")},
        {"zip/bar.txt", "zip"},
    ),
    (
        "subdirs 1",
        {"foo.txt": P("foo"), "zip/zap/bar.txt": P("zip/bar")},
        {"foo.txt": P("foo")},
        {"zip/zap/bar.txt", "zip", "zip/zap"},
    ),
    (
        "subdirs 2",
        {"foo.txt": P("foo"), "zip/1/2/3/4/bar.txt": P("zip/b}ar")},
        {"foo.txt": P("foo")},
        {"zip/1/2/3/4/bar.txt", "zip", "zip/1", "zip/1/2", "zip/1/2/3", "zip/1/2/3/4"},
    ),
    (
        "subdirs 3",
        {
            "foo.txt": P("foo"),
            "zip/1/2/3/4/bar.txt": P("zip/b}ar"),
            "zap/a/b/c/bar.txt": P("zap/bar"),
        },
        {"foo.txt": P("foo")},
        {
            "zip/1/2/3/4/bar.txt",
            "zip",
            "zip/1",
            "zip/1/2",
            "zip/1/2/3",
            "zip/1/2/3/4",
            "zap",
            "zap/a",
            "zap/a/b",
            "zap/a/b/c",
            "zap/a/b/c/bar.txt",
        },
    ),
    (
        "subdirs 4",
        {
            "foo.txt": P("foo"),
            "zap/1/2/3/4/bar.txt": P("zip/bar"),
            "zap/1/2/c/bar.txt": P("zap/bar"),
            "zap/1/2/magic.txt": P("indigo"),
        },
        {"foo.txt": P("foo"), "zap/1/2/magic.txt": P("indigo")},
        {"zap/1/2/3/4/bar.txt", "zap/1/2/3", "zap/1/2/3/4", "zap/1/2/c", "zap/1/2/c/bar.txt"},
    ),
    (
        "subdirs 5",
        {
            "foo.txt": P("foo"),
            "zap/1/2/3/4/bar.txt": P("zip/bar"),
            "zap/1/2/c/bar.txt": P("zap/bar"),
        },
        {"foo.txt": P("foo"), "zap/1/2/magic.txt": P("indigo")},
        {"zap/1/2/3/4/bar.txt", "zap/1/2/3", "zap/1/2/3/4", "zap/1/2/c", "zap/1/2/c/bar.txt"},
    ),
]


@pytest.mark.parametrize(
    ("name", "first", "second", "expected"), PATHS_TO_REMOVE, ids=[c[0] for c in PATHS_TO_REMOVE]
)
def test_paths_to_remove(
    tmp_path: Path,
    name: str,
    first: dict[str, FileProjection],
    second: dict[str, FileProjection],
    expected: set[str],
) -> None:
    writer = AtomicWriter(tmp_path)
    assert writer.write(first)
    assert paths_to_remove(second, writer.current_dir()) == expected


MYSTERY = bytes(range(256)) * 3
# TestWriteOnce: (name, payload, success)
WRITE_ONCE = [
    (
        "invalid payload 1",
        {"foo": P("foo"), "..bar": P("bar"), "binary.bin": FileProjection(MYSTERY)},
        False,
    ),
    ("invalid payload 2", {"foo/../bar": P("foo")}, False),
    ("basic 1", {"foo": P("foo"), "bar": P("bar")}, True),
    (
        "basic 2",
        {"binary.bin": FileProjection(MYSTERY), ".binary.bin": FileProjection(MYSTERY)},
        True,
    ),
    ("basic mode 1", {"foo": P("foo", 0o777), "bar": P("bar", 0o400)}, True),
    (
        "dotfiles",
        {
            "foo": P("foo"),
            "bar": P("bar"),
            ".dotfile": P("dotfile"),
            ".dotfile.file": P("dotfile.file"),
        },
        True,
    ),
    (
        "dotfiles mode",
        {
            "foo": P("foo", 0o407),
            "bar": P("bar", 0o440),
            ".dotfile": P("dotfile", 0o777),
            ".dotfile.file": P("dotfile.file", 0o666),
        },
        True,
    ),
    ("subdirectories 1", {"foo/bar.txt": P("foo/bar"), "bar/zab.txt": P("bar/zab.txt")}, True),
    (
        "subdirectories mode 1",
        {"foo/bar.txt": P("foo/bar", 0o400), "bar/zab.txt": P("bar/zab.txt")},
        True,
    ),
    (
        "subdirectories 2",
        {"foo//bar.txt": P("foo//bar"), "bar///bar/zab.txt": P("bar/../bar/zab.txt")},
        True,
    ),
    (
        "subdirectories 3",
        {
            "foo/bar.txt": P("foo/bar"),
            "bar/zab.txt": P("bar/zab.txt"),
            "foo/blaz/bar.txt": P("foo/blaz/bar"),
            "bar/zib/zab.txt": P("bar/zib/zab.txt"),
        },
        True,
    ),
    (
        "kitchen sink",
        {
            "foo.log": P("foo"),
            "bar.zap": P("bar"),
            ".dotfile": P("dotfile"),
            "foo/bar.txt": P("foo/bar"),
            "bar/zab.txt": P("bar/zab.txt"),
            "foo/blaz/bar.txt": P("foo/blaz/bar"),
            "bar/zib/zab.txt": P("bar/zib/zab.txt", 0o400),
            "1/2/3/4/5/6/7/8/9/10/.dotfile.lib": P("1-2-3-dotfile", 0o777),
        },
        True,
    ),
]


def check_contents(target: Path, payload: dict[str, FileProjection]) -> None:
    """Every payload file reads back through the user-visible links, with its mode,
    and nothing else is visible."""
    for path, projection in payload.items():
        visible = target / os.path.normpath(path)
        assert visible.read_bytes() == projection.data, path
        assert os.stat(visible).st_mode & 0o7777 == projection.mode, path
    tops = {os.path.normpath(p).split("/")[0] for p in payload}
    visible_names = {n for n in os.listdir(target) if not n.startswith("..")}
    assert visible_names == tops


@pytest.mark.parametrize(("name", "payload", "success"), WRITE_ONCE, ids=[c[0] for c in WRITE_ONCE])
def test_write_once(
    tmp_path: Path, name: str, payload: dict[str, FileProjection], success: bool
) -> None:
    writer = AtomicWriter(tmp_path)
    if not success:
        with pytest.raises(PayloadError):
            writer.write(payload)
        assert os.listdir(tmp_path) == []  # nothing half written
        return
    assert writer.write(payload)
    check_contents(tmp_path, payload)
    assert os.readlink(tmp_path / DATA_DIR_NAME).startswith("..")


# TestUpdate: (name, first, next, should write)
UPDATE = [
    (
        "update",
        {"foo": P("foo"), "bar": P("bar")},
        {"foo": P("foo2"), "bar": P("bar2", 0o640)},
        True,
    ),
    ("no update", {"foo": P("foo"), "bar": P("bar")}, {"foo": P("foo"), "bar": P("bar")}, False),
    (
        "no update 2",
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        False,
    ),
    (
        "add 1",
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar"), "blu/zip.txt": P("zip")},
        True,
    ),
    (
        "add 2",
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar"), "blu/two/2/3/4/5/zip.txt": P("zip")},
        True,
    ),
    (
        "add 3",
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar"), "bar/2/3/4/5/zip.txt": P("zip")},
        True,
    ),
    (
        "delete 1",
        {"foo/bar.txt": P("foo"), "bar/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo")},
        True,
    ),
    (
        "delete 2",
        {"foo/bar.txt": P("foo"), "bar/1/2/3/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo")},
        True,
    ),
    (
        "delete 3",
        {"foo/bar.txt": P("foo"), "bar/1/2/sip.txt": P("sip"), "bar/1/2/3/zab.txt": P("bar")},
        {"foo/bar.txt": P("foo"), "bar/1/2/sip.txt": P("sip")},
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "first", "following", "should_write"), UPDATE, ids=[c[0] for c in UPDATE]
)
def test_update(
    tmp_path: Path,
    name: str,
    first: dict[str, FileProjection],
    following: dict[str, FileProjection],
    should_write: bool,
) -> None:
    writer = AtomicWriter(tmp_path)
    assert writer.write(first)
    old = writer.current_dir()
    assert writer.write(following) is should_write
    check_contents(tmp_path, following)
    if should_write:
        assert old is not None and not old.exists()  # the old payload directory is gone
        assert writer.current_dir() != old
    # Only the current payload directory and the ..data link remain.
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("..")) == sorted(
        [DATA_DIR_NAME, writer.current_dir().name]  # type: ignore[union-attr]
    )


def test_missing_target_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        AtomicWriter(tmp_path / "nope").write({"a": P("a")})


def test_readers_never_see_a_partial_update(tmp_path: Path) -> None:
    """Readers reading both files while the writer swaps payloads see either the
    whole old payload or the whole new one: both files always agree, and are
    always complete."""
    size = 64 * 1024
    writer = AtomicWriter(tmp_path)

    def payload(gen: int) -> dict[str, FileProjection]:
        body = (f"{gen:08d}" * (size // 8)).encode()
        return {"a.txt": FileProjection(body), "dir/b.txt": FileProjection(body)}

    writer.write(payload(0))
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            # Read through ..data once, as a consumer that wants one consistent
            # view opens the files under the same resolved directory.
            try:
                base = tmp_path / os.readlink(tmp_path / DATA_DIR_NAME)
                a = (base / "a.txt").read_bytes()
                b = (base / "dir" / "b.txt").read_bytes()
            except FileNotFoundError:
                continue  # the old directory was removed after we resolved it: retry
            single = (tmp_path / "a.txt").read_bytes()
            reads[0] += 1
            for name, data in (("a", a), ("b", b), ("visible a", single)):
                if len(data) != size or data != data[:8] * (size // 8):
                    problems.append(f"{name}: partial or mixed content ({len(data)} bytes)")
            if a != b:
                problems.append("a and b from one payload directory disagree")

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for gen in range(1, 60):
            assert writer.write(payload(gen))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert problems == []
    assert reads[0] > 0
    assert (tmp_path / "a.txt").read_bytes()[:8] == b"00000059"
