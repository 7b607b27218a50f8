"""Safe resolution of a volumeMount's ``subPath`` inside its volume.

A workload controls the content of its volumes (an emptyDir, a hostPath), so it
can plant ``..`` tricks and symlinks there to make a later container's
``subPath`` point at the host's files. As the kubelet does, a sub path:

* must be relative and have no ``..`` component (checked on the text);
* is resolved with its symlinks, and must stay inside the volume's own resolved
  directory; a symlink inside the volume that points elsewhere in the volume is
  fine, one that leaves it is refused;
* is then walked again one component at a time with ``O_NOFOLLOW``, each step
  opened relative to the descriptor of the previous one, so a symlink swapped in
  during the check is refused too, and every descriptor opened must still name a
  place inside the volume;
* is created as a directory (with the volume directory's mode) when missing.

Checking a path and then handing its *name* to someone else is never enough: a
running container that can write into the volume may replace a checked directory
with a symlink to ``/`` after the check and before the runtime's bind mount, and
the runtime, following the name, would mount the host's directory into the next
container. A name can change between two looks at it; an open descriptor cannot.
So :func:`bind_sub_path` keeps the descriptor of the last component open and
bind-mounts *that* (through ``/proc/<pid>/fd/<n>``, which the kernel resolves to
the open object, not to a name) onto a path of the agent's own,
``<root_dir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>``; the
runtime is given that path, which the workload cannot touch. Whatever is swapped
in the volume later, the mount keeps showing the object that was checked.
:func:`clean_sub_paths` unmounts and removes those paths when the volume or the
pod goes away.

A process that may not mount (no ``CAP_SYS_ADMIN``) cannot make that bind
mount: :func:`bind_sub_path` then returns the checked host path as
:func:`resolve_sub_path` does, and the window between the check and the
runtime's own mount remains open.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from kubelet_kit.errors import ValidationError
from kubelet_kit.volume import mounter

__all__ = ["bind_sub_path", "clean_sub_paths", "resolve_sub_path", "validate_sub_path"]

#: Mode of the directories under ``volume-subpaths`` (the kubelet's 0750).
_SUBPATH_DIR_MODE = 0o750


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


def _fd_path(fd: int) -> str:
    # The kernel's magic link: it names the open object itself, whatever has
    # been renamed or swapped since it was opened.
    return f"/proc/{os.getpid()}/fd/{fd}"


def _check_fd_inside(fd: int, base: str, sub_path: str, field: str) -> None:
    # A directory moved out of the volume after it was opened keeps its
    # descriptor; where the descriptor points now is what counts.
    try:
        where = os.readlink(_fd_path(fd))
    except OSError as exc:
        raise ValidationError.single(
            field, f'"{sub_path}": cannot check an opened component: {exc.strerror}'
        ) from None
    if not _within(where, base):
        raise ValidationError.single(
            field, f'"{sub_path}": an opened component is at {where}, outside the volume {base}'
        )


def _open_sub_path(
    volume_path: str | Path, sub_path: str, *, create: bool, field: str
) -> tuple[int, str]:
    """Check ``sub_path`` and open it safely: ``(O_PATH descriptor, resolved path)``.

    The caller owns the descriptor and must close it.
    """
    validate_sub_path(sub_path, field)
    try:
        base = os.path.realpath(volume_path)
        target = os.path.realpath(os.path.join(base, sub_path))
    except OSError as exc:
        # A component changing kind between realpath's lstat and readlink (a
        # workload swapping it) surfaces here: refuse, never crash the caller.
        raise ValidationError.single(
            field, f'"{sub_path}": cannot resolve it in the volume: {exc.strerror}'
        ) from None
    if not _within(target, base):
        raise ValidationError.single(
            field, f'"{sub_path}" resolves to {target}, outside the volume {base}'
        )
    rel = os.path.relpath(target, base)
    try:
        mode = os.stat(base).st_mode & 0o7777
        fd = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ValidationError.single(field, f"volume directory {base}: {exc.strerror}") from None
    if rel == ".":
        return fd, target
    try:
        for part in rel.split("/"):
            try:
                nfd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ValidationError.single(
                        field, f'"{sub_path}" does not exist in the volume'
                    ) from None
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                    nfd = os.open(
                        part,
                        os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC,
                        dir_fd=fd,
                    )
                    os.chmod(_fd_path(nfd), mode)  # mkdir's mode went through umask
                except OSError as exc:
                    raise ValidationError.single(
                        field, f'cannot create "{sub_path}" in the volume: {exc.strerror}'
                    ) from None
            except OSError as exc:
                raise ValidationError.single(
                    field, f'"{sub_path}": cannot open "{part}": {exc.strerror}'
                ) from None
            os.close(fd)
            fd = nfd
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise ValidationError.single(
                    field, f'"{sub_path}": "{part}" changed into a symlink while being resolved'
                )
            _check_fd_inside(fd, base, sub_path, field)
    except BaseException:
        os.close(fd)
        raise
    return fd, target


def resolve_sub_path(
    volume_path: str | Path, sub_path: str, *, create: bool = True, field: str = "subPath"
) -> Path:
    """The host path of ``sub_path`` inside the volume at ``volume_path``.

    The path is checked, but only its name is returned: see the module doc for
    the window that leaves, and :func:`bind_sub_path` for what closes it.
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
    fd, target = _open_sub_path(volume_path, sub_path, create=create, field=field)
    os.close(fd)
    return Path(target)


