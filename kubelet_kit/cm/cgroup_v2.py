"""CgroupV2Driver: plain operations on a cgroup2 (unified) tree.

It creates cgroups with their parents, delegates the controllers it needs through
each parent's ``cgroup.subtree_control`` (only where the parent offers them, so a
tree without a controller is never asked for it), writes ``cpu.weight``,
``cpu.max``, ``memory.max``, ``memory.min``/``memory.low``, ``pids.max`` and
``cpuset.*``, moves processes with ``cgroup.procs``, kills with ``cgroup.kill``,
freezes with ``cgroup.freeze``, and reads ``memory.events`` (OOM kills),
``memory.stat``, ``cpu.stat`` and the PSI ``*.pressure`` files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Callable, Sequence
from typing import TypeVar

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm.driver import CgroupStats, PressureStats
from kubelet_kit.cm.fs import CgroupFiles, HostCgroupFiles
from kubelet_kit.cm.helpers import ResourceConfig, cpu_shares_to_weight
from kubelet_kit.errors import ConfigurationError

__all__ = [
    "DEFAULT_CONTROLLERS",
    "CgroupV2Driver",
    "discover_v2_mount",
    "parse_flat_keyed",
    "parse_pressure",
]

T = TypeVar("T")

#: Controllers the kubelet wants delegated to pod cgroups: what runc enables on the
#: way down to a container's cgroup (those the kernel offers of these).
DEFAULT_CONTROLLERS: frozenset[str] = frozenset(
    {"cpu", "io", "memory", "pids", "cpuset", "hugetlb"}
)
_KILL_WAIT_STEPS = 200
_KILL_WAIT_STEP_SECONDS = 0.01


def discover_v2_mount(mounts_file: str = "/proc/self/mounts") -> str | None:
    """Where the cgroup2 hierarchy is mounted (``/sys/fs/cgroup`` on a pure v2
    machine, often ``/sys/fs/cgroup/unified`` beside v1), read from the mount
    table; the first of several; None without one."""
    try:
        with open(mounts_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            # The mount table escapes spaces and the like as octal (\040).
            return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
    return None


def parse_flat_keyed(text: str) -> dict[str, int]:
    """Parse ``key value`` lines (``memory.stat``, ``memory.events``, ``cpu.stat``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def parse_pressure(text: str) -> PressureStats:
    """Parse a PSI file (``some avg10=.. avg60=.. avg300=.. total=..`` / ``full ...``)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind not in ("some", "full"):
            continue
        for field in rest.split():
            key, _, val = field.partition("=")
            try:
                values[f"{kind}_{key}"] = float(val)
            except ValueError:
                continue
    return PressureStats(
        some_avg10=values.get("some_avg10", 0.0),
        some_avg60=values.get("some_avg60", 0.0),
        some_avg300=values.get("some_avg300", 0.0),
        some_total=int(values.get("some_total", 0)),
        full_avg10=values.get("full_avg10", 0.0),
        full_avg60=values.get("full_avg60", 0.0),
        full_avg300=values.get("full_avg300", 0.0),
        full_total=int(values.get("full_total", 0)),
    )


def _rel(path: str) -> str:
    """``/a/b`` -> ``a/b``; refuses ``..`` so a name never escapes the hierarchy."""
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ConfigurationError(f"cgroup path {path!r}: '.' and '..' are not allowed")
    return "/".join(parts)


def _limit(value: int) -> str:
    return "max" if value < 0 else str(value)


def config_files_v2(config: ResourceConfig) -> list[tuple[str, str]]:
    """The (file, value) writes that apply ``config`` on cgroup v2, in order."""
    writes: list[tuple[str, str]] = []
    if config.cpuset_cpus is not None:
        writes.append(("cpuset.cpus", config.cpuset_cpus))
    if config.cpuset_mems is not None:
        writes.append(("cpuset.mems", config.cpuset_mems))
    if config.cpu_shares is not None:
        writes.append(("cpu.weight", str(cpu_shares_to_weight(config.cpu_shares))))
    if config.cpu_quota is not None or config.cpu_period is not None:
        quota = config.cpu_quota if config.cpu_quota is not None else -1
        text = str(quota) if quota > 0 else "max"
        if config.cpu_period:
            text += f" {config.cpu_period}"
        writes.append(("cpu.max", text))
    if config.memory is not None and config.memory != 0:
        writes.append(("memory.max", _limit(config.memory)))
    if config.pids_limit is not None and config.pids_limit != 0:
        writes.append(("pids.max", _limit(config.pids_limit)))
    writes.extend(sorted(config.unified.items()))
    return writes


class CgroupV2Driver:
    """A :class:`~kubelet_kit.cm.driver.CgroupDriver` for a cgroup2 hierarchy.

    Args:
        mount: Where the cgroup2 hierarchy is mounted (default ``/sys/fs/cgroup``).
        files: File access to use instead of the mount (e.g. a fake tree).
        controllers: Controllers to delegate down to created cgroups, where offered.
        clock: For the short waits after a kill.
    """

    def __init__(
        self,
        mount: str | os.PathLike[str] = "/sys/fs/cgroup",
        *,
        files: CgroupFiles | None = None,
        controllers: frozenset[str] = DEFAULT_CONTROLLERS,
        clock: Clock | None = None,
    ) -> None:
        self.files: CgroupFiles = files if files is not None else HostCgroupFiles(mount)
        self.controllers = controllers
        self.clock: Clock = clock if clock is not None else RealClock()
        # Kernel files go through a thread; an in-memory tree answers at once, which
        # keeps tests on a FakeClock deterministic.
        self._threaded = isinstance(self.files, HostCgroupFiles)

    @property
    def version(self) -> int:
        """2."""
        return 2

    async def _run(self, fn: Callable[[], T]) -> T:
        if not self._threaded:
            return fn()
        return await asyncio.to_thread(fn)

    def _fail(self, what: str, cgroup: str, name: str, exc: OSError) -> ConfigurationError:
        where = self.files.describe(cgroup, name)
        return ConfigurationError(f"{where}: cannot {what}: {os.strerror(exc.errno or 0)}")

    # ------------------------------------------------------------------ reading

    async def available_controllers(self) -> frozenset[str]:
        """Controllers in the root's ``cgroup.controllers``."""

        def read() -> frozenset[str]:
            try:
                return frozenset(self.files.read("", "cgroup.controllers").split())
            except OSError as exc:
                raise self._fail("read", "", "cgroup.controllers", exc) from None

        return await self._run(read)

    async def exists(self, path: str) -> bool:
        """Whether the cgroup directory exists."""
        rel = _rel(path)
        return await self._run(lambda: self.files.is_dir(rel))

    async def read_file(self, path: str, name: str) -> str:
        """Read one interface file. Raises ConfigurationError naming it."""
        rel = _rel(path)

        def read() -> str:
            try:
                return self.files.read(rel, name)
            except OSError as exc:
                raise self._fail("read", rel, name, exc) from None

        return await self._run(read)

    async def enabled_controllers(self, path: str) -> frozenset[str]:
        """Controllers of the cgroup itself (its ``cgroup.controllers``)."""
        return frozenset((await self.read_file(path, "cgroup.controllers")).split())

    # ------------------------------------------------------------------ writing

    def _delegate(self, parent: str) -> None:
        """Enable in ``parent``'s subtree_control what we want and it offers."""
        offered = set(self.files.read(parent, "cgroup.controllers").split())
        enabled = set(self.files.read(parent, "cgroup.subtree_control").split())
        missing = sorted((self.controllers & offered) - enabled)
        if missing:
            try:
                self.files.write(
                    parent, "cgroup.subtree_control", " ".join("+" + c for c in missing)
                )
            except OSError as exc:
                raise self._fail(
                    f"enable controllers {missing}", parent, "cgroup.subtree_control", exc
                ) from None

    def _create_sync(self, rel: str) -> None:
        if not self.files.is_dir(""):
            raise ConfigurationError(
                f"{self.files.describe('')}: no cgroup2 hierarchy mounted there"
            )
        parts = rel.split("/") if rel else []
        parent = ""
        for part in parts:
            here = f"{parent}/{part}" if parent else part
            if not self.files.is_dir(here):
                self._delegate(parent)
                try:
                    self.files.mkdir(here)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise self._fail("create cgroup", here, "", exc) from None
            parent = here

    def _apply_sync(self, rel: str, config: ResourceConfig) -> None:
        for name, value in config_files_v2(config):
            if not self.files.has_file(rel, name):
                # The controller is not delegated here: say which one is missing.
                raise ConfigurationError(
                    f"{self.files.describe(rel, name)}: controller "
                    f"{name.split('.')[0]!r} is not enabled for this cgroup"
                )
            try:
                self.files.write(rel, name, value)
            except OSError as exc:
                raise self._fail(f"write {value!r}", rel, name, exc) from None

    async def create(self, path: str, config: ResourceConfig | None = None) -> None:
        """Create the cgroup (delegating controllers on the way) and apply ``config``."""
        rel = _rel(path)

        def work() -> None:
            self._create_sync(rel)
            if config is not None:
                self._apply_sync(rel, config)

        await self._run(work)

    async def update(self, path: str, config: ResourceConfig) -> None:
        """Apply ``config`` to an existing cgroup."""
        rel = _rel(path)
        await self._run(lambda: self._apply_sync(rel, config))

    async def write_file(self, path: str, name: str, value: str) -> None:
        """Write one interface file. Raises ConfigurationError naming it."""
        rel = _rel(path)

        def write() -> None:
            try:
                self.files.write(rel, name, value)
            except OSError as exc:
                raise self._fail(f"write {value!r}", rel, name, exc) from None

        await self._run(write)

    async def add_process(self, path: str, pid: int) -> None:
        """Write ``pid`` to ``cgroup.procs``."""
        await self.write_file(path, "cgroup.procs", str(pid))

    def _pids_sync(self, rel: str, recursive: bool) -> list[int]:
        if not self.files.is_dir(rel):
            return []
        try:
            own = [int(x) for x in self.files.read(rel, "cgroup.procs").split()]
        except FileNotFoundError:
            return []
        if recursive:
            for child in self.files.children(rel):
                own.extend(self._pids_sync(f"{rel}/{child}" if rel else child, True))
        return own

    async def children(self, path: str) -> Sequence[str]:
        """Child cgroup names, sorted."""
        rel = _rel(path)
        return await self._run(lambda: self.files.children(rel))

    async def pids(self, path: str, *, recursive: bool = False) -> Sequence[int]:
        """Processes listed in ``cgroup.procs`` (and the children's when recursive)."""
        rel = _rel(path)
        return await self._run(lambda: self._pids_sync(rel, recursive))

    async def freeze(self, path: str, frozen: bool = True) -> None:
        """Freeze (or thaw) the cgroup and its descendants via ``cgroup.freeze``."""
        await self.write_file(path, "cgroup.freeze", "1" if frozen else "0")

    async def events(self, path: str) -> dict[str, int]:
        """``cgroup.events`` (``populated``, ``frozen``)."""
        return parse_flat_keyed(await self.read_file(path, "cgroup.events"))

    async def kill(self, path: str) -> None:
        """Kill everything below ``path`` (``cgroup.kill``, else SIGKILL per pid)."""
        rel = _rel(path)

        def kill() -> None:
            if not self.files.is_dir(rel):
                return
            if self.files.has_file(rel, "cgroup.kill"):
                try:
                    self.files.write(rel, "cgroup.kill", "1")
                    return
                except OSError as exc:
                    raise self._fail("kill", rel, "cgroup.kill", exc) from None
            for pid in self._pids_sync(rel, True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

        await self._run(kill)
        # Killed tasks leave the cgroup asynchronously; wait briefly on the clock.
        for _ in range(_KILL_WAIT_STEPS):
            if not await self.pids(path, recursive=True):
                return
            await self.clock.sleep(_KILL_WAIT_STEP_SECONDS)

    async def remove(self, path: str) -> None:
        """Kill what runs below ``path``, then remove the cgroups, children first."""
        rel = _rel(path)
        if not rel:
            raise ConfigurationError("refusing to remove the root cgroup")
        if not await self.exists(path):
            return
        if await self.pids(path, recursive=True):
            await self.kill(path)

        def rm(here: str) -> None:
            for child in self.files.children(here):
                rm(f"{here}/{child}")
            try:
                self.files.rmdir(here)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise self._fail("remove cgroup", here, "", exc) from None

        await self._run(lambda: rm(rel))

    # ------------------------------------------------------------------ stats

    def _stats_sync(self, rel: str) -> CgroupStats:
        if not self.files.is_dir(rel):
            raise ConfigurationError(f"{self.files.describe(rel)}: no such cgroup")

        def opt(name: str) -> str:
            try:
                return self.files.read(rel, name) if self.files.has_file(rel, name) else ""
            except OSError:
                return ""

        usage = int(opt("memory.current").strip() or 0)
        stat = parse_flat_keyed(opt("memory.stat"))
        working_set = max(0, usage - stat.get("inactive_file", 0))
        events = parse_flat_keyed(opt("memory.events"))
        cpu = parse_flat_keyed(opt("cpu.stat"))
        current = opt("pids.current").strip()
        pids = int(current) if current else len(self._pids_sync(rel, True))
        pressure = {
            res: parse_pressure(text)
            for res in ("cpu", "memory", "io")
            if (text := opt(f"{res}.pressure"))
        }
        return CgroupStats(
            memory_usage_bytes=usage,
            memory_working_set_bytes=working_set,
            oom_kills=events.get("oom_kill", 0),
            cpu_usage_usec=cpu.get("usage_usec", 0),
            pids=pids,
            pressure=pressure,
        )

    async def stats(self, path: str) -> CgroupStats:
        """Memory, OOM kills, CPU time, task count and PSI of the cgroup."""
        rel = _rel(path)
        return await self._run(lambda: self._stats_sync(rel))
