"""GenericPLEG: find pod changes by relisting the runtime periodically.

Each relist lists every sandbox and container, compares each pod's containers
with the previous relist (:mod:`kubelet_kit.pleg.relist`), inspects the pods
that changed, stores their statuses in the cache and only then sends their
events, so an agent woken by an event always finds the change in the cache.

Differences from the kubelet, on purpose:

* Changed pods are inspected concurrently, each under a deadline on the clock
  (``inspect_timeout``): one hung inspection cannot stall a relist. The pod is
  retried on the next relist, as a failed inspection is.
* Listing the runtime is under the same deadline, so a hung runtime makes the
  relist fail (and the PLEG go unhealthy after the threshold) instead of
  hanging the loop.
* A changed pod is not inspected when the cache already holds a status of it
  with exactly the listed sandboxes and containers in the listed states
  (typically the agent's own read right after it started them): an inspection
  would only read the same again. The events are sent all the same.
* An event the full channel drops is counted and logged as by the kubelet, but
  not forgotten: the relist keeps the container's previous state in its records,
  so the next relist finds the same change and sends it again. The kubelet
  records the new state regardless and leaves the pod to its periodic resync. The
  next relist comes at once when the reader has caught up (the channel's drain
  callback), not only after the period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kubelet_kit.api.duration import format_duration
from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerInfo,
    PodSandbox,
    PodSandboxFilter,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container.pods import (
    PodRuntimeStatus,
    RuntimePod,
    get_pod_status,
    group_pods,
)
from kubelet_kit.errors import ContainerRuntimeError, DeadlineExceededError
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.pleg.channel import EventChannel, _ChannelPLEG
from kubelet_kit.pleg.interfaces import EVENT_CHANNEL_CAPACITY, PodLifecycleEvent
from kubelet_kit.pleg.relist import (
    CONTAINER_STATES,
    SANDBOX_STATES,
    PlegContainerState,
    compute_pod_events,
    sendable,
    states_by_pod,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.pleg.metrics import PLEGMetrics

__all__ = [
    "DEFAULT_INSPECT_TIMEOUT",
    "RELIST_PERIOD",
    "RELIST_THRESHOLD",
    "GenericPLEG",
    "keep_ips",
]

log = logging.getLogger(__name__)

#: The kubelet's generic relist period and health threshold, in seconds.
RELIST_PERIOD = 1.0
RELIST_THRESHOLD = 180.0
#: How long one pod's inspection (or the listing) may take before it is given up.
DEFAULT_INSPECT_TIMEOUT = 10.0


@attrs.define
class _PodRecord:
    """What the previous relist saw of one pod."""

    pod: RuntimePod
    states: dict[str, PlegContainerState]


_Change = tuple[list[PodLifecycleEvent], RuntimePod | None, dict[str, PlegContainerState]]


@attrs.frozen
class _Inspection:
    error: Exception | None
    updated: bool


class GenericPLEG(_ChannelPLEG):
    """A PLEG that relists the runtime every ``relist_period`` seconds.

    Args:
        runtime: The runtime to watch.
        clock: Source of time for periods, deadlines and timestamps.
        relist_period: Pause between the end of one relist and the next.
        relist_threshold: :meth:`healthy` fails when no relist succeeded for longer.
        inspect_timeout: Deadline of one pod's inspection, and of the listing.
        max_concurrent_inspections: How many pods are inspected at once.
        cache: The cache to keep current; a new one when None.
        registry: Where the metrics go; a fresh registry when None (and when
            ``metrics`` is given, it is ignored).
        metrics: Metrics shared with another component (the evented PLEG).
        channel: An event queue shared with another component; a new one
            (capacity 1000) when None.
        status_timestamps: Send a pod's events only when the cache took its new
            status (used beside an event stream, where the cache may already
            hold something newer).
    """

    _run_task_name = "GenericPLEG.run"

    def __init__(
        self,
        runtime: Runtime,
        clock: Clock | None = None,
        *,
        relist_period: float = RELIST_PERIOD,
        relist_threshold: float = RELIST_THRESHOLD,
        inspect_timeout: float = DEFAULT_INSPECT_TIMEOUT,
        max_concurrent_inspections: int = 64,
        cache: PodCache | None = None,
        registry: CollectorRegistry | None = None,
        metrics: PLEGMetrics | None = None,
        channel: EventChannel | None = None,
        status_timestamps: bool = False,
    ) -> None:
        _check_positive("relist_period", relist_period)
        _check_positive("relist_threshold", relist_threshold)
        _check_positive("inspect_timeout", inspect_timeout)
        if max_concurrent_inspections < 1:
            raise ValueError(
                f"max_concurrent_inspections: must be at least 1, got {max_concurrent_inspections}"
            )
        self._runtime = runtime
        self._clock: Clock = clock if clock is not None else RealClock()
        self._relist_period = relist_period
        self._relist_threshold = relist_threshold
        self._inspect_timeout = inspect_timeout
        self._max_concurrent = max_concurrent_inspections
        self._cache = cache if cache is not None else PodCache()
        if metrics is None:
            # Here, not at the top: prometheus_client is loaded only once a PLEG is built.
            from kubelet_kit.pleg.metrics import PLEGMetrics

            metrics = PLEGMetrics(registry)
        self.metrics = metrics
        self._owns_channel = channel is None
        self._channel = (
            channel if channel is not None else EventChannel(self.metrics, EVENT_CHANNEL_CAPACITY)
        )
        self._status_timestamps = status_timestamps

        self._records: dict[str, _PodRecord] = {}
        self._last_listing: tuple[list[PodSandbox], list[ContainerInfo]] | None = None
        self._reinspect: dict[str, RuntimePod | None] = {}
        self._relist_lock = asyncio.Lock()
        self._last_relist: float | None = None  # monotonic
        self._running = False
        self._stopped = False
        self._wakeup: asyncio.Future[None] | None = None
        self._relist_requested = False
        self._task: asyncio.Task[None] | None = None
        #: Called with every event sent (a hook for the evented PLEG's bookkeeping).
        self.on_event: Callable[[PodLifecycleEvent], bool] | None = None
        #: Called with every event the full channel dropped after ``on_event``
        #: admitted it, so that bookkeeping can be undone.
        self.on_discard: Callable[[PodLifecycleEvent], None] | None = None
        self._channel.add_drain_callback(self.request_relist)

    # -- PLEG protocol ----------------------------------------------------------

    @property
    def cache(self) -> PodCache:
        """The pod cache this PLEG keeps current."""
        return self._cache

    @property
    def relist_period(self) -> float:
        """Current pause between relists, in seconds."""
        return self._relist_period

    @property
    def relist_threshold(self) -> float:
        """Current health threshold, in seconds."""
        return self._relist_threshold

    async def run(self) -> None:
        """Relist every ``relist_period`` seconds until :meth:`stop`.

        The first relist happens at once. Relist failures are logged and retried
        on the next period; they show in :meth:`healthy`.

        Raises:
            RuntimeError: this PLEG is already running.
        """
        if self._running:
            raise RuntimeError("GenericPLEG.run: already running")
        self._running = True
        self._stopped = False
        if self._owns_channel:
            self._channel.open()
        try:
            while not self._stopped:
                try:
                    await self.relist()
                except Exception:
                    # A bug, not a runtime failure (those are handled in relist):
                    # keep the loop alive; health shows that relists stopped working.
                    log.exception("PLEG: relist failed unexpectedly")
                if self._stopped:
                    break
                if not self._relist_requested:
                    await self._pause(self._relist_period)
        finally:
            self._running = False
            if self._owns_channel:
                self._channel.close()

    def stop(self) -> None:
        """Make :meth:`run` return after the current relist. Never blocks; idempotent."""
        self._stopped = True
        self._wake()

    def healthy(self) -> tuple[bool, str]:
        """Whether a relist succeeded within the threshold, with the kubelet's message."""
        if self._last_relist is None:
            return False, "pleg has yet to be successful"
        elapsed = self._clock.monotonic() - self._last_relist
        if elapsed > self._relist_threshold:
            return False, (
                f"pleg was last seen active {format_duration(elapsed)} ago; "
                f"threshold is {format_duration(self._relist_threshold)}"
            )
        return True, ""

    async def update_cache(self, pod_uid: str) -> bool:
        """Inspect one pod now and store its status (see ``PLEG.update_cache``).

        Raises:
            ContainerRuntimeError: listing or inspecting failed (DeadlineExceededError
                when it took longer than ``inspect_timeout``).
        """
        selector = {kl.POD_UID: pod_uid}
        listed_at = self._clock.now()
        try:
            sandboxes, containers = await wait_for(
                self._clock,
                _list(
                    self._runtime,
                    PodSandboxFilter(label_selector=selector),
                    ContainerFilter(label_selector=selector),
                ),
                self._inspect_timeout,
            )
        except TimeoutError:
            raise DeadlineExceededError(
                f"pod {pod_uid}: listing did not finish within {self._inspect_timeout:g}s"
            ) from None
        pods = group_pods(sandboxes, containers)
        result = await self._inspect(pod_uid, pods[0] if pods else None, listed_at)
        if result.error is not None:
            raise result.error
        return result.updated

    # -- control used by the evented PLEG ----------------------------------------

    def set_relist_period(self, period: float, threshold: float) -> None:
        """Change the relist period and health threshold; relists at once if running."""
        _check_positive("relist_period", period)
        _check_positive("relist_threshold", threshold)
        self._relist_period = period
        self._relist_threshold = threshold
        self._wake()

    def request_relist(self) -> None:
        """Make a running loop relist now (or, if one is under way, again right after)."""
        self._relist_requested = True
        self._wake()

    def container_state(self, pod_uid: str, container_id: str) -> PlegContainerState | None:
        """The state the last relist recorded for a container, or None if unknown."""
        record = self._records.get(pod_uid)
        return None if record is None else record.states.get(container_id)

    def known_container_ids(self) -> set[str]:
        """Ids of every container and sandbox the last relists recorded."""
        return {cid for record in self._records.values() for cid in record.states}

    def record_container_state(
        self, pod_uid: str, container_id: str, state: PlegContainerState
    ) -> None:
        """Record a container's state learnt elsewhere (an event), so the next
        relist does not report the same change again. Ignored for unknown pods."""
        record = self._records.get(pod_uid)
        if record is None:
            return
        self._last_listing = None  # the records no longer mirror the last listing
        if state is PlegContainerState.NON_EXISTENT:
            record.states.pop(container_id, None)
        else:
            record.states[container_id] = state

    # -- the relist ---------------------------------------------------------------

    async def relist(self) -> bool:
        """List the runtime once, update the cache and send the events found.

        Blocks until done (bounded by the deadlines); never overlaps another relist.

        Returns:
            Whether the listing succeeded (a relist whose inspections partly failed
            still succeeded: those pods are retried on the next one).
        """
        async with self._relist_lock:
            self._relist_requested = False
            clock = self._clock
            started = clock.monotonic()
            timestamp = clock.now()
            if self._last_relist is not None:
                self.metrics.relist_interval.observe(started - self._last_relist)
            try:
                return await self._relist(timestamp, started)
            finally:
                self.metrics.relist_duration.observe(clock.monotonic() - started)

    async def _relist(self, timestamp: float, started: float) -> bool:
        try:
            sandboxes, containers = await wait_for(
                self._clock, _list(self._runtime, None, None), self._inspect_timeout
            )
        except TimeoutError:
            log.error("PLEG: listing the runtime took longer than %gs", self._inspect_timeout)
            return False
        except ContainerRuntimeError as err:
            log.error("PLEG: unable to list the runtime's pods: %s", err)
            return False
        self._last_relist = started
        self.metrics.last_seen.set(timestamp)

        records = self._records
        listing = (sandboxes, containers)
        changed_uids: list[str] = []
        gone: list[str] = []
        current_states: dict[str, dict[str, PlegContainerState]] = {}
        # Fastest paths, when the records mirror the previous listing: the same
        # objects (by id) in the same order means nothing was added or removed,
        # and only the pods of the objects whose state moved changed; often none
        # (a CRI object's labels never change). The walk allocates nothing when
        # nothing moved, so it does not wake the garbage collector either.
        moved: list[tuple[str, str, PlegContainerState]] | None = None
        previous = self._last_listing
        if previous is not None:
            moved = _state_moves(previous[1], containers, CONTAINER_STATES)
            if moved is not None:
                sandbox_moves = _state_moves(previous[0], sandboxes, SANDBOX_STATES)
                moved = None if sandbox_moves is None else moved + sandbox_moves
        if moved:
            for uid, cid, state in moved:
                states = current_states.get(uid)
                if states is None:
                    record = records.get(uid)
                    if record is None:  # cannot be while records mirror the listing
                        moved = None
                        break
                    states = current_states[uid] = dict(record.states)
                states[cid] = state
            changed_uids = list(current_states)
        if moved is None:
            # Fast path: one pass over the listing into container states per pod,
            # then one dict comparison per pod. An unchanged pod costs no object
            # construction and no await.
            current_states = states_by_pod(sandboxes, containers)
            changed_uids = [
                uid
                for uid, states in current_states.items()
                if (record := records.get(uid)) is None or record.states != states
            ]
            gone = [uid for uid in records if uid not in current_states]
        pods: dict[str, RuntimePod] = {}
        if changed_uids or self._reinspect:
            wanted = set(changed_uids).union(self._reinspect)
            pods = {p.uid: p for p in group_pods(sandboxes, containers, only=wanted)}
        changed: dict[str, _Change] = {}
        for uid in changed_uids:
            record = records.get(uid)
            states = current_states[uid]
            old_states = record.states if record is not None else {}
            changed[uid] = (compute_pod_events(uid, old_states, states), pods[uid], states)
        for uid in gone:
            changed[uid] = (compute_pod_events(uid, records[uid].states, {}), None, {})

        to_inspect: dict[str, RuntimePod | None] = {}
        already_known: dict[str, _Inspection] = {}
        for uid, change in changed.items():
            if self._known_as_listed(uid, change[2]):
                already_known[uid] = _Inspection(None, True)
            else:
                to_inspect[uid] = change[1]
        for uid in self._reinspect:
            if uid not in to_inspect:
                to_inspect[uid] = pods.get(uid)
        results = await self._inspect_many(to_inspect, timestamp) if to_inspect else {}
        results.update(already_known)

        needs_reinspection: dict[str, RuntimePod | None] = {}
        records_match_listing = True
        lost_any = False
        # The records change from here on: until the end, they mirror no listing.
        self._last_listing = None
        channel = self._channel
        reader_keeps_up = True
        for uid, (events, now_pod, states) in changed.items():
            result = results[uid]
            if result.error is not None:
                # Keep the old record, so the next relist finds the same change
                # again and sends its events once the pod can be inspected.
                needs_reinspection[uid] = now_pod
                records_match_listing = False
                continue
            if self._status_timestamps and not result.updated:
                # The cache holds something newer (from the event stream): these
                # events are stale.
                records_match_listing = False
                continue
            to_send = sendable(events)
            if reader_keeps_up and len(channel) + len(to_send) > channel.capacity:
                # The kubelet's reader drains its channel while the relist runs;
                # here it runs only when the relist gives way. Give way once, then
                # drop (and count) as the kubelet does if the reader is stuck.
                await asyncio.sleep(0)
                reader_keeps_up = len(channel) + len(to_send) <= channel.capacity
            lost = {e.data for e in to_send if not self._send(e)}
            if lost:
                lost_any = True
                # The channel was full: keep what the previous relist saw of the
                # containers whose events were dropped, so the next relist finds
                # their change again and sends it then.
                records_match_listing = False
                record = records.get(uid)
                old_states = record.states if record is not None else {}
                kept = {cid: s for cid, s in states.items() if cid not in lost}
                kept.update((cid, old_states[cid]) for cid in lost if cid in old_states)
                pod = now_pod if now_pod is not None else records[uid].pod
                records[uid] = _PodRecord(pod, kept)
            elif now_pod is None:
                records.pop(uid, None)
            else:
                records[uid] = _PodRecord(now_pod, states)
        for uid, retry_pod in to_inspect.items():
            if uid not in changed and results[uid].error is not None:
                needs_reinspection[uid] = retry_pod
        # Only after every pod is in the cache: waiters on unchanged pods wake now.
        self._cache.update_time(timestamp)
        if not lost_any and not self._relist_requested:
            # Every change this relist found got through, and with the records
            # kept for the dropped ones, that includes whatever an overflow lost
            # before it started (unless a relist is asked for again: a drop since).
            self._channel.end_overflow()
        self._reinspect = needs_reinspection
        self._last_listing = listing if records_match_listing else None
        return True

    async def _inspect_many(
        self, pods: dict[str, RuntimePod | None], listed_at: float
    ) -> dict[str, _Inspection]:
        semaphore = asyncio.Semaphore(self._max_concurrent)

        async def one(uid: str, pod: RuntimePod | None) -> _Inspection:
            async with semaphore:
                return await self._inspect(uid, pod, listed_at)

        uids = list(pods)
        outcomes = await asyncio.gather(*(one(uid, pods[uid]) for uid in uids))
        return dict(zip(uids, outcomes, strict=True))

    async def _inspect(self, uid: str, pod: RuntimePod | None, listed_at: float) -> _Inspection:
        if pod is None:
            # No sandbox and no container left: the pod is gone from the runtime.
            self._cache.delete(uid, listed_at)
            return _Inspection(None, True)
        # Taken before asking, so the status holds everything older than it.
        timestamp = self._clock.now()
        try:
            status = await wait_for(
                self._clock,
                get_pod_status(self._runtime, uid, pod.name, pod.namespace, timestamp=timestamp),
                self._inspect_timeout,
            )
        except TimeoutError:
            error: Exception = DeadlineExceededError(
                f"pod {pod.namespace}/{pod.name} ({uid}): inspection did not finish "
                f"within {self._inspect_timeout:g}s"
            )
        except ContainerRuntimeError as err:
            error = err
        except Exception as err:
            # Not one of the typed errors a Runtime should raise: still only this
            # pod's problem, so it must not stop the relist of every other pod.
            log.exception("PLEG: inspecting pod %s/%s raised", pod.namespace, pod.name)
            error = err
        else:
            status = self._keep_ips(uid, status)
            return _Inspection(None, self._cache.set(uid, status, None, timestamp))
        log.warning("PLEG: pod %s/%s will be inspected again: %s", pod.namespace, pod.name, error)
        self._cache.set(uid, None, error, timestamp)
        return _Inspection(error, False)

    def _known_as_listed(self, uid: str, states: Mapping[str, PlegContainerState]) -> bool:
        """Whether the cache's status of ``uid`` has exactly the listed sandboxes
        and containers (``states``), each in its listed state.

        Such a status is what an inspection now would read: the details of a
        container (exit code, times, IPs of a sandbox) do not change while its
        state does not. Not with status timestamps (an evented PLEG), whose
        relists trust the cache's newest entry to tell stale events apart.
        """
        if self._status_timestamps or not states or uid in self._reinspect:
            return False
        status = self._cache.get(uid).status
        if status is None:
            return False
        containers, sandboxes = status.container_statuses, status.sandbox_statuses
        if len(containers) + len(sandboxes) != len(states):
            return False
        get = states.get
        for c in containers:
            if get(c.id) is not CONTAINER_STATES[c.state]:
                return False
        return all(get(s.id) is SANDBOX_STATES[s.state] for s in sandboxes)

    def _keep_ips(self, uid: str, status: PodRuntimeStatus) -> PodRuntimeStatus:
        return keep_ips(self._cache, uid, status)

    def _send(self, event: PodLifecycleEvent) -> bool:
        """Send one event; False only when the full channel dropped it."""
        if self.on_event is not None and not self.on_event(event):
            return True  # filtered on purpose (already sent), not lost
        if self._channel.send(event):
            return True
        if self.on_discard is not None:
            self.on_discard(event)
        return False

    # -- waiting ------------------------------------------------------------------

    async def _pause(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._wakeup = future

        def expire() -> None:
            if not future.done():
                future.set_result(None)

        handle = self._clock.call_later(seconds, expire)
        try:
            await future
        finally:
            handle.cancel()
            if self._wakeup is future:
                self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


def keep_ips(cache: PodCache, uid: str, status: PodRuntimeStatus) -> PodRuntimeStatus:
    """``status``, with the IPs the cache knew if the pod has no ready sandbox left.

    As the kubelet does: an exited pod keeps the IPs it had, so its status does not
    lose them while it terminates.
    """
    if status.ips or any(s.state is PodSandboxState.READY for s in status.sandbox_statuses):
        return status
    old = cache.get(uid).status
    if old is None or not old.ips:
        return status
    return attrs.evolve(status, ips=old.ips)


async def _list(
    runtime: Runtime,
    sandbox_filter: PodSandboxFilter | None,
    container_filter: ContainerFilter | None,
) -> tuple[list[PodSandbox], list[ContainerInfo]]:
    return (
        await runtime.list_pod_sandboxes(sandbox_filter),
        await runtime.list_containers(container_filter),
    )


class _Listed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def state(self) -> Any: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def _state_moves(
    old: Sequence[_Listed],
    new: Sequence[_Listed],
    states: Mapping[Any, PlegContainerState],
) -> list[tuple[str, str, PlegContainerState]] | None:
    """(pod uid, id, new state) of each object whose state moved between two
    listings of the same objects in the same order; None when they are not."""
    if len(old) != len(new):
        return None
    moves = []
    for a, b in zip(old, new, strict=True):
        if a is b:
            continue
        if a.id != b.id:
            return None
        if a.state is not b.state:
            uid = b.labels.get(kl.POD_UID)
            if uid:
                moves.append((uid, b.id, states[b.state]))
    return moves


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}: must be a positive number of seconds, got {value!r}")
