"""What :class:`~kubelet_kit.runtimes.host.HostProcessRuntime` reads of the host machine.

The host's primary IPv4 address (the one sandboxes report without a network of
their own), whether this process may mount (CAP_SYS_ADMIN), the ``cgroup.procs``
files of a pod cgroup in every mounted hierarchy, and the environment the shim
runs with.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
from pathlib import Path

from kubelet_kit.runtimes._cgroupfs import host_hierarchies, parent_cgroup_path


def _host_primary_ip() -> str:
    """IPv4 address of the default route's interface, or 127.0.0.1."""
    try:
        with open("/proc/net/route", encoding="ascii") as f:
            next(f)
            iface = next(
                (p[0] for p in (line.split() for line in f) if len(p) > 2 and p[1] == "00000000"),
                None,
            )
        if iface is None:
            return "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            siocgifaddr = 0x8915
            packed = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", iface[:15].encode()))
        return socket.inet_ntoa(packed[20:24])
    except (OSError, StopIteration):
        return "127.0.0.1"


def _shim_env() -> dict[str, str]:
    env = dict(os.environ)
    # The shim runs from "/", so make sure it imports this very kubelet_kit.
    # The directory holding the kubelet_kit package (runtimes/_host_system.py is two below).
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return env


def _has_cap_sys_admin() -> bool:
    """Whether this process may mount (CAP_SYS_ADMIN in its effective set)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))
    except OSError:
        pass
    return os.geteuid() == 0


def cgroup_procs_files(cgroup_parent: str, mounts_file: str = "/proc/self/mounts") -> list[str]:
    """The ``cgroup.procs`` files that put a process into ``cgroup_parent``.

    ``cgroup_parent`` is what the ContainerManager gave the sandbox: a cgroupfs path
    (``/kubepods/burstable/pod<uid>``) or a systemd slice, by name
    (``kubepods-burstable-pod<uid>.slice``, expanded as systemd does) or by path.
    Every mounted hierarchy (each cgroup v1 controller, and cgroup v2) where that
    cgroup exists contributes its file; hierarchies where the manager made nothing
    are left out, so a process lands exactly where the manager prepared limits for it.

    Raises:
        ValueError: An invalid slice name.
    """
    if not cgroup_parent:
        return []
    path = parent_cgroup_path(cgroup_parent)
    files = []
    for h in host_hierarchies(mounts_file):
        procs = os.path.join(h.mount + path, "cgroup.procs")
        if os.path.exists(procs):
            files.append(procs)
    return files
