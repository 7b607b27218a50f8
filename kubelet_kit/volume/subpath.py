"""Safe resolution of a volumeMount's ``subPath`` inside its volume.

A workload controls the content of its volumes (an emptyDir, a hostPath), so it
can plant ``..`` tricks and symlinks there to make a later container's
``subPath`` point at the host's files. As the kubelet does, a sub path:

* must be relative and have no ``..`` component (checked on the text);
* is resolved with its symlinks, and must stay inside the volume's own resolved
  directory; a symlink inside the volume that points elsewhere in the volume is
  fine, one that leaves it is refused;
* is then walked again one component at a time with ``O_NOFOLLOW``, so a symlink
  swapped in during the check is refused too;
* is created as a directory (with the volume directory's mode) when missing.

What remains is the window between this check and the bind mount made by the
runtime; the kubelet closes it by bind-mounting the opened file descriptor, which
a runtime given a plain host path cannot do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kubelet_kit.errors import ValidationError

__all__ = ["resolve_sub_path", "validate_sub_path"]


def validate_sub_path(sub_path: str, field: str = "subPath") -> None:
    """Check the text of a sub path.

    Raises:
        ValidationError: at ``field``: absolute, or containing a ``..`` component.
    """
    if sub_path.startswith("/"):
        raise ValidationError.single(field, f'"{sub_path}" must not be an absolute path')
    if ".." in sub_path.split("/"):
        raise ValidationError.single(field, f"\"{sub_path}\" must not contain '..'")


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def resolve_sub_path(
    volume_path: str | Path, sub_path: str, *, create: bool = True, field: str = "subPath"
) -> Path:
    """The host path of ``sub_path`` inside the volume at ``volume_path``.

    Blocks on file I/O. Idempotent.

    Args:
        volume_path: The volume's directory on the host.
        sub_path: The mount's ``subPath`` (already expanded for ``subPathExpr``).
        create: Make missing directories, as the kubelet does.
        field: Field path named in errors.

    Raises:
        ValidationError: at ``field``: bad text, a path leaving the volume, a
            symlink met during the safe walk, or a directory that cannot be made.
    """
    validate_sub_path(sub_path, field)
    base = os.path.realpath(volume_path)
    target = os.path.realpath(os.path.join(base, sub_path))
    if not _within(target, base):
        raise ValidationError.single(
            field, f'"{sub_path}" resolves to {target}, outside the volume {base}'
        )
    rel = os.path.relpath(target, base)
    if rel == ".":
        return Path(target)
    try:
        mode = os.stat(base).st_mode & 0o7777
        fd = os.open(base, os.O_PATH | os.O_DIRECTORY)
    except OSError as exc:
        raise ValidationError.single(field, f"volume directory {base}: {exc.strerror}") from None
    try:
        for part in rel.split("/"):
            try:
                nfd = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ValidationError.single(
                        field, f'"{sub_path}" does not exist in the volume'
                    ) from None
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                    nfd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
                    os.chmod(f"/proc/self/fd/{nfd}", mode)  # mkdir's mode went through umask
                except OSError as exc:
                    raise ValidationError.single(
                        field, f'cannot create "{sub_path}" in the volume: {exc.strerror}'
                    ) from None
            except OSError as exc:
                raise ValidationError.single(
                    field, f'"{sub_path}": cannot open "{part}": {exc.strerror}'
                ) from None
            if stat.S_ISLNK(os.fstat(nfd).st_mode):
                os.close(nfd)
                raise ValidationError.single(
                    field, f'"{sub_path}": "{part}" changed into a symlink while being resolved'
                )
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    return Path(target)
