"""Linux capabilities as the CRI names them, and the set a container gets.

A security context names capabilities as the kubelet does (``SYS_ADMIN``;
``CAP_SYS_ADMIN`` and any case are read too). :func:`capability_set` computes a
container's set as containerd does, so every runtime of the project agrees.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import LinuxContainerSecurityContext

#: Capability names by number (``capabilities(7)``), without the ``CAP_`` prefix.
CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
)
_NUMBERS = {name: i for i, name in enumerate(CAPABILITIES)}

#: Every capability this table knows, by number.
ALL_CAPABILITIES = frozenset(range(len(CAPABILITIES)))

#: The capabilities containerd gives a container by default: CHOWN, DAC_OVERRIDE,
#: FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, NET_RAW,
#: SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP.
DEFAULT_CAPABILITIES = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})


def capability_number(name: str) -> int:
    """The number of a capability (``SYS_ADMIN``, ``CAP_SYS_ADMIN``, any case).

    Raises:
        ValueError: no such capability.
    """
    key = name.upper().removeprefix("CAP_")
    if key not in _NUMBERS:
        raise ValueError(f"unknown capability {name!r}")
    return _NUMBERS[key]


def capability_names(mask: int) -> frozenset[str]:
    """The names of the capabilities in a bit mask (``CAP_<n>`` for unknown bits)."""
    return frozenset(
        CAPABILITIES[i] if i < len(CAPABILITIES) else f"CAP_{i}"
        for i in range(mask.bit_length())
        if mask >> i & 1
    )


def capability_set(
    sc: LinuxContainerSecurityContext | None, everything: frozenset[int] = ALL_CAPABILITIES
) -> frozenset[int]:
    """The capabilities a container gets, as containerd computes them.

    All of ``everything`` (the capabilities the runtime itself holds) when
    privileged; otherwise the default set, then every capability when ``ALL`` is
    added, none when ``ALL`` is dropped, then the single names added, then the
    single names dropped.

    Raises:
        ValueError: an unknown capability name.
    """
    if sc is None:
        return DEFAULT_CAPABILITIES & everything
    if sc.privileged:
        return everything
    caps = set(DEFAULT_CAPABILITIES)
    adds = [c for c in sc.capabilities_add if c.upper() != "ALL"]
    drops = [c for c in sc.capabilities_drop if c.upper() != "ALL"]
    if len(adds) != len(sc.capabilities_add):
        caps = set(everything)
    if len(drops) != len(sc.capabilities_drop):
        caps = set()
    caps |= {capability_number(c) for c in adds}
    caps -= {capability_number(c) for c in drops}
    return frozenset(caps & everything)
