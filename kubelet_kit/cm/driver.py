"""The CgroupDriver protocol (one cgroup hierarchy, v1 or v2) and its value types.

A driver works on cgroup paths relative to its hierarchy, like
``/kubepods/burstable/pod1234``; naming (cgroupfs or systemd spelling) is decided
above it, in :mod:`kubelet_kit.cm.naming`. Filesystem work runs in a thread so the
event loop never waits on cgroupfs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from kubelet_kit.cm.helpers import ResourceConfig

__all__ = ["CgroupDriver", "CgroupStats", "PressureStats"]


@attrs.frozen
class PressureStats:
    """One PSI file (``cpu.pressure``...): ``some``/``full`` averages and totals (us)."""

    some_avg10: float = 0.0
    some_avg60: float = 0.0
    some_avg300: float = 0.0
    some_total: int = 0
    full_avg10: float = 0.0
    full_avg60: float = 0.0
    full_avg300: float = 0.0
    full_total: int = 0


@attrs.frozen(kw_only=True)
class CgroupStats:
    """What a cgroup reports, for the eviction signals and the summary API.

    Attributes:
        memory_usage_bytes: Current usage (v2 ``memory.current``).
        memory_working_set_bytes: Usage less inactive file pages, floored at 0 (the
            kubelet's working set).
        oom_kills: OOM kills inside the cgroup (``memory.events`` ``oom_kill``).
        cpu_usage_usec: Cumulative CPU time in microseconds.
        pids: Tasks in the cgroup and below.
        pressure: PSI per resource (``cpu``, ``memory``, ``io``) where the kernel offers it.
    """

    memory_usage_bytes: int = 0
    memory_working_set_bytes: int = 0
    oom_kills: int = 0
    cpu_usage_usec: int = 0
    pids: int = 0
    pressure: Mapping[str, PressureStats] = attrs.field(factory=dict)


@runtime_checkable
class CgroupDriver(Protocol):
    """Plain operations on one cgroup hierarchy (v1 controllers or a cgroup2 tree).

    Paths are absolute within the hierarchy (``/kubepods/pod1``); ``/`` is its root.
    """

    @property
    def version(self) -> int:
        """1 or 2."""

    async def available_controllers(self) -> frozenset[str]:
        """Controllers usable below the driver's base. Blocks on filesystem I/O only;
        raises ConfigurationError when the hierarchy is missing."""

    async def exists(self, path: str) -> bool:
        """Whether the cgroup exists (in every controller, for v1). Never raises."""

    async def create(self, path: str, config: ResourceConfig | None = None) -> None:
        """Create the cgroup and its missing parents, then apply ``config``.
        Idempotent. Raises ConfigurationError naming the path and file on failure."""

    async def update(self, path: str, config: ResourceConfig) -> None:
        """Apply ``config`` to an existing cgroup. Idempotent; raises
        ConfigurationError naming the path and file on failure."""

    async def remove(self, path: str) -> None:
        """Kill what still runs in the cgroup and below, then remove it, children
        first. Idempotent (a missing cgroup is fine); raises ConfigurationError when
        it cannot be removed."""

    async def add_process(self, path: str, pid: int) -> None:
        """Move process ``pid`` into the cgroup. Raises ConfigurationError."""

    async def children(self, path: str) -> Sequence[str]:
        """Names of the cgroup's child cgroups; [] when it does not exist. Never raises."""

    async def pids(self, path: str, *, recursive: bool = False) -> Sequence[int]:
        """Processes in the cgroup (and below when ``recursive``); [] when missing."""

    async def kill(self, path: str) -> None:
        """SIGKILL every process in the cgroup and below. Idempotent."""

    async def stats(self, path: str) -> CgroupStats:
        """Usage figures of the cgroup; zeros for what the kernel does not offer.
        Raises ConfigurationError when the cgroup does not exist."""
