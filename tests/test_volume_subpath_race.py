"""A volumeMount's subPath is bind-mounted from the checked descriptor, so a
workload that swaps a path component for a symlink cannot escape its volume.

Every test that mounts runs its body in a forked child inside a private mount
namespace of its own (with a tmpfs as scratch space): whatever it mounts dies
with the child and never reaches the host's mount table, which the parent
checks afterwards. The tests need root (CAP_SYS_ADMIN); CI runs them as root.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Pod
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.volume import ReconcilingVolumeManager, mounter
from kubelet_kit.volume.reconciler import container_mounts
from kubelet_kit.volume.subpath import bind_sub_path, resolve_sub_path

pytestmark = pytest.mark.timeout(120)

RequireReal = Callable[[bool, str], None]
FIELD = "spec.containers[0].volumeMounts[0].subPath"

_CLONE_NEWNS = 0x00020000
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _enter_private_mount_ns() -> None:
    # os.unshare arrived in Python 3.12; libc's works everywhere.
    if _libc.unshare(_CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    # Without this, mounts made here would still propagate to shared peers.
    mounter.mount("none", "/", None, mounter.MS_REC | mounter.MS_PRIVATE, None)


def _in_child(body: Callable[[], None]) -> tuple[int, str]:
    """Run ``body`` in a forked child; its exit status and any traceback."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        out = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


def _can_unshare() -> bool:
    code, _ = _in_child(_enter_private_mount_ns)
    return code == 0


def _host_mounts_under(path: Path) -> list[str]:
    return mounter.mount_points_under(path)


def run_isolated(tmp_path: Path, require_real: RequireReal, body: Callable[[Path], None]) -> None:
    """Run ``body(scratch)`` in a private mount namespace over a fresh tmpfs."""
    require_real(mounter.can_mount(), "root (CAP_SYS_ADMIN) to make bind mounts")
    require_real(_can_unshare(), "a private mount namespace (unshare CLONE_NEWNS)")
    scratch = tmp_path / "fs"
    scratch.mkdir()

    def child() -> None:
        _enter_private_mount_ns()
        # tmpfs: renameat2(RENAME_EXCHANGE) works there, and it vanishes with us.
        mounter.mount_tmpfs(scratch, mode=0o755)
        body(scratch)

    code, out = _in_child(child)
    assert _host_mounts_under(tmp_path) == [], "a mount leaked into the host's namespace"
    if code != 0:
        pytest.fail(f"isolated body failed (exit {code}):\n{out}", pytrace=False)


def host_path_pod(uid: str, volume: Path, sub_path: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": f"pod-{uid}", "namespace": "ns", "uid": uid},
            "spec": {
                "volumes": [{"name": "vol", "hostPath": {"path": str(volume)}}],
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "volumeMounts": [
                            {"name": "vol", "mountPath": "/data", "subPath": sub_path}
                        ],
                    }
                ],
            },
        }
    )


def mount_count(path: Path) -> int:
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split()[4] == real)


# --------------------------------------------------------------------- (a)


def _exchange(a: Path, b: Path) -> None:
    rc = _libc.renameat2(_AT_FDCWD, str(a).encode(), _AT_FDCWD, str(b).encode(), _RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"renameat2 {a} {b}: {os.strerror(err)}")


def _swap_race(scratch: Path, bind: bool) -> None:
    root = scratch / "root"
    volume = scratch / "volume"
    outside = scratch / "outside"
    for d in (root, volume, outside):
        d.mkdir()
    (outside / "outside-marker").write_text("host secret")
    inside = volume / "data"
    inside.mkdir()
    (inside / "inside-marker").write_text("volume")
    inside_id = (os.stat(inside).st_dev, os.stat(inside).st_ino)
    # "data" and "decoy" trade places atomically: the name "data" is always
    # either the real directory or a symlink to the outside one.
    os.symlink(str(outside), volume / "decoy")

    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            _exchange(volume / "data", volume / "decoy")
            swaps += 1

    sys.setswitchinterval(1e-6)  # interleave the two threads as finely as possible
    thread = threading.Thread(target=swapper)
    thread.start()
    returned: list[Path] = []
    refused = 0
    try:
        for i in range(400):
            pod = host_path_pod(f"u{i}", volume, "data")
            try:
                [m] = container_mounts(root, pod, pod.spec.containers[0], {}, bind_sub_paths=bind)
            except ValidationError as exc:
                assert [e.path for e in exc.errors] == [FIELD], exc.errors
                refused += 1
                continue
            path = Path(m.host_path)
            returned.append(path)
            st = os.stat(path)
            assert (st.st_dev, st.st_ino) == inside_id, f"call {i}: {path} is not the volume's"
            assert not (path / "outside-marker").exists(), f"call {i}: escaped the volume"
    finally:
        stop.set()
        thread.join()
    if os.path.isdir(volume / "data") and not os.path.islink(volume / "data"):
        _exchange(volume / "data", volume / "decoy")
    assert os.path.islink(volume / "data")  # the attacker's final state
    assert swaps > 100 and returned, (swaps, len(returned), refused)
    for path in returned:
        st = os.stat(path)
        assert (st.st_dev, st.st_ino) == inside_id, f"{path} now shows something else"
        assert (path / "inside-marker").read_text() == "volume"
        assert not (path / "outside-marker").exists()


