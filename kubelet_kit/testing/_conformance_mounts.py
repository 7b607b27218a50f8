"""The conformance checks of what a container sees of the host and of its config:
volumes, mount propagation, its working directory and environment.

What the CRI's contract says, checked through the Runtime interface:

* A :class:`Mount` of a host directory shows that directory at
  ``container_path``, live: the host's files with their content (also those
  written after the container started), and the container's writes land in the
  host's directory. A ``readonly`` mount refuses writes; a mount of a single
  host file is that file. ``container_status`` reports the mounts it was given.
* ``propagation`` says which later mounts cross the mount: with ``PRIVATE`` (the
  default) a mount made on the host under the volume after the container
  started is not seen inside; with ``HOST_TO_CONTAINER`` it is; with
  ``BIDIRECTIONAL`` it is, and a mount a (privileged) container makes under the
  volume is seen on the host too.
* ``working_dir`` is the directory the container's process and the commands
  exec'd into it start in (made if the image lacks it), and ``envs`` are its
  environment, values kept byte for byte (spaces, ``=``, quotes, empty values).

The host directories are made by the kit, in a temporary directory of its own
(removed afterwards with every mount under it): the kit must run on the machine
the runtime runs on, as it must for log files. Container paths lie in that
directory too, so a runtime that, like the host-process one, shares the host's
root file system makes its mount targets there and nowhere else. The
propagation checks need root to make mounts on the host (a tmpfs under the
volume, which the kit first makes a shared mount, as a node does for volumes
with propagation); without it they are skipped. ``BIDIRECTIONAL`` is asked of a
privileged container in a privileged sandbox, the only ones allowed to mount.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs

from kubelet_kit.container.interfaces import (
    ContainerState,
    ExecResult,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
)
from kubelet_kit.testing._conformance_context import _Ctx, _Skip, _wait_state, log_file
from kubelet_kit.testing._conformance_io import _find_log_line

_MS_BIND = 4096
_MS_REC = 16384
_MS_SHARED = 1 << 20
_MNT_DETACH = 2

#: The environment the ``working_dir_and_envs`` check gives its container.
ENVS = {
    "KK_PLAIN": "plain",
    "KK_SPACES": "two  spaces",
    "KK_SYMBOLS": "a=b;c'd\"e$f",
    "KK_EMPTY": "",
}


# ------------------------------------------------------------------ host side


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    rc = _libc().mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mount_points_under(root: Path) -> list[str]:
    """Mount points of this namespace at or under ``root``, deepest first."""
    prefix = str(root).rstrip("/") + "/"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        points = [line.split()[4] for line in f]
    mine = {p for p in points if p == str(root) or p.startswith(prefix)}
    return sorted(mine, key=lambda p: p.count("/"), reverse=True)


def _unmount_all(root: Path) -> None:
    """Unmount everything mounted at or under ``root`` (also mounts a container
    made there and that propagated to the host)."""
    libc = _libc()
    for _ in range(32):  # a mount point may hold a stack of mounts
        points = _mount_points_under(root)
        if not points:
            return
        for point in points:
            if libc.umount2(point.encode(), 0) != 0 and ctypes.get_errno() == errno.EBUSY:
                libc.umount2(point.encode(), _MNT_DETACH)


@attrs.define
class _HostDir:
    """A temporary directory of the host the check owns, and what it mounted."""

    root: Path

    def directory(self, name: str, files: dict[str, str] | None = None) -> Path:
        path = self.root / name
        path.mkdir(parents=True)
        for file, content in (files or {}).items():
            (path / file).write_text(content)
        return path

    def file(self, name: str, content: str) -> Path:
        path = self.root / name
        path.write_text(content)
        return path

    def make_shared(self, path: Path) -> None:
        """Make ``path`` a shared mount of its own (bound onto itself)."""
        _mount(str(path), str(path), None, _MS_BIND | _MS_REC)
        _mount(None, str(path), None, _MS_SHARED | _MS_REC)

    def mount_tmpfs(self, path: Path) -> None:
        _mount("kk-conformance", str(path), "tmpfs", 0)


@contextlib.asynccontextmanager
async def _host_dir(ctx: _Ctx) -> AsyncIterator[_HostDir]:
    """A temporary host directory for the check; on the way out the check's
    sandboxes are removed first, then every mount under the directory, then it."""
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix=f"kk-conformance-{ctx.run_id}-")))
    root.chmod(0o755)
    try:
        yield _HostDir(root)
    finally:
        await ctx.cleanup()
        ctx.sandboxes.clear()
        if os.geteuid() == 0:
            _unmount_all(root)
        shutil.rmtree(root, ignore_errors=True)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise _Skip(f"{what}: the kit needs root to make mounts on the host")


# -------------------------------------------------------------- container side


async def _exec(ctx: _Ctx, cid: str, cmd: Sequence[str]) -> ExecResult:
    ctx.at(f"exec_sync({list(cmd)!r})")
    result, _ = await ctx.run_while_waiting(
        "exec_sync", ctx.runtime.exec_sync(cid, cmd, ctx.timeout), ctx.timeout
    )
    return result


async def _expect_output(ctx: _Ctx, cid: str, cmd: Sequence[str], want: str) -> None:
    res = await _exec(ctx, cid, cmd)
    ctx.expect(
        res.exit_code == 0,
        f"`{' '.join(cmd)}` exited {res.exit_code}: {res.stderr.decode(errors='replace')!r}",
    )
    ctx.expect_eq(f"stdout of `{' '.join(cmd)}`", res.stdout.decode(errors="replace"), want)


async def _start_with_mounts(
    ctx: _Ctx,
    name: str,
    mounts: tuple[Mount, ...],
    *,
    what: str,
    privileged: bool = False,
) -> str:
    """Run a sandbox and start a ``sleep`` container with ``mounts`` in it; a
    runtime declining a field (UnimplementedError) skips the check."""
    rt = ctx.runtime
    sandbox = attrs.evolve(ctx.sandbox_config(), privileged=privileged)
    ctx.at("run_pod_sandbox" + (" (privileged)" if privileged else ""))
    sid = await rt.run_pod_sandbox(sandbox)
    ctx.sandboxes.append(sid)
    config = attrs.evolve(
        ctx.container_config(sandbox, name, "sleep 3600"),
        mounts=mounts,
        security_context=LinuxContainerSecurityContext(privileged=True) if privileged else None,
    )
    ctx.at(f"create_container({what})")
    with ctx.declined_is_skip(what):
        cid = await rt.create_container(sid, config, sandbox)
        ctx.at("start_container")
        await rt.start_container(cid)
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at("container_status (mounts)")
    reported = (await rt.container_status(cid)).mounts
    for m in mounts:
        ctx.expect(m in reported, f"status.mounts {list(reported)!r} lacks {m!r}")
    return cid


# -------------------------------------------------------------------- checks


async def _check_volumes(ctx: _Ctx) -> None:
    async with _host_dir(ctx) as host:
        src = host.directory("source", {"greeting": "hello from the host\n"})
        sealed = host.directory("sealed", {"sealed": "read only\n"})
        single = host.file("single.txt", "one file\n")
        inside = host.root / "in"
        rw, ro, one = inside / "rw", inside / "ro", inside / "one.txt"
        mounts = (
            Mount(str(rw), str(src)),
            Mount(str(ro), str(sealed), readonly=True),
            Mount(str(one), str(single)),
        )
        cid = await _start_with_mounts(ctx, "volumes", mounts, what="mounts")

        await _expect_output(ctx, cid, ["cat", f"{rw}/greeting"], "hello from the host\n")
        (src / "later").write_text("written on the host after the start\n")
        await _expect_output(
            ctx, cid, ["cat", f"{rw}/later"], "written on the host after the start\n"
        )
        res = await _exec(ctx, cid, ["sh", "-c", f"echo written in the container > {rw}/mine"])
        ctx.expect_eq("exit code of a write to a volume", res.exit_code, 0)
        ctx.at("the container's write, read on the host")
        written = src / "mine"
        ctx.expect_eq(
            f"{written} on the host",
            written.read_text() if written.exists() else None,
            "written in the container\n",
        )

        await _expect_output(ctx, cid, ["cat", f"{ro}/sealed"], "read only\n")
        res = await _exec(ctx, cid, ["touch", f"{ro}/denied"])
        ctx.expect(res.exit_code != 0, f"`touch {ro}/denied` in a read-only mount succeeded")
        ctx.expect(
            not (sealed / "denied").exists(), "a write to a read-only mount reached the host"
        )

        await _expect_output(ctx, cid, ["cat", str(one)], "one file\n")
        res = await _exec(ctx, cid, ["sh", "-c", f"echo appended >> {one}"])
        ctx.expect_eq("exit code of an append to a single-file mount", res.exit_code, 0)
        ctx.at("the appended single file, read on the host")
        ctx.expect_eq(f"{single} on the host", single.read_text(), "one file\nappended\n")


async def _check_propagation(ctx: _Ctx, propagation: MountPropagation) -> None:
    _need_root(f"mount propagation {propagation.value}")
    async with _host_dir(ctx) as host:
        volume = host.directory("volume", {"plain": "a plain file\n"})
        (volume / "from-host").mkdir()
        (volume / "from-container").mkdir()
        ctx.at("make the volume a shared mount on the host")
        host.make_shared(volume)
        inside = host.root / "in"
        bidirectional = propagation is MountPropagation.BIDIRECTIONAL
        cid = await _start_with_mounts(
            ctx,
            "propagation",
            (Mount(str(inside), str(volume), propagation=propagation),),
            what=f"mounts[0].propagation {propagation.value}",
            privileged=bidirectional,
        )
        await _expect_output(ctx, cid, ["cat", f"{inside}/plain"], "a plain file\n")

        ctx.at("mount a tmpfs on the host under the volume, after the start")
        host.mount_tmpfs(volume / "from-host")
        (volume / "from-host" / "flag").write_text("mounted on the host\n")
        flag = f"{inside}/from-host/flag"
        if propagation is MountPropagation.PRIVATE:
            res = await _exec(ctx, cid, ["cat", flag])
            ctx.expect(
                res.exit_code != 0,
                f"a mount made on the host after the start is seen in a private mount: {flag} "
                f"holds {res.stdout!r}",
            )
        else:
            await _expect_output(ctx, cid, ["cat", flag], "mounted on the host\n")
        if not bidirectional:
            return

        target = f"{inside}/from-container"
        res = await _exec(ctx, cid, ["sh", "-c", f"mount -t tmpfs kk-conformance {target}"])
        ctx.expect(
            res.exit_code == 0,
            f"`mount -t tmpfs` in a privileged container exited {res.exit_code}: "
            f"{res.stderr.decode(errors='replace')!r}",
        )
        res = await _exec(ctx, cid, ["sh", "-c", f"echo mounted in the container > {target}/flag"])
        ctx.expect_eq("exit code of a write to the container's tmpfs", res.exit_code, 0)
        ctx.at("the container's mount, seen on the host")
        seen = volume / "from-container"
        ctx.expect(seen.is_mount(), f"the container's tmpfs is not mounted at {seen} on the host")
        ctx.expect_eq(
            f"{seen}/flag on the host",
            (seen / "flag").read_text() if (seen / "flag").exists() else None,
            "mounted in the container\n",
        )


async def _check_mount_propagation_private(ctx: _Ctx) -> None:
    await _check_propagation(ctx, MountPropagation.PRIVATE)


async def _check_mount_propagation_host_to_container(ctx: _Ctx) -> None:
    await _check_propagation(ctx, MountPropagation.HOST_TO_CONTAINER)


async def _check_mount_propagation_bidirectional(ctx: _Ctx) -> None:
    await _check_propagation(ctx, MountPropagation.BIDIRECTIONAL)


async def _check_working_dir_and_envs(ctx: _Ctx) -> None:
    rt = ctx.runtime
    async with _host_dir(ctx) as host:
        # Not made beforehand: the runtime makes it, as runc does.
        workdir = str(host.root / "work" / "dir")
        sid, sandbox = await ctx.run_sandbox()
        script = (
            "pwd; "
            'echo "plain=$KK_PLAIN"; echo "spaces=$KK_SPACES"; '
            'echo "symbols=$KK_SYMBOLS"; echo "empty=[$KK_EMPTY]"; '
            "echo made here > relative.txt; sleep 3600"
        )
        config = attrs.evolve(
            ctx.container_config(sandbox, "workdir", script, env=ENVS), working_dir=workdir
        )
        ctx.at("create_container(working_dir, envs)")
        with ctx.declined_is_skip("working_dir"):
            cid = await rt.create_container(sid, config, sandbox)
            ctx.at("start_container")
            await rt.start_container(cid)
        await _wait_state(ctx, cid, ContainerState.RUNNING)

        log = log_file(sandbox, "workdir")
        want = [
            workdir,
            "plain=plain",
            "spaces=two  spaces",
            "symbols=a=b;c'd\"e$f",
            "empty=[]",
        ]
        for line in want:
            ctx.at(f"log of the container holding {line!r}")

            async def logged(line: str = line) -> bool:
                return _find_log_line(log, "stdout", line)

            await ctx.eventually(f"the container's process printing {line!r}", logged)
        await _expect_output(ctx, cid, ["cat", f"{workdir}/relative.txt"], "made here\n")
        await _expect_output(ctx, cid, ["sh", "-c", "pwd"], f"{workdir}\n")
        await _expect_output(ctx, cid, ["cat", "relative.txt"], "made here\n")
        await _expect_output(ctx, cid, ["sh", "-c", 'echo "$KK_SYMBOLS"'], "a=b;c'd\"e$f\n")
