"""The kubelet's atomic writer: projected files swapped in all at once.

A volume written by :class:`AtomicWriter` looks like this::

    <target>/..2026_01_02_03_04_05.123456789/   the current payload, a real directory
    <target>/..data -> ..2026_01_02_03_04_05.123456789
    <target>/key    -> ..data/key            one link per top-level payload entry

An update writes the new payload into a fresh timestamped directory, then points
``..data`` at it with a rename of a new symlink over the old one (``rename(2)``
is atomic), then removes the old directory. A reader that opens ``key`` therefore
sees the whole old payload or the whole new one, never a mix or a half-written
file. Paths starting with ``..`` are reserved for this machinery.

Everything here is synchronous file work: call it from a thread in async code.
"""

from __future__ import annotations

import datetime as _dt
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

__all__ = [
    "DATA_DIR_NAME",
    "MAX_FILE_NAME_LENGTH",
    "MAX_PATH_LENGTH",
    "NEW_DATA_DIR_NAME",
    "AtomicWriter",
    "FileProjection",
    "PayloadError",
    "paths_to_remove",
    "validate_path",
    "validate_payload",
]

#: The symlink that names the current payload directory.
DATA_DIR_NAME = "..data"
#: The symlink made beside it and renamed over it.
NEW_DATA_DIR_NAME = "..data_tmp"
#: Longest payload path accepted (the kubelet's limit).
MAX_PATH_LENGTH = 4096
#: Longest single path component accepted.
MAX_FILE_NAME_LENGTH = 255


@attrs.frozen
class FileProjection:
    """One file of a payload: its bytes and its permission bits."""

    data: bytes
    mode: int = 0o644


class PayloadError(ValueError):
    """A payload path is unusable; the message names the path."""


def validate_path(path: str) -> None:
    """Check one payload path as the kubelet does.

    Raises:
        PayloadError: empty, too long, absolute, containing a ``..`` component,
            starting with ``..`` (reserved), or with a component over 255 bytes.
    """
    if not path:
        raise PayloadError("invalid path: must not be empty")
    if len(path) > MAX_PATH_LENGTH:
        raise PayloadError(
            f"invalid path {path[:32]!r}...: must be less than or equal to "
            f"{MAX_PATH_LENGTH} characters"
        )
    if path.startswith("/"):
        raise PayloadError(f"invalid path {path!r}: must be relative path")
    parts = path.split("/")
    if ".." in parts:
        raise PayloadError(f"invalid path {path!r}: must not contain '..'")
    if path.startswith(".."):
        raise PayloadError(f"invalid path {path!r}: must not start with '..'")
    for part in parts:
        if len(part) > MAX_FILE_NAME_LENGTH:
            raise PayloadError(
                f"invalid path {path!r}: filenames must be less than or equal to "
                f"{MAX_FILE_NAME_LENGTH} characters"
            )


