"""HostProcessRuntime applies mounts in a private mount namespace (as root).

Every mount target lives under the test's own temporary directory: the
container shares the host's root file system, so a created target is created on
the host. After each test no mount is left under that directory (mounts
elsewhere may be other tests', running at the same time).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import attrs
import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.errors import ContainerStartError
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import _has_cap_sys_admin

pytestmark = pytest.mark.timeout(30)

WAIT = 10.0
RequireReal = Callable[[bool, str], None]


def mount_table() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split()[4] for line in f)


class Setup:
    def __init__(self, tmp: Path, runtime: HostProcessRuntime) -> None:
        self.tmp = tmp
        self.runtime = runtime
        self.sandbox_config = PodSandboxConfig(
            metadata=PodSandboxMetadata(name="m", namespace="default", uid="uid-m"),
            log_directory=str(tmp / "logs"),
        )
        self.sandbox = ""

    def config(self, name: str, script: str, mounts: tuple[Mount, ...]) -> ContainerConfig:
        return ContainerConfig(
            metadata=ContainerMetadata(name=name),
            image=ImageSpec("busybox"),
            command=("/bin/sh", "-c", script),
            log_path=f"{name}/0.log",
            mounts=mounts,
        )

    async def start(self, cfg: ContainerConfig) -> str:
        cid = await self.runtime.create_container(self.sandbox, cfg, self.sandbox_config)
        await self.runtime.start_container(cid)
        return cid

    async def output(self, cid: str, cfg: ContainerConfig) -> str:
        deadline = time.monotonic() + WAIT
        while (await self.runtime.container_status(cid)).state is not ContainerState.EXITED:
            assert time.monotonic() < deadline, "container did not exit"
            await asyncio.sleep(0.02)
        log = self.tmp / "logs" / cfg.log_path
        return join_output(read_log(log)).decode() if log.exists() else ""


@pytest.fixture
async def setup(tmp_path: Path, require_real: RequireReal) -> AsyncIterator[Setup]:
    require_real(_has_cap_sys_admin(), "root (CAP_SYS_ADMIN) to make mount namespaces")
    runtime = HostProcessRuntime(tmp_path / "state")
    s = Setup(tmp_path, runtime)
    s.sandbox = await runtime.run_pod_sandbox(s.sandbox_config)
    try:
        yield s
    finally:
        for c in await runtime.list_containers():
            with contextlib.suppress(Exception):
                await runtime.stop_container(c.id, 0)
        await runtime.remove_pod_sandbox(s.sandbox)
        # Nothing the containers mounted leaked into the host's namespace (every
        # target is under the test's directory; other tests may mount elsewhere).
        assert [p for p in mount_table() if p.startswith(f"{tmp_path}/")] == []


async def test_bind_mounts_shadow_the_target_only_inside_the_container(setup: Setup) -> None:
    volume = setup.tmp / "volume"
    volume.mkdir()
    (volume / "key").write_text("from the volume\n")
    target = setup.tmp / "etc" / "config"
    target.mkdir(parents=True)
    (target / "host-only").write_text("host")
    cfg = setup.config(
        "reader",
        f"cat {target}/key; ls {target}; touch {target}/new && echo writable",
        (Mount(container_path=str(target), host_path=str(volume)),),
    )
    out = await setup.output(await setup.start(cfg), cfg)
    assert out.splitlines() == ["from the volume", "key", "writable"]
    # The host still sees its own directory; the write went to the volume.
    assert sorted(os.listdir(target)) == ["host-only"]
    assert (volume / "new").exists()


async def test_read_only_file_and_missing_targets(setup: Setup) -> None:
    volume = setup.tmp / "vol"
    volume.mkdir()
    single = setup.tmp / "single.txt"
    single.write_text("one file\n")
    dir_target = setup.tmp / "made" / "dir"
    file_target = setup.tmp / "made" / "file.txt"
    cfg = setup.config(
        "ro",
        f"touch {dir_target}/x 2>/dev/null && echo rw || echo ro; cat {file_target}",
        (
            Mount(container_path=str(dir_target), host_path=str(volume), readonly=True),
            Mount(container_path=str(file_target), host_path=str(single)),
        ),
    )
    out = await setup.output(await setup.start(cfg), cfg)
    assert out.splitlines() == ["ro", "one file"]
    assert not (volume / "x").exists()
    # As runc: a missing target is made as a directory or an empty file.
    assert dir_target.is_dir() and file_target.is_file() and file_target.read_text() == ""


async def test_nested_mounts_are_made_parents_first(setup: Setup) -> None:
    outer, inner = setup.tmp / "outer", setup.tmp / "inner"
    outer.mkdir()
    inner.mkdir()
    (inner / "f").write_text("inner")
    target = setup.tmp / "t"
    cfg = setup.config(
        "nested",
        f"cat {target}/sub/f",
        # Given child first: the runtime must still mount the parent first.
        (
            Mount(container_path=str(target / "sub"), host_path=str(inner)),
            Mount(container_path=str(target), host_path=str(outer)),
        ),
    )
    assert (await setup.output(await setup.start(cfg), cfg)).strip() == "inner"


async def test_host_to_container_propagation_sees_later_host_mounts(setup: Setup) -> None:
    volume = setup.tmp / "prop"
    volume.mkdir()
    # Propagation needs a shared mount on the host side (this machine's "/" is
    # private): make the volume one, as a node would for such a hostPath.
    subprocess.run(["mount", "--bind", str(volume), str(volume)], check=True)
    subprocess.run(["mount", "--make-shared", str(volume)], check=True)
    try:
        await _propagation(setup, volume)
    finally:
        subprocess.run(["umount", "-l", str(volume)], check=True)


async def _propagation(setup: Setup, volume: Path) -> None:
    target = setup.tmp / "seen"
    cfg = setup.config(
        "prop",
        f"while [ ! -e {target}/late/flag ]; do sleep 0.05; done; cat {target}/late/flag",
        (
            Mount(
                container_path=str(target),
                host_path=str(volume),
                propagation=MountPropagation.HOST_TO_CONTAINER,
            ),
        ),
    )
    cid = await setup.start(cfg)
    late = volume / "late"
    late.mkdir()
    src = setup.tmp / "late-src"
    src.mkdir()
    (src / "flag").write_text("propagated")
    # A bind mount made on the host after the container started.
    subprocess.run(["mount", "--bind", str(src), str(late)], check=True)
    try:
        out = await asyncio.wait_for(setup.output(cid, cfg), WAIT)
    finally:
        subprocess.run(["umount", str(late)], check=True)
    assert out.strip() == "propagated"


@contextlib.contextmanager
def shared(volume: Path) -> Iterator[None]:
    """``volume`` as a shared mount of its own; every mount under it is undone after."""
    subprocess.run(["mount", "--bind", str(volume), str(volume)], check=True)
    subprocess.run(["mount", "--make-shared", str(volume)], check=True)
    try:
        yield
    finally:
        for point in sorted(
            (p for p in mount_table() if p.startswith(f"{volume}/")), key=len, reverse=True
        ):
            subprocess.run(["umount", "-l", point], check=True)
        subprocess.run(["umount", "-l", str(volume)], check=True)


async def test_private_mount_beside_a_host_to_container_one_stays_private(
    setup: Setup,
) -> None:
    # One HostToContainer mount makes the namespace a slave of the host's; the
    # private mount beside it must still not receive later host mounts.
    volume = setup.tmp / "shared-vol"
    (volume / "late").mkdir(parents=True)
    with shared(volume):
        private, follows = setup.tmp / "private", setup.tmp / "follows"
        cfg = setup.config(
            "mixed",
            "sleep 30",
            (
                Mount(container_path=str(private), host_path=str(volume)),
                Mount(
                    container_path=str(follows),
                    host_path=str(volume),
                    propagation=MountPropagation.HOST_TO_CONTAINER,
                ),
            ),
        )
        cid = await setup.start(cfg)
        subprocess.run(["mount", "-t", "tmpfs", "kk", str(volume / "late")], check=True)
        (volume / "late" / "flag").write_text("late")
        run = setup.runtime.exec_sync
        seen = await run(cid, ["cat", f"{follows}/late/flag"], timeout=5)
        assert (seen.exit_code, seen.stdout) == (0, b"late")
        hidden = await run(cid, ["cat", f"{private}/late/flag"], timeout=5)
        assert hidden.exit_code != 0
        await setup.runtime.stop_container(cid, 0)


async def test_bidirectional_mounts_of_the_container_reach_the_host(setup: Setup) -> None:
    volume = setup.tmp / "bidi"
    (volume / "sub").mkdir(parents=True)
    with shared(volume):
        target = setup.tmp / "inside"
        cfg = setup.config(
            "bidi",
            "sleep 30",
            (
                Mount(
                    container_path=str(target),
                    host_path=str(volume),
                    propagation=MountPropagation.BIDIRECTIONAL,
                ),
            ),
        )
        # Only a privileged container may mount.
        cfg = attrs.evolve(cfg, security_context=LinuxContainerSecurityContext(privileged=True))
        cid = await setup.start(cfg)
        made = await setup.runtime.exec_sync(
            cid, ["sh", "-c", f"mount -t tmpfs kk {target}/sub && echo hi > {target}/sub/f"], 5
        )
        assert made.exit_code == 0, made.stderr
        assert os.path.ismount(volume / "sub")
        assert (volume / "sub" / "f").read_text() == "hi\n"
        # Nothing but what the container mounted under the volume reached the host.
        assert not os.path.ismount(target)
        await setup.runtime.stop_container(cid, 0)


@pytest.mark.parametrize(
    ("propagation", "needs"),
    [(MountPropagation.BIDIRECTIONAL, "shared"), (MountPropagation.HOST_TO_CONTAINER, "slave")],
)
async def test_propagation_from_a_private_host_mount_is_a_start_error(
    setup: Setup, propagation: MountPropagation, needs: str
) -> None:
    volume = setup.tmp / "private-vol"
    volume.mkdir()
    cfg = setup.config(
        "refused",
        "true",
        (Mount(str(setup.tmp / "in"), str(volume), propagation=propagation),),
    )
    cid = await setup.runtime.create_container(setup.sandbox, cfg, setup.sandbox_config)
    with pytest.raises(ContainerStartError, match=needs):
        await setup.runtime.start_container(cid)


async def test_exec_sees_the_container_mounts(setup: Setup) -> None:
    volume = setup.tmp / "v"
    volume.mkdir()
    (volume / "probe").write_text("ok")
    target = setup.tmp / "in"
    cfg = setup.config(
        "svc", "sleep 30", (Mount(container_path=str(target), host_path=str(volume)),)
    )
    cid = await setup.start(cfg)
    result = await setup.runtime.exec_sync(cid, ["cat", f"{target}/probe"], timeout=5)
    assert (result.exit_code, result.stdout) == (0, b"ok")
    missing = await setup.runtime.exec_sync(cid, ["no-such-command"], timeout=5)
    assert missing.exit_code == 127 and b"no-such-command" in missing.stderr
    assert (await setup.runtime.container_status(cid)).state is ContainerState.RUNNING
    await setup.runtime.stop_container(cid, 0)


async def test_missing_source_is_a_start_error(setup: Setup) -> None:
    cfg = setup.config(
        "bad",
        "true",
        (Mount(container_path=str(setup.tmp / "x"), host_path=str(setup.tmp / "nope")),),
    )
    cid = await setup.runtime.create_container(setup.sandbox, cfg, setup.sandbox_config)
    with pytest.raises(ContainerStartError, match="error mounting"):
        await setup.runtime.start_container(cid)
    status = await setup.runtime.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        128,
        "StartError",
    )


async def test_without_privilege_mounts_are_only_recorded(tmp_path: Path) -> None:
    runtime = HostProcessRuntime(tmp_path / "state", apply_mounts=False)
    sb = PodSandboxConfig(
        metadata=PodSandboxMetadata(name="n", namespace="d", uid="u"),
        log_directory=str(tmp_path / "logs"),
    )
    sid = await runtime.run_pod_sandbox(sb)
    volume = tmp_path / "v"
    volume.mkdir()
    (volume / "key").write_text("volume")
    target = tmp_path / "t"
    cfg = ContainerConfig(
        metadata=ContainerMetadata(name="c"),
        image=ImageSpec("busybox"),
        command=("/bin/sh", "-c", f"ls {target} 2>&1 || echo absent"),
        log_path="c/0.log",
        mounts=(Mount(container_path=str(target), host_path=str(volume)),),
    )
    cid = await runtime.create_container(sid, cfg, sb)
    await runtime.start_container(cid)
    deadline = time.monotonic() + WAIT
    while (await runtime.container_status(cid)).state is not ContainerState.EXITED:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    out = join_output(read_log(tmp_path / "logs" / "c" / "0.log")).decode()
    assert "absent" in out and not target.exists()
    assert (await runtime.container_status(cid)).mounts == cfg.mounts
    await runtime.remove_pod_sandbox(sid)
