"""What a fake runtime container sees of its security context and its sandbox.

The part of :class:`~kubelet_kit.testing.FakeRuntime` that gives a container the
files a real one would read to learn who and where it is, computed as containerd
computes them: ``/proc/self/status`` (``Uid``, ``Gid``, ``Groups``,
``NoNewPrivs``, ``Seccomp``, the capability masks), ``/proc/self/ns/{net,pid,ipc}``
(the node's own namespaces, those of the process running the fake, where the
sandbox shares them, made-up ones otherwise), ``/proc/sys/kernel/hostname`` and
the sandbox's sysctls under ``/proc/sys``, and for a privileged container the
node's devices under ``/dev``. With ``readonly_rootfs`` the container's file
system is a :class:`ReadOnlyRoot`, refusing writes outside its writable mounts.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import socket
from collections.abc import Callable

from kubelet_kit.container.capabilities import capability_set
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    LinuxContainerSecurityContext,
    PodSandboxConfig,
    SecurityProfileType,
)


def _mask(caps: frozenset[int]) -> str:
    return f"{sum(1 << c for c in caps):016x}"


def _status(config: ContainerConfig, identity: tuple[int, int]) -> str:
    sc = config.security_context
    try:
        return _status_of(sc, identity)
    except TypeError:  # a context built with a list in it: not hashable
        return _status_of.__wrapped__(sc, identity)


@functools.lru_cache(maxsize=256)
def _status_of(sc: LinuxContainerSecurityContext | None, identity: tuple[int, int]) -> str:
    # A value of its (frozen, hashable) security context and identity alone:
    # most containers share one, so it is worked out once.
    caps = capability_set(sc)
    uid, gid = identity
    # A process that is not root loses its capabilities when it execs.
    eff = caps if uid == 0 else frozenset()
    groups = " ".join(str(g) for g in (sc.supplemental_groups if sc else ()))
    confined = (
        sc is not None
        and not sc.privileged
        and sc.seccomp is not None
        and sc.seccomp.profile_type is not SecurityProfileType.UNCONFINED
    )
    lines = [
        "Name:\tsh",
        "State:\tS (sleeping)",
        f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}",
        f"Gid:\t{gid}\t{gid}\t{gid}\t{gid}",
        f"Groups:\t{groups}",
        f"CapInh:\t{_mask(frozenset())}",
        f"CapPrm:\t{_mask(eff)}",
        f"CapEff:\t{_mask(eff)}",
        f"CapBnd:\t{_mask(caps)}",
        f"CapAmb:\t{_mask(frozenset())}",
        f"NoNewPrivs:\t{1 if sc is not None and sc.no_new_privs else 0}",
        f"Seccomp:\t{2 if confined else 0}",
    ]
    return "".join(f"{line}\n" for line in lines)


def checked_capabilities(sc: LinuxContainerSecurityContext | None) -> frozenset[int]:
    """:func:`~kubelet_kit.container.capabilities.capability_set` of ``sc``,
    worked out once per (frozen, hashable) security context.

    Raises:
        ValueError: an unknown capability name.
    """
    try:
        return _capabilities_of(sc)
    except TypeError:  # a context built with a list in it: not hashable
        return capability_set(sc)


@functools.lru_cache(maxsize=256)
def _capabilities_of(sc: LinuxContainerSecurityContext | None) -> frozenset[int]:
    return capability_set(sc)


def _made_up_namespace(kind: str, owner: str) -> str:
    """The namespace of ``kind`` the fake gives ``owner`` (a sandbox or a
    container id) when it does not share the node's: a value of the two alone."""
    # The first three bytes of the digest (its first six hex digits) as a number.
    digest = int.from_bytes(hashlib.sha256(f"{kind}/{owner}".encode()).digest()[:3], "big")
    return f"{kind}:[{4026600000 + digest}]"


@functools.lru_cache(maxsize=256)
def _sandbox_namespace(kind: str, sandbox_id: str) -> str:
    """:func:`_made_up_namespace` of a sandbox (its net or ipc namespace),
    worked out once for all the containers of the sandbox, made one after the
    other."""
    return _made_up_namespace(kind, sandbox_id)


def _namespace(
    kind: str,
    shared: bool,
    owner: str,
    made_up: Callable[[str, str], str] = _made_up_namespace,
) -> str:
    """The link ``/proc/self/ns/KIND`` of a container: the node's own namespace
    where it is shared (if readable), else ``made_up(kind, owner)``."""
    if shared:
        with contextlib.suppress(OSError):
            return os.readlink(f"/proc/self/ns/{kind}")
    return made_up(kind, owner)


def security_files(
    sandbox_id: str,
    container_id: str,
    sandbox: PodSandboxConfig,
    config: ContainerConfig,
    identity: tuple[int, int],
) -> dict[str, str]:
    """The files a container reads to learn its identity and surroundings."""
    ns = sandbox.namespace_options
    files = {
        "/proc/self/status": _status(config, identity),
        "/proc/self/ns/net": _namespace("net", ns.host_network, sandbox_id, _sandbox_namespace),
        # The kubelet gives each container a PID namespace of its own.
        "/proc/self/ns/pid": _namespace("pid", ns.host_pid, container_id),
        "/proc/self/ns/ipc": _namespace("ipc", ns.host_ipc, sandbox_id, _sandbox_namespace),
        "/proc/sys/kernel/hostname": (
            socket.gethostname() if ns.host_network or not sandbox.hostname else sandbox.hostname
        )
        + "\n",
    }
    for key, value in sandbox.sysctls.items():
        files["/proc/sys/" + key.replace(".", "/")] = f"{value}\n"
    sc = config.security_context
    if sc is not None and sc.privileged:
        with contextlib.suppress(OSError):
            for name in os.listdir("/dev"):
                files.setdefault(f"/dev/{name}", "")
    return files