def test_swapped_component_never_escapes_the_volume(
    tmp_path: Path, require_real: RequireReal
) -> None:
    run_isolated(tmp_path, require_real, lambda scratch: _swap_race(scratch, bind=True))


# --------------------------------------------------------------------- (b), (c)


def _file_and_restart(scratch: Path) -> None:
    root = scratch / "root"
    volume = scratch / "volume"
    (volume / "conf").mkdir(parents=True)
    (volume / "conf" / "app.ini").write_text("key=value\n")
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {
                "volumes": [{"name": "vol", "hostPath": {"path": str(volume)}}],
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "volumeMounts": [
                            {"name": "vol", "mountPath": "/etc/app.ini", "subPath": "conf/app.ini"},
                            {"name": "vol", "mountPath": "/work", "subPath": "work/dir"},
                            {"name": "vol", "mountPath": "/whole"},
                        ],
                    }
                ],
            },
        }
    )
    container = pod.spec.containers[0]
    mounts = container_mounts(root, pod, container, {}, bind_sub_paths=True)
    subpaths = root / "pods" / "u1" / "volume-subpaths" / "vol" / "app"
    assert [m.host_path for m in mounts] == [str(subpaths / "0"), str(subpaths / "1"), str(volume)]
    file_target, dir_target = subpaths / "0", subpaths / "1"
    # (b) a file sub path: an empty file was made to mount on, showing the file.
    assert file_target.is_file() and mounter.is_mount_point(file_target)
    assert file_target.read_text() == "key=value\n"
    assert dir_target.is_dir() and mounter.is_mount_point(dir_target)
    assert (volume / "work" / "dir").is_dir()  # created in the volume, as before
    (dir_target / "written").write_text("through the mount")
    assert (volume / "work" / "dir" / "written").read_text() == "through the mount"
    # (c) a restart: the same paths, the mounts reused, not stacked.
    again = container_mounts(root, pod, container, {}, bind_sub_paths=True)
    assert again == mounts
    assert mount_count(file_target) == 1 and mount_count(dir_target) == 1
    # Reused even after the source name was swapped: the mount holds the object.
    os.rename(volume / "conf", volume / "conf-old")
    os.symlink("/etc", volume / "conf")
    assert container_mounts(root, pod, container, {}, bind_sub_paths=True) == mounts
    assert file_target.read_text() == "key=value\n"


def test_file_sub_path_and_restart_reuse(tmp_path: Path, require_real: RequireReal) -> None:
    run_isolated(tmp_path, require_real, _file_and_restart)


def _refused_without_mounting(scratch: Path) -> None:
    root = scratch / "root"
    volume = scratch / "volume"
    volume.mkdir()
    os.symlink("/etc", volume / "escape")
    target = root / "pods" / "u1" / "volume-subpaths" / "vol" / "app" / "0"
    with pytest.raises(ValidationError, match="outside the volume") as err:
        bind_sub_path(volume, "escape", target, field=FIELD)
    assert err.value.errors[0].path == FIELD
    assert not target.exists() and not mounter.mount_points_under(root)


def test_refused_sub_path_mounts_nothing(tmp_path: Path, require_real: RequireReal) -> None:
    run_isolated(tmp_path, require_real, _refused_without_mounting)


# --------------------------------------------------------------------- (d)


