"""FakeRuntime containers see the host beneath their mounts, start in their
working directory, and decline Bidirectional propagation."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    Mount,
    MountPropagation,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import UnimplementedError
from kubelet_kit.testing import FakeClock, FakeRuntime, _fake_fs

SANDBOX = PodSandboxConfig(metadata=PodSandboxMetadata("p", "default", "uid-p"))


async def _start(rt: FakeRuntime, mounts: tuple[Mount, ...] = (), working_dir: str = "") -> str:
    sid = await rt.run_pod_sandbox(SANDBOX)
    config = ContainerConfig(
        metadata=ContainerMetadata("c"),
        image=ImageSpec("busybox"),
        command=("sleep", "3600"),
        mounts=mounts,
        working_dir=working_dir,
    )
    cid = await rt.create_container(sid, config, SANDBOX)
    await rt.start_container(cid)
    return cid


async def _sh(rt: FakeRuntime, cid: str, script: str) -> tuple[int, str, str]:
    res = await rt.exec_sync(cid, ["sh", "-c", script])
    return res.exit_code, res.stdout.decode(), res.stderr.decode()


async def test_volumes_are_the_host_files(tmp_path: Path) -> None:
    src, sealed = tmp_path / "src", tmp_path / "sealed"
    src.mkdir()
    sealed.mkdir()
    (src / "a").write_text("from the host\n")
    (sealed / "b").write_text("sealed\n")
    single = tmp_path / "one.txt"
    single.write_text("one\n")
    rt = FakeRuntime(FakeClock())
    cid = await _start(
        rt,
        (
            Mount("/data", str(src)),
            Mount("/data/ro", str(sealed), readonly=True),
            Mount("/etc/one.txt", str(single)),
        ),
    )
    assert await _sh(rt, cid, "cat /data/a") == (0, "from the host\n", "")
    (src / "late").write_text("later\n")
    assert await _sh(rt, cid, "cat /data/late; echo mine > /data/mine") == (0, "later\n", "")
    assert (src / "mine").read_text() == "mine\n"
    # The nested read-only mount shadows its parent's directory.
    assert await _sh(rt, cid, "cat /data/ro/b") == (0, "sealed\n", "")
    code, _, err = await _sh(rt, cid, "touch /data/ro/x")
    assert code == 1 and "Read-only file system" in err
    code, _, err = await _sh(rt, cid, "echo x > /data/ro/y")
    assert code == 1 and "Read-only file system" in err
    assert sorted(os.listdir(sealed)) == ["b"]
    assert await _sh(rt, cid, "echo two >> /etc/one.txt; cat /etc/one.txt") == (
        0,
        "one\ntwo\n",
        "",
    )
    assert await _sh(rt, cid, "rm /data/mine && test -e /data/mine || echo gone") == (
        0,
        "gone\n",
        "",
    )
    # The container's own files stay in memory.
    await _sh(rt, cid, "echo own > /tmp/own")
    files = rt.files(cid)
    assert files["/tmp/own"] == "own\n"
    assert not [path for path in files if path.startswith("/data")]


async def test_working_dir_is_where_relative_paths_start(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock())
    cid = await _start(rt, working_dir="/work")
    assert await _sh(rt, cid, "pwd; echo x > rel; cat /work/rel") == (0, "/work\nx\n", "")
    assert "/work/rel" in rt.files(cid)
    other = FakeRuntime(FakeClock())
    assert (await other.exec_sync(await _start(other), ["pwd"])).stdout == b"/\n"


async def test_bidirectional_propagation_is_declined(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock())
    with pytest.raises(UnimplementedError, match=r"mounts\[0\]\.propagation"):
        await _start(rt, (Mount("/m", str(tmp_path), propagation=MountPropagation.BIDIRECTIONAL),))


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A directory a tmpfs is mounted on, by the test, after the fixture returns."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = tmp_path / "vol" / "sub"
    made.mkdir(parents=True)
    yield made
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    while os.path.ismount(made):
        assert libc.umount2(str(made).encode(), 0) == 0, os.strerror(ctypes.get_errno())


@pytest.mark.parametrize(
    ("propagation", "seen"),
    [(MountPropagation.PRIVATE, False), (MountPropagation.HOST_TO_CONTAINER, True)],
)
async def test_later_host_mounts_reach_only_host_to_container(
    tmpfs: Path, propagation: MountPropagation, seen: bool
) -> None:
    rt = FakeRuntime(FakeClock())
    cid = await _start(rt, (Mount("/v", str(tmpfs.parent), propagation=propagation),))
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    assert libc.mount(b"kk", str(tmpfs).encode(), b"tmpfs", ctypes.c_ulong(0), None) == 0
    (tmpfs / "flag").write_text("mounted\n")
    code, out, _ = await _sh(rt, cid, "cat /v/sub/flag")
    assert (code, out) == ((0, "mounted\n") if seen else (1, ""))
    if not seen:
        code, _, err = await _sh(rt, cid, "echo x > /v/sub/other")
        assert code == 1 and "cannot reach" in err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_reads_its_own_mount_table() -> None:
    table = _fake_fs._OWN_TABLE
    points = _fake_fs.host_mount_points()
    parent_file = table._file
    assert parent_file is not None
    pid = os.fork()
    if pid == 0:  # the child: the parent's open table is let go, its own opened
        ok = table._file is None and _fake_fs.host_mount_points() == points
        os._exit(0 if ok and table._file is not None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert table._file is parent_file and not parent_file.closed
    assert _fake_fs.host_mount_points() == points
