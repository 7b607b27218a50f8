"""``/stats/summary``: the kubelet's summary (stats/v1alpha1) for the node and its pods.

Node figures are read from the host (``/proc`` and ``statvfs``); pod and container
figures are what the Runtime reports (``pod_sandbox_stats``), plus the size of each
container's log files. ``usageNanoCores`` is derived from two samples, so it appears
from the second summary on. A figure the runtime does not report is left out, as
the kubelet leaves out nil fields; a runtime that does not offer ``stats`` reports
none (its pods are listed with their log sizes only, and one line says so in the
log).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerStats,
    PodSandboxState,
    PodSandboxStats,
    RuntimeCore,
    StatsRuntime,
)
from kubelet_kit.container.optional import STATS, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError

__all__ = ["SummaryProvider", "format_time", "fs_stats"]

log = logging.getLogger(__name__)

_NS = 1_000_000_000


def format_time(epoch: float) -> str:
    """An epoch time as ``metav1.Time`` writes it (RFC 3339, whole seconds, ``Z``)."""
    return _dt.datetime.fromtimestamp(int(epoch), tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fs_stats(path: Path, now: float) -> dict[str, Any]:
    """FsStats of the filesystem holding ``path`` ({} if it cannot be read)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return {}
    return {
        "time": format_time(now),
        "availableBytes": st.f_bavail * st.f_frsize,
        "capacityBytes": st.f_blocks * st.f_frsize,
        "usedBytes": (st.f_blocks - st.f_bfree) * st.f_frsize,
        "inodesFree": st.f_ffree,
        "inodes": st.f_files,
        "inodesUsed": st.f_files - st.f_ffree,
    }


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _meminfo() -> dict[str, int]:
    out = {}
    for line in _read("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return out


def _host_sample() -> dict[str, Any]:
    """One read of the host's counters (runs in a thread: it is file I/O)."""
    stat = _read("/proc/stat").splitlines()
    cpu_ns = None
    boot = None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for line in stat:
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:]]
            # user nice system idle iowait irq softirq steal: busy = all but idle, iowait.
            busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
            cpu_ns = busy * _NS // hz
        elif fields and fields[0] == "btime":
            boot = int(fields[1])
    vm: dict[str, int] = {}
    for line in _read("/proc/vmstat").splitlines():
        key, _, value = line.partition(" ")
        if key in ("pgfault", "pgmajfault") and value.strip().isdigit():
            vm[key] = int(value)
    loadavg = _read("/proc/loadavg").split()
    procs = None
    if len(loadavg) > 3 and "/" in loadavg[3]:
        procs = int(loadavg[3].split("/")[1])
    pid_max = _read("/proc/sys/kernel/pid_max").strip()
    return {
        "cpu_ns": cpu_ns,
        "boot": boot,
        "mem": _meminfo(),
        "vm": vm,
        "procs": procs,
        "pid_max": int(pid_max) if pid_max.isdigit() else None,
    }


