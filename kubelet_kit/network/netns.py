"""Named network namespaces (``ip netns`` style) made with pyroute2.

A named namespace is a file under a run directory (``/run/netns`` by default)
onto which the namespace is bind-mounted, so it lives without any process in
it, and a process joins it by opening the file and calling ``setns``. Making
and removing one needs CAP_SYS_ADMIN. pyroute2's calls block (one forks a
child), so the async wrappers run them in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

__all__ = ["DEFAULT_NETNS_DIR", "create_netns", "is_netns", "remove_netns"]

DEFAULT_NETNS_DIR = "/run/netns"
_NSFS_MAGIC = 0x6E736673  # statfs type of a namespace file ("nsfs")


def is_netns(path: str | Path) -> bool:
    """Whether ``path`` is a live bind-mounted namespace (not a stale file left
    behind, e.g. after a reboot, which is an ordinary empty file)."""
    try:
        st = os.stat(path)
        parent = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    # A mounted namespace lives on nsfs, a device apart from its directory's.
    return st.st_dev != parent.st_dev and st.st_ino != 0


def _create(path: str) -> None:
    from pyroute2 import netns as pr_netns

    pr_netns.create(path)


def _remove(path: str) -> None:
    from pyroute2 import netns as pr_netns

    with contextlib.suppress(FileNotFoundError):
        pr_netns.remove(path)


async def create_netns(path: str | Path) -> str:
    """Make a named network namespace at ``path`` (its directory is created and
    made a shared mount point as ``ip netns`` does). Returns the path. Not
    idempotent.

    Raises:
        FileExistsError: something is at ``path`` already.
        OSError: the namespace could not be made (e.g. no CAP_SYS_ADMIN).
    """
    path = str(path)
    if os.path.lexists(path):
        raise FileExistsError(f"network namespace {path}: already exists")
    try:
        await asyncio.to_thread(_create, path)
    except Exception as exc:
        # The child that made it reports failures as generic exceptions.
        with contextlib.suppress(OSError):
            if not is_netns(path):
                os.unlink(path)
        if isinstance(exc, OSError):
            raise
        raise OSError(f"create network namespace {path}: {exc}") from exc
    if not is_netns(path):
        raise OSError(f"create network namespace {path}: not mounted after creation")
    return path


async def remove_netns(path: str | Path) -> None:
    """Unmount and delete the namespace file at ``path``. Idempotent: a missing
    path, or a stale unmounted file, is fine. The namespace itself ends when no
    process is left in it.

    Raises:
        OSError: the file could not be removed.
    """
    path = str(path)
    if not os.path.lexists(path):
        return
    await asyncio.to_thread(_remove, path)
