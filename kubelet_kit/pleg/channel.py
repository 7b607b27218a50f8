"""EventChannel: the bounded, single-consumer queue between a PLEG and its watcher.

It plays the part of the kubelet's buffered Go channel: sending never blocks;
when the queue is full the event is dropped and counted, because a PLEG that
waited for a slow consumer would stop relisting and go unhealthy.

A drop is not a silent loss. It opens an *overflow episode*, logged once at its
start (the kubelet's message, and the count goes up on every drop) and once at
its end. Whenever the reader has brought the queue down to half its capacity
after a drop, the channel calls its drain callbacks, with which a PLEG relists to
send again what was dropped; the PLEG ends the episode (:meth:`end_overflow`)
once a relist got everything through. A channel without drain callbacks ends
the episode itself at that point, since nobody will send the events again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Self

from kubelet_kit.pleg.interfaces import EVENT_CHANNEL_CAPACITY, PodLifecycleEvent

if TYPE_CHECKING:
    # Only an annotation here; importing it would load prometheus_client.
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
        self._episode = False  # an overflow episode is under way
        self._episode_drops = 0  # events dropped in it
        self._undrained = 0  # events dropped since the drain callbacks last ran
        # Half the capacity: low enough that a relist sending the lost events
        # again has room for many of them, high enough that a reader that never
        # quite catches up still gets them sent again.
        self._low_water = capacity // 2
        self._drained: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return len(self._events)

    @property
    def full(self) -> bool:
        """Whether the next event would be dropped."""
        return len(self._events) >= self.capacity

    @property
    def overflowing(self) -> bool:
        """Whether an overflow episode is under way (events were dropped, and not
        all of them are known to have been sent again)."""
        return self._episode

    def add_drain_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` each time the reader has made room after drops.

        It runs in the reader's task, right after the read that brought the queue
        down to half its capacity, so it must not block: a PLEG only asks for a
        relist there, and calls :meth:`end_overflow` once that relist lost nothing.
        """
        self._drained.append(callback)

    def end_overflow(self) -> None:
        """Declare what was dropped sent again: the overflow episode ends.

        Ignored when no episode is under way, or when events were dropped since the
        drain callbacks last ran (they are still to be sent again). Never blocks.
        """
        if not self._episode or self._undrained:
            return
        log.warning("PLEG event channel recovered after discarding %d events", self._episode_drops)
        self._episode = False
        self._episode_drops = 0

    def send(self, event: PodLifecycleEvent) -> bool:
        """Queue ``event``; never blocks.

        Returns:
            False when the queue was full and the event was dropped (and counted).
        """
        if len(self._events) >= self.capacity:
            self._metrics.discard_events.inc()
            if not self._episode:
                # Once per episode: a stuck or slow reader would otherwise bury
                # the log (and the loop) in one line per event.
                self._episode = True
                log.error("Event channel is full, discard this relist() cycle event: %s", event)
            self._episode_drops += 1
            self._undrained += 1
            return False
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
                    event = self._events.popleft()
                    if self._undrained and len(self._events) <= self._low_water:
                        self._drain()
                    yield event
                if self._closed:
                    return
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        finally:
            self._watching = False

    def _drain(self) -> None:
        self._undrained = 0
        if not self._drained:
            self.end_overflow()
        for callback in self._drained:
            callback()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _ChannelPLEG:
    """The lifecycle the reference PLEGs share around their :class:`EventChannel`.

    ``async with pleg:`` runs :meth:`run` in a task named :attr:`_run_task_name`
    and, on exit, stops it and waits for it; :meth:`watch` reads the channel. The
    subclass provides ``run``, ``stop``, ``_channel`` and sets ``_task`` to None.
    """

    #: The name of the task ``async with`` runs :meth:`run` in.
    _run_task_name: ClassVar[str]
    _channel: EventChannel
    _task: asyncio.Task[None] | None

    async def run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self.run(), name=self._run_task_name)
        # One turn of the loop, so that the task has started when the block begins.
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._task is not None:
            task, self._task = self._task, None
            await task

    def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        """The event stream; single consumer (see :meth:`kubelet_kit.pleg.PLEG.watch`)."""
        return self._channel.watch()
