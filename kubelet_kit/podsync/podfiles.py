"""The files the kubelet itself puts in a pod's containers, as plain mounts.

Two kinds, both kept in the pod's directory (``<root_dir>/pods/<uid>``,
:mod:`kubelet_kit.container.poddirs`) and handed to the runtime as ordinary
mounts in the container config, so every runtime gets them alike:

* **the managed /etc/hosts** (``makeHostsMount`` in ``kubelet_pods.go``): the
  file ``<podDir>/etc-hosts``, written (mode 0644) before each container is
  created and mounted read-write at ``/etc/hosts``. A pod on its own network
  gets localhost entries and a line per pod IP for its hostname
  (:func:`managed_hosts_content`); a host-network pod gets the node's own
  ``/etc/hosts`` under a header of its own (:func:`node_hosts_content`).
  ``hostAliases`` come last in both. A container is given it only once the pod
  has an IP and when it does not mount something at ``/etc/hosts`` itself
  (:func:`wants_hosts_mount`);
* **the termination-message file** (``makeMounts`` in
  ``kuberuntime_container.go``): for a container with a
  ``terminationMessagePath``, a new empty file
  ``<podDir>/containers/<name>/<8 hex digits>`` made writable by anyone (so a
  container running as any user can write it), mounted at that path. It is read
  back when the container has exited (:mod:`kubelet_kit.container.termination`).

:func:`remove_pod_files` removes both with the pod. The functions do small
local file work inline, and each is called for every container started, so
they go straight to ``os`` calls on string paths: the hosts file and the
termination-message file cost little more than their system calls
(:class:`_DirHints` says how a container's first files skip the calls that
would fail).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

from kubelet_kit.api import Container, Pod
from kubelet_kit.container.interfaces import Mount
from kubelet_kit.container.poddirs import (
    ETC_HOSTS_FILE,
    POD_CONTAINERS_DIR,
    pod_container_dir_str,
    pod_dir,
    pod_dir_str,
)
from kubelet_kit.errors import go_path_error

__all__ = [
    "ETC_HOSTS_MOUNT_NAME",
    "ETC_HOSTS_PATH",
    "MANAGED_HOSTS_HEADER",
    "MANAGED_HOSTS_HEADER_HOST_NETWORK",
    "ensure_hosts_file",
    "host_aliases_entries",
    "hosts_mount",
    "make_dir",
    "managed_hosts_content",
    "node_hosts_content",
    "remove_pod_files",
    "termination_message_mount",
    "wants_hosts_mount",
]

log = logging.getLogger(__name__)

#: Where the hosts file is, in a container and on the node.
ETC_HOSTS_PATH: Final = "/etc/hosts"
#: The name the kubelet gives the hosts mount.
ETC_HOSTS_MOUNT_NAME: Final = "k8s-managed-etc-hosts"
MANAGED_HOSTS_HEADER: Final = "# Kubernetes-managed hosts file.\n"
MANAGED_HOSTS_HEADER_HOST_NETWORK: Final = "# Kubernetes-managed hosts file (host network).\n"

# What every pod of its own network resolves locally (IPv4 and IPv6 loopback,
# and the IPv6 names glibc's own default hosts file carries).
_LOCAL_ENTRIES: Final = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def make_dir(path: str, mode: int) -> bool:
    """Make the directory ``path`` with ``mode``, and its missing parents as
    ``os.makedirs`` makes them (the umask's default mode); returns whether ``path``
    was made now (False: a directory was there).

    Cheaper than ``os.makedirs(..., exist_ok=True)`` in the common cases: one
    system call when the parent exists, none of its existence checks.

    Raises:
        OSError: a directory could not be made, or something else is at ``path``
            (FileExistsError).
    """
    return _make_dirs(path, mode) > 0


def _make_dirs(path: str, mode: int) -> int:
    """:func:`make_dir`, saying how much it made: 0 when ``path`` was there (or
    was made meanwhile by someone else), else 1 + the number of its parents made
    on the way (so 2 or more: its parent is new, and holds only ``path``).

    Raises:
        OSError: as :func:`make_dir`.
    """
    try:
        os.mkdir(path, mode)
        return 1
    except FileExistsError:
        if os.path.isdir(path):
            return 0
        raise
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if not parent or parent == path:
            raise
    parents = _make_dirs(parent, 0o777)
    try:
        os.mkdir(path, mode)
    except FileExistsError:  # made meanwhile
        if os.path.isdir(path):
            return 0
        raise
    return 1 + parents


def _join(directory: str, name: str) -> str:
    """``os.path.join(directory, name)`` for a ``name`` that is not absolute: one
    slash between them (``directory`` is never empty here)."""
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


# What is known of a pod's directory (see _DirHints).
_THERE: Final = "there"
_EMPTY: Final = "empty"
_PodDirHint: TypeAlias = str | set[str]


class _DirHints:
    """What this process has seen and made of pods' directories, so that the
    files of a pod's next container go straight to the system calls that will
    succeed.

    Without it, a file is opened first and its directories made when the open
    fails: for each container's first instance a failed open, and for a pod's
    first container two failed opens and a failed mkdir, each a system call and
    an exception. With it:

    * a pod with no volumes has no directory until its first hosts file (the
      volume manager makes it only for volumes): its directory is made first;
    * a pod directory this process made has no ``containers/``: it and the
      container's directory are made first;
    * in a ``containers/`` this process made, the directories are those of the
      containers it made them for: another container's is made first; a
      container seen before (a restart) has its own, so its file is opened
      first, as without a hint.

    A hint never changes what happens, only which call goes first: a directory
    made from a hint is one the ordinary way (open, then make the directories
    when it fails) would have made with the same mode, and when a mkdir from a
    hint fails (the hint went stale: something else made or removed a
    directory) the ordinary way runs after it, as if there had been no hint, so
    the same files, modes and errors come out.

    Kept by ``(root_dir, uid)``: forgotten when the pod's files are removed, and
    the oldest pods' dropped beyond ``size`` (a node runs some hundred pods; a
    hint is of use from a pod's first container to its last).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        # Per pod: _THERE (its directory is there, nothing known below it),
        # _EMPTY (this process made it: nothing but its hosts file in it), or
        # the names whose directories this process made in the containers/ it
        # made.
        self._pods: dict[tuple[str, str], _PodDirHint] = {}

    def get(self, key: tuple[str, str]) -> _PodDirHint | None:
        return self._pods.get(key)

    def put(self, key: tuple[str, str], hint: _PodDirHint) -> None:
        pods = self._pods
        pods[key] = hint
        if len(pods) > self._size:
            pods.pop(next(iter(pods)), None)

    def forget(self, key: tuple[str, str]) -> None:
        self._pods.pop(key, None)


_hints: Final = _DirHints(4096)


# ------------------------------------------------------------------ /etc/hosts


def host_aliases_entries(host_aliases: Iterable[Mapping[str, Any]]) -> str:
    """The ``hostAliases`` block: a blank line, a comment, then per alias its IP
    and its hostnames, tab-separated (``hostsEntriesFromHostAliases``); "" for none."""
    aliases = list(host_aliases)
    if not aliases:
        return ""
    lines = ["\n# Entries added by HostAliases.\n"]
    for alias in aliases:
        names = "\t".join(str(h) for h in alias.get("hostnames") or ())
        lines.append(f"{alias.get('ip', '')}\t{names}\n")
    return "".join(lines)


def managed_hosts_content(
    pod_ips: Sequence[str],
    hostname: str,
    domain: str,
    host_aliases: Iterable[Mapping[str, Any]] = (),
) -> bytes:
    """The hosts file of a pod on its own network (``managedHostsFileContent``).

    The header, the localhost entries, one line per pod IP (``IP\\thost.domain\\thost``
    when the pod has a domain, else ``IP\\thost``), then the hostAliases block.
    """
    lines = [MANAGED_HOSTS_HEADER, _LOCAL_ENTRIES]
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    lines.extend(f"{ip}\t{names}\n" for ip in pod_ips)
    lines.append(host_aliases_entries(host_aliases))
    return "".join(lines).encode()


def node_hosts_content(node_hosts: bytes, host_aliases: Iterable[Mapping[str, Any]] = ()) -> bytes:
    """The hosts file of a host-network pod (``nodeHostsFileContent``): its own
    header, the node's hosts file as it is, then the hostAliases block."""
    return (
        MANAGED_HOSTS_HEADER_HOST_NETWORK.encode()
        + node_hosts
        + host_aliases_entries(host_aliases).encode()
    )


def wants_hosts_mount(container: Container, pod_ips: Sequence[str]) -> bool:
    """Whether the kubelet mounts its hosts file into ``container``: once the pod
    has an IP, unless a volumeMount of the container is at ``/etc/hosts``."""
    return bool(pod_ips) and all(m.mount_path != ETC_HOSTS_PATH for m in container.volume_mounts)


def ensure_hosts_file(
    path: str | os.PathLike[str],
    pod: Pod,
    pod_ips: Sequence[str],
    hostname: str,
    domain: str,
    *,
    node_hosts_path: str = ETC_HOSTS_PATH,
) -> None:
    """Write the pod's hosts file at ``path`` (mode 0644), afresh each time
    (``ensureHostsFile``): a pod IP or an alias that changed is in the next
    container's file. The pod's directory is made (0750) if missing.

    Raises:
        OSError: the node's hosts file (host network) cannot be read, or the
            file cannot be written; its text is Go's, as the kubelet reports it.
    """
    _ensure_hosts_file(
        os.fspath(path), pod, pod_ips, hostname, domain, node_hosts_path, hint_key=None
    )


def _ensure_hosts_file(
    target: str,
    pod: Pod,
    pod_ips: Sequence[str],
    hostname: str,
    domain: str,
    node_hosts_path: str,
    *,
    hint_key: tuple[str, str] | None,
) -> None:
    """:func:`ensure_hosts_file`; with ``hint_key``, ``target`` is the pod's
    own hosts file, whose directory :data:`_hints` keeps under that key."""
    aliases = pod.spec.host_aliases
    if pod.spec.host_network:
        try:
            content = node_hosts_content(Path(node_hosts_path).read_bytes(), aliases)
        except OSError as exc:
            raise OSError(exc.errno, go_path_error("open", node_hosts_path, exc)) from None
    else:
        content = managed_hosts_content(pod_ips, hostname, domain, aliases)
    known = _hints.get(hint_key) if hint_key is not None else None
    made = False  # the pod's directory, now
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        if hint_key is not None and known is None and not pod.spec.volumes:
            # Likely the pod's first file: its directory is made first (_DirHints).
            made = _mkdir_hinted(os.path.dirname(target), 0o750)
        try:
            # The pod's directory is there for every container but the first.
            fd = os.open(target, flags, 0o644)
        except FileNotFoundError:
            made = make_dir(os.path.dirname(target), 0o750)
            fd = os.open(target, flags, 0o644)
        try:
            _write_all(fd, content)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, go_path_error("open", Path(target), exc)) from None
    if hint_key is not None and (made or known is None):
        _hints.put(hint_key, _EMPTY if made else _THERE)


