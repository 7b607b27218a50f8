"""CgroupV1Driver: cgroup v1 controllers through cgroupspy.

On cgroup v1 each controller is its own hierarchy (``/sys/fs/cgroup/cpu``,
``/sys/fs/cgroup/memory``...), so one cgroup path is a directory in every mounted
controller: the kubelet makes its cgroups in each hierarchy mounted (cpu, cpuacct,
cpuset, memory, pids, hugetlb, and blkio, devices, freezer... too, as
libcontainer's cgroupfs manager does), so that a process moved there is in it
everywhere. The driver makes and removes those directories with cgroupspy's
``Node`` and writes the knobs through its controller classes: ``cpu.shares``,
``cpu.cfs_period_us``/``cpu.cfs_quota_us``, ``memory.limit_in_bytes``,
``pids.max`` and ``cpuset.cpus``/``cpuset.mems`` (a new cpuset cgroup gets its
parent's CPUs and memory nodes, as runc does, or no process could join it).
``ResourceConfig.unified`` is a cgroup v2 notion and is ignored here.

cgroupspy is imported when a driver is built, so ``kubelet_kit.cm`` imports
without it; where it is not installed the driver falls back to the same file
operations written out here (:attr:`CgroupV1Driver.uses_cgroupspy` tells which).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm.cgroup_v2 import parse_flat_keyed
from kubelet_kit.cm.driver import CgroupStats
from kubelet_kit.cm.helpers import ResourceConfig
from kubelet_kit.errors import ConfigurationError

__all__ = ["DEFAULT_V1_CONTROLLERS", "V1_CONTROLLERS", "CgroupV1Driver", "discover_v1_mounts"]

T = TypeVar("T")

#: The cgroup v1 controllers (the kernel's names, as /proc/cgroups lists them). A
#: named hierarchy such as ``name=systemd`` is no controller and is left alone.
V1_CONTROLLERS: Final = (
    "cpuset",
    "cpu",
    "cpuacct",
    "blkio",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
)
#: The controllers the kubelet's existence check looks at (hugetlb where mounted):
#: a cgroup exists when it is in each of these that is mounted.
DEFAULT_V1_CONTROLLERS: Final = ("cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb")
_KILL_WAIT_STEPS = 200
#: Interface files cgroupspy models as typed attributes.
_DESCRIPTORS: Final = {
    "cpu.shares": "shares",
    "cpu.cfs_period_us": "cfs_period_us",
    "cpu.cfs_quota_us": "cfs_quota_us",
    "memory.limit_in_bytes": "limit_in_bytes",
}
_KILL_WAIT_STEP_SECONDS = 0.01


def discover_v1_mounts(
    controllers: Iterable[str] = V1_CONTROLLERS, mounts_file: str = "/proc/self/mounts"
) -> dict[str, str]:
    """Where each wanted v1 controller is mounted, read from ``/proc/self/mounts``.

    A co-mounted hierarchy (``cpu,cpuacct``) serves each of its controllers.
    """
    wanted = set(controllers)
    found: dict[str, str] = {}
    try:
        with open(mounts_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[2] != "cgroup":
            continue
        for option in fields[3].split(","):
            if option in wanted and option not in found:
                found[option] = fields[1]
    return found


class _PlainNode:
    """The part of cgroupspy's ``Node`` the driver uses, for hosts without it."""

    def __init__(self, name: str | bytes, parent: _PlainNode | None = None) -> None:
        self.name = name.decode() if isinstance(name, bytes) else name
        self.parent = parent

    @property
    def full_path(self) -> str:
        return os.path.join(self.parent.full_path, self.name) if self.parent else self.name

    def create_cgroup(self, name: str) -> _PlainNode:
        node = _PlainNode(name, self)
        with contextlib.suppress(FileExistsError):
            os.mkdir(node.full_path)
        return node


class _PlainController:
    """The part of cgroupspy's ``Controller`` the driver uses, for hosts without it."""

    def __init__(self, node: _PlainNode) -> None:
        self.node = node

    def get_property(self, name: bytes) -> str:
        with open(os.path.join(self.node.full_path, name.decode()), encoding="ascii") as f:
            return f.read().strip()

    def set_property(self, name: bytes, value: str) -> None:
        with open(os.path.join(self.node.full_path, name.decode()), "w", encoding="ascii") as f:
            f.write(str(value))


