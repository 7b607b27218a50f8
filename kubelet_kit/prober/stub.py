"""StubProbeManager: no probing; containers are started and ready once running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs

from kubelet_kit.prober.interfaces import ProbeUpdate

if TYPE_CHECKING:
    from kubelet_kit.api import Pod, PodStatus
    from kubelet_kit.api.status import ContainerStatus

__all__ = ["StubProbeManager"]


class StubProbeManager:
    """A ProbeManager that runs no probes. As the kubelet treats a container
    without probes: started and ready exactly while it runs. Publishes nothing."""

    def __init__(self) -> None:
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        """Wait until stopped."""
        await self._stopped.wait()

    async def stop(self) -> None:
        """Stop :meth:`run` and end :meth:`updates`."""
        self._stopped.set()

    def add_pod(self, pod: Pod) -> None:
        """Nothing to probe."""

    def remove_pod(self, pod: Pod) -> None:
        """Nothing to stop."""

    def update_pod_status(self, pod: Pod, status: PodStatus) -> PodStatus:
        """Mark running containers started and ready, others neither."""

        def fold(statuses: tuple[ContainerStatus, ...]) -> tuple[ContainerStatus, ...]:
            return tuple(
                attrs.evolve(
                    cs, ready=cs.state.running is not None, started=cs.state.running is not None
                )
                for cs in statuses
            )

        return attrs.evolve(
            status,
            container_statuses=fold(status.container_statuses),
            init_container_statuses=fold(status.init_container_statuses),
        )

    async def updates(self) -> AsyncIterator[ProbeUpdate]:
        """Yields nothing; ends when stopped."""
        await self._stopped.wait()
        return
        yield  # pragma: no cover  (makes this an async generator)
