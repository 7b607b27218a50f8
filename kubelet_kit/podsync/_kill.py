"""How the pod syncer stops containers: grace periods, preStop hooks, ordering.

:class:`_Killer` is a mixin of :class:`~kubelet_kit.podsync.syncer.RuntimePodSyncer`
holding the kubelet's ``killContainer`` and its termination ordering: the grace
period of a pod or of a probe kill (``setTerminationGracePeriod``), the preStop
hook bounded by it, regular containers stopped at once and sidecars after them in
reverse order, never less than :data:`MINIMUM_GRACE_PERIOD` for the stop itself,
and stopping the pod's sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kubelet_kit.clock import Clock, wait_for
from kubelet_kit.container.interfaces import ContainerStatus, Runtime
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import NotFoundError
from kubelet_kit.podsync.actions import KILL_REASON_LIVENESS, KILL_REASON_STARTUP
from kubelet_kit.podsync.backoff import format_pod
from kubelet_kit.podsync.hooks import HandlerRunner

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod

__all__ = ["MINIMUM_GRACE_PERIOD"]

# The syncer's logger: what stopping containers logs keeps its name.
log = logging.getLogger("kubelet_kit.podsync.syncer")

#: The kubelet always gives a stopping container at least this many seconds.
MINIMUM_GRACE_PERIOD = 2


def _pod_grace(pod: Pod) -> int:
    if pod.metadata.deletion_grace_period_seconds is not None:
        return pod.metadata.deletion_grace_period_seconds
    return pod.spec.termination_grace_period_seconds


class _Killer:
    """Stopping a pod's containers and sandboxes, for
    :class:`~kubelet_kit.podsync.syncer.RuntimePodSyncer`."""

    runtime: Runtime
    clock: Clock
    hooks: HandlerRunner

    if TYPE_CHECKING:

        def _event(
            self, pod: Pod, event_type: str, reason: str, message: str, container: str = ""
        ) -> None: ...

    async def _stop_sandboxes(self, runtime_status: PodRuntimeStatus) -> None:
        # Every sandbox, ready or not, as the kubelet does: one left NOTREADY by a
        # runtime that died while making or running it may still hold its network
        # namespace and IP, which only StopPodSandbox releases.
        for sandbox in runtime_status.sandbox_statuses:
            # Gone since the listing: as stopped as it gets.
            with contextlib.suppress(NotFoundError):
                await self.runtime.stop_pod_sandbox(sandbox.id)

    def _grace_for(self, pod: Pod, container: Container | None, reason: str) -> int:
        """The kubelet's ``setTerminationGracePeriod``: the pod's (deletion) grace,
        or the probe's own terminationGracePeriodSeconds for a probe kill."""
        grace = _pod_grace(pod)
        if container is None or pod.metadata.deletion_timestamp is not None:
            return grace
        probe = None
        if reason == KILL_REASON_LIVENESS:
            probe = container.liveness_probe
        elif reason == KILL_REASON_STARTUP:
            probe = container.startup_probe
        if probe is not None and probe.termination_grace_period_seconds is not None:
            return probe.termination_grace_period_seconds
        return grace

    async def _kill_container(
        self,
        pod: Pod,
        container_id: str,
        name: str,
        container: Container | None,
        *,
        reason: str = "",
        message: str = "",
        grace_override: float | None = None,
        wait_turn: Callable[[float], Awaitable[float]] | None = None,
        pod_ips: Sequence[str] = (),
    ) -> None:
        """The kubelet's ``killContainer``: preStop within the grace period, wait for
        this container's turn (termination ordering), then stop with what is left
        (never less than 2 s)."""
        grace: float = self._grace_for(pod, container, reason)
        if grace_override is not None:
            grace = grace_override
        message = message or f"Stopping container {name}"
        log.info(
            "Killing container %s of pod %s (grace %gs): %s", name, format_pod(pod), grace, message
        )
        self._event(pod, "Normal", "Killing", message, name)
        if (
            container is not None
            and container.lifecycle is not None
            and container.lifecycle.pre_stop is not None
            and grace > 0
        ):
            grace -= await self._pre_stop(pod, container_id, container, grace, pod_ips)
        if wait_turn is not None and grace > 0:
            grace -= await wait_turn(grace)
        grace = max(grace, MINIMUM_GRACE_PERIOD)
        # A container already gone is stopped, as far as the pod is concerned.
        with contextlib.suppress(NotFoundError):
            await self.runtime.stop_container(container_id, grace)

    async def _pre_stop(
        self,
        pod: Pod,
        container_id: str,
        container: Container,
        grace: float,
        pod_ips: Sequence[str],
    ) -> int:
        """Run the preStop hook bounded by ``grace``; returns the whole seconds it took."""
        assert container.lifecycle is not None and container.lifecycle.pre_stop is not None
        started = self.clock.monotonic()
        try:
            failure = await wait_for(
                self.clock,
                self.hooks.run(
                    container_id,
                    pod,
                    container,
                    container.lifecycle.pre_stop,
                    pod_ips=pod_ips,
                ),
                grace,
            )
        except TimeoutError:
            log.info(
                "PreStop hook of %s in %s not completed in grace period",
                container.name,
                format_pod(pod),
            )
        else:
            if failure is not None:
                # The message stays out of the event: it may carry secrets.
                log.info("%s", failure)
                self._event(
                    pod, "Warning", "FailedPreStopHook", "PreStopHook failed", container.name
                )
        return int(self.clock.monotonic() - started)

    async def _kill_running(
        self, pod: Pod, runtime_status: PodRuntimeStatus, *, grace_override: float | None
    ) -> None:
        """Stop every running container, with the kubelet's termination ordering:
        regular containers at once, each sidecar only after every regular
        container and every later sidecar has stopped (or its grace ran out)."""
        running = runtime_status.running_container_statuses()
        if not running:
            return
        specs = {c.name: c for c in pod.spec.all_containers()}
        regular = {c.name for c in pod.spec.containers}
        sidecar_rank = {c.name: i for i, c in enumerate(pod.spec.sidecars)}
        stopped = {s.id: asyncio.Event() for s in running}

        def blockers(status: ContainerStatus) -> list[asyncio.Event]:
            rank = sidecar_rank.get(status.metadata.name)
            if rank is None:
                return []
            return [
                stopped[other.id]
                for other in running
                if other.id != status.id
                and (
                    other.metadata.name in regular
                    or sidecar_rank.get(other.metadata.name, -1) > rank
                )
            ]

        def turn_waiter(events: list[asyncio.Event]) -> Callable[[float], Awaitable[float]]:
            async def wait_turn(remaining: float) -> float:
                started = self.clock.monotonic()
                with contextlib.suppress(TimeoutError):
                    await wait_for(
                        self.clock, asyncio.gather(*(e.wait() for e in events)), remaining
                    )
                return float(int(self.clock.monotonic() - started))

            return wait_turn

        async def stop(status: ContainerStatus) -> None:
            try:
                events = blockers(status)
                await self._kill_container(
                    pod,
                    status.id,
                    status.metadata.name,
                    specs.get(status.metadata.name),
                    grace_override=grace_override,
                    wait_turn=turn_waiter(events) if events else None,
                    pod_ips=runtime_status.ips,
                )
            finally:
                stopped[status.id].set()

        results = await asyncio.gather(*(stop(s) for s in running), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