def validate_payload(payload: Mapping[str, FileProjection]) -> dict[str, FileProjection]:
    """Validate every path and return the payload keyed by cleaned paths
    (``foo//bar`` becomes ``foo/bar``).

    Raises:
        PayloadError: naming the first bad path.
    """
    cleaned: dict[str, FileProjection] = {}
    for path, projection in payload.items():
        validate_path(path)
        cleaned[posixpath.normpath(path)] = projection
    return cleaned


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _walk(root: Path) -> set[str]:
    """Every file and directory under ``root``, as paths relative to it."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in (*dirnames, *filenames):
            found.add(name if rel == "." else f"{rel}/{name}")
    return found


def paths_to_remove(payload: Mapping[str, FileProjection], old_dir: Path | None) -> set[str]:
    """Paths of the old payload directory that the new payload no longer has.

    Directories still holding a new payload file are kept.
    """
    if old_dir is None or not old_dir.is_dir():
        return set()
    keep: set[str] = set()
    for path in payload:
        keep.add(path)
        keep.update(_ancestors(path))
    return _walk(old_dir) - keep


def _same_payload(payload: Mapping[str, FileProjection], old_dir: Path) -> bool:
    for path, projection in payload.items():
        target = old_dir / path
        try:
            st = target.lstat()
            if (st.st_mode & 0o7777) != projection.mode or target.read_bytes() != projection.data:
                return False
        except OSError:
            return False
    return True


@attrs.define
class AtomicWriter:
    """Writes payloads into ``target_dir`` atomically (see the module doc).

    Attributes:
        target_dir: An existing directory the writer owns.
        now: Source of the UTC time used in the payload directory's name.
    """

    target_dir: Path = attrs.field(converter=Path)
    now: Callable[[], float] = attrs.field(factory=lambda: _wall_clock)

    def current_dir(self) -> Path | None:
        """The payload directory ``..data`` points at, or None before the first write."""
        try:
            name = os.readlink(self.target_dir / DATA_DIR_NAME)
        except OSError:
            return None
        return self.target_dir / name

    def write(
        self,
        payload: Mapping[str, FileProjection],
        set_perms: Callable[[Path], None] | None = None,
    ) -> bool:
        """Make ``payload`` the visible content of the target directory.

        ``set_perms`` is called with the new payload directory once it is written
        and before it becomes visible (the kubelet applies a pod's fsGroup there).
        Blocks on file I/O. Idempotent: an unchanged payload writes nothing.

        Returns:
            True if a new payload directory was swapped in.

        Raises:
            PayloadError: a payload path is invalid (nothing is written).
            FileNotFoundError: the target directory does not exist.
            OSError: the file system refused a step; the old payload stays visible.
        """
        clean = validate_payload(payload)
        if not self.target_dir.is_dir():
            raise FileNotFoundError(f"atomic writer target {self.target_dir} does not exist")
        old_dir = self.current_dir()
        stale = paths_to_remove(clean, old_dir)
        if old_dir is not None and old_dir.is_dir() and not stale and _same_payload(clean, old_dir):
            self._link_user_visible(clean)
            return False
        stamp = _dt.datetime.fromtimestamp(self.now(), _dt.UTC).strftime("..%Y_%m_%d_%H_%M_%S.")
        new_dir = Path(tempfile.mkdtemp(prefix=stamp, dir=self.target_dir))
        try:
            os.chmod(new_dir, 0o755)
            for path, projection in clean.items():
                dest = new_dir / path
                dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    view = memoryview(projection.data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fchmod(fd, projection.mode)
                finally:
                    os.close(fd)
            if set_perms is not None:
                set_perms(new_dir)
            self._link_user_visible(clean)
            tmp_link = self.target_dir / NEW_DATA_DIR_NAME
            if tmp_link.is_symlink():
                tmp_link.unlink()
            os.symlink(new_dir.name, tmp_link)
            # The one step readers can observe: the new payload replaces the old at once.
            os.rename(tmp_link, self.target_dir / DATA_DIR_NAME)
        except BaseException:
            shutil.rmtree(new_dir, ignore_errors=True)
            raise
        tops = {p.split("/", 1)[0] for p in clean}
        for path in stale:
            if "/" not in path and path not in tops:
                link = self.target_dir / path
                if link.is_symlink():
                    link.unlink()
        if old_dir is not None and old_dir != new_dir:
            shutil.rmtree(old_dir, ignore_errors=True)
        return True

    def _link_user_visible(self, payload: Mapping[str, FileProjection]) -> None:
        for top in sorted({p.split("/", 1)[0] for p in payload}):
            link = self.target_dir / top
            if not link.is_symlink():
                if link.exists():
                    raise PayloadError(
                        f"invalid path {top!r}: {link} exists and is not the writer's link"
                    )
                os.symlink(f"{DATA_DIR_NAME}/{top}", link)


def _wall_clock() -> float:
    # Only names the payload directory; the manager passes its Clock's now().
    return _dt.datetime.now(_dt.UTC).timestamp()
