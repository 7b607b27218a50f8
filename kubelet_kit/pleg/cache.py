"""PodCache: the newest known runtime status of every pod.

The PLEG writes it, the agent reads it. Its one invariant: an entry is never
replaced by an older one. An evented PLEG gets statuses from two sides, the
event stream and the safety relist, and they can arrive out of order; if a
relist status taken *before* a container started overwrote the event that
reported it running, the agent would read "not started yet" and start the
container a second time.

Timestamps are wall-clock seconds (a Clock's ``now()``), comparable with the
runtime's own event timestamps.
"""

from __future__ import annotations

import asyncio

import attrs

from kubelet_kit.container.pods import PodRuntimeStatus

__all__ = ["PodCache", "PodCacheEntry"]

# How long a deleted pod's deletion time is remembered, in seconds past the
# cache's global timestamp, so a late status from before the deletion cannot
# bring the pod back. Far longer than any inspection can take.
_TOMBSTONE_KEEP = 600.0


@attrs.frozen
class PodCacheEntry:
    """What the cache holds for one pod.

    Attributes:
        uid: The pod uid.
        status: The pod's status; None when the last inspection failed.
        error: The error of the last inspection, or None.
        timestamp: When the status was observed (wall-clock seconds); 0.0 for
            a pod the cache has never seen.
    """

    uid: str
    status: PodRuntimeStatus | None
    error: Exception | None = attrs.field(default=None, eq=False)
    timestamp: float = 0.0


class _Waiter:
    __slots__ = ("future", "min_time")

    def __init__(self, future: asyncio.Future[PodCacheEntry], min_time: float) -> None:
        self.future = future
        self.min_time = min_time


class PodCache:
    """Per-pod runtime status with "newer than" waits (the kubelet's pod cache).

    Not thread-safe: use it from one event loop.
    """

    def __init__(self) -> None:
        self._pods: dict[str, PodCacheEntry] = {}
        self._deleted: dict[str, float] = {}
        self._timestamp: float | None = None
        self._waiters: dict[str, list[_Waiter]] = {}

    # -- reads --------------------------------------------------------------------

    def get(self, uid: str) -> PodCacheEntry:
        """The entry for ``uid``; never blocks.

        A pod the cache does not hold gets an empty status (no sandboxes, no
        containers) with timestamp 0.0, as the kubelet's cache answers.
        """
        entry = self._pods.get(uid)
        return entry if entry is not None else _default_entry(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def uids(self) -> list[str]:
        """The uids of every pod held."""
        return list(self._pods)

    @property
    def timestamp(self) -> float | None:
        """The global timestamp: every pod's entry is at least this new (None: unset)."""
        return self._timestamp

    def newer_than(self, uid: str, t: float) -> PodRuntimeStatus | None:
        """The pod's status as known after time ``t``, without waiting; None when
        the cache knows nothing that new of it, or its last inspection failed.

        The same rule as :meth:`get_newer_than`: the pod's entry is newer than
        ``t``, or a relist that began after ``t`` found the pod unchanged (an
        unknown pod then has the empty status). Never blocks; does not raise.
        """
        ready = self._newer_than(uid, t)
        return None if ready is None else ready.status

    async def get_newer_than(self, uid: str, t: float) -> PodCacheEntry:
        """Wait until the cache knows ``uid`` as it was after time ``t``.

        Returns as soon as the pod's entry is newer than ``t``, or the global
        timestamp (set by each completed relist, see :meth:`update_time`) is newer
        than ``t``, in which case the pod's current entry is returned (the empty
        default if the pod is unknown): the relist saw no change for it.
        Newer means strictly later, as in the kubelet: a status stamped at the
        same instant as ``t`` may predate whatever happened at ``t``.

        Blocks; cancellable. Does not raise.
        """
        ready = self._newer_than(uid, t)
        if ready is not None:
            return ready
        future: asyncio.Future[PodCacheEntry] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(future, t)
        self._waiters.setdefault(uid, []).append(waiter)
        try:
            return await future
        finally:
            waiters = self._waiters.get(uid)
            if waiters is not None:
                if waiter in waiters:
                    waiters.remove(waiter)
                if not waiters:
                    del self._waiters[uid]

    # -- writes -------------------------------------------------------------------

    def set(
        self,
        uid: str,
        status: PodRuntimeStatus | None,
        error: Exception | None,
        timestamp: float,
    ) -> bool:
        """Store the pod's status (or the error inspecting it) observed at ``timestamp``.

        Never blocks. An entry already newer than ``timestamp`` is kept and the
        call is ignored; so is a status older than the pod's deletion.

        Returns:
            Whether the cache took it.
        """
        current = self._pods.get(uid)
        if current is not None and current.timestamp > timestamp:
            return False
        deleted_at = self._deleted.get(uid)
        if deleted_at is not None:
            if deleted_at > timestamp:
                return False
            del self._deleted[uid]
        entry = PodCacheEntry(uid, status, error, timestamp)
        self._pods[uid] = entry
        self._notify(uid)
        return True

    def delete(self, uid: str, timestamp: float | None = None) -> None:
        """Forget the pod. Never blocks; idempotent.

        Args:
            uid: The pod.
            timestamp: When the pod was seen gone. Given, a later :meth:`set` of a
                status observed before it is ignored, so a late status cannot bring
                a deleted pod back.
        """
        self._pods.pop(uid, None)
        if timestamp is not None:
            self._deleted[uid] = max(timestamp, self._deleted.get(uid, timestamp))

    def update_time(self, t: float) -> None:
        """Declare every entry current as of ``t`` (the start of a completed relist).

        Wakes the waiters of pods the relist found unchanged. The global timestamp
        never goes back. Never blocks.
        """
        if self._timestamp is not None and t <= self._timestamp:
            return
        self._timestamp = t
        if self._deleted:
            horizon = t - _TOMBSTONE_KEEP
            for uid in [u for u, at in self._deleted.items() if at < horizon]:
                del self._deleted[uid]
        for uid in list(self._waiters):
            self._notify(uid)

    # -- internals ----------------------------------------------------------------

    def _newer_than(self, uid: str, t: float) -> PodCacheEntry | None:
        entry = self._pods.get(uid)
        if entry is not None and entry.timestamp > t:
            return entry
        if self._timestamp is not None and self._timestamp > t:
            return entry if entry is not None else _default_entry(uid)
        return None

    def _notify(self, uid: str) -> None:
        waiters = self._waiters.get(uid)
        if not waiters:
            return
        remaining = []
        for waiter in waiters:
            if waiter.future.done():
                continue
            ready = self._newer_than(uid, waiter.min_time)
            if ready is None:
                remaining.append(waiter)
            else:
                waiter.future.set_result(ready)
        if remaining:
            self._waiters[uid] = remaining
        else:
            del self._waiters[uid]


def _default_entry(uid: str) -> PodCacheEntry:
    return PodCacheEntry(uid, PodRuntimeStatus(uid=uid), None, 0.0)