def _prepare_target(target: Path, want_dir: bool) -> bool:
    """Make the empty directory or file to mount on; True when it was made here."""
    target.parent.mkdir(mode=_SUBPATH_DIR_MODE, parents=True, exist_ok=True)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode) == want_dir and not stat.S_ISLNK(st.st_mode):
            return False
        # Left by an earlier bind of the other kind (the sub path changed type)
        # and not mounted (checked by the caller): ours to replace.
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(target)
        else:
            os.unlink(target)
    if want_dir:
        os.mkdir(target, _SUBPATH_DIR_MODE)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o640))
    return True


def _remove_target(target: Path) -> None:
    with contextlib.suppress(OSError):
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        else:
            target.unlink()


def bind_sub_path(
    volume_path: str | Path,
    sub_path: str,
    target: str | Path,
    *,
    create: bool = True,
    field: str = "subPath",
) -> Path:
    """Check ``sub_path`` inside the volume and bind-mount what was checked onto
    ``target``; returns the path to give the runtime.

    The last component stays open while it is mounted (through
    ``/proc/<pid>/fd/<n>``), so no later change of names in the volume can make
    the mount show anything but the checked object (see the module doc). An
    empty directory or file is made at ``target`` to mount on, and its parents
    (mode 0750). When ``target`` is already a mount point (a container that
    restarts) it is reused as it is. When this process may not mount
    (:func:`~kubelet_kit.volume.mounter.can_mount` is false), nothing is mounted
    and the checked host path is returned, as :func:`resolve_sub_path` does.

    Blocks briefly on file I/O and ``mount(2)``. Idempotent.

    Args:
        volume_path: The volume's directory on the host.
        sub_path: The mount's ``subPath`` (already expanded for ``subPathExpr``).
        target: Where to mount it, conventionally
            ``<root_dir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>``;
            a place the workload cannot write to.
        create: Make missing directories in the volume, as the kubelet does.
        field: Field path named in errors.

    Raises:
        ValidationError: at ``field``: as :func:`resolve_sub_path`, or the bind
            mount could not be made.
    """
    if not mounter.can_mount():
        return resolve_sub_path(volume_path, sub_path, create=create, field=field)
    target = Path(target)
    if mounter.is_mount_point(target):
        return target
    fd, _ = _open_sub_path(volume_path, sub_path, create=create, field=field)
    try:
        opened = os.fstat(fd)
        try:
            made = _prepare_target(target, stat.S_ISDIR(opened.st_mode))
        except OSError as exc:
            raise ValidationError.single(
                field, f'"{sub_path}": cannot prepare {target}: {exc.strerror or exc}'
            ) from None
        try:
            mounter.bind_mount(_fd_path(fd), target)
        except OSError as exc:
            if made:
                _remove_target(target)
            raise ValidationError.single(
                field, f'"{sub_path}": cannot bind-mount it on {target}: {exc.strerror or exc}'
            ) from None
        # The mount must show the very object that was opened and checked.
        mounted = os.lstat(target)
        if (mounted.st_dev, mounted.st_ino) != (opened.st_dev, opened.st_ino):
            with contextlib.suppress(OSError):
                mounter.unmount(target)
            raise ValidationError.single(
                field, f'"{sub_path}": {target} does not show the checked object after mounting'
            )
    finally:
        os.close(fd)
    return target


def clean_sub_paths(subpaths_dir: str | Path, volume_name: str | None = None) -> None:
    """Unmount and remove the sub path bind mounts under a pod's ``volume-subpaths``
    directory: every volume's, or only ``volume_name``'s.

    Mount points are unmounted deepest first; only then are the (now empty)
    directories and empty target files removed, so nothing beneath a live mount is
    ever deleted. Blocks on file I/O and ``umount2(2)``. Idempotent (a missing
    directory is fine).

    Raises:
        OSError: a mount could not be removed, or something that is not an empty
            mount target was found (the tree is then kept for the operator).
    """
    root = Path(subpaths_dir) if volume_name is None else Path(subpaths_dir) / volume_name
    if not os.path.lexists(root):
        return
    mounter.unmount_all_under(root)
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size != 0:
                raise OSError(f"{path}: not an empty sub path mount target")
            os.unlink(path)
        os.rmdir(dirpath)
