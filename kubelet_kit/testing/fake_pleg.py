"""FakePLEG: a :class:`kubelet_kit.pleg.PLEG` a test drives by hand, or that follows a runtime.

Two ways to use it:

* **By hand.** The test says what happened::

      pleg = FakePLEG()
      pleg.emit_started("pod-uid", "container-id", status=pod_status)
      pleg.emit_died("pod-uid", "container-id")

  Each event goes into the same bounded, single-consumer queue as the reference
  PLEGs' (the kubelet's channel of 1000 events; when it is full the event is
  dropped and counted in :attr:`FakePLEG.dropped_events`). A status given with
  an event is stored in :attr:`FakePLEG.cache` *before* the event is queued, as
  a real PLEG keeps the cache ahead of its events. :meth:`FakePLEG.run` blocks
  until :meth:`FakePLEG.stop`, so the fake plugs into the agent's task group;
  :meth:`FakePLEG.healthy` answers ``(True, "")`` unless scripted with
  :meth:`FakePLEG.set_healthy`.

* **Following a runtime.** :meth:`FakePLEG.following` makes a fake that, while
  it runs, relists the runtime on its clock every ``relist_period`` seconds and
  turns what changed into events with the kubelet's rules
  (:mod:`kubelet_kit.pleg.relist`): it inspects each changed pod, stores its
  status in the cache, then queues its events; a pod whose inspection failed is
  inspected again on the next relist; an event the full queue dropped is sent
  again by a later relist. Its health is the kubelet's: ``pleg has yet to be
  successful`` before the first successful relist, unhealthy once none
  succeeded for ``relist_threshold`` seconds. Events can still be emitted by
  hand beside it. This is the mode the PLEG conformance kit
  (:mod:`kubelet_kit.testing.pleg_kit`) runs the fake in.

Both modes record every call of the PLEG protocol in :attr:`FakePLEG.calls`, and
:meth:`FakePLEG.inject_error` makes ``run``, ``watch`` or ``update_cache`` fail.

Deliberate simplifications against :class:`~kubelet_kit.pleg.GenericPLEG`: pods
are inspected one after the other, with no deadline of their own (a hung
runtime hangs the relist, and the fake goes unhealthy after the threshold), and
there are no relist metrics; the queue's ``kubelet_pleg_discard_events`` and
``kubelet_pleg_events_total`` counters are kept in :attr:`FakePLEG.metrics`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from kubelet_kit.api.duration import format_duration
from kubelet_kit.clock import Clock
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import ContainerFilter, PodSandboxFilter, Runtime
from kubelet_kit.container.pods import PodRuntimeStatus, RuntimePod, get_pod_status, group_pods
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.pleg.channel import EventChannel
from kubelet_kit.pleg.generic import keep_ips
from kubelet_kit.pleg.interfaces import (
    EVENT_CHANNEL_CAPACITY,
    PodLifecycleEvent,
    PodLifecycleEventType,
)
from kubelet_kit.pleg.relist import (
    PlegContainerState,
    compute_pod_events,
    container_states,
    sendable,
)
from kubelet_kit.testing._fake_records import Call, InjectedError, _Fault, _take
from kubelet_kit.testing.clock import FakeClock

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.pleg.metrics import PLEGMetrics

__all__ = ["PLEG_METHODS", "FakePLEG"]

log = logging.getLogger(__name__)

#: The methods of the PLEG protocol the call log records, and those of them
#: :meth:`FakePLEG.inject_error` accepts (``stop`` and ``healthy`` never fail).
PLEG_METHODS: frozenset[str] = frozenset({"run", "stop", "watch", "healthy", "update_cache"})
_FAILING_METHODS = frozenset({"run", "watch", "update_cache"})

_STARTED = PodLifecycleEventType.CONTAINER_STARTED
_DIED = PodLifecycleEventType.CONTAINER_DIED
_REMOVED = PodLifecycleEventType.CONTAINER_REMOVED
_CHANGED = PodLifecycleEventType.CONTAINER_CHANGED


class FakePLEG:
    """An in-memory PLEG: events emitted by the test, or found by relisting a runtime.

    Satisfies :class:`kubelet_kit.pleg.PLEG` with the reference PLEGs' contract:
    ``run()`` blocks until ``stop()`` and raises RuntimeError if already running;
    ``stop()`` never blocks and is idempotent; ``watch()`` has a single consumer
    (a second concurrent watcher gets RuntimeError when it iterates), reads a
    queue of ``capacity`` events that drops (and counts) what does not fit, and
    ends once the fake is stopped and the queued events are read.

    Args:
        clock: The clock of relists, health and cache timestamps; a fresh
            :class:`~kubelet_kit.testing.FakeClock` when None.
        runtime: A runtime to follow (see :meth:`following`); None: by hand only.
        relist_period: Pause between relists when following a runtime.
        relist_threshold: When following, :meth:`healthy` fails once no relist
            succeeded for longer than this.
        capacity: How many events may wait for the watcher (the kubelet's 1000).
        cache: The pod cache to keep; a new one when None.
        registry: Where the queue's counters go; a fresh registry when None.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        runtime: Runtime | None = None,
        relist_period: float = 1.0,
        relist_threshold: float = 180.0,
        capacity: int = EVENT_CHANNEL_CAPACITY,
        cache: PodCache | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        for name, value in (
            ("relist_period", relist_period),
            ("relist_threshold", relist_threshold),
        ):
            if not value > 0:
                raise ValueError(f"{name}: must be a positive number of seconds, got {value!r}")
        # Here, not at the top: prometheus_client is loaded only once a PLEG is built.
        from kubelet_kit.pleg.metrics import PLEGMetrics

        self.clock: Clock = clock if clock is not None else FakeClock()
        self.runtime = runtime
        self.relist_period = relist_period
        self.relist_threshold = relist_threshold
        #: The queue's counters (``kubelet_pleg_discard_events``, ``kubelet_pleg_events``).
        self.metrics: PLEGMetrics = PLEGMetrics(registry)
        #: Every call of the PLEG protocol made to the fake, oldest first.
        self.calls: list[Call] = []
        #: Events the full queue dropped (emitted by hand or found by a relist).
        self.dropped_events = 0
        self._cache = cache if cache is not None else PodCache()
        self._channel = EventChannel(self.metrics, capacity)
        self._faults: list[_Fault] = []
        self._health: tuple[bool, str] | None = None
        self._running = False
        self._stopped = False
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        # Following a runtime: what the last relist recorded of each pod's
        # containers, the pods to inspect again, the last successful relist.
        self._states: dict[str, dict[str, PlegContainerState]] = {}
        self._retry: set[str] = set()
        self._last_relist: float | None = None  # monotonic
        self._relist_requested = False
        self._relist_lock = asyncio.Lock()
        if runtime is not None:
            # The reader has caught up after drops: relist now to send them again.
            self._channel.add_drain_callback(self.request_relist)

    @classmethod
    def following(
        cls,
        runtime: Runtime,
        clock: Clock | None = None,
        *,
        relist_period: float = 1.0,
        relist_threshold: float = 180.0,
        capacity: int = EVENT_CHANNEL_CAPACITY,
        cache: PodCache | None = None,
        registry: CollectorRegistry | None = None,
    ) -> FakePLEG:
        """A fake that turns ``runtime``'s changes into events by relisting it.

        Args:
            runtime: Any Runtime; typically a :class:`~kubelet_kit.testing.FakeRuntime`.
            clock: The clock to relist on; the runtime's ``clock`` attribute (as a
                FakeRuntime has) when None, else a fresh FakeClock.
            relist_period: Pause between relists (the kubelet's 1 s).
            relist_threshold: Health threshold (the kubelet's 3 minutes).
            capacity: How many events may wait for the watcher.
            cache: The pod cache to keep; a new one when None.
            registry: Where the queue's counters go.
        """
        if clock is None:
            clock = getattr(runtime, "clock", None)
        return cls(
            clock,
            runtime=runtime,
            relist_period=relist_period,
            relist_threshold=relist_threshold,
            capacity=capacity,
            cache=cache,
            registry=registry,
        )

    # -- test controls -----------------------------------------------------------

    def emit(self, event: PodLifecycleEvent, *, status: PodRuntimeStatus | None = None) -> bool:
        """Queue ``event`` for the watcher, as if the PLEG had found it. Never blocks.

        Args:
            event: The event. ContainerChanged is refused: no PLEG sends it.
            status: The pod's status after the change; stored in the cache, stamped
                with the clock's ``now()``, before the event is queued.

        Returns:
            False when the queue was full and the event was dropped (and counted).

        Raises:
            ValueError: a ContainerChanged event, or a status of another pod.
        """
        if event.type is _CHANGED:
            raise ValueError("emit: ContainerChanged is computed but never sent by a PLEG")
        if status is not None:
            if status.uid != event.pod_uid:
                raise ValueError(
                    f"emit: the status is of pod {status.uid!r}, the event of {event.pod_uid!r}"
                )
            self._cache.set(event.pod_uid, status, None, self.clock.now())
        return self._send(event)

    def emit_started(
        self, pod_uid: str, container_id: str, *, status: PodRuntimeStatus | None = None
    ) -> bool:
        """Emit ContainerStarted for ``container_id`` (or a sandbox id) of ``pod_uid``."""
        return self.emit(PodLifecycleEvent(pod_uid, _STARTED, container_id), status=status)

    def emit_died(
        self, pod_uid: str, container_id: str, *, status: PodRuntimeStatus | None = None
    ) -> bool:
        """Emit ContainerDied for ``container_id`` (or a sandbox id) of ``pod_uid``."""
        return self.emit(PodLifecycleEvent(pod_uid, _DIED, container_id), status=status)

    def emit_removed(
        self,
        pod_uid: str,
        container_id: str,
        *,
        status: PodRuntimeStatus | None = None,
        pod_gone: bool = False,
    ) -> bool:
        """Emit ContainerRemoved for ``container_id`` (or a sandbox id) of ``pod_uid``.

        With ``pod_gone`` the pod is first deleted from the cache, as a PLEG does
        when the runtime holds nothing of the pod any more.
        """
        if pod_gone:
            self._cache.delete(pod_uid, self.clock.now())
        return self.emit(PodLifecycleEvent(pod_uid, _REMOVED, container_id), status=status)

    def emit_sync(self, pod_uid: str, *, status: PodRuntimeStatus | None = None) -> bool:
        """Emit PodSync for ``pod_uid`` (sync the pod, no container event)."""
        event = PodLifecycleEvent(pod_uid, PodLifecycleEventType.POD_SYNC)
        return self.emit(event, status=status)

    @property
    def pending_events(self) -> int:
        """How many events wait in the queue for the watcher."""
        return len(self._channel)

    def set_healthy(self, healthy: bool | None, message: str = "") -> None:
        """Script what :meth:`healthy` answers: ``(healthy, message)`` from now on.

        None returns to the fake's own answer (``(True, "")`` by hand; the relist's
        health when following a runtime).
        """
        self._health = None if healthy is None else (healthy, message)

    def inject_error(
        self,
        method: str,
        exc: BaseException,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``exc``.

        ``run`` raises it at once (a PLEG that failed fatally); ``watch`` returns an
        iterator that raises it when iterated; ``update_cache`` raises it after
        storing it in the cache as the pod's error (a ContainerRuntimeError is what
        the reference PLEGs raise there). A fault with ``when`` applies only to calls
        for which ``when(*args)`` is true (``update_cache``'s args: the pod uid).

        Raises:
            ValueError: ``method`` is not ``run``, ``watch`` or ``update_cache``, or
                ``times < 1``.
        """
        if method not in _FAILING_METHODS:
            raise ValueError(
                f"{method!r} cannot fail; expected one of {', '.join(sorted(_FAILING_METHODS))}"
            )
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._faults.append(_Fault(method, exc, times, when))

    def pending_errors(self, method: str | None = None) -> list[InjectedError]:
        """Injected faults not yet raised (all of them, or those of ``method``)."""
        return [
            InjectedError(f.method, f.exc, f.remaining, f.when)
            for f in self._faults
            if method is None or f.method == method
        ]

    def clear_errors(self) -> None:
        """Drop every pending injected fault."""
        self._faults.clear()

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        self.calls.clear()

    # -- PLEG protocol -------------------------------------------------------------

    @property
    def cache(self) -> PodCache:
        """The pod cache: statuses given with events, or found by relists."""
        return self._cache

    async def run(self) -> None:
        """Work until :meth:`stop`: relist a followed runtime every period, or just wait.

        Relist failures are logged and show in :meth:`healthy`, never raised.

        Raises:
            RuntimeError: already running.
            BaseException: the fault injected for ``run``.
        """
        self._record("run", ())
        self._raise_fault("run", ())
        if self._running:
            raise RuntimeError("FakePLEG.run: already running")
        self._running = True
        self._stopped = False
        self._channel.open()
        try:
            while not self._stopped:
                if self.runtime is not None:
                    try:
                        await self.relist()
                    except Exception:  # keep relisting; health tells it stopped working
                        log.exception("FakePLEG: relist failed unexpectedly")
                    if self._stopped:
                        break
                    if self._relist_requested:
                        continue
                await self._pause(self.relist_period if self.runtime is not None else None)
        finally:
            self._running = False
            self._channel.close()

    def stop(self) -> None:
        """Make :meth:`run` return (after a relist under way); end :meth:`watch` once
        the queued events are read. Never blocks; idempotent."""
        self._record("stop", ())
        self._stopped = True
        self._wake()
        if not self._running:
            self._channel.close()

    def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        """The events, in the order they were queued; single consumer.

        Raises (when iterated):
            RuntimeError: another watch is being iterated.
            BaseException: the fault injected for ``watch``.
        """
        self._record("watch", ())
        fault = _take(self._faults, "watch", ())
        if fault is not None:
            return _failing(fault.exc)
        return self._channel.watch()

    def healthy(self) -> tuple[bool, str]:
        """The scripted answer (:meth:`set_healthy`), else ``(True, "")`` by hand, or
        the kubelet's relist health when following a runtime. Never blocks."""
        self._record("healthy", ())
        if self._health is not None:
            return self._health
        if self.runtime is None:
            return True, ""
        if self._last_relist is None:
            return False, "pleg has yet to be successful"
        elapsed = self.clock.monotonic() - self._last_relist
        if elapsed > self.relist_threshold:
            return False, (
                f"pleg was last seen active {format_duration(elapsed)} ago; "
                f"threshold is {format_duration(self.relist_threshold)}"
            )
        return True, ""

    async def update_cache(self, pod_uid: str) -> bool:
        """Inspect one pod of the followed runtime now and store its status.

        By hand (no runtime) there is nothing to inspect: the cache keeps what the
        test put there and the answer is False. Idempotent.

        Returns:
            Whether the cache took a new status (a pod gone from the runtime is
            deleted from the cache, which counts as taken).

        Raises:
            ContainerRuntimeError: inspecting the pod failed (the error is also
                cached), or listing the runtime did.
            BaseException: the fault injected for ``update_cache`` (also cached).
        """
        self._record("update_cache", (pod_uid,))
        fault = _take(self._faults, "update_cache", (pod_uid,))
        if fault is not None:
            if isinstance(fault.exc, Exception):
                self._cache.set(pod_uid, None, fault.exc, self.clock.now())
            raise fault.exc.with_traceback(None)
        runtime = self.runtime
        if runtime is None:
            return False
        selector = {kl.POD_UID: pod_uid}
        sandboxes = await runtime.list_pod_sandboxes(PodSandboxFilter(label_selector=selector))
        containers = await runtime.list_containers(ContainerFilter(label_selector=selector))
        pods = group_pods(sandboxes, containers)
        error = await self._inspect(pod_uid, pods[0] if pods else None)
        if error is not None:
            raise error
        return True

    async def __aenter__(self) -> Self:
        """Run :meth:`run` in a task for the block."""
        self._task = asyncio.create_task(self.run(), name="FakePLEG.run")
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop, and wait for :meth:`run` to return."""
        self.stop()
        if self._task is not None:
            task, self._task = self._task, None
            await task

    # -- following a runtime -----------------------------------------------------------

    def request_relist(self) -> None:
        """Make a running fake that follows a runtime relist now."""
        self._relist_requested = True
        self._wake()

    async def relist(self) -> bool:
        """List the followed runtime once: update the cache, then queue the events.

        Returns:
            Whether the listing succeeded.

        Raises:
            RuntimeError: the fake follows no runtime.
        """
        runtime = self.runtime
        if runtime is None:
            raise RuntimeError("FakePLEG.relist: the fake follows no runtime")
        async with self._relist_lock:
            self._relist_requested = False
            started, timestamp = self.clock.monotonic(), self.clock.now()
            try:
                sandboxes = await runtime.list_pod_sandboxes(None)
                containers = await runtime.list_containers(None)
            except ContainerRuntimeError as err:
                log.warning("FakePLEG: listing the runtime failed: %s", err)
                return False
            self._last_relist = started
            pods = {p.uid: p for p in group_pods(sandboxes, containers)}
            lost_any = False
            order = [*self._states, *(uid for uid in pods if uid not in self._states)]
            for uid in order:
                old = self._states.get(uid, {})
                new = container_states(pods.get(uid))
                events = sendable(compute_pod_events(uid, old, new))
                if not events and uid not in self._retry and old == new:
                    continue
                if await self._inspect(uid, pods.get(uid)) is not None:
                    continue  # keep the old states: the same events are found next time
                lost = {e.data for e in events if not self._send(e)}
                lost_any = lost_any or bool(lost)
                kept = {cid: s for cid, s in new.items() if cid not in lost}
                kept.update((cid, old[cid]) for cid in lost if cid in old)
                if kept:
                    self._states[uid] = kept
                else:
                    self._states.pop(uid, None)
            self._cache.update_time(timestamp)
            if not lost_any and not self._relist_requested:
                self._channel.end_overflow()
            return True

    async def _inspect(self, uid: str, pod: RuntimePod | None) -> Exception | None:
        """Store the pod's status (or delete a pod that is gone); the error, if any."""
        timestamp = self.clock.now()
        if pod is None:
            self._cache.delete(uid, timestamp)
            self._retry.discard(uid)
            return None
        assert self.runtime is not None
        try:
            status = await get_pod_status(
                self.runtime, uid, pod.name, pod.namespace, timestamp=timestamp
            )
        except ContainerRuntimeError as err:
            log.warning("FakePLEG: pod %s will be inspected again: %s", uid, err)
            self._cache.set(uid, None, err, timestamp)
            self._retry.add(uid)
            return err
        self._cache.set(uid, keep_ips(self._cache, uid, status), None, timestamp)
        self._retry.discard(uid)
        return None

    # -- internals ----------------------------------------------------------------------

    def _send(self, event: PodLifecycleEvent) -> bool:
        if self._channel.send(event):
            return True
        self.dropped_events += 1
        return False

    def _record(self, method: str, args: tuple[Any, ...]) -> None:
        names = ("pod_uid",) if method == "update_cache" else ()
        self.calls.append(Call(method, args, dict(zip(names, args, strict=True))))

    def _raise_fault(self, method: str, args: tuple[Any, ...]) -> None:
        fault = _take(self._faults, method, args)
        if fault is not None:
            raise fault.exc.with_traceback(None)

    async def _pause(self, seconds: float | None) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._wakeup = future

        def expire() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.clock.call_later(seconds, expire) if seconds is not None else None
        try:
            await future
        finally:
            if handle is not None:
                handle.cancel()
            if self._wakeup is future:
                self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


async def _failing(exc: BaseException) -> AsyncIterator[PodLifecycleEvent]:
    raise exc.with_traceback(None)
    yield  # pragma: no cover  (makes this an async generator)
