"""The kubelet's events about pods: where the syncer sends them, and a log keeping them.

:class:`EventRecorder` is what :class:`~kubelet_kit.podsync.syncer.RuntimePodSyncer`
sends its events to (``Pulling``, ``Created``, ``Started``, ``Killing``,
``BackOff``, ``Failed``, ...); :class:`EventLog` is an in-memory recorder keeping
the newest ones as :class:`RecordedEvent` values, which the cluster mode turns
into API events.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Final, Protocol

import attrs

from kubelet_kit.clock import Clock

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = ["EVENT_TYPES", "EventLog", "EventRecorder", "RecordedEvent"]

log = logging.getLogger(__name__)

#: The two event types the API knows; an event of any other type is dropped
#: (with an error logged), as client-go's recorder drops it.
EVENT_TYPES: Final = frozenset({"Normal", "Warning"})


class EventRecorder(Protocol):
    """Receives the kubelet's events about pods (``Pulling``, ``Created``,
    ``Started``, ``Killing``, ``BackOff``, ``Failed``, ...)."""

    def event(
        self, pod: Pod, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        """Record one event; ``event_type`` is ``Normal`` or ``Warning`` (an event
        of another type is dropped). Events are kept in the order recorded. Never
        blocks; must not raise."""


# Without __slots__: a frozen slotted instance is filled in through one
# object.__setattr__ call per field, a plain one through its __dict__, about a
# third faster. One is made for every event (six per pod started), while the
# log keeps a bounded number of them (1,000 by default): speed matters more
# here than the few bytes a slotted instance saves.
@attrs.frozen(slots=False)
class RecordedEvent:
    """One event as :class:`EventLog` keeps it.

    Attributes:
        time: Wall-clock seconds when it was recorded.
        namespace: The pod's namespace.
        pod_name: The pod's name.
        pod_uid: The pod's uid.
        container: The container it is about ("" for the pod).
        type: ``Normal`` or ``Warning``.
        reason: The kubelet's event reason.
        message: The kubelet's event message.
    """

    time: float
    namespace: str
    pod_name: str
    pod_uid: str
    container: str
    type: str
    reason: str
    message: str


class EventLog:
    """An in-memory :class:`EventRecorder` keeping the newest ``capacity`` events.

    Args:
        clock: Stamps each event.
        capacity: How many events are kept (oldest dropped first); None keeps
            them all.
    """

    def __init__(self, clock: Clock, *, capacity: int | None = 1000) -> None:
        self.clock = clock
        self._events: collections.deque[RecordedEvent] = collections.deque(maxlen=capacity)

    def event(
        self, pod: Pod, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        """Keep one event; one whose type is neither ``Normal`` nor ``Warning`` is
        dropped with an error logged, as client-go's recorder does. Never blocks."""
        if event_type not in EVENT_TYPES:
            log.error("unsupported event type %r: event %s dropped", event_type, reason)
            return
        md = pod.metadata
        self._events.append(
            RecordedEvent(
                self.clock.now(),
                md.namespace,
                md.name,
                md.uid,
                container,
                event_type,
                reason,
                message,
            )
        )

    def events(self, pod_uid: str | None = None) -> list[RecordedEvent]:
        """The events kept (of one pod), oldest first."""
        return [e for e in self._events if pod_uid is None or e.pod_uid == pod_uid]