async def _inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def _manager_cleanup(scratch: Path) -> None:
    root = scratch / "root"
    host = scratch / "host"
    (host / "h").mkdir(parents=True)
    (host / "h" / "keep").write_text("host data")

    def pod(with_host: bool) -> Pod:
        volumes: list[dict[str, Any]] = [{"name": "scratch", "emptyDir": {}}]
        mounts: list[dict[str, Any]] = [
            {"name": "scratch", "mountPath": "/a", "subPath": "a/b"},
            {"name": "scratch", "mountPath": "/f", "subPath": "f.txt"},
        ]
        if with_host:
            volumes.append({"name": "host", "hostPath": {"path": str(host)}})
            mounts.append({"name": "host", "mountPath": "/h", "subPath": "h"})
        return Pod.from_dict(
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                "spec": {
                    "volumes": volumes,
                    "containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts}],
                },
            }
        )

    async def flow() -> None:
        manager = ReconcilingVolumeManager(root, clock=FakeClock(), offload=_inline, may_mount=True)
        first = pod(with_host=True)
        manager.add_pod(first)
        await manager.reconcile()
        volume = root / "pods/u1/volumes/kubernetes.io~empty-dir/scratch"
        (volume / "f.txt").write_text("file")
        mounts = manager.container_mounts(first, first.spec.containers[0])
        subpaths = root / "pods/u1/volume-subpaths"
        assert [m.host_path for m in mounts] == [
            str(subpaths / "scratch/app/0"),
            str(subpaths / "scratch/app/1"),
            str(subpaths / "host/app/2"),
        ]
        assert len(mounter.mount_points_under(subpaths)) == 3
        # One volume torn down while the pod stays: only its sub paths go.
        second = pod(with_host=False)
        manager.add_pod(second)
        await manager.reconcile()
        assert not (subpaths / "host").exists()
        assert len(mounter.mount_points_under(subpaths)) == 2
        assert (host / "h" / "keep").read_text() == "host data"  # the host's, untouched
        # The pod removed: every mount gone, and its directories.
        manager.remove_pod(second)
        await manager.reconcile()
        await manager.wait_for_unmount(second, 1)
        assert mounter.mount_points_under(root) == []
        assert not (root / "pods" / "u1").exists()

        # Sub path mounts no volume record speaks for (an agent that restarted)
        # are still found and cleaned with the pod's directories.
        orphan = host_path_pod("u2", host, "h")
        container_mounts(root, orphan, orphan.spec.containers[0], {}, bind_sub_paths=True)
        assert len(mounter.mount_points_under(root)) == 1
        manager._remove_pod_dirs("u2")
        assert mounter.mount_points_under(root) == []
        assert not (root / "pods" / "u2").exists()
        assert (host / "h" / "keep").read_text() == "host data"

    asyncio.run(flow())


def test_pod_removal_unmounts_sub_paths(tmp_path: Path, require_real: RequireReal) -> None:
    run_isolated(tmp_path, require_real, _manager_cleanup)


# --------------------------------------------------------------------- (e)


def test_without_mount_privilege_the_checked_path_is_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    root = tmp_path / "root"
    pod = host_path_pod("u1", volume, "sub/dir")
    monkeypatch.setattr(mounter, "can_mount", lambda: False)
    target = root / "pods/u1/volume-subpaths/vol/app/0"
    assert bind_sub_path(volume, "sub/dir", target) == resolve_sub_path(volume, "sub/dir")
    [m] = container_mounts(root, pod, pod.spec.containers[0], {}, bind_sub_paths=True)
    assert m.host_path == str(volume / "sub" / "dir")
    monkeypatch.undo()
    manager = ReconcilingVolumeManager(root, may_mount=False)
    [m] = manager.container_mounts(pod, pod.spec.containers[0])
    assert m.host_path == str(volume / "sub" / "dir")
    assert not (root / "pods").exists()  # nothing made for a bind mount


# --------------------------------------------------------------------- host runtime


def _host_runtime_mounts_the_bind(scratch: Path) -> None:
    from kubelet_kit.container import (
        ContainerConfig,
        ContainerMetadata,
        ContainerState,
        ImageSpec,
        Mount,
        PodSandboxConfig,
        PodSandboxMetadata,
    )
    from kubelet_kit.container.logs import join_output, read_log
    from kubelet_kit.runtimes import HostProcessRuntime

    root = scratch / "root"
    volume = scratch / "volume"
    outside = scratch / "outside"
    (volume / "conf").mkdir(parents=True)
    (volume / "conf" / "app.ini").write_text("from the volume\n")
    outside.mkdir()
    (outside / "app.ini").write_text("host secret\n")
    pod = host_path_pod("u1", volume, "conf")
    [m] = container_mounts(root, pod, pod.spec.containers[0], {}, bind_sub_paths=True)
    # The workload swaps the checked directory for a symlink before the start.
    os.rename(volume / "conf", volume / "conf-old")
    os.symlink(str(outside), volume / "conf")
    target = scratch / "ctr" / "etc"

    async def run() -> str:
        runtime = HostProcessRuntime(scratch / "state")
        sandbox_config = PodSandboxConfig(
            metadata=PodSandboxMetadata(name="p", namespace="ns", uid="u1"),
            log_directory=str(scratch / "logs"),
        )
        sandbox = await runtime.run_pod_sandbox(sandbox_config)
        cfg = ContainerConfig(
            metadata=ContainerMetadata(name="app"),
            image=ImageSpec("busybox"),
            command=("/bin/sh", "-c", f"cat {target}/app.ini"),
            log_path="app/0.log",
            mounts=(Mount(container_path=str(target), host_path=m.host_path, readonly=True),),
        )
        cid = await runtime.create_container(sandbox, cfg, sandbox_config)
        await runtime.start_container(cid)
        for _ in range(500):
            if (await runtime.container_status(cid)).state is ContainerState.EXITED:
                break
            await asyncio.sleep(0.02)
        await runtime.remove_pod_sandbox(sandbox)
        return join_output(read_log(scratch / "logs" / "app/0.log")).decode()

    assert asyncio.run(run()) == "from the volume\n"


def test_host_runtime_mounts_the_sub_path_bind(tmp_path: Path, require_real: RequireReal) -> None:
    run_isolated(tmp_path, require_real, _host_runtime_mounts_the_bind)