def _dir_usage(path: Path) -> tuple[int, int]:
    """Bytes and inodes used under ``path`` (0, 0 if absent)."""
    used = inodes = 0
    for root, dirs, files in os.walk(path):
        inodes += len(dirs) + len(files)
        for name in files:
            try:
                used += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return used, inodes


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class SummaryProvider:
    """Builds the stats/v1alpha1 ``Summary`` of a node.

    Args:
        runtime: Where pod and container figures come from.
        node_name: ``node.nodeName``.
        root_dir: The agent's state directory (its filesystem is ``node.fs`` and,
            lacking a runtime figure, the image and container filesystems).
        pod_logs_dir: Where container logs are (counted in ``logs`` and
            ``ephemeral-storage``).
        now: Current epoch time in seconds (the agent's clock).
        monotonic: Monotonic seconds (for usage rates).
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        *,
        node_name: str,
        root_dir: Path,
        pod_logs_dir: Path,
        now: Any,
        monotonic: Any,
    ) -> None:
        self.runtime = runtime
        self._said_no_stats = False
        self.node_name = node_name
        self.root_dir = root_dir
        self.pod_logs_dir = pod_logs_dir
        self._now = now
        self._monotonic = monotonic
        # Last cumulative cpu sample per key, for usageNanoCores.
        self._cpu: dict[str, tuple[float, int]] = {}

    def _rate(self, key: str, usage_ns: int | None, at: float) -> int | None:
        if usage_ns is None:
            return None
        last = self._cpu.get(key)
        self._cpu[key] = (at, usage_ns)
        if last is None or at <= last[0] or usage_ns < last[1]:
            return None
        return int((usage_ns - last[1]) / (at - last[0]))

    def _cpu_stats(self, key: str, usage_ns: int | None, now: float, at: float) -> dict[str, Any]:
        if usage_ns is None:
            return {}
        return _drop_none(
            {
                "time": format_time(now),
                "usageNanoCores": self._rate(key, usage_ns, at),
                "usageCoreNanoSeconds": usage_ns,
            }
        )

    async def summary(self) -> dict[str, Any]:
        """The Summary document. Raises ContainerRuntimeError when the runtime
        cannot be listed; a pod whose stats fail is left out."""
        now, at = self._now(), self._monotonic()
        host = await asyncio.to_thread(_host_sample)
        node = await self._node(host, now, at)
        pods = await self._pods(now, at)
        return {"node": node, "pods": pods}

    async def _node(self, host: Mapping[str, Any], now: float, at: float) -> dict[str, Any]:
        mem = host["mem"]
        t = format_time(now)
        memory: dict[str, Any] = {}
        if "MemTotal" in mem:
            total = mem["MemTotal"]
            usage = total - mem.get("MemFree", 0)
            working_set = max(usage - mem.get("Inactive(file)", 0), 0)
            memory = _drop_none(
                {
                    "time": t,
                    "availableBytes": max(total - working_set, 0),
                    "usageBytes": usage,
                    "workingSetBytes": working_set,
                    "rssBytes": mem.get("AnonPages"),
                    "pageFaults": host["vm"].get("pgfault"),
                    "majorPageFaults": host["vm"].get("pgmajfault"),
                }
            )
        fs = await asyncio.to_thread(fs_stats, self.root_dir, now)
        node: dict[str, Any] = {
            "nodeName": self.node_name,
            "systemContainers": [],
            "startTime": format_time(host["boot"] or now),
            "cpu": self._cpu_stats("node", host["cpu_ns"], now, at),
            "memory": memory,
            "fs": fs,
            # The Runtime protocol has no image filesystem call: the agent's own
            # filesystem holds the host runtime's state and is the best figure here.
            "runtime": {"imageFs": fs, "containerFs": fs},
            "rlimit": _drop_none({"time": t, "maxpid": host["pid_max"], "curproc": host["procs"]}),
        }
        return node

    def _stats_runtime(self) -> StatsRuntime | None:
        """The runtime when it measures its pods (if not, said once in the log)."""
        if STATS in runtime_capabilities(self.runtime):
            return cast(StatsRuntime, self.runtime)
        if not self._said_no_stats:
            self._said_no_stats = True
            log.info("pod stats are left out: %s", not_offered(self.runtime, STATS))
        return None

    async def _pods(self, now: float, at: float) -> list[dict[str, Any]]:
        sandboxes = [
            s for s in await self.runtime.list_pod_sandboxes() if s.state is PodSandboxState.READY
        ]
        containers = await self.runtime.list_containers()
        by_id: dict[str, ContainerInfo] = {c.id: c for c in containers}
        logs_fs = await asyncio.to_thread(fs_stats, self.pod_logs_dir, now)
        out = []
        measures = self._stats_runtime()
        for sb in sandboxes:
            if measures is None:
                stats = PodSandboxStats(pod_sandbox_id=sb.id, timestamp=now)
            else:
                try:
                    stats = await measures.pod_sandbox_stats(sb.id)
                except ContainerRuntimeError:
                    continue  # gone or not measurable now: the next summary has it
            out.append(await self._pod(sb.metadata, sb.created_at, stats, by_id, logs_fs, now, at))
        return out

    async def _pod(
        self,
        meta: Any,
        created: float,
        stats: PodSandboxStats,
        by_id: Mapping[str, ContainerInfo],
        logs_fs: Mapping[str, Any],
        now: float,
        at: float,
    ) -> dict[str, Any]:
        t = format_time(now)
        pod_dir = self.pod_logs_dir / f"{meta.namespace}_{meta.name}_{meta.uid}"
        containers = []
        eph_used = eph_inodes = 0
        for cs in stats.containers:
            info = by_id.get(cs.container_id)
            name = info.labels.get(labels.CONTAINER_NAME, info.metadata.name) if info else ""
            if not name:
                continue
            log_used, log_inodes = await asyncio.to_thread(_dir_usage, pod_dir / name)
            eph_used += log_used + (cs.writable_layer_bytes or 0)
            eph_inodes += log_inodes + (cs.writable_layer_inodes or 0)
            containers.append(
                self._container(name, info, cs, log_used, log_inodes, logs_fs, now, at)
            )
        memory = _drop_none({"time": t, "workingSetBytes": stats.memory_working_set_bytes})
        pod: dict[str, Any] = {
            "podRef": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
            "startTime": format_time(created),
            "containers": containers,
            "cpu": self._cpu_stats(f"pod/{meta.uid}", stats.cpu_usage_core_nanoseconds, now, at),
            "memory": memory if len(memory) > 1 else {},
            "volume": [],
            "ephemeral-storage": {
                **{
                    k: v
                    for k, v in logs_fs.items()
                    if k in ("time", "availableBytes", "capacityBytes", "inodesFree", "inodes")
                },
                "usedBytes": eph_used,
                "inodesUsed": eph_inodes,
            },
        }
        if stats.process_count is not None:
            pod["process_stats"] = {"process_count": stats.process_count}
        return pod

    def _container(
        self,
        name: str,
        info: ContainerInfo | None,
        cs: ContainerStats,
        log_used: int,
        log_inodes: int,
        logs_fs: Mapping[str, Any],
        now: float,
        at: float,
    ) -> dict[str, Any]:
        t = format_time(now)
        memory = _drop_none(
            {
                "time": t,
                "usageBytes": cs.memory_usage_bytes,
                "workingSetBytes": cs.memory_working_set_bytes,
            }
        )
        rootfs = _drop_none(
            {
                "time": t,
                "usedBytes": cs.writable_layer_bytes,
                "inodesUsed": cs.writable_layer_inodes,
            }
        )
        shared = {
            k: v
            for k, v in logs_fs.items()
            if k in ("availableBytes", "capacityBytes", "inodesFree", "inodes")
        }
        return {
            "name": name,
            "startTime": format_time(info.created_at if info else now),
            "cpu": self._cpu_stats(
                f"container/{cs.container_id}", cs.cpu_usage_core_nanoseconds, now, at
            ),
            "memory": memory if len(memory) > 1 else {},
            "rootfs": {**shared, **rootfs} if len(rootfs) > 1 else {},
            "logs": {"time": t, **shared, "usedBytes": log_used, "inodesUsed": log_inodes},
        }