def _mkdir_hinted(path: str, mode: int) -> bool:
    """``os.mkdir(path, mode)`` where a hint says ``path`` is missing and its
    parent there; whether it was made. A failure is left for the ordinary way
    that follows (see :class:`_DirHints`), which meets it again if it lasts."""
    try:
        os.mkdir(path, mode)
    except OSError:
        return False
    return True


def _write_all(fd: int, content: bytes) -> None:
    """Write all of ``content`` to ``fd`` (a write may take only part of it)."""
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]


def hosts_mount(
    root_dir: str | os.PathLike[str],
    pod: Pod,
    container: Container,
    pod_ips: Sequence[str],
    hostname: str,
    domain: str,
    *,
    node_hosts_path: str = ETC_HOSTS_PATH,
) -> Mount | None:
    """The managed hosts file's mount for ``container``, the file written first;
    None when the container gets none (:func:`wants_hosts_mount`).

    Raises:
        OSError: as :func:`ensure_hosts_file`.
    """
    if not wants_hosts_mount(container, pod_ips):
        return None
    root = os.fspath(root_dir)
    path = _join(pod_dir_str(root, pod.uid), ETC_HOSTS_FILE)
    _ensure_hosts_file(
        path, pod, pod_ips, hostname, domain, node_hosts_path, hint_key=(root, pod.uid)
    )
    return Mount(
        container_path=ETC_HOSTS_PATH,
        host_path=path,
        readonly=False,
        selinux_relabel=True,
    )


