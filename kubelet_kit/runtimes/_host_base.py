"""The state shared by every part of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

The runtime is composed of parts (sandboxes, containers, exec and streams,
stats, images, events), each a mixin over :class:`_HostRuntimeBase`. The base
declares the attributes the constructor sets, holds the plumbing every part
uses (locks, state directories, loading and saving records) and reads a
container's run state from its files and /proc. It also declares the few
methods one part calls on another, so each part type-checks on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
    PodSandboxStatus,
)
from kubelet_kit.errors import NotFoundError
from kubelet_kit.network import CNINetwork
from kubelet_kit.runtimes._cgroupfs import CgroupHierarchy, ContainerCgroup, oom_kill_count
from kubelet_kit.runtimes._host_records import (
    _CGROUP_FILE,
    _CONTAINER_FILE,
    _SANDBOX_FILE,
    _ContainerRecord,
    _from_json,
    _Observed,
    _read_json,
    _SandboxRecord,
    _unstructure,
)
from kubelet_kit.runtimes._shim import EXIT_FILE, START_FILE, process_start_ticks, write_json_atomic

#: containerd's exit code and reason for a running container whose task vanished.
UNKNOWN_EXIT_CODE = 255
UNKNOWN_EXIT_REASON = "Unknown"
#: The exit code of a process killed by SIGKILL, as the shim records it.
SIGKILL_EXIT_CODE = 137
#: The reason of a container the kernel killed for memory (runc's and containerd's).
OOM_KILLED_REASON = "OOMKilled"


class _HostRuntimeBase:
    """State and plumbing shared by the parts of the host-process runtime."""

    _root: Path
    _apply_mounts: bool
    _clock: Clock
    _host_ip: str | None
    _python: str
    _max_line: int
    _start_timeout: float
    _kill_timeout: float
    _locks: dict[str, asyncio.Lock]
    _event_buffer: int
    _subscribers: list[asyncio.Queue[ContainerEvent]]
    # Running containers whose end is being watched for subscribers: id -> pidfd.
    _watched: dict[str, int]
    _stop_reported: set[str]
    _network: CNINetwork | None
    _networks_recovered: bool
    # Hierarchies where containers get cgroups of their own (empty: none).
    _cgroups: tuple[CgroupHierarchy, ...]

    if TYPE_CHECKING:
        # Defined by the sandbox and container parts, used across parts.

        @staticmethod
        def _sandbox_status(rec: _SandboxRecord) -> PodSandboxStatus: ...

        def _container_status(self, container_id: str) -> ContainerStatus: ...

        async def stop_container(self, container_id: str, timeout: float) -> None: ...

        async def remove_container(self, container_id: str) -> None: ...

        async def list_containers(
            self, filter: ContainerFilter | None = None
        ) -> list[ContainerInfo]: ...

    # ------------------------------------------------------------ plumbing

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def _sandbox_dir(self, sandbox_id: str) -> Path:
        return self._root / "sandboxes" / sandbox_id

    def _container_dir(self, container_id: str) -> Path:
        return self._root / "containers" / container_id

    @staticmethod
    def _check_id(kind: str, value: str) -> None:
        # Ids become directory names: refuse anything that could leave the root.
        if not value or "/" in value or value in (".", ".."):
            raise NotFoundError(f"{kind} {value!r} not found")

    def _load_sandbox(self, sandbox_id: str) -> _SandboxRecord:
        self._check_id("sandbox", sandbox_id)
        data = _read_json(self._sandbox_dir(sandbox_id) / _SANDBOX_FILE)
        if data is None:
            raise NotFoundError(f'sandbox "{sandbox_id}" not found')
        return _from_json(_SandboxRecord, data)

    def _save_sandbox(self, rec: _SandboxRecord) -> None:
        write_json_atomic(self._sandbox_dir(rec.id) / _SANDBOX_FILE, _unstructure(rec))

    def _load_container(self, container_id: str) -> _ContainerRecord:
        self._check_id("container", container_id)
        data = _read_json(self._container_dir(container_id) / _CONTAINER_FILE)
        if data is None:
            raise NotFoundError(f'container "{container_id}" not found')
        return _from_json(_ContainerRecord, data)

    def _sandbox_ids(self) -> list[str]:
        return sorted(p.name for p in (self._root / "sandboxes").iterdir() if p.is_dir())

    def _container_records(self) -> list[_ContainerRecord]:
        records = []
        for p in (self._root / "containers").iterdir():
            data = _read_json(p / _CONTAINER_FILE)
            if data is not None:  # a directory half made or half removed is skipped
                records.append(_from_json(_ContainerRecord, data))
        records.sort(key=lambda r: (r.created_at, r.id))
        return records

    def _observe(self, container_id: str) -> _Observed:
        """Read a container's state from its files and /proc (never blocks for long)."""
        cdir = self._container_dir(container_id)
        exit_ = _read_json(cdir / EXIT_FILE)
        start = _read_json(cdir / START_FILE)
        started_at = float(start["started_at"]) if start else 0.0
        if exit_ is not None:
            exit_ = self._oom_settled(cdir, exit_)
            return _Observed(
                ContainerState.EXITED,
                started_at=started_at or float(exit_.get("started_at", 0.0)),
                finished_at=float(exit_["finished_at"]),
                exit_code=int(exit_["exit_code"]),
                reason=str(exit_.get("reason", "")),
                message=str(exit_.get("message", "")),
                pid=int(start["pid"]) if start else 0,
            )
        if start is None:
            # Not started, or a start still under way: containerd says CREATED too.
            return _Observed(ContainerState.CREATED)
        pid, shim_pid = int(start["pid"]), int(start["shim_pid"])
        main_alive = (
            start["pid_start"] is not None and process_start_ticks(pid) == start["pid_start"]
        )
        shim_alive = (
            start["shim_start"] is not None and process_start_ticks(shim_pid) == start["shim_start"]
        )
        if main_alive or shim_alive:
            return _Observed(
                ContainerState.RUNNING,
                started_at=started_at,
                pid=pid,
                shim_pid=shim_pid,
                shim_alive=shim_alive,
            )
        exit_ = _read_json(cdir / EXIT_FILE)  # the shim may have finished just now
        if exit_ is None:
            exit_ = {
                "exit_code": UNKNOWN_EXIT_CODE,
                "reason": UNKNOWN_EXIT_REASON,
                "message": "the container's shim exited without recording its exit status",
                "started_at": started_at,
                "finished_at": self._clock.now(),
            }
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                write_json_atomic(cdir / EXIT_FILE, exit_)
        else:
            exit_ = self._oom_settled(cdir, exit_)
        return _Observed(
            ContainerState.EXITED,
            started_at=started_at,
            finished_at=float(exit_["finished_at"]),
            exit_code=int(exit_["exit_code"]),
            reason=str(exit_.get("reason", "")),
            message=str(exit_.get("message", "")),
            pid=pid,
        )

    def _oom_settled(self, cdir: Path, exit_: dict[str, Any]) -> dict[str, Any]:
        """``exit_`` (a container's exit record) with the OOM question settled.

        A container whose process died of SIGKILL while its cgroup's OOM kill
        counter went up since its start was killed by the kernel for memory: its
        reason becomes ``OOMKilled``. The answer is written back
        (``oom_checked``), so the counter is read once, while the cgroup still
        exists, and the answer outlives it.
        """
        if (
            exit_.get("exit_code") != SIGKILL_EXIT_CODE
            or exit_.get("reason") != "Error"
            or exit_.get("oom_checked")
        ):
            return exit_
        data = _read_json(cdir / _CGROUP_FILE)
        if data is None:
            return exit_
        cgroup = ContainerCgroup.from_json(data)
        count = oom_kill_count(self._cgroups, cgroup)
        settled = {**exit_, "oom_checked": True}
        if count is not None and count > cgroup.oom_kills:
            settled["reason"] = OOM_KILLED_REASON
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile
            write_json_atomic(cdir / EXIT_FILE, settled)
        return settled

    async def _wait_exited(self, container_id: str) -> None:
        """Return once the container has exited (its shim, or its process, is gone)."""
        loop = asyncio.get_running_loop()
        while True:
            obs = self._observe(container_id)
            if obs.state is not ContainerState.RUNNING:
                return
            # The shim records the exit and then ends, so its end is the moment to
            # look again; without a shim, the process's own end is.
            watched = obs.shim_pid if obs.shim_alive else obs.pid
            try:
                pidfd = os.pidfd_open(watched)
            except ProcessLookupError:
                continue
            except OSError:
                # No pidfd support: poll the process table. This is real time, not
                # a duration of the injected clock, so it does not use the clock.
                await asyncio.sleep(0.02)
                continue
            exited: asyncio.Future[None] = loop.create_future()

            def wake(fut: asyncio.Future[None] = exited) -> None:
                if not fut.done():
                    fut.set_result(None)

            loop.add_reader(pidfd, wake)
            try:
                # Look again after registering: the process may have ended between
                # the observation and pidfd_open.
                if self._observe(container_id).state is ContainerState.RUNNING:
                    await exited
            finally:
                loop.remove_reader(pidfd)
                os.close(pidfd)
