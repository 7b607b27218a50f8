"""Linux mount primitives for the volume plugins: tmpfs and bind mounts, unmounts,
mount points.

``mount(2)`` and ``umount2(2)`` are called through ctypes (the standard library
has no binding). Mounting needs ``CAP_SYS_ADMIN``; :func:`can_mount` tells whether
this process has it, so a caller can refuse (or fall back) with a clear message
instead of an EPERM. All functions block briefly; call them from a thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

__all__ = [
    "MNT_DETACH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SLAVE",
    "MountError",
    "bind_mount",
    "can_mount",
    "is_mount_point",
    "is_not_mounted_error",
    "mount",
    "mount_points_under",
    "mount_tmpfs",
    "unmount",
    "unmount_all_under",
]

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MNT_DETACH = 2

_CAP_SYS_ADMIN = 21


class MountError(OSError):
    """A mount or unmount failed; the message names the path and the reason."""


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    """``mount(2)``.

    Raises:
        MountError: with the errno, naming ``target``.
    """
    rc = _lib().mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"mount {fstype or source} on {target}: {os.strerror(err)}")


def unmount(target: str | Path, *, detach: bool = False) -> None:
    """``umount2(2)``; with ``detach`` a busy mount is detached lazily.

    Raises:
        MountError: naming ``target`` (EINVAL: not a mount point).
    """
    rc = _lib().umount2(str(target).encode(), MNT_DETACH if detach else 0)
    if rc != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"unmount {target}: {os.strerror(err)}")


def bind_mount(source: str | Path, target: str | Path) -> None:
    """Bind-mount ``source`` onto ``target`` (``MS_BIND``, not recursive).

    ``source`` may be a ``/proc/<pid>/fd/<n>`` link: the kernel then mounts the
    open object itself. ``target`` must exist and be of the same kind (directory
    on directory, file on file).

    Raises:
        MountError: no privilege (EPERM) or another failure, naming ``target``.
    """
    mount(str(source), str(target), None, MS_BIND, None)


def mount_tmpfs(target: str | Path, size_bytes: int | None = None, mode: int = 0o777) -> None:
    """Mount a fresh tmpfs on ``target`` (nosuid, nodev), with ``size=`` when given.

    Raises:
        MountError: no privilege (EPERM) or another failure, naming ``target``.
    """
    options = [f"mode={mode:o}"]
    if size_bytes is not None and size_bytes > 0:
        options.append(f"size={size_bytes}")
    mount("tmpfs", str(target), "tmpfs", MS_NOSUID | MS_NODEV, ",".join(options))


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mount_points() -> list[str]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            return [_unescape(line.split()[4]) for line in f if line.strip()]
    except OSError:
        return []


def is_mount_point(path: str | Path) -> bool:
    """Whether ``path`` (resolved) is a mount point of this mount namespace."""
    real = os.path.realpath(path)
    return real in _mount_points()


def mount_points_under(root: str | Path) -> list[str]:
    """Mount points at or below ``root`` (resolved), deepest first (the order to
    unmount them in)."""
    real = os.path.realpath(root)
    prefix = real.rstrip("/") + "/"
    found = {m for m in _mount_points() if m == real or m.startswith(prefix)}
    return sorted(found, key=lambda m: (-m.count("/"), m))


def unmount_all_under(root: str | Path, *, passes: int = 16) -> None:
    """Unmount every mount at or below ``root``, deepest first; a target mounted
    more than once (stacked mounts) is unmounted once per layer.

    Raises:
        OSError: an unmount failed for another reason than nothing being mounted,
            or mounts remain after ``passes`` rounds.
    """
    for _ in range(passes):
        points = mount_points_under(root)
        if not points:
            return
        for point in points:
            try:
                unmount(point)
            except OSError as exc:
                if not is_not_mounted_error(exc):
                    raise
    if mount_points_under(root):
        raise OSError(f"{root}: still mounted after unmount")


def can_mount() -> bool:
    """Whether this process holds CAP_SYS_ADMIN in its effective set (may mount)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << _CAP_SYS_ADMIN))
    except OSError:
        pass
    return os.geteuid() == 0


def is_not_mounted_error(exc: OSError) -> bool:
    """Whether an unmount failed only because nothing was mounted there."""
    return exc.errno in (errno.EINVAL, errno.ENOENT)
