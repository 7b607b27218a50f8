"""FakeStatusSink: where the pod syncer's fresh runtime statuses go, kept for a test.

The pod syncer writes every status it reads from the runtime to a
:class:`~kubelet_kit.podsync.syncer.PodStatusSink` (in the agent, the PLEG's
:class:`~kubelet_kit.pleg.PodCache`), so the next sync sees it without asking
the runtime again. The fake keeps every write in order and the newest per pod,
with the sink's rule: a status older than the one held is refused::

    sink = FakeStatusSink()
    syncer = RuntimePodSyncer(runtime, clock, status_manager=sm, pod_cache=sink)
    await syncer.sync_pod(UpdateType.CREATE, pod)
    held = sink.latest(pod).status
    assert held.find_container_status("app").state is ContainerState.RUNNING

``inject_error("set", exc)`` makes a write raise, to test a caller's handling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from kubelet_kit.testing._fake_log import FakeCallLog

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.container.pods import PodRuntimeStatus

__all__ = ["FakeStatusSink", "StatusWrite"]


@attrs.frozen
class StatusWrite:
    """One write to a :class:`FakeStatusSink`.

    Attributes:
        uid: The pod's uid.
        status: The runtime status written; None when the inspection failed.
        error: The inspection's error, or None.
        timestamp: When the status was observed (wall-clock seconds).
        accepted: Whether the sink took it (False: it held a newer one).
    """

    uid: str
    status: PodRuntimeStatus | None
    error: Exception | None = attrs.field(eq=False)
    timestamp: float
    accepted: bool


def _uid(pod: Pod | str) -> str:
    return pod if isinstance(pod, str) else pod.metadata.uid


class FakeStatusSink(FakeCallLog):
    """A :class:`~kubelet_kit.podsync.syncer.PodStatusSink` that keeps every write.

    Each ``set(uid, status, error, timestamp)`` is recorded as a
    :class:`~kubelet_kit.testing.Call` and, unless an injected fault raises
    first, as a :class:`StatusWrite` in :attr:`writes`. The newest write per pod
    is held; a write older than the one held is refused (``set`` returns False),
    one at the same time or newer replaces it, as the PLEG's pod cache does.
    """

    _METHODS: ClassVar[frozenset[str]] = frozenset({"set"})

    def __init__(self) -> None:
        super().__init__()
        #: Every write, accepted or refused, oldest first.
        self.writes: list[StatusWrite] = []
        self._latest: dict[str, StatusWrite] = {}

    def set(
        self,
        uid: str,
        status: PodRuntimeStatus | None,
        error: Exception | None,
        timestamp: float,
    ) -> bool:
        """Store the status observed at ``timestamp`` unless a newer one is held.
        Never blocks.

        Returns:
            Whether the sink took it.

        Raises:
            BaseException: Only what :meth:`inject_error` queued for ``"set"``.
        """
        self._enter(
            "set",
            (uid, status, error, timestamp),
            {"uid": uid, "status": status, "error": error, "timestamp": timestamp},
        )
        held = self._latest.get(uid)
        accepted = held is None or held.timestamp <= timestamp
        write = StatusWrite(uid, status, error, timestamp, accepted)
        self.writes.append(write)
        if accepted:
            self._latest[uid] = write
        return accepted

    # -- lookups ----------------------------------------------------------------

    def latest(self, pod: Pod | str) -> StatusWrite | None:
        """The write held for ``pod`` (a Pod or its uid), or None."""
        return self._latest.get(_uid(pod))

    def writes_for(self, pod: Pod | str) -> list[StatusWrite]:
        """Every write about ``pod``, accepted or not, oldest first."""
        uid = _uid(pod)
        return [w for w in self.writes if w.uid == uid]

    def uids(self) -> list[str]:
        """The pods a write is held for, in the order first written."""
        return list(self._latest)

    def forget(self, pod: Pod | str) -> None:
        """Drop what is held for ``pod`` (as the agent does once it is gone)."""
        self._latest.pop(_uid(pod), None)