# --------------------------------------------------------- termination message


# The termination-message files' names. The kubelet draws them from a
# non-cryptographic generator, as this does: a name need not be unguessable, only
# new in its directory, and the O_EXCL create makes a name that is there anyway
# fail safely (logged, no mount, as for any file that cannot be made). Unlike
# os.urandom, a draw costs no system call. Seeded from the OS, and again in a
# forked child, so that two processes do not draw the same names.
_names: Final = random.Random()
os.register_at_fork(after_in_child=_names.seed)


def termination_message_mount(
    root_dir: str | os.PathLike[str], pod: Pod, container: Container
) -> Mount | None:
    """A new termination-message file for ``container`` and its mount; None when
    the container has no ``terminationMessagePath``.

    Each container instance gets its own file (a restart does not see what the
    one before wrote). A file that cannot be made is logged and the container
    gets no mount, as with the kubelet.
    """
    if not container.termination_message_path:
        return None
    root = os.fspath(root_dir)
    directory = pod_container_dir_str(root, pod.uid, container.name)
    # 8 random hex digits, as the kubelet names it: the directory already names
    # the pod and the container.
    path = _join(directory, f"{_names.getrandbits(32):08x}")
    # A new file, never one that is there (nor what a link there points to).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    key = (root, pod.uid)
    known = _hints.get(key)
    try:
        if known == _EMPTY or (isinstance(known, set) and container.name not in known):
            # The container's first instance: its directory is made first (_DirHints).
            _make_container_dir_hinted(key, known, directory, container.name)
        try:
            fd = os.open(path, flags, 0o666)
        except FileNotFoundError:  # the container's first instance
            if _make_dirs(directory, 0o750) >= 2:  # with a new containers/
                _hints.put(key, {container.name})
            fd = os.open(path, flags, 0o666)
        try:
            # fchmod, not the mode of the create: the umask must not narrow it.
            os.fchmod(fd, 0o666)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("pod %s: error on creating termination-log file %s: %s", pod.uid, path, exc)
        return None
    return Mount(container_path=container.termination_message_path, host_path=path)


