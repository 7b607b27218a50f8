"""The file system a :class:`~kubelet_kit.testing.FakeRuntime` container sees.

A container's own files live in memory (``echo x > /tmp/f``, :meth:`write_file`);
beneath the ``container_path`` of each of its :class:`Mount`\\ s it sees the
host's file system for real, as a bind mount would show it: the host's files
with their content at the moment they are read, and the container's writes
landing in the host's files. A mount of a single file is that file. A
``readonly`` mount refuses writes (``Read-only file system``). A relative path
is taken from the container's working directory.

Mount propagation, as far as a process of the host can tell it apart: the fake
reads through the host's own mount table, so a mount made on the host under a
volume after the container started is seen there, as with
``HOST_TO_CONTAINER``. For a ``PRIVATE`` mount (the default) the fake records
the host's mount table when the container starts; a path beneath a mount point
made later under the volume is hidden (the directory it covers looks empty,
and writing there fails), as the container would see only what the mount
covers, which the fake cannot read. Which of the recorded mount points lie
under the volume is worked out when a path beneath the mount is first used,
from the volume's real path then (the path the fake reads and writes through,
so both agree). ``BIDIRECTIONAL`` needs the container to make mounts of its
own, which the fake's containers cannot: the runtime declines it (see
``create_container``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import posixpath
import re
import select
import threading
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TextIO

from kubelet_kit.container.interfaces import Mount, MountPropagation

#: Where the host's mount table is read from.
MOUNTINFO = "/proc/self/mountinfo"
_OCTAL = re.compile(r"\\([0-7]{3})")


def host_mount_points(mountinfo: str = MOUNTINFO) -> frozenset[str]:
    """Every mount point of this process's mount namespace (empty if unreadable)."""
    if mountinfo == MOUNTINFO:
        return _OWN_TABLE.points()
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            return _parse_mountinfo(f.read())
    except OSError:
        return frozenset()


