"""The status manager: the latest API status of every pod, and its subscribers.

The composer hands every status it generates to :meth:`StatusManager.set_pod_status`;
the manager normalises it (a pod never leaves ``Failed``/``Succeeded``, conditions
keep their transition times, the start time is kept) and drops updates that
change nothing. An embedding agent that reports statuses somewhere (an API
server, a fleet service) reads :meth:`StatusManager.subscribe`.

Subscribers never slow the manager down: each has its own buffer holding at most
one pending status per pod. A subscriber that falls behind loses intermediate
statuses of a pod but always receives the latest one, which is what a status
reporter needs (the kubelet's status manager coalesces the same way).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
from collections import OrderedDict
from collections.abc import Mapping
from types import TracebackType

import attrs

from kubelet_kit.api import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.termination import MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
from kubelet_kit.status.generate import CONTAINER_STATUS_UNKNOWN, merge_transition_times
from kubelet_kit.status.phase import FAILED, TERMINAL_PHASES, is_static_pod

__all__ = [
    "StatusManager",
    "StatusSubscription",
    "cap_termination_messages",
    "illegal_container_transition",
]

log = logging.getLogger(__name__)

_KILLED_MESSAGE = "The container could not be located when the pod was terminated"


def _unknown_terminated() -> ContainerState:
    # What the kubelet reports for a container it stopped without seeing the
    # exit: we do not know whether it succeeded, so it is reported as an error.
    return ContainerState(
        terminated=ContainerStateTerminated(
            reason=CONTAINER_STATUS_UNKNOWN, message=_KILLED_MESSAGE, exit_code=137
        )
    )


def _over(message: str, limit: int) -> bool:
    # Whether the message is longer than ``limit`` bytes in UTF-8. An ASCII
    # message (the usual one) has as many bytes as characters: no need to encode.
    if message.isascii():
        return len(message) > limit
    return len(_utf8(message)) > limit


def _utf8(message: str) -> bytes:
    # A lone surrogate (from a custom Runtime's message) is counted as the three
    # bytes it stands for, not refused: a bad message must not fail the status.
    return message.encode("utf-8", "surrogatepass")


def _needs_cap(statuses: tuple[ContainerStatus, ...], limit: int) -> bool:
    # (Checked on every status set: both states are written out, with no
    # tuple of them made per container.)
    for cs in statuses:
        terminated = cs.state.terminated
        if terminated is not None and _over(terminated.message, limit):
            return True
        terminated = cs.last_state.terminated
        if terminated is not None and _over(terminated.message, limit):
            return True
    return False


def _capped_state(state: ContainerState, limit: int) -> ContainerState:
    terminated = state.terminated
    if terminated is None:
        return state
    raw = _utf8(terminated.message)
    if len(raw) <= limit:
        return state
    # The kubelet cuts bytes; what is cut inside a character is shown replaced.
    message = raw[:limit].decode("utf-8", "replace")
    return attrs.evolve(state, terminated=attrs.evolve(terminated, message=message))


def cap_termination_messages(pod: Pod, status: PodStatus) -> PodStatus:
    """``status`` with each terminated container's message cut to its share of
    the pod's 12 KiB: the first ``12 KiB / (containers + init containers)``
    bytes of each, in ``state`` and ``lastState`` alike (the kubelet's
    ``normalizeStatus``). The same object when nothing is over its share."""
    share = MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
    count = len(pod.spec.containers) + len(pod.spec.init_containers)
    if count:
        share //= count
    if not (
        _needs_cap(status.init_container_statuses, share)
        or _needs_cap(status.container_statuses, share)
        or _needs_cap(status.ephemeral_container_statuses, share)
    ):
        return status  # (the usual case: checked without copying anything)

    def capped(statuses: tuple[ContainerStatus, ...]) -> tuple[ContainerStatus, ...]:
        out = []
        for cs in statuses:
            state = _capped_state(cs.state, share)
            last = _capped_state(cs.last_state, share)
            if state is not cs.state or last is not cs.last_state:
                cs = attrs.evolve(cs, state=state, last_state=last)
            out.append(cs)
        return tuple(out)

    inits = capped(status.init_container_statuses)
    regular = capped(status.container_statuses)
    ephemeral = capped(status.ephemeral_container_statuses)
    if all(
        a is b
        for a, b in zip(
            (*inits, *regular, *ephemeral),
            (
                *status.init_container_statuses,
                *status.container_statuses,
                *status.ephemeral_container_statuses,
            ),
            strict=True,
        )
    ):
        return status
    return attrs.evolve(
        status,
        init_container_statuses=inits,
        container_statuses=regular,
        ephemeral_container_statuses=ephemeral,
    )


def _has_run(status: ContainerStatus) -> bool:
    return (
        status.state.running is not None
        or status.state.terminated is not None
        or status.last_state.terminated is not None
    )


def illegal_container_transition(pod: Pod, old: PodStatus, new: PodStatus) -> str | None:
    """Why ``new`` may not follow ``old``, or None when it may (upstream
    ``checkContainerStateTransition``).

    A container that terminated and will not be restarted (restartPolicy Never,
    or OnFailure after exit 0) cannot be reported non-terminated again; with
    restartPolicy Always, and for sidecars, anything goes.
    """
    policy = pod.spec.restart_policy
    if policy == "Always":
        return None
    sidecars = {c.name for c in pod.spec.sidecars}

    def final(status: ContainerStatus) -> bool:
        terminated = status.state.terminated
        if terminated is None or status.name in sidecars:
            return False
        return not (terminated.exit_code != 0 and policy == "OnFailure")

    for kind, before, after in (
        ("container", old.container_statuses, new.container_statuses),
        ("init container", old.init_container_statuses, new.init_container_statuses),
    ):
        done = {s.name for s in before if final(s)}
        for status in after:
            if status.name in done and status.state.terminated is None:
                return (
                    f"terminated {kind} {status.name} attempted illegal transition to "
                    "non-terminated state"
                )
    return None


class StatusSubscription:
    """One subscriber's view of status changes: an async iterator of ``(pod, status)``.

    Made by :meth:`StatusManager.subscribe`. It receives every change made after
    it was created (and, by default, the statuses already known). At most one
    status per pod waits in its buffer: a newer status of the same pod replaces
    the waiting one, so a slow reader skips intermediate statuses but never the
    latest. Iteration ends after :meth:`close` or :meth:`StatusManager.close`.
    One task should iterate a subscription (single consumer).
    """

    def __init__(self, manager: StatusManager) -> None:
        self._manager = manager
        self._pending: OrderedDict[str, tuple[Pod, PodStatus]] = OrderedDict()
        self._wakeup = asyncio.Event()
        self._closed = False

    def _offer(self, pod: Pod, status: PodStatus) -> None:
        if self._closed:
            return
        uid = pod.uid
        self._pending.pop(uid, None)  # move to the back: newest change last
        self._pending[uid] = (pod, status)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        """How many pods have a status waiting to be read."""
        return len(self._pending)

    def close(self) -> None:
        """Stop receiving; a waiting reader ends its iteration. Idempotent."""
        if not self._closed:
            self._closed = True
            self._manager._unsubscribe(self)
            self._wakeup.set()

    def __aiter__(self) -> StatusSubscription:
        return self

    async def __anext__(self) -> tuple[Pod, PodStatus]:
        """Wait for the next changed status. Raises StopAsyncIteration once closed."""
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()
        _, item = self._pending.popitem(last=False)
        return item

    async def __aenter__(self) -> StatusSubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class StatusManager:
    """Keeps the latest API status of each pod and tells subscribers of changes.

    Every method is synchronous and never blocks; subscribers read at their own
    pace (see :class:`StatusSubscription`).

    Args:
        clock: Source of the time stamped on new conditions and start times.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else RealClock()
        self._statuses: dict[str, tuple[Pod, PodStatus]] = {}
        self._subscribers: set[StatusSubscription] = set()
        self._closed = False

    def _now(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self._clock.now(), tz=_dt.UTC)

    def _normalise(self, pod: Pod, status: PodStatus, old: PodStatus | None) -> PodStatus:
        status = cap_termination_messages(pod, status)
        base = old if old is not None else pod.status
        if base.phase in TERMINAL_PHASES and status.phase != base.phase:
            # Terminal is final: keep the phase and why the pod got there.
            status = attrs.evolve(
                status, phase=base.phase, reason=base.reason, message=base.message
            )
        start_time = base.start_time or status.start_time
        timed = True
        for c in status.conditions:
            if c.last_transition_time is None:
                timed = False
                break
        now: _dt.datetime | None = None
        if start_time is None or not timed:
            # The clock is read only when something takes the time (with every
            # condition timed, merge_transition_times never uses it).
            now = self._now()
        if start_time is None:
            start_time = now
        conditions = merge_transition_times(status.conditions, base.conditions, now)
        if start_time is status.start_time and (
            conditions is status.conditions
            or all(a is b for a, b in zip(conditions, status.conditions, strict=True))
        ):
            # The usual case: the status was generated from this very base, so
            # it already carries its start and transition times.
            return status
        return attrs.evolve(status, start_time=start_time, conditions=conditions)

    def set_pod_status(self, pod: Pod, status: PodStatus) -> bool:
        """Record ``status`` as the pod's current status.

        The status is normalised first: a pod whose status is (or, for a pod new
        to the manager, whose ``pod.status`` is) ``Failed`` or ``Succeeded``
        keeps that phase with its reason and message; a condition whose status
        did not change keeps its ``lastTransitionTime`` (new or changed ones
        without a time get the clock's now); ``startTime`` is kept, or set now;
        termination messages are cut to the pod's share
        (:func:`cap_termination_messages`).
        Idempotent: an update that changes nothing is dropped. An update that
        shows a container that terminated for good (restartPolicy Never, or
        OnFailure after exit 0) as no longer terminated is refused and logged, as
        the kubelet does (:func:`illegal_container_transition`).

        Args:
            pod: The pod the status belongs to (keyed by ``pod.uid``).
            status: The new status, e.g. from ``generate_pod_status``.

        Returns:
            True when the stored status changed (subscribers were told).
        """
        uid = pod.uid
        entry = self._statuses.get(uid)
        old = entry[1] if entry is not None else None
        problem = illegal_container_transition(pod, old or pod.status, status)
        if problem is not None:
            log.warning("pod %s: status update refused: %s", pod.full_name, problem)
            return False
        status = self._normalise(pod, status, old)
        if old is not None and (status is old or status == old):
            if entry is not None and entry[0] is not pod and entry[0] != pod:
                self._statuses[uid] = (pod, status)  # newer spec, same status
            return False
        self._statuses[uid] = (pod, status)
        for subscriber in tuple(self._subscribers):
            subscriber._offer(pod, status)
        return True

    def get_pod_status(self, uid: str) -> PodStatus | None:
        """The pod's current status, or None if the manager has none. Never blocks."""
        entry = self._statuses.get(uid)
        return entry[1] if entry is not None else None

    def all_statuses(self) -> Mapping[str, PodStatus]:
        """Every known status by pod uid (a copy)."""
        return {uid: status for uid, (_, status) in self._statuses.items()}

    def remove(self, uid: str) -> None:
        """Forget a pod (after it was removed from the node). Idempotent."""
        self._statuses.pop(uid, None)

    def terminate_pod(
        self,
        pod: Pod,
        reason: str = "",
        message: str = "",
        condition: PodCondition | None = None,
    ) -> PodStatus:
        """Mark a pod as stopped for good (killed, evicted, shut down).

        As the kubelet does on kill: every container not already terminated is
        shown terminated with ``ContainerStatusUnknown`` (exit 137), since the
        exit was not observed; init containers that never started stay waiting.
        A pod not yet terminal becomes ``Failed`` with ``reason`` and ``message``
        (e.g. ``Evicted``); a terminal pod keeps its phase, reason and message.
        Static pods keep their phase, as upstream.

        Args:
            pod: The pod.
            reason: Pod status reason for the termination, e.g. ``Evicted``.
            message: Human-readable explanation.
            condition: A condition to set (replacing one of its type), such as the
                ``DisruptionTarget`` of an evicted pod; it stays through later syncs.

        Returns:
            The stored status.
        """
        current = self.get_pod_status(pod.uid) or pod.status
        containers = tuple(
            s if s.state.terminated is not None else attrs.evolve(s, state=_unknown_terminated())
            for s in current.container_statuses
        )
        inits = list(current.init_container_statuses)
        # Init containers up to the last one that ever ran may have been killed;
        # those after it never started and stay as they are.
        last_run = max((i for i, s in enumerate(inits) if _has_run(s)), default=-1)
        for i in range(last_run + 1):
            if inits[i].state.terminated is None:
                inits[i] = attrs.evolve(inits[i], state=_unknown_terminated())
        status = attrs.evolve(
            current, container_statuses=containers, init_container_statuses=tuple(inits)
        )
        if condition is not None:
            others = tuple(c for c in status.conditions if c.type != condition.type)
            status = attrs.evolve(status, conditions=(*others, condition))
        if status.phase not in TERMINAL_PHASES and not is_static_pod(pod):
            status = attrs.evolve(status, phase=FAILED, reason=reason, message=message)
        self.set_pod_status(pod, status)
        return self._statuses[pod.uid][1]

    def subscribe(self, *, replay: bool = True) -> StatusSubscription:
        """A new subscription to status changes.

        Args:
            replay: Start with the current status of every known pod.

        Returns:
            The subscription; iterate it with ``async for``, close it when done.
        """
        subscription = StatusSubscription(self)
        if self._closed:
            subscription.close()
            return subscription
        self._subscribers.add(subscription)
        if replay:
            for pod, status in self._statuses.values():
                subscription._offer(pod, status)
        return subscription

    def _unsubscribe(self, subscription: StatusSubscription) -> None:
        self._subscribers.discard(subscription)

    def close(self) -> None:
        """End every subscription (after they drain what is pending). Idempotent."""
        self._closed = True
        for subscriber in tuple(self._subscribers):
            subscriber.close()