def _make_container_dir_hinted(
    key: tuple[str, str], known: _PodDirHint, directory: str, name: str
) -> None:
    """Make the container's ``directory`` where the hint ``known`` says it is
    missing, and its parent (``containers/``) first if that is missing too, with
    the modes the ordinary way gives them; and note it. A failure is left for
    the ordinary way (see :class:`_DirHints`), and the hint went stale: what
    was known below the pod's directory is forgotten."""
    made = known if isinstance(known, set) else None
    if made is None and not _mkdir_hinted(os.path.dirname(directory), 0o777):
        _hints.put(key, _THERE)
        return
    if not _mkdir_hinted(directory, 0o750):
        _hints.put(key, _THERE)
        return
    if made is None:
        _hints.put(key, {name})
    else:
        made.add(name)


# -------------------------------------------------------------------- removal


def remove_pod_files(root_dir: str | os.PathLike[str], uid: str) -> None:
    """Remove the pod's hosts file and termination-message files, then the pod's
    directory if nothing else (a volume still there) is left in it. Idempotent.

    Raises:
        OSError: a file could not be removed.
    """
    _hints.forget((os.fspath(root_dir), uid))
    base = pod_dir(root_dir, uid)
    with contextlib.suppress(FileNotFoundError):
        os.remove(base / ETC_HOSTS_FILE)
    containers = base / POD_CONTAINERS_DIR
    if containers.is_dir() and not containers.is_symlink():
        shutil.rmtree(containers)
    with contextlib.suppress(OSError):
        base.rmdir()  # only if empty: the volume manager removes its own part
