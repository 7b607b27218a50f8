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
local file work inline.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kubelet_kit.api import Container, Pod
from kubelet_kit.container.interfaces import Mount
from kubelet_kit.container.poddirs import (
    ETC_HOSTS_FILE,
    POD_CONTAINERS_DIR,
    pod_container_dir,
    pod_dir,
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
    try:
        os.mkdir(path, mode)
        return True
    except FileExistsError:
        if os.path.isdir(path):
            return False
        raise
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if not parent or parent == path:
            raise
    make_dir(parent, 0o777)
    try:
        os.mkdir(path, mode)
    except FileExistsError:  # made meanwhile
        if os.path.isdir(path):
            return False
        raise
    return True


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
    target = os.fspath(path)
    aliases = pod.spec.host_aliases
    if pod.spec.host_network:
        try:
            content = node_hosts_content(Path(node_hosts_path).read_bytes(), aliases)
        except OSError as exc:
            raise OSError(exc.errno, go_path_error("open", node_hosts_path, exc)) from None
    else:
        content = managed_hosts_content(pod_ips, hostname, domain, aliases)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        try:
            # The pod's directory is there for every container but the first.
            fd = os.open(target, flags, 0o644)
        except FileNotFoundError:
            make_dir(os.path.dirname(target), 0o750)
            fd = os.open(target, flags, 0o644)
        try:
            _write_all(fd, content)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, go_path_error("open", Path(target), exc)) from None


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
    path = os.path.join(pod_dir(root_dir, pod.uid), ETC_HOSTS_FILE)
    ensure_hosts_file(path, pod, pod_ips, hostname, domain, node_hosts_path=node_hosts_path)
    return Mount(
        container_path=ETC_HOSTS_PATH,
        host_path=path,
        readonly=False,
        selinux_relabel=True,
    )


# --------------------------------------------------------- termination message


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
    directory = os.fspath(pod_container_dir(root_dir, pod.uid, container.name))
    # 8 random hex digits, as the kubelet names it: the directory already names
    # the pod and the container.
    path = os.path.join(directory, secrets.token_hex(4))
    # A new file, never one that is there (nor what a link there points to).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o666)
        except FileNotFoundError:  # the container's first instance
            make_dir(directory, 0o750)
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


# -------------------------------------------------------------------- removal


def remove_pod_files(root_dir: str | os.PathLike[str], uid: str) -> None:
    """Remove the pod's hosts file and termination-message files, then the pod's
    directory if nothing else (a volume still there) is left in it. Idempotent.

    Raises:
        OSError: a file could not be removed.
    """
    base = pod_dir(root_dir, uid)
    with contextlib.suppress(FileNotFoundError):
        os.remove(base / ETC_HOSTS_FILE)
    containers = base / POD_CONTAINERS_DIR
    if containers.is_dir() and not containers.is_symlink():
        shutil.rmtree(containers)
    with contextlib.suppress(OSError):
        base.rmdir()  # only if empty: the volume manager removes its own part