class _PlainNodes:
    Node = _PlainNode


def _parts(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ConfigurationError(f"cgroup path {path!r}: '.' and '..' are not allowed")
    return parts


class CgroupV1Driver:
    """A :class:`~kubelet_kit.cm.driver.CgroupDriver` over cgroup v1 controllers.

    Args:
        mounts: Controller name -> mount directory (default: every v1 controller
            mounted, discovered from ``/proc/self/mounts``).
        clock: For the short waits after a kill.
        use_cgroupspy: Go through cgroupspy when it is installed (the default).

    Raises:
        ConfigurationError: No controller is mounted.
    """

    def __init__(
        self,
        mounts: Mapping[str, str] | None = None,
        *,
        clock: Clock | None = None,
        use_cgroupspy: bool = True,
    ) -> None:
        self._nodes: Any = _PlainNodes
        self._classes: dict[str, Any] = {}
        self._base_class: Any = _PlainController
        self.uses_cgroupspy = False
        if use_cgroupspy:
            try:
                from cgroupspy import controllers as spy_controllers  # type: ignore[import-untyped, unused-ignore, import-not-found]
                from cgroupspy import nodes as spy_nodes  # type: ignore[import-untyped, unused-ignore, import-not-found]
            except ImportError:  # pragma: no cover - depends on the environment
                pass
            else:
                self._nodes = spy_nodes
                self._classes = {
                    "cpu": spy_controllers.CpuController,
                    "cpuacct": spy_controllers.CpuAcctController,
                    "cpuset": spy_controllers.CpuSetController,
                    "memory": spy_controllers.MemoryController,
                }
                self._base_class = spy_controllers.Controller
                self.uses_cgroupspy = True
        self.mounts: dict[str, str] = dict(mounts) if mounts is not None else discover_v1_mounts()
        if not self.mounts:
            raise ConfigurationError("no cgroup v1 controller is mounted (see /proc/self/mounts)")
        self.clock: Clock = clock if clock is not None else RealClock()

    @property
    def version(self) -> int:
        """1."""
        return 1

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    # ------------------------------------------------------------------ nodes

    def _node(self, controller: str, parts: Sequence[str]) -> Any:
        """cgroupspy node chain for ``parts`` in ``controller``'s hierarchy."""
        mount = self.mounts[controller].rstrip("/")
        parent_dir, name = os.path.split(mount)
        node = self._nodes.Node(name, parent=self._nodes.Node(parent_dir))
        for part in parts:
            node = self._nodes.Node(part, parent=node)
        return node

    def _ctl(self, controller: str, node: Any) -> Any:
        return self._classes.get(controller, self._base_class)(node)

    def _set(self, ctl: Any, name: str, value: str) -> None:
        """Write through cgroupspy's typed descriptor when it has one."""
        attr = _DESCRIPTORS.get(name) if self.uses_cgroupspy else None
        if attr is not None:
            setattr(ctl, attr, int(value))
        else:
            ctl.set_property(name.encode(), value)

    @staticmethod
    def _get(ctl: Any, name: str) -> str:
        return str(ctl.get_property(name.encode()))

    def _dir(self, controller: str, parts: Sequence[str]) -> str:
        return os.path.join(self.mounts[controller], *parts)

    def _fail(self, what: str, where: str, exc: OSError) -> ConfigurationError:
        return ConfigurationError(f"{where}: cannot {what}: {os.strerror(exc.errno or 0)}")

    # ------------------------------------------------------------------ reading

    async def available_controllers(self) -> frozenset[str]:
        """The controllers whose mount exists."""
        return await self._run(
            lambda: frozenset(c for c, m in self.mounts.items() if os.path.isdir(m))
        )

    async def exists(self, path: str) -> bool:
        """Whether the cgroup exists in each mounted controller of
        :data:`DEFAULT_V1_CONTROLLERS` (in every controller when none of those is
        mounted), as the kubelet checks: other tools' hierarchies do not count."""
        parts = _parts(path)
        checked = [c for c in self.mounts if c in DEFAULT_V1_CONTROLLERS] or list(self.mounts)
        return await self._run(lambda: all(os.path.isdir(self._dir(c, parts)) for c in checked))

    # ------------------------------------------------------------------ writing

    def _create_sync(self, parts: list[str]) -> None:
        for controller, mount in self.mounts.items():
            if not os.path.isdir(mount):
                raise ConfigurationError(f"{mount}: the {controller} controller is not mounted")
            node = self._node(controller, [])
            for depth, part in enumerate(parts):
                where = self._dir(controller, parts[: depth + 1])
                fresh = not os.path.isdir(where)
                try:
                    node = node.create_cgroup(part)
                except OSError as exc:
                    raise self._fail("create cgroup", where, exc) from None
                if fresh and controller == "cpuset":
                    self._inherit_cpuset(node, where)

    def _inherit_cpuset(self, node: Any, where: str) -> None:
        ctl = self._ctl("cpuset", node)
        parent = self._ctl("cpuset", node.parent)
        for name in ("cpuset.cpus", "cpuset.mems"):
            try:
                if not self._get(ctl, name).strip():
                    self._set(ctl, name, self._get(parent, name).strip())
            except OSError as exc:
                raise self._fail(f"initialise {name}", where, exc) from None

    def _writes(self, config: ResourceConfig) -> list[tuple[str, str, str]]:
        """(controller, file, value) in the order to write them."""
        w: list[tuple[str, str, str]] = []
        if config.cpuset_cpus is not None:
            w.append(("cpuset", "cpuset.cpus", config.cpuset_cpus))
        if config.cpuset_mems is not None:
            w.append(("cpuset", "cpuset.mems", config.cpuset_mems))
        if config.cpu_shares is not None:
            w.append(("cpu", "cpu.shares", str(config.cpu_shares)))
        if config.cpu_period:
            w.append(("cpu", "cpu.cfs_period_us", str(config.cpu_period)))
        if config.cpu_quota is not None and config.cpu_quota != 0:
            w.append(
                ("cpu", "cpu.cfs_quota_us", str(config.cpu_quota if config.cpu_quota > 0 else -1))
            )
        if config.memory is not None and config.memory != 0:
            w.append(("memory", "memory.limit_in_bytes", str(config.memory)))
        if config.pids_limit is not None and config.pids_limit != 0:
            w.append(
                ("pids", "pids.max", "max" if config.pids_limit < 0 else str(config.pids_limit))
            )
        return w

    def _apply_sync(self, parts: list[str], config: ResourceConfig) -> None:
        for controller, name, value in self._writes(config):
            if controller not in self.mounts:
                raise ConfigurationError(
                    f"{name}: the {controller} controller is not mounted on this node"
                )
            ctl = self._ctl(controller, self._node(controller, parts))
            where = os.path.join(self._dir(controller, parts), name)
            try:
                self._set(ctl, name, value)
            except OSError as exc:
                raise self._fail(f"write {value!r}", where, exc) from None

    async def create(self, path: str, config: ResourceConfig | None = None) -> None:
        """Create the cgroup in every controller, then apply ``config``."""
        parts = _parts(path)

        def work() -> None:
            self._create_sync(parts)
            if config is not None:
                self._apply_sync(parts, config)

        await self._run(work)

    async def update(self, path: str, config: ResourceConfig) -> None:
        """Apply ``config`` to the existing cgroup."""
        parts = _parts(path)
        await self._run(lambda: self._apply_sync(parts, config))

    async def read_file(self, controller: str, path: str, name: str) -> str:
        """Read one interface file of one controller (through cgroupspy)."""
        parts = _parts(path)

        def read() -> str:
            try:
                return self._get(self._ctl(controller, self._node(controller, parts)), name)
            except OSError as exc:
                raise self._fail(
                    "read", os.path.join(self._dir(controller, parts), name), exc
                ) from None

        return await self._run(read)

    async def add_process(self, path: str, pid: int) -> None:
        """Write ``pid`` to ``cgroup.procs`` in every controller."""
        parts = _parts(path)

        def move() -> None:
            for controller in self.mounts:
                ctl = self._ctl(controller, self._node(controller, parts))
                try:
                    self._set(ctl, "cgroup.procs", str(pid))
                except OSError as exc:
                    raise self._fail(
                        f"add process {pid}",
                        os.path.join(self._dir(controller, parts), "cgroup.procs"),
                        exc,
                    ) from None

        await self._run(move)

    def _pids_in(self, directory: str, recursive: bool) -> list[int]:
        try:
            with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as f:
                pids = [int(x) for x in f.read().split()]
        except FileNotFoundError:
            return []
        if recursive:
            with os.scandir(directory) as it:
                subdirs = sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
            for sub in subdirs:
                pids.extend(self._pids_in(sub, True))
        return pids

    def _pids_sync(self, parts: list[str], recursive: bool) -> list[int]:
        seen: dict[int, None] = {}
        for controller in self.mounts:
            for pid in self._pids_in(self._dir(controller, parts), recursive):
                seen.setdefault(pid)
        return list(seen)

    async def children(self, path: str) -> Sequence[str]:
        """Child cgroup names (in any controller), sorted."""
        parts = _parts(path)

        def names() -> list[str]:
            found: set[str] = set()
            for controller in self.mounts:
                try:
                    with os.scandir(self._dir(controller, parts)) as it:
                        found.update(e.name for e in it if e.is_dir(follow_symlinks=False))
                except (FileNotFoundError, NotADirectoryError):
                    continue
            return sorted(found)

        return await self._run(names)

    async def pids(self, path: str, *, recursive: bool = False) -> Sequence[int]:
        """Processes in the cgroup in any controller (and below when recursive)."""
        parts = _parts(path)
        return await self._run(lambda: self._pids_sync(parts, recursive))

    async def kill(self, path: str) -> None:
        """SIGKILL every process in the cgroup and below, then wait for them to leave."""
        parts = _parts(path)

        def kill() -> None:
            for pid in self._pids_sync(parts, True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

        for _ in range(_KILL_WAIT_STEPS):
            await self._run(kill)
            if not await self.pids(path, recursive=True):
                return
            await self.clock.sleep(_KILL_WAIT_STEP_SECONDS)

    async def remove(self, path: str) -> None:
        """Kill what runs there, then remove the cgroup (children first) everywhere."""
        parts = _parts(path)
        if not parts:
            raise ConfigurationError("refusing to remove the root cgroup")
        if await self.pids(path, recursive=True):
            await self.kill(path)

        def rm() -> None:
            for controller in self.mounts:
                top = self._dir(controller, parts)
                if not os.path.isdir(top):
                    continue
                for here, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
                    try:
                        os.rmdir(here)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        raise self._fail("remove cgroup", here, exc) from None

        await self._run(rm)

    # ------------------------------------------------------------------ stats

    def _stats_sync(self, parts: list[str]) -> CgroupStats:
        if not all(os.path.isdir(self._dir(c, parts)) for c in self.mounts):
            raise ConfigurationError(f"{'/'.join(parts)}: no such cgroup")

        def opt(controller: str, name: str) -> str:
            if controller not in self.mounts:
                return ""
            try:
                with open(os.path.join(self._dir(controller, parts), name), encoding="ascii") as f:
                    return f.read()
            except OSError:
                return ""

        usage = int(opt("memory", "memory.usage_in_bytes").strip() or 0)
        stat = parse_flat_keyed(opt("memory", "memory.stat"))
        inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
        oom = parse_flat_keyed(opt("memory", "memory.oom_control"))
        cpu_ns = int(opt("cpuacct", "cpuacct.usage").strip() or 0)
        current = opt("pids", "pids.current").strip()
        return CgroupStats(
            memory_usage_bytes=usage,
            memory_working_set_bytes=max(0, usage - inactive),
            oom_kills=oom.get("oom_kill", 0),
            cpu_usage_usec=cpu_ns // 1000,
            pids=int(current) if current else len(self._pids_sync(parts, True)),
        )

    async def stats(self, path: str) -> CgroupStats:
        """Memory usage and working set, OOM kills, CPU time and task count."""
        parts = _parts(path)
        return await self._run(lambda: self._stats_sync(parts))
