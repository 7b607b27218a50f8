"""FakeEventRecorder: the agent's pod events, kept for a test to look at.

The pod syncer and the probe manager send their events (``Pulling``, ``Started``,
``Killing``, ``Unhealthy``, ...) to an
:class:`~kubelet_kit.podsync.syncer.EventRecorder`. The project's in-memory
recorder is :class:`~kubelet_kit.podsync.syncer.EventLog`; the fake is that log,
unbounded, with lookups a test wants and the fake convention's call log and
``inject_error``::

    events = FakeEventRecorder()
    syncer = RuntimePodSyncer(runtime, clock, status_manager=sm, events=events)
    ...
    assert events.reasons(pod)[:2] == ["Pulling", "Pulled"]
    [backoff] = events.events_for(pod, reason="BackOff", type="Normal")

It keeps the recorder's contract: it accepts ``Normal`` and ``Warning`` events
only (others are dropped, as client-go drops them), keeps them in order, and
never blocks. ``inject_error("event", exc)`` makes it break that contract on
purpose, to test that a caller survives a broken recorder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from kubelet_kit.podsync._events import EventLog, RecordedEvent
from kubelet_kit.testing._fake_log import FakeCallLog
from kubelet_kit.testing.clock import FakeClock

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.clock import Clock

__all__ = ["FakeEventRecorder"]


def _uid(pod: Pod | str) -> str:
    return pod if isinstance(pod, str) else pod.metadata.uid


class FakeEventRecorder(FakeCallLog, EventLog):
    """An :class:`~kubelet_kit.podsync.syncer.EventLog` that keeps every event,
    records each call and can be told to fail.

    Each ``event(pod, type, reason, message, container=)`` call is recorded as a
    :class:`~kubelet_kit.testing.Call` (``args`` = ``(pod, type, reason,
    message, container)``, the pod object itself), then kept as a
    :class:`~kubelet_kit.podsync.syncer.RecordedEvent` unless its type is
    neither ``Normal`` nor ``Warning``.

    Args:
        clock: Stamps each event (default: a new :class:`FakeClock`).
        capacity: How many events are kept, oldest dropped first (default: all).
    """

    _METHODS: ClassVar[frozenset[str]] = frozenset({"event"})

    def __init__(self, clock: Clock | None = None, *, capacity: int | None = None) -> None:
        FakeCallLog.__init__(self)
        EventLog.__init__(self, clock if clock is not None else FakeClock(), capacity=capacity)

    def event(
        self, pod: Pod, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        """Record one event (see the class). Never blocks.

        Raises:
            BaseException: Only what :meth:`inject_error` queued for ``"event"``.
        """
        self._enter(
            "event",
            (pod, event_type, reason, message, container),
            {
                "pod": pod,
                "event_type": event_type,
                "reason": reason,
                "message": message,
                "container": container,
            },
        )
        super().event(pod, event_type, reason, message, container=container)

    # -- lookups ----------------------------------------------------------------

    def events_for(
        self,
        pod: Pod | str,
        *,
        reason: str | None = None,
        type: str | None = None,
        container: str | None = None,
    ) -> list[RecordedEvent]:
        """The events kept about ``pod`` (a Pod or its uid), oldest first, only
        those with the given ``reason``, ``type`` and ``container`` if given."""
        return [
            e
            for e in self.events(_uid(pod))
            if (reason is None or e.reason == reason)
            and (type is None or e.type == type)
            and (container is None or e.container == container)
        ]

    def reasons(self, pod: Pod | str | None = None) -> list[str]:
        """The reasons of the events kept (about ``pod`` only, if given), in order."""
        return [e.reason for e in self.events(None if pod is None else _uid(pod))]

    def messages(self, pod: Pod | str | None = None, *, reason: str | None = None) -> list[str]:
        """The messages of the events kept (about ``pod``, with ``reason``), in order."""
        return [
            e.message
            for e in self.events(None if pod is None else _uid(pod))
            if reason is None or e.reason == reason
        ]

    def warnings(self, pod: Pod | str | None = None) -> list[RecordedEvent]:
        """The ``Warning`` events kept (about ``pod`` only, if given), in order."""
        return [e for e in self.events(None if pod is None else _uid(pod)) if e.type == "Warning"]

    def clear(self) -> None:
        """Forget the events kept (the call log stays; see :meth:`clear_calls`)."""
        self._events.clear()
