"""One worker per pod: updates serialised, coalesced, and taken through the
kubelet's syncing -> terminating -> terminated progression.

The kubelet's ``podWorkers`` are the source of truth for what should be running on
the node: the sync loop hands every change to :meth:`PodWorkers.update_pod` and
never calls the runtime itself. Each pod has one asyncio task; an update that
arrives while the pod is being synced waits in a single slot, so a burst of ten
updates costs at most one extra sync (latest wins). A pod that is told to stop
never starts again under the same uid; once its worker has finished, housekeeping
(:meth:`PodWorkers.sync_known_pods`) forgets it.

Work for one pod never waits on another pod: a slow or stuck sync only holds its
own worker.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs

from kubelet_kit.clock import Clock, RealClock, TimerHandle
from kubelet_kit.errors import KubeletKitError

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = [
    "PodSyncer",
    "PodWorkers",
    "SyncResult",
    "UpdateType",
    "WorkerPhase",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class UpdateType(enum.Enum):
    """Why a pod is being handed to its worker (the kubelet's SyncPodType)."""

    CREATE = "create"
    UPDATE = "update"
    SYNC = "sync"
    KILL = "kill"


class WorkerPhase(enum.Enum):
    """Where a pod's worker is in its life."""

    SYNCING = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@attrs.frozen
class SyncResult:
    """What :meth:`PodSyncer.sync_pod` tells the worker.

    Attributes:
        terminal: The pod reached Succeeded or Failed; its worker moves on to
            terminating (stop what still runs), then terminated (clean up).
        requeue_after: Seconds until the pod should be synced again, overriding
            the periodic resync (e.g. when a restart back-off expires).
    """

    terminal: bool = False
    requeue_after: float | None = None


class PodSyncer(Protocol):
    """What pod workers drive: the composer's per-pod logic."""

    async def sync_pod(self, update_type: UpdateType, pod: Pod) -> SyncResult:
        """Make the runtime match ``pod``. May raise to ask for a retry after the
        back-off period. Cancelled when the pod is told to terminate meanwhile."""

    async def sync_terminating_pod(self, pod: Pod, grace_period: float) -> None:
        """Stop every container of the pod within ``grace_period`` seconds. Raising
        retries after the back-off period. Cancelled and called again if a shorter
        grace period is requested meanwhile."""

    async def sync_terminated_pod(self, pod: Pod) -> None:
        """Release what the stopped pod still holds (volumes, cgroups, sandbox).
        Raising retries after the back-off period."""


@attrs.define
class _PodState:
    uid: str
    pod: Pod
    phase: WorkerPhase = WorkerPhase.SYNCING
    pending: UpdateType | None = None
    grace_period: float | None = None
    finished: bool = False
    syncs: int = 0
    wake: asyncio.Event = attrs.Factory(asyncio.Event)
    task: asyncio.Task[None] | None = None
    in_call: bool = False  # a syncer call is in flight (in the worker's task)
    interrupts: int = 0  # cancellations of the worker's task asked by _interrupt
    current_grace: float | None = None
    requeue: TimerHandle | None = None
    stopped: asyncio.Event = attrs.Factory(asyncio.Event)  # set once containers are stopped


class PodWorkers:
    """Per-pod worker tasks.

    Args:
        syncer: The per-pod logic (in the composer, the Kubelet itself).
        clock: Source of time for resync and back-off timers.
        resync_interval: Seconds between periodic syncs of a healthy pod (the
            kubelet's syncFrequency, default 60 s).
        backoff_period: Seconds before retrying a sync that raised (the kubelet
            uses 10 s).

    Create and use it inside a running event loop; :meth:`shutdown` cancels every
    worker. Worker tasks are created lazily on the first update of each pod.
    """

    def __init__(
        self,
        syncer: PodSyncer,
        clock: Clock | None = None,
        *,
        resync_interval: float = 60.0,
        backoff_period: float = 10.0,
    ) -> None:
        self._syncer = syncer
        self._clock = clock or RealClock()
        self.resync_interval = resync_interval
        self.backoff_period = backoff_period
        self._pods: dict[str, _PodState] = {}
        self._closed = False

    # -- queries ---------------------------------------------------------------------

    def phase(self, uid: str) -> WorkerPhase | None:
        """The worker phase of pod ``uid``, or None if no worker knows it."""
        state = self._pods.get(uid)
        return state.phase if state else None

    def is_finished(self, uid: str) -> bool:
        """Whether pod ``uid`` was terminated and cleaned up completely."""
        state = self._pods.get(uid)
        return bool(state and state.finished)

    def known_pods(self) -> dict[str, WorkerPhase]:
        """Every pod with a worker (running or finished but not forgotten)."""
        return {uid: s.phase for uid, s in self._pods.items()}

    def sync_count(self, uid: str) -> int:
        """How many times the pod's syncer methods ran (for tests and metrics)."""
        state = self._pods.get(uid)
        return state.syncs if state else 0

    # -- commands --------------------------------------------------------------------

    def update_pod(
        self,
        pod: Pod,
        update_type: UpdateType = UpdateType.UPDATE,
        *,
        grace_period: float | None = None,
    ) -> None:
        """Hand a pod change to its worker. Never blocks.

        A ``KILL`` update (or a pod carrying a deletion timestamp) moves the pod to
        terminating for good; its grace period can only shrink after that. Updates
        to a pod whose worker has finished are ignored: a uid never runs twice.

        Args:
            pod: The newest version of the pod.
            update_type: Why the pod is updated.
            grace_period: For ``KILL``, seconds the containers get to stop; default
                the pod's deletion grace period or terminationGracePeriodSeconds.
        """
        if self._closed:
            return
        uid = pod.metadata.uid
        state = self._pods.get(uid)
        if state is None:
            state = _PodState(uid=uid, pod=pod)
            self._pods[uid] = state
        if state.finished:
            return
        state.pod = pod
        kill = update_type is UpdateType.KILL or pod.metadata.deletion_timestamp is not None
        if kill:
            grace = grace_period if grace_period is not None else _grace(pod)
            self._request_termination(state, grace)
        # Coalesce: one pending slot, and a pending KILL is never downgraded.
        if state.pending is not UpdateType.KILL:
            state.pending = UpdateType.KILL if kill else update_type
        if state.task is None:
            state.task = asyncio.get_running_loop().create_task(
                self._work(state), name=f"pod-worker-{uid}"
            )
        state.wake.set()

    def sync_known_pods(self, desired: Iterable[str]) -> list[str]:
        """Housekeeping: forget finished workers of pods no longer desired.

        Args:
            desired: uids of the pods the agent's configuration still holds.

        Returns:
            The uids forgotten (their uid may be used by a new pod afterwards).
        """
        wanted = set(desired)
        gone = [uid for uid, s in self._pods.items() if s.finished and uid not in wanted]
        for uid in gone:
            del self._pods[uid]
        return gone

    async def wait_terminated(self, uid: str) -> None:
        """Block until pod ``uid``'s containers are stopped (its worker reached
        TERMINATED). Returns at once for a pod no worker knows."""
        state = self._pods.get(uid)
        if state is not None:
            await state.stopped.wait()

    async def shutdown(self) -> None:
        """Cancel every worker and wait for them. Idempotent. Pods keep running."""
        self._closed = True
        tasks = [s.task for s in self._pods.values() if s.task is not None]
        for state in self._pods.values():
            if state.requeue is not None:
                state.requeue.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- internals -------------------------------------------------------------------

    def _request_termination(self, state: _PodState, grace: float) -> None:
        grace = max(0.0, grace)
        if state.phase is WorkerPhase.SYNCING:
            state.phase = WorkerPhase.TERMINATING
            state.grace_period = grace
            # The in-flight sync works toward a pod that must now stop.
            self._interrupt(state)
        elif state.phase is WorkerPhase.TERMINATING and (
            state.grace_period is None or grace < state.grace_period
        ):
            state.grace_period = grace
            if state.current_grace is None or grace < state.current_grace:
                self._interrupt(state)

    def _schedule(self, state: _PodState, delay: float) -> None:
        if state.requeue is not None:
            state.requeue.cancel()

        def fire() -> None:
            state.requeue = None
            if not self._closed and not state.finished:
                if state.pending is None:
                    state.pending = UpdateType.SYNC
                state.wake.set()

        state.requeue = self._clock.call_later(delay, fire)

    def _interrupt(self, state: _PodState) -> None:
        """Cancel the syncer call in flight, if any. It runs in the worker's own
        task, so that task is cancelled; :meth:`_guarded` takes the cancellation
        back once the call has given up."""
        if state.in_call and state.task is not None:
            state.interrupts += 1
            state.task.cancel()

    async def _guarded(
        self, state: _PodState, coro: Coroutine[object, object, T], grace: float | None = None
    ) -> tuple[bool, T | None]:
        """Run one syncer call in the worker's task, interruptible by a termination
        request (:meth:`_interrupt`) without cancelling the worker. Returns
        (completed, result).

        No task per call: the call is cancelled only while the worker waits inside
        it (the event loop runs nothing else meanwhile), so its cancellation always
        lands in the call, never in the worker's own steps.
        """
        state.in_call = True
        state.current_grace = grace
        try:
            result = await coro
        except asyncio.CancelledError:
            if not self._taken_back(state) or self._closed:
                raise  # the worker itself is being shut down
            return False, None
        finally:
            state.in_call = False
            state.current_grace = None
        # A call may have caught its cancellation and ended anyway.
        self._taken_back(state)
        return True, result

    def _taken_back(self, state: _PodState) -> bool:
        """Undo the cancellations :meth:`_interrupt` asked of the worker's task;
        True if there were some and no other cancellation (a shutdown) stands."""
        interrupts, state.interrupts = state.interrupts, 0
        me = asyncio.current_task()
        if not interrupts or me is None:
            return False
        remaining = me.cancelling()
        for _ in range(interrupts):
            remaining = me.uncancel()
        return remaining == 0

    async def _work(self, state: _PodState) -> None:
        while not state.finished:
            await state.wake.wait()
            state.wake.clear()
            update, state.pending = state.pending, None
            if update is None:
                continue
            if state.requeue is not None:
                state.requeue.cancel()
                state.requeue = None
            state.syncs += 1
            try:
                next_delay = await self._step(state, update)
            except KubeletKitError as exc:
                # Expected trouble (an image that will not pull, a crash loop, a
                # runtime that is down): the pod's status carries the reason.
                log.info(
                    "%s of pod %s: %s; retrying in %gs",
                    state.phase.value,
                    _name(state.pod),
                    exc,
                    self.backoff_period,
                )
                next_delay = self.backoff_period
            except Exception:
                log.exception(
                    "%s of pod %s failed; retrying in %gs",
                    state.phase.value,
                    _name(state.pod),
                    self.backoff_period,
                )
                next_delay = self.backoff_period
            if next_delay is None:
                # Go round again at once (phase changed or a step was interrupted).
                state.pending = state.pending or UpdateType.SYNC
                state.wake.set()
            elif not state.finished:
                self._schedule(state, next_delay)

    async def _step(self, state: _PodState, update: UpdateType) -> float | None:
        """Do one unit of work; return the delay before the next, None for "now"."""
        pod = state.pod
        if state.phase is WorkerPhase.SYNCING:
            done, result = await self._guarded(state, self._syncer.sync_pod(update, pod))
            if not done or state.phase is not WorkerPhase.SYNCING:
                return None  # terminating was requested meanwhile
            assert result is not None
            if result.terminal:
                self._request_termination(state, _grace(pod))
                return None
            delay = self.resync_interval
            if result.requeue_after is not None:
                delay = min(max(0.0, result.requeue_after), delay)
            return delay
        if state.phase is WorkerPhase.TERMINATING:
            grace = state.grace_period if state.grace_period is not None else _grace(pod)
            done, _ = await self._guarded(
                state, self._syncer.sync_terminating_pod(pod, grace), grace
            )
            if done:
                state.phase = WorkerPhase.TERMINATED
                state.stopped.set()
            return None  # on to cleanup, or again with the shorter grace period
        await self._syncer.sync_terminated_pod(pod)
        state.finished = True
        return None


def _grace(pod: Pod) -> float:
    """The pod's grace period: the deletion grace period if set, else the spec's."""
    if pod.metadata.deletion_grace_period_seconds is not None:
        return float(pod.metadata.deletion_grace_period_seconds)
    value = pod.spec.termination_grace_period_seconds
    return 30.0 if value is None else float(value)


def _name(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
