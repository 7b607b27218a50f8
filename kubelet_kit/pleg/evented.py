"""EventedPLEG: follow the runtime's container event stream, relist rarely.

The runtime's ``get_container_events()`` stream carries, with each event, the
status of the pod's sandbox and containers. The evented PLEG stores that status
in the cache (stamped with the event's own time) and maps the event as the
kubelet does:

=================  ==========================================
CRI event          pod lifecycle events
=================  ==========================================
STARTED            ContainerStarted
STOPPED            ContainerDied
CREATED            none (the cache is updated)
DELETED            ContainerDied, ContainerRemoved
=================  ==========================================

A slow relist (every 300 s, unhealthy after 10 m) runs beside it as a safety net.
When the stream fails it is retried with back-off (250 ms doubling up to 30 s) and
a relist is forced; after 5 consecutive failures, or at once when the runtime
has no event stream (UnimplementedError), the PLEG falls back to relisting every
second (unhealthy after 3 m) and keeps retrying the stream every 30 s; once a
stream works again it returns to the slow relist.

Two sources writing one cache race: a relist may inspect a pod just before a
container starts and store that status just after the STARTED event. The cache
refuses a status older than the one it holds, and a relist whose status was
refused sends no events, so an agent never reads "not started" after being told
"started". ContainerStarted is also sent at most once per container id (a CRI
container cannot be started twice; a restart is a new container), so an agent
that reacts to the event does not see it twice from the two sources.

When the event channel is full (the consumer is slower than the runtime), an
event is dropped and counted (``kubelet_pleg_discard_events``) as in the kubelet,
but its change is not recorded as known: once the reader has caught up, a relist
runs at once (not 300 s later) and sends again what was dropped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kubelet_kit.clock import Clock, RealClock, TimerHandle
from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import ContainerRuntimeError, UnimplementedError
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.pleg.channel import EventChannel, _ChannelPLEG
from kubelet_kit.pleg.generic import (
    DEFAULT_INSPECT_TIMEOUT,
    RELIST_PERIOD,
    RELIST_THRESHOLD,
    GenericPLEG,
    keep_ips,
)
from kubelet_kit.pleg.interfaces import (
    EVENT_CHANNEL_CAPACITY,
    PodLifecycleEvent,
    PodLifecycleEventType,
)
from kubelet_kit.pleg.relist import PlegContainerState

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "EVENTED_RELIST_PERIOD",
    "EVENTED_RELIST_THRESHOLD",
    "MAX_STREAM_RETRIES",
    "EventedPLEG",
    "pod_status_from_event",
]

log = logging.getLogger(__name__)

#: The kubelet's relist period and threshold while the event stream works.
EVENTED_RELIST_PERIOD = 300.0
EVENTED_RELIST_THRESHOLD = 600.0
#: Consecutive stream failures after which the PLEG relists every second.
MAX_STREAM_RETRIES = 5

_STARTED = PodLifecycleEventType.CONTAINER_STARTED
_DIED = PodLifecycleEventType.CONTAINER_DIED
_REMOVED = PodLifecycleEventType.CONTAINER_REMOVED

# Past this many remembered started ids, forget those no relist knows any more.
_STARTED_PRUNE_AT = 10_000


def pod_status_from_event(event: ContainerEvent) -> PodRuntimeStatus | None:
    """The pod status an event carries, stamped with the event's time.

    Returns:
        None when the event has no sandbox status (it cannot be tied to a pod).
    """
    sandbox = event.pod_sandbox_status
    if sandbox is None:
        return None
    ips: tuple[str, ...] = ()
    if sandbox.state is PodSandboxState.READY:
        ips = tuple(ip for ip in (sandbox.ip, *sandbox.additional_ips) if ip)
    return PodRuntimeStatus(
        uid=sandbox.metadata.uid,
        name=sandbox.metadata.name,
        namespace=sandbox.metadata.namespace,
        ips=ips,
        sandbox_statuses=(sandbox,),
        container_statuses=event.containers_statuses,
        timestamp=event.created_at,
    )


class EventedPLEG(_ChannelPLEG):
    """A PLEG driven by the runtime's event stream, with a slow safety relist.

    Args:
        runtime: The runtime to watch.
        clock: Source of time.
        relist_period: Safety relist period while the stream works (300 s).
        relist_threshold: Health threshold while the stream works (10 m).
        fallback_relist_period: Relist period without a stream (1 s).
        fallback_relist_threshold: Health threshold without a stream (3 m).
        max_stream_retries: Consecutive stream failures before falling back.
        initial_backoff: First pause before retrying the stream (250 ms).
        max_backoff: Longest pause between stream retries (30 s); the retry
            period once fallen back.
        stream_stable_after: A stream that delivered an event, or stayed open this
            long without failing, counts as working: failures and back-off reset,
            and a fallen-back PLEG returns to the slow relist.
        inspect_timeout: Deadline of one pod's inspection by the relist.
        cache: The cache to keep current; a new one when None.
        registry: Where the metrics go; a fresh registry when None.
        channel_capacity: How many events may wait for the consumer (the
            kubelet's 1000).
    """

    _run_task_name = "EventedPLEG.run"

    def __init__(
        self,
        runtime: Runtime,
        clock: Clock | None = None,
        *,
        relist_period: float = EVENTED_RELIST_PERIOD,
        relist_threshold: float = EVENTED_RELIST_THRESHOLD,
        fallback_relist_period: float = RELIST_PERIOD,
        fallback_relist_threshold: float = RELIST_THRESHOLD,
        max_stream_retries: int = MAX_STREAM_RETRIES,
        initial_backoff: float = 0.25,
        max_backoff: float = 30.0,
        stream_stable_after: float = 1.0,
        inspect_timeout: float = DEFAULT_INSPECT_TIMEOUT,
        cache: PodCache | None = None,
        registry: CollectorRegistry | None = None,
        channel_capacity: int = EVENT_CHANNEL_CAPACITY,
    ) -> None:
        if max_stream_retries < 1:
            raise ValueError(f"max_stream_retries: must be at least 1, got {max_stream_retries}")
        for name, value in (
            ("initial_backoff", initial_backoff),
            ("max_backoff", max_backoff),
            ("stream_stable_after", stream_stable_after),
        ):
            if not value > 0:
                raise ValueError(f"{name}: must be a positive number of seconds, got {value!r}")
        self._runtime = runtime
        self._clock: Clock = clock if clock is not None else RealClock()
        self._periods = (relist_period, relist_threshold)
        self._fallback_periods = (fallback_relist_period, fallback_relist_threshold)
        self._max_retries = max_stream_retries
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._stable_after = stream_stable_after
        # Here, not at the top: prometheus_client is loaded only once a PLEG is built.
        from kubelet_kit.pleg.metrics import PLEGMetrics

        self.metrics = PLEGMetrics(registry, evented=True)
        self._channel = EventChannel(self.metrics, channel_capacity)
        self._generic = GenericPLEG(
            runtime,
            self._clock,
            relist_period=relist_period,
            relist_threshold=relist_threshold,
            inspect_timeout=inspect_timeout,
            cache=cache,
            metrics=self.metrics,
            channel=self._channel,
            status_timestamps=True,
        )
        self._generic.on_event = self._admit
        self._generic.on_discard = self._forget
        self._started_ids: set[str] = set()
        self._failures = 0
        self._backoff = initial_backoff
        self._fallen_back = False
        self._running = False
        self._stopped = False
        self._stream_task: asyncio.Task[None] | None = None
        self._stream_ok = False
        self._task: asyncio.Task[None] | None = None

    # -- PLEG protocol ------------------------------------------------------------

    @property
    def cache(self) -> PodCache:
        """The pod cache this PLEG keeps current."""
        return self._generic.cache

    @property
    def generic(self) -> GenericPLEG:
        """The relisting PLEG running beside the stream (slow, or every second)."""
        return self._generic

    @property
    def fallen_back(self) -> bool:
        """Whether the PLEG currently relists every second for lack of a stream."""
        return self._fallen_back

    @property
    def stream_failures(self) -> int:
        """Consecutive stream failures since the stream last worked."""
        return self._failures

    async def run(self) -> None:
        """Follow the event stream and relist beside it until :meth:`stop`.

        Stream failures are retried (see the module docstring), never raised.

        Raises:
            RuntimeError: already running.
        """
        if self._running:
            raise RuntimeError("EventedPLEG.run: already running")
        self._running = True
        self._stopped = False
        self._channel.open()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._generic.run(), name="EventedPLEG.relist")
                self._stream_task = group.create_task(
                    self._follow_stream(), name="EventedPLEG.stream"
                )
        finally:
            self._stream_task = None
            self._running = False
            self._channel.close()

    def stop(self) -> None:
        """Make :meth:`run` return. Never blocks; idempotent."""
        self._stopped = True
        self._generic.stop()
        if self._stream_task is not None:
            self._stream_task.cancel()

    def healthy(self) -> tuple[bool, str]:
        """Healthy while relisting keeps to its current threshold and the queue has room.

        Messages are the kubelet's: the relist's, or ``EventedPLEG: pleg event channel
        capacity is full with <n> events``.
        """
        if self._channel.full:
            return False, (
                f"EventedPLEG: pleg event channel capacity is full with {len(self._channel)} events"
            )
        return self._generic.healthy()

    async def update_cache(self, pod_uid: str) -> bool:
        """Inspect one pod now and store its status (see ``PLEG.update_cache``).

        Raises:
            ContainerRuntimeError: listing or inspecting failed.
        """
        return await self._generic.update_cache(pod_uid)

    # -- events -------------------------------------------------------------------

    def process_event(self, event: ContainerEvent) -> None:
        """Apply one runtime event: update the cache, send the pod lifecycle events.

        Called for each event of the stream; public so a user feeding events from
        elsewhere (a message bus) can reuse the mapping. Never blocks.
        """
        latency = self.metrics.connection_latency
        if latency is not None:
            latency.observe(max(0.0, self._clock.now() - event.created_at))
        status = pod_status_from_event(event)
        if status is None:
            log.warning("EventedPLEG: event for %s has no sandbox status", event.container_id)
            return
        uid, cid, when = status.uid, event.container_id, event.created_at
        cache = self.cache
        if event.type is ContainerEventType.DELETED:
            if event.pod_sandbox_status is not None and cid == event.pod_sandbox_status.id:
                # The sandbox is gone, and with it the pod.
                cache.delete(uid, when)
            else:
                cache.set(uid, keep_ips(cache, uid, status), None, when)
            # Both are tried, so the reader gets what fits.
            died = self._send(PodLifecycleEvent(uid, _DIED, cid))
            removed = self._send(PodLifecycleEvent(uid, _REMOVED, cid))
            self._known(uid, cid, PlegContainerState.NON_EXISTENT, died and removed)
            return
        if not cache.set(uid, keep_ips(cache, uid, status), None, when):
            # The cache already holds something newer: this event is stale.
            return
        if event.type is ContainerEventType.STARTED:
            sent = self._send(PodLifecycleEvent(uid, _STARTED, cid))
            self._known(uid, cid, PlegContainerState.RUNNING, sent)
        elif event.type is ContainerEventType.STOPPED:
            sent = self._send(PodLifecycleEvent(uid, _DIED, cid))
            self._known(uid, cid, PlegContainerState.EXITED, sent)
        # CREATED: the cache is updated; the kubelet does not act on it.

    def _known(self, uid: str, cid: str, state: PlegContainerState, sent: bool) -> None:
        if sent:
            # Told: the relist must not report this change again.
            self._generic.record_container_state(uid, cid, state)
        # Dropped: the relist's records keep the old state, so the relist that
        # follows the channel's drain finds the change and sends it.

    def _send(self, event: PodLifecycleEvent) -> bool:
        """Send one event; False only when the full channel dropped it."""
        if not self._admit(event):
            return True  # already sent by the relist
        if self._channel.send(event):
            return True
        self._forget(event)
        return False

    def _admit(self, event: PodLifecycleEvent) -> bool:
        # ContainerStarted at most once per container id, whichever source saw it first.
        if event.type is _STARTED:
            if event.data in self._started_ids:
                return False
            self._started_ids.add(event.data)
            if len(self._started_ids) > _STARTED_PRUNE_AT:
                self._started_ids &= self._generic.known_container_ids()
        elif event.type is _REMOVED:
            self._started_ids.discard(event.data)
        return True

    def _forget(self, event: PodLifecycleEvent) -> None:
        # A dropped ContainerStarted was never told: let the relist send it.
        if event.type is _STARTED:
            self._started_ids.discard(event.data)

    # -- the stream -----------------------------------------------------------------

    async def _follow_stream(self) -> None:
        while not self._stopped:
            error = await self._consume_one_stream()
            if self._stopped:
                return
            self._stream_failed(error)
            await self._pause(self._max_backoff if self._fallen_back else self._backoff)
            if not self._fallen_back:
                self._backoff = min(self._backoff * 2, self._max_backoff)

    async def _consume_one_stream(self) -> Exception:
        self._stream_ok = False
        stream = self._runtime.get_container_events()
        handle: TimerHandle = self._clock.call_later(self._stable_after, self._stream_works)
        try:
            async for event in stream:
                self._stream_works()
                self.process_event(event)
            return ContainerRuntimeError("get_container_events: the stream ended")
        except Exception as err:
            # Any failure of the stream (typed runtime errors, or whatever a user's
            # runtime raises) is retried the same way.
            return err
        finally:
            handle.cancel()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # closing a broken stream may fail too; nothing to do
                    log.debug("EventedPLEG: closing the event stream failed", exc_info=True)

    def _stream_works(self) -> None:
        if self._stream_ok:
            return
        self._stream_ok = True
        if self.metrics.connections is not None:
            self.metrics.connections.inc()
        if self._failures or self._fallen_back:
            # Events of the time the stream was down are lost: relist to find
            # what they would have told.
            self._generic.request_relist()
        self._failures = 0
        self._backoff = self._initial_backoff
        if self._fallen_back:
            log.info(
                "EventedPLEG: the event stream works again; relist every %gs", self._periods[0]
            )
            self._fallen_back = False
            self._generic.set_relist_period(*self._periods)

    def _stream_failed(self, error: Exception) -> None:
        if self.metrics.connection_errors is not None:
            self.metrics.connection_errors.inc()
        self._failures += 1
        log.warning("EventedPLEG: event stream failed (%d in a row): %s", self._failures, error)
        # Whatever happened while the stream was down is found by a relist.
        self._generic.request_relist()
        if not self._fallen_back and (
            isinstance(error, UnimplementedError) or self._failures >= self._max_retries
        ):
            log.warning(
                "EventedPLEG: falling back to relisting every %gs", self._fallback_periods[0]
            )
            self._fallen_back = True
            self._generic.set_relist_period(*self._fallback_periods)

    async def _pause(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def expire() -> None:
            if not future.done():
                future.set_result(None)

        handle = self._clock.call_later(seconds, expire)
        try:
            await future
        finally:
            handle.cancel()
