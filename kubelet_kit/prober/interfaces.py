"""The ProbeManager protocol and its value types."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from kubelet_kit.api import Pod, PodStatus

__all__ = ["ProbeKind", "ProbeManager", "ProbeResult", "ProbeUpdate"]


class ProbeKind(enum.Enum):
    """Which probe (the kubelet's probe types)."""

    LIVENESS = "Liveness"
    READINESS = "Readiness"
    STARTUP = "Startup"


class ProbeResult(enum.Enum):
    """Outcome of a probe as published to the agent."""

    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


@attrs.frozen
class ProbeUpdate:
    """A published change of one probe's result for one container.

    A liveness or startup FAILURE asks the agent to restart the container; a
    readiness change asks it to recompute the pod's Ready condition.

    Attributes:
        termination_grace_period_seconds: The probe's own
            ``terminationGracePeriodSeconds``, if it sets one: the kubelet uses it
            instead of the pod's when it kills a container for a failed liveness
            or startup probe.
    """

    pod_uid: str
    container_name: str
    container_id: str
    kind: ProbeKind
    result: ProbeResult
    message: str = ""
    termination_grace_period_seconds: int | None = None


@runtime_checkable
class ProbeManager(Protocol):
    """Runs a worker per (container, probe kind) and publishes the results."""

    async def run(self) -> None:
        """Run until :meth:`stop`; raises only on a fatal error."""

    async def stop(self) -> None:
        """Stop every probe worker. Idempotent."""

    def add_pod(self, pod: Pod) -> None:
        """Start workers for every probe of ``pod``. Never blocks; idempotent."""

    def remove_pod(self, pod: Pod) -> None:
        """Stop the workers of ``pod``. Never blocks; idempotent."""

    def update_pod_status(self, pod: Pod, status: PodStatus) -> PodStatus:
        """Fold the latest results into ``status``: each container status's
        ``ready`` and ``started``. Never blocks."""

    def updates(self) -> AsyncIterator[ProbeUpdate]:
        """Result changes as they happen. Single consumer (the composer)."""
