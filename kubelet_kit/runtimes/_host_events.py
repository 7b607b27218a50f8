"""The container events of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

:meth:`get_container_events` streams the changes the runtime makes (CREATED,
STARTED, STOPPED, DELETED of sandboxes and containers) and every container
exit, learnt from the end of the container's shim through a pidfd, without
polling. This part holds the subscribers' queues, the watching of running
containers while someone listens, and the reporting of each exit once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    ContainerState,
    ContainerStatus,
    PodSandboxStatus,
)
from kubelet_kit.errors import NotFoundError
from kubelet_kit.runtimes._host_base import _HostRuntimeBase


class _HostEvents(_HostRuntimeBase):
    """Event subscribers and the watching of container exits."""

    def _try_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus | None:
        try:
            return self._sandbox_status(self._load_sandbox(sandbox_id))
        except NotFoundError:
            return None

    def _emit(
        self,
        object_id: str,
        type_: ContainerEventType,
        sandbox: PodSandboxStatus | None,
        statuses: tuple[ContainerStatus, ...],
    ) -> None:
        if not self._subscribers:
            return
        event = ContainerEvent(
            container_id=object_id,
            type=type_,
            created_at=self._clock.now(),
            pod_sandbox_status=sandbox,
            containers_statuses=statuses,
        )
        for queue in self._subscribers:
            # A consumer that fell this far behind loses events, and relists.
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)

    def _sandbox_containers(self, sandbox_id: str) -> tuple[ContainerStatus, ...]:
        statuses = []
        for rec in self._container_records():
            if rec.pod_sandbox_id == sandbox_id:
                with contextlib.suppress(NotFoundError):
                    statuses.append(self._container_status(rec.id))
        return tuple(statuses)

    def _emit_sandbox(self, sandbox_id: str, type_: ContainerEventType) -> None:
        if self._subscribers:
            self._emit(
                sandbox_id,
                type_,
                self._try_sandbox_status(sandbox_id),
                self._sandbox_containers(sandbox_id),
            )

    def _emit_container(self, container_id: str, type_: ContainerEventType) -> None:
        if not self._subscribers:
            return
        try:
            sandbox_id = self._load_container(container_id).pod_sandbox_id
        except NotFoundError:
            return
        # As containerd: the event carries the statuses of the pod's containers.
        self._emit(
            container_id,
            type_,
            self._try_sandbox_status(sandbox_id),
            self._sandbox_containers(sandbox_id),
        )

    def _report_stopped(self, container_id: str) -> None:
        """Send STOPPED once per container, whoever notices the exit first."""
        if container_id in self._stop_reported:
            return
        self._stop_reported.add(container_id)
        self._unwatch(container_id)
        self._emit_container(container_id, ContainerEventType.STOPPED)

    def _watch(self, container_id: str, *, report_exited: bool = True) -> None:
        """While someone listens, learn of the container's exit from its shim's end.

        ``report_exited=False`` (a new subscription looking at old containers)
        sends nothing for a container that had already exited.
        """
        if not self._subscribers or container_id in self._watched:
            return
        try:
            self._load_container(container_id)
        except NotFoundError:
            return
        obs = self._observe(container_id)
        if obs.state is ContainerState.EXITED:
            if report_exited:
                self._report_stopped(container_id)
            return
        if obs.state is not ContainerState.RUNNING:
            return
        try:
            pidfd = os.pidfd_open(obs.shim_pid if obs.shim_alive else obs.pid)
        except ProcessLookupError:
            # Ended between the look and the open: look again (it is EXITED now, or
            # the shim is gone and the process is watched instead).
            asyncio.get_running_loop().call_soon(self._on_watched_exit, container_id)
            return
        except OSError:
            return  # no pidfd support: exits are seen only by stop or a relist
        self._watched[container_id] = pidfd
        asyncio.get_running_loop().add_reader(pidfd, self._on_watched_exit, container_id)

    def _unwatch(self, container_id: str) -> None:
        pidfd = self._watched.pop(container_id, None)
        if pidfd is not None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                asyncio.get_running_loop().remove_reader(pidfd)
            os.close(pidfd)

    def _on_watched_exit(self, container_id: str) -> None:
        self._unwatch(container_id)
        self._watch(container_id)

    async def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """Stream of sandbox and container events, from the moment iteration starts.

        Events: CREATED and STARTED (a sandbox's id for its own), STOPPED when a
        container exits (by itself, by a stop, or failing to start) or a sandbox
        is stopped, DELETED on removal; each carries the sandbox's status and the
        statuses of its containers. Exits are seen through each running
        container's shim (a pidfd), without polling; other changes are reported
        when this runtime instance makes them, so a second agent's actions on the
        same root are seen only at a relist. Single consumer per call; a consumer
        more than ``event_buffer`` events behind loses the newest ones. Blocks
        until the next event; cancel or ``aclose()`` to stop.
        """
        queue: asyncio.Queue[ContainerEvent] = asyncio.Queue(maxsize=self._event_buffer)
        self._subscribers.append(queue)
        try:
            for rec in self._container_records():
                self._watch(rec.id, report_exited=False)
            while True:
                yield await queue.get()
        finally:
            self._subscribers.remove(queue)
            if not self._subscribers:
                for container_id in list(self._watched):
                    self._unwatch(container_id)
