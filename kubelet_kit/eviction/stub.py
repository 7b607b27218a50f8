"""StubEvictionManager: never under pressure, never evicts."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.eviction.interfaces import ActivePodsFunc, KillPodFunc

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = ["StubEvictionManager"]


class StubEvictionManager:
    """An EvictionManager that reports no pressure, admits every pod and evicts
    nothing."""

    def __init__(self) -> None:
        self._stopped = asyncio.Event()

    async def run(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> None:
        """Wait until stopped."""
        await self._stopped.wait()

    async def stop(self) -> None:
        """Stop :meth:`run`."""
        self._stopped.set()

    def admit(self, pod: Pod) -> AdmitResult:
        """Admit."""
        return AdmitResult.ok()

    def node_conditions(self) -> frozenset[str]:
        """No pressure."""
        return frozenset()
