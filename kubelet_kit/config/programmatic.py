"""A source an embedding agent fills from its own code."""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import AsyncIterator, Iterable

import attrs

from kubelet_kit.api import Pod
from kubelet_kit.api.validation import validate_pod_update
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.errors import ValidationError

__all__ = ["ProgrammaticSource"]


class ProgrammaticSource:
    """Pods given by code: ``set_pods``, ``add``, ``update``, ``delete``, ``remove``.

    Each call publishes a new snapshot; calls made faster than the agent reads them
    coalesce into the latest. A pod given again under its uid is an update, held
    to the API server's rule: its spec may change only in its containers' images
    (which restarts those containers), a lower ``activeDeadlineSeconds``, added
    tolerations and a negative grace period raised to 1. Any other change is
    refused with :class:`~kubelet_kit.errors.ValidationError` naming the fields,
    and the source keeps what it had; to change more, give the pod a new uid.

    ``delete`` is graceful (it sets a deletion timestamp and grace period, so the
    agent stops the pod's containers politely and reports it terminated);
    ``remove`` drops the pod from the source at once.

    Args:
        name: The source name stamped on its pods (``kubernetes.io/config.source``).
        clock: Time source for deletion timestamps.
    """

    def __init__(self, name: str = "api", *, clock: Clock | None = None) -> None:
        self.name = name
        self._clock = clock or RealClock()
        self._pods: dict[str, Pod] = {}
        self._changed = asyncio.Event()
        self._version = 0

    def pods(self) -> list[Pod]:
        """The pods this source holds now."""
        return list(self._pods.values())

    def set_pods(self, pods: Iterable[Pod]) -> None:
        """Replace every pod; all or nothing.

        Raises:
            ValidationError: an update a pod may not have (see the class); no
                pod is changed then.
        """
        new = {p.metadata.uid: p for p in pods}
        for pod in new.values():
            self._check_update(pod)
        self._pods = new
        self._publish()

    def add(self, pod: Pod) -> None:
        """Add a pod, or update the one with the same uid.

        Raises:
            ValidationError: an update the pod may not have (see the class).
        """
        self._check_update(pod)
        self._pods[pod.metadata.uid] = pod
        self._publish()

    update = add

    def delete(self, uid: str, *, grace_period_seconds: int | None = None) -> None:
        """Ask for a graceful deletion (sets deletionTimestamp and the grace period,
        default the pod's terminationGracePeriodSeconds). Unknown uid: no-op."""
        pod = self._pods.get(uid)
        if pod is None or pod.metadata.deletion_timestamp is not None:
            return
        grace = (
            grace_period_seconds
            if grace_period_seconds is not None
            else pod.spec.termination_grace_period_seconds
        )
        meta = attrs.evolve(
            pod.metadata,
            deletion_timestamp=_dt.datetime.fromtimestamp(self._clock.now(), _dt.UTC),
            deletion_grace_period_seconds=grace,
        )
        self._pods[uid] = attrs.evolve(pod, metadata=meta)
        self._publish()

    def remove(self, uid: str) -> None:
        """Drop a pod from the source (the agent stops it). Unknown uid: no-op."""
        if self._pods.pop(uid, None) is not None:
            self._publish()

    def _check_update(self, pod: Pod) -> None:
        old = self._pods.get(pod.metadata.uid)
        if old is None:
            return
        errors = validate_pod_update(pod, old)
        if errors:
            meta = pod.metadata
            raise ValidationError(errors, source=f"{self.name}: pod {meta.namespace}/{meta.name}")

    def _publish(self) -> None:
        self._version += 1
        self._changed.set()

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """Yield the current pods at once, then after every change."""
        while True:
            self._changed.clear()
            yield SourceSnapshot(tuple(self._pods.values()))
            await self._changed.wait()
