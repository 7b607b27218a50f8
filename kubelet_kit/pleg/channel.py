"""EventChannel: the bounded, single-consumer queue between a PLEG and its watcher.

It plays the part of the kubelet's buffered Go channel: sending never blocks;
when the queue is full the event is dropped and counted, because a PLEG that
waited for a slow consumer would stop relisting and go unhealthy.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator

from kubelet_kit.pleg.interfaces import EVENT_CHANNEL_CAPACITY, PodLifecycleEvent
from kubelet_kit.pleg.metrics import PLEGMetrics

__all__ = ["EventChannel"]

log = logging.getLogger(__name__)


class EventChannel:
    """A bounded queue of pod lifecycle events with one reader.

    Args:
        metrics: Where drops (``kubelet_pleg_discard_events``) and sent events
            are counted.
        capacity: How many events may wait; the kubelet's is 1000.
    """

    def __init__(self, metrics: PLEGMetrics, capacity: int = EVENT_CHANNEL_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: must be at least 1, got {capacity}")
        self.capacity = capacity
        self._metrics = metrics
        self._events: deque[PodLifecycleEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._watching = False
        self._dropping = False

    def __len__(self) -> int:
        return len(self._events)

    @property
    def full(self) -> bool:
        """Whether the next event would be dropped."""
        return len(self._events) >= self.capacity

    def send(self, event: PodLifecycleEvent) -> bool:
        """Queue ``event``; never blocks.

        Returns:
            False when the queue was full and the event was dropped (and counted).
        """
        if len(self._events) >= self.capacity:
            self._metrics.discard_events.inc()
            if not self._dropping:
                # Once per spell of fullness: a stuck consumer would otherwise
                # bury the log (and the loop) in one line per event.
                self._dropping = True
                log.error("Event channel is full, discard this relist() cycle event: %s", event)
            return False
        self._dropping = False
        self._events.append(event)
        self._metrics.events.labels(event.type.value).inc()
        self._wake()
        return True

    def open(self) -> None:
        """Let :meth:`watch` wait for events again after :meth:`close`."""
        self._closed = False

    def close(self) -> None:
        """End :meth:`watch` once the queued events have been read. Idempotent."""
        self._closed = True
        self._wake()

    async def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        """Yield events in the order sent; single consumer.

        Raises:
            RuntimeError: another watch is already being iterated.
        """
        if self._watching:
            raise RuntimeError("a PLEG has a single watcher: watch() is already being iterated")
        self._watching = True
        try:
            while True:
                while self._events:
                    yield self._events.popleft()
                if self._closed:
                    return
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        finally:
            self._watching = False

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