class _MountTable:
    """This process's mount points, read again only when the table changed.

    The kernel marks an open ``/proc/self/mountinfo`` with ``POLLPRI`` (and
    ``POLLERR``) once a mount or unmount happened since the last poll, so
    starting thousands of containers reads the table once, not once each.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        self._poll: select.poll | None = None
        self._points: frozenset[str] = frozenset()
        if hasattr(os, "register_at_fork"):
            # A forked child opens the table again, its own (the open file is
            # the parent's): told by fork itself, not by asking for the process
            # id at every call.
            os.register_at_fork(after_in_child=self._close)

    def points(self) -> frozenset[str]:
        with self._lock:
            try:
                if self._file is None or self._poll is None:
                    self._open()
                elif self._poll.poll(0):
                    self._file.seek(0)
                    self._points = _parse_mountinfo(self._file.read())
            except OSError:
                self._close()
                return frozenset()
            return self._points

    def _open(self) -> None:
        self._close()
        f = open(MOUNTINFO, encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)
        try:
            poll = select.poll()
            poll.register(f.fileno(), select.POLLPRI | select.POLLERR)
            poll.poll(0)  # what happened before the read below is in it
            self._points = _parse_mountinfo(f.read())
        except BaseException:
            f.close()
            raise
        self._file, self._poll = f, poll

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._file = self._poll = None


def _parse_mountinfo(text: str) -> frozenset[str]:
    lines = text.splitlines()
    points = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            # Octal escapes (\040 for a space) as the kernel writes them.
            points.add(_OCTAL.sub(lambda m: chr(int(m[1], 8)), fields[4]))
    return frozenset(points)


_OWN_TABLE = _MountTable()
_PRIVATE = MountPropagation.PRIVATE  # looked up once: an enum member's lookup is not free
_O_PATH = getattr(os, "O_PATH", None)


def _realpath(path: str) -> str:
    """``os.path.realpath(path)``; for a path that exists, the kernel's own
    resolution of it (three system calls, not one ``lstat`` per component)."""
    if _O_PATH is not None:
        try:
            fd = os.open(path, _O_PATH)
        except OSError:
            return os.path.realpath(path)
        try:
            resolved = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            resolved = ""
        finally:
            os.close(fd)
        # Anything but a plain absolute path ("(deleted)", "(unreachable)"...):
        # leave it to the portable walk.
        if resolved.startswith("/") and not resolved.endswith(")"):
            return resolved
    return os.path.realpath(path)


@functools.lru_cache(maxsize=256)
def _depth(container_path: str) -> int:
    """How deep a mount's container path is (its normalised path's slashes),
    worked out once per path: a node's containers mostly mount the same few
    (``/etc/hosts``, ``/dev/termination-log``)."""
    return posixpath.normpath(container_path).count("/")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class _ContainerFS(MutableMapping[str, str]):
    """Path -> content of one fake container: its own files, and the host's
    beneath its mounts (see the module doc).

    Reading a missing file raises KeyError; writing where the container may not
    raises OSError (``EROFS`` for a read-only mount). Iterating (and ``len``)
    covers the container's own files only, not the host's beneath its mounts.
    """

    def __init__(self, mounts: Sequence[Mount] = (), cwd: str = "/") -> None:
        self.own: dict[str, str] = {}
        self.cwd = cwd or "/"
        # Deepest container path first: a nested mount shadows its parent's.
        self._mounts = sorted(mounts, key=lambda m: _depth(m.container_path), reverse=True)
        # The private mounts by container path (of two at one path, the last one's
        # volume is the one recorded).
        self._private = {m.container_path: m for m in self._mounts if m.propagation is _PRIVATE}
        # The host's mount table when the container started (None: not started,
        # or no private mount), and, once first asked, which of its mount points
        # lie under each private mount's volume, by container path.
        self._table_at_start: frozenset[str] | None = None
        self._at_start: dict[str, frozenset[str]] = {}
        # readonly_rootfs: the container's own files (all but /proc and /dev, the
        # kernel's) refuse writes; its writable mounts still take them.
        self.readonly_root = False

    def started(self) -> None:
        """Record the host's mount table for the private mounts: the container
        started, and mounts made on the host from now on do not reach it.

        Only the table is taken now (a frozen set the process shares while the
        table does not change): the volumes' real paths, and which recorded
        mount points lie under them, are worked out when first needed
        (:meth:`_seen`), as most containers never use a path beneath a mount.
        """
        if self._private:
            self._table_at_start = host_mount_points()
            self._at_start.clear()

    # -- routing

    def _key(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def _host(self, key: str) -> tuple[Mount, str] | None:
        """The mount ``key`` is beneath and its path on the host, or None."""
        for m in self._mounts:
            target = posixpath.normpath(m.container_path)
            if _under(key, target):
                rest = key[len(target) :].lstrip("/")
                source = os.path.realpath(m.host_path)
                return m, os.path.join(source, rest) if rest else source
        return None

    def _seen(self, m: Mount) -> frozenset[str] | None:
        """The host's mount points under private mount ``m`` when the container
        started; None if it was not started with ``m`` private."""
        points = self._table_at_start
        private = self._private.get(m.container_path)
        if points is None or private is None:
            return None
        seen = self._at_start.get(m.container_path)
        if seen is None:
            root = _realpath(private.host_path)
            seen = self._at_start[m.container_path] = frozenset(
                p for p in points if _under(p, root)
            )
        return seen

    def _hidden(self, m: Mount, host_path: str) -> bool:
        """Whether ``host_path`` is beneath a host mount made under the private
        mount ``m`` after the container started."""
        seen = self._seen(m)
        if seen is None:
            return False
        root = os.path.realpath(m.host_path)
        return any(
            _under(host_path, p) and _under(p, root) for p in host_mount_points() if p not in seen
        )

    def _writable(self, key: str) -> str | None:
        """The host path a write to ``key`` goes to (None: the container's own)."""
        routed = self._host(key)
        if routed is None:
            if self.readonly_root and not key.startswith(("/proc/", "/dev/")):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), key)
            return None
        m, host_path = routed
        if m.readonly:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), key)
        if self._hidden(m, host_path):
            raise OSError(
                errno.EIO,
                "the fake runtime cannot reach a directory covered by a host mount made "
                "after the container started",
                key,
            )
        return host_path

    # -- MutableMapping

    def __getitem__(self, path: str) -> str:
        key = self._key(path)
        routed = self._host(key)
        if routed is None:
            return self.own[key]
        m, host_path = routed
        if self._hidden(m, host_path):
            raise KeyError(path)
        try:
            with open(host_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            raise KeyError(path) from None

    def __setitem__(self, path: str, content: str) -> None:
        key = self._key(path)
        host_path = self._writable(key)
        if host_path is None:
            self.own[key] = content
            return
        with open(host_path, "w", encoding="utf-8") as f:
            f.write(content)

    def __delitem__(self, path: str) -> None:
        key = self._key(path)
        host_path = self._writable(key)
        if host_path is None:
            del self.own[key]
            return
        try:
            os.unlink(host_path)
        except (FileNotFoundError, NotADirectoryError):
            raise KeyError(path) from None

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        key = self._key(path)
        routed = self._host(key)
        if routed is None:
            return key in self.own
        m, host_path = routed
        return os.path.exists(host_path) and not self._hidden(m, host_path)

    def __iter__(self) -> Iterator[str]:
        return iter(self.own)

    def __len__(self) -> int:
        return len(self.own)
