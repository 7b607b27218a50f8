"""The EvictionManager protocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kubelet_kit.api import Pod, PodCondition
    from kubelet_kit.api.admission import AdmitResult

__all__ = ["ActivePodsFunc", "EvictionManager", "KillPodFunc"]


class KillPodFunc(Protocol):
    """``kill_pod(pod, grace_period_seconds, reason, message, condition=None)``:
    stop a pod and mark it Failed with that reason (``Evicted``) and message,
    adding ``condition`` to its status when given (the ``DisruptionTarget`` of a
    pod evicted for node pressure); returns once its containers are stopped."""

    def __call__(
        self,
        pod: Pod,
        grace_period: float,
        reason: str,
        message: str,
        /,
        *,
        condition: PodCondition | None = None,
    ) -> Awaitable[None]: ...


#: ``active_pods()``: the pods currently admitted and not terminated.
ActivePodsFunc = Callable[[], Sequence["Pod"]]


@runtime_checkable
class EvictionManager(Protocol):
    """Watches resource pressure, reports node conditions, evicts pods."""

    async def run(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> None:
        """Monitor and evict until :meth:`stop`; raises only on a fatal error."""

    async def stop(self) -> None:
        """Stop monitoring. Idempotent."""

    def admit(self, pod: Pod) -> AdmitResult:
        """Refuse pods the node cannot take under its current pressure. Never blocks."""

    def node_conditions(self) -> frozenset[str]:
        """Pressure conditions now reported (``MemoryPressure``, ``DiskPressure``,
        ``PIDPressure``). Never blocks."""
