"""The security context of a host-process container, applied by its shim.

Run in the container's process between fork and exec (and by the exec helper
before it becomes the command), while still root, in this order:

1. ``readonly_rootfs``: a mount namespace of the process's own
   (``unshare(CLONE_NEWNS)``, every mount made a slave of the host's so nothing
   propagates back), where ``/`` is remounted read-only. Only the root mount is:
   mounts beneath it (the container's writable mounts, ``/proc``, ``/dev``,
   ``/tmp`` where it is a mount of its own) keep their flags.
2. The capability bounding set is cut down to the container's set
   (``PR_CAPBSET_DROP``), computed as containerd does
   (:func:`kubelet_kit.container.capabilities.capability_set`), where "all" is
   the shim's own bounding set.
3. Supplemental groups, group, user (``setgroups``, ``setgid``, ``setuid``); a
   process that stays root then gets exactly that set as its effective and
   permitted capabilities (``capset``), one that is not root keeps none, as
   with runc.
4. ``no_new_privs`` (``PR_SET_NO_NEW_PRIVS``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

from kubelet_kit.container.capabilities import capability_set
from kubelet_kit.container.interfaces import (
    LinuxContainerSecurityContext,
    SecurityProfile,
    SecurityProfileType,
)
from kubelet_kit.errors import UnimplementedError

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_SLAVE = 1 << 19
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def own_bounding_set() -> frozenset[int]:
    """The capabilities in this process's bounding set."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("CapBnd:"):
                mask = int(line.split()[1], 16)
                return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)
    return frozenset()


def check_security(name: str, sc: LinuxContainerSecurityContext | None, *, root: bool) -> None:
    """Decline what a host process cannot be given.

    Args:
        name: The container's name, for the message.
        sc: Its security context.
        root: Whether the runtime runs as root (may mount and hand out capabilities).

    Raises:
        UnimplementedError: naming the field: a seccomp or AppArmor profile other
            than Unconfined (the runtime has none to apply); without root, a
            read-only root file system, privileged mode or added capabilities.
    """
    if sc is None:
        return
    for field, profile in (("seccomp", sc.seccomp), ("apparmor", sc.apparmor)):
        if _confining(profile):
            assert profile is not None
            raise UnimplementedError(
                f'container "{name}": security_context.{field}: the host runtime has no '
                f"{field} profile to apply ({profile.profile_type.value} asked)"
            )
    if root:
        return
    if sc.readonly_rootfs:
        raise UnimplementedError(
            f'container "{name}": security_context.readonly_rootfs: needs a runtime that '
            "may mount (root)"
        )
    if sc.privileged or sc.capabilities_add:
        raise UnimplementedError(
            f'container "{name}": security_context.capabilities: an agent that is not root '
            "cannot give its processes capabilities"
        )


def _confining(profile: SecurityProfile | None) -> bool:
    return profile is not None and profile.profile_type is not SecurityProfileType.UNCONFINED


def security_spec(sc: LinuxContainerSecurityContext | None, *, caps: bool) -> dict[str, Any]:
    """What the shim needs of a security context, as JSON; ``caps``: whether it
    sets the process's capabilities (it runs as root)."""
    if sc is None:
        return {"caps": caps, "add": [], "drop": [], "privileged": False}
    return {
        "caps": caps,
        "add": list(sc.capabilities_add),
        "drop": list(sc.capabilities_drop),
        "privileged": sc.privileged,
        "no_new_privs": sc.no_new_privs,
        "readonly_rootfs": sc.readonly_rootfs,
    }


def make_root_readonly() -> None:
    """Move into a mount namespace of one's own where ``/`` is read-only."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare mount namespace")
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_SLAVE), None), "mount /")
    kept = os.statvfs("/").f_flag & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(flags), None), "remount / read-only")


def apply_security(
    security: dict[str, Any],
    user: int | None,
    group: int | None,
    extra_groups: list[int] | None,
    *,
    readonly_root: bool = True,
) -> None:
    """Apply the security context and identity to the calling process (see the
    module doc); ``readonly_root=False`` when the mount namespace was joined
    already (an exec).

    Raises:
        OSError: a step failed.
    """
    libc = _libc()
    if security.get("readonly_rootfs") and readonly_root:
        make_root_readonly()
    everything = own_bounding_set() if security.get("caps", True) else frozenset()
    sc = LinuxContainerSecurityContext(
        privileged=bool(security.get("privileged")),
        capabilities_add=tuple(security.get("add") or ()),
        capabilities_drop=tuple(security.get("drop") or ()),
    )
    caps = capability_set(sc, everything)
    for cap in sorted(everything - caps):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    if extra_groups is not None:
        os.setgroups(extra_groups)
    if group is not None:
        os.setgid(group)
    if user is not None:
        os.setuid(user)
    if os.getuid() == 0 and security.get("caps", True):
        mask = sum(1 << c for c in caps)
        header = _CapHeader(_CAP_VERSION_3, 0)
        data = (_CapData * 2)(
            _CapData(mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0),
            _CapData(mask >> 32, mask >> 32, 0),
        )
        _check(libc.capset(ctypes.byref(header), data), "capset")
    if security.get("no_new_privs"):
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
