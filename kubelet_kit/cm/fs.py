"""The file operations a cgroup v2 driver needs, and their host implementation.

The v2 driver reaches cgroupfs only through :class:`CgroupFiles`, so the same driver
runs on the kernel's tree (:class:`HostCgroupFiles`) and on the fake tree in
``kubelet_kit.testing.fake_cgroups`` for controllers a machine does not offer.
Errors are the kernel's ``OSError``s (EEXIST, ENOENT, EBUSY, EINVAL...).
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

__all__ = ["CgroupFiles", "HostCgroupFiles"]


@runtime_checkable
class CgroupFiles(Protocol):
    """Synchronous cgroupfs access; ``cgroup`` is ``"/"``-separated, ``""`` the root."""

    def mkdir(self, cgroup: str) -> None:
        """Create a cgroup (EEXIST if present, ENOENT if the parent is missing)."""

    def rmdir(self, cgroup: str) -> None:
        """Remove an empty cgroup (EBUSY while it has processes or children)."""

    def is_dir(self, cgroup: str) -> bool:
        """Whether the cgroup exists."""

    def children(self, cgroup: str) -> list[str]:
        """Names of the child cgroups."""

    def has_file(self, cgroup: str, name: str) -> bool:
        """Whether the interface file exists in the cgroup."""

    def read(self, cgroup: str, name: str) -> str:
        """Read an interface file."""

    def write(self, cgroup: str, name: str, value: str) -> None:
        """Write an interface file (one write, as the kernel wants)."""

    def describe(self, cgroup: str, name: str = "") -> str:
        """A human-readable location for error messages."""


class HostCgroupFiles:
    """:class:`CgroupFiles` on a mounted hierarchy.

    Args:
        mount: Where the hierarchy is mounted (e.g. ``/sys/fs/cgroup``).
    """

    def __init__(self, mount: str | os.PathLike[str]) -> None:
        self.mount = os.fspath(mount)

    def _path(self, cgroup: str, name: str = "") -> str:
        parts = [self.mount]
        if cgroup:
            parts.append(cgroup)
        if name:
            parts.append(name)
        return os.path.join(*parts)

    def mkdir(self, cgroup: str) -> None:
        """``os.mkdir``."""
        os.mkdir(self._path(cgroup))

    def rmdir(self, cgroup: str) -> None:
        """``os.rmdir`` (cgroupfs removes the interface files itself)."""
        os.rmdir(self._path(cgroup))

    def is_dir(self, cgroup: str) -> bool:
        """``os.path.isdir``."""
        return os.path.isdir(self._path(cgroup))

    def children(self, cgroup: str) -> list[str]:
        """Sub-directories."""
        base = self._path(cgroup)
        try:
            with os.scandir(base) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def has_file(self, cgroup: str, name: str) -> bool:
        """``os.path.exists``."""
        return os.path.exists(self._path(cgroup, name))

    def read(self, cgroup: str, name: str) -> str:
        """Read the whole file."""
        with open(self._path(cgroup, name), encoding="ascii") as f:
            return f.read()

    def write(self, cgroup: str, name: str, value: str) -> None:
        """Write without truncating or creating (cgroupfs files exist already)."""
        fd = os.open(self._path(cgroup, name), os.O_WRONLY)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)

    def describe(self, cgroup: str, name: str = "") -> str:
        """The absolute path."""
        return self._path(cgroup, name)
