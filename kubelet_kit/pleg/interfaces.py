"""The PLEG protocol and its value types.

A PLEG (pod lifecycle event generator) watches the runtime and tells the agent
which pods changed, so the agent syncs those pods instead of polling every pod.
It also keeps the :class:`~kubelet_kit.pleg.cache.PodCache` current: the agent
reads pod statuses from the cache, never from the runtime directly.

No I/O happens here.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from kubelet_kit.pleg.cache import PodCache

__all__ = [
    "EVENT_CHANNEL_CAPACITY",
    "PLEG",
    "PodLifecycleEvent",
    "PodLifecycleEventType",
]

#: Capacity of a PLEG's event queue, as the kubelet's ``plegChannelCapacity``.
EVENT_CHANNEL_CAPACITY = 1000


class PodLifecycleEventType(enum.Enum):
    """Kind of a pod lifecycle event; values are the kubelet's strings."""

    CONTAINER_STARTED = "ContainerStarted"
    """A container (or sandbox) is now running."""
    CONTAINER_DIED = "ContainerDied"
    """A container (or sandbox) exited."""
    CONTAINER_REMOVED = "ContainerRemoved"
    """A container (or sandbox) is gone from the runtime."""
    POD_SYNC = "PodSync"
    """Something changed that the other types do not describe: sync the pod."""
    CONTAINER_CHANGED = "ContainerChanged"
    """The container is in an unknown state. Computed but never sent, as in the kubelet."""


@attrs.frozen
class PodLifecycleEvent:
    """One change of one pod.

    Attributes:
        pod_uid: The pod that changed.
        type: What changed.
        data: For container events, the container (or sandbox) id; else "".
    """

    pod_uid: str
    type: PodLifecycleEventType
    data: str = ""


@runtime_checkable
class PLEG(Protocol):
    """A pod lifecycle event generator.

    Lifecycle: ``await pleg.run()`` works until :meth:`stop` is called (or the
    task is cancelled); ``async with pleg:`` runs it in a task and stops it on
    exit. Events are read with ``async for event in pleg.watch()``.
    """

    async def run(self) -> None:
        """Generate events until stopped.

        Blocks until :meth:`stop` is called; returns then. Runtime errors are
        not raised (they are retried and show in :meth:`healthy`). Raises
        RuntimeError if it is already running.
        """

    def stop(self) -> None:
        """Ask :meth:`run` to return. Never blocks; idempotent."""

    def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        """The stream of events, read by one consumer.

        Events wait in a bounded queue (capacity 1000, like the kubelet's channel);
        when it is full, new events are dropped and counted
        (``kubelet_pleg_discard_events``), and the reference PLEGs send their
        changes again with a relist once the reader has caught up. Only one
        watcher at a time: a second concurrent ``watch()`` raises RuntimeError
        when iterated. The iterator ends once the PLEG is stopped and the queued
        events have been read.
        """

    def healthy(self) -> tuple[bool, str]:
        """Whether the PLEG is working, with the kubelet's message when it is not.

        Never blocks. Messages: ``pleg has yet to be successful`` before the first
        relist, ``pleg was last seen active <d> ago; threshold is <t>`` after.
        """

    async def update_cache(self, pod_uid: str) -> bool:
        """Inspect one pod now and store its status in the cache.

        Blocks on the runtime (bounded by the inspection timeout). Idempotent.
        A pod the runtime no longer has is deleted from the cache.

        Returns:
            Whether the cache took the new status (False when it already held a
            newer one).

        Raises:
            ContainerRuntimeError: the runtime failed; the error is also cached.
        """

    @property
    def cache(self) -> PodCache:
        """The pod cache this PLEG keeps current."""
