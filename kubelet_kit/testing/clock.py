"""FakeClock: a Clock that only moves when a test says so."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

__all__ = ["FakeClock", "FakeTimerHandle"]


class FakeTimerHandle:
    """A timer registered on a :class:`FakeClock`."""

    def __init__(self, deadline: float, callback: Callable[[], object]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Cancel the timer; a cancelled timer never fires. Idempotent."""
        self.cancelled = True


class FakeClock:
    """A deterministic :class:`kubelet_kit.clock.Clock` for tests.

    Time stands still until :meth:`advance` (synchronous) or :meth:`run_for`
    (asynchronous) moves it. Every sleeper and timer whose deadline falls inside
    the step fires in deadline order, ties in the order they were registered, so
    a test sees exactly the interleaving it would see in real time.

    Args:
        start: The initial wall-clock time (seconds since the epoch).
        monotonic_start: The initial monotonic reading.
    """

    def __init__(self, start: float = 1_767_225_600.0, monotonic_start: float = 1000.0) -> None:
        self._wall_offset = start - monotonic_start
        self._mono = monotonic_start
        self._timers: list[tuple[float, int, FakeTimerHandle]] = []
        self._seq = itertools.count()

    # -- Clock protocol -------------------------------------------------------------

    def now(self) -> float:
        """Current fake wall time."""
        return self._mono + self._wall_offset

    def monotonic(self) -> float:
        """Current fake monotonic time."""
        return self._mono

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced by ``seconds``.

        ``seconds <= 0`` yields to the loop once, like ``asyncio.sleep(0)``.
        """
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.call_later(seconds, wake)
        try:
            await fut
        finally:
            handle.cancel()

    def call_later(self, delay: float, callback: Callable[[], object]) -> FakeTimerHandle:
        """Register ``callback`` to run when the clock reaches now + ``delay``."""
        handle = FakeTimerHandle(self._mono + max(0.0, delay), callback)
        heapq.heappush(self._timers, (handle.deadline, next(self._seq), handle))
        return handle

    # -- test controls --------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Number of timers and sleepers that have not fired or been cancelled."""
        return sum(1 for _, _, h in self._timers if not h.cancelled)

    def next_deadline(self) -> float | None:
        """Monotonic time of the earliest pending timer, or None if there is none."""
        self._drop_cancelled()
        return self._timers[0][0] if self._timers else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer due on the way.

        Timers fire synchronously, in deadline order; a sleeper woken here resumes
        the next time the test yields to the event loop. Timers registered by code
        that runs only after this returns are not fired by this call: use
        :meth:`run_for` to let loops that sleep again run through the interval.
        """
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        target = self._mono + seconds
        while True:
            self._drop_cancelled()
            if not self._timers or self._timers[0][0] > target:
                break
            deadline, _, handle = heapq.heappop(self._timers)
            self._mono = max(self._mono, deadline)
            handle.cancelled = True
            handle.callback()
        self._mono = target

    def set_wall_time(self, wall: float) -> None:
        """Jump wall time (``now()``) without moving monotonic time or firing timers."""
        self._wall_offset = wall - self._mono

    async def settle(self, rounds: int = 50) -> None:
        """Let every task that can run, run, until all wait on something.

        Yields to the event loop at least ``rounds`` times, and then as long as the
        loop still has callbacks ready (bounded), so that a chain of awaits woken
        by one timer completes before time moves again. (The check reads the
        running loop's ready queue, an implementation detail of CPython's asyncio
        loops; elsewhere exactly ``rounds`` yields are made.)
        """
        for _ in range(rounds):
            await asyncio.sleep(0)
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        if ready is None:
            return
        for _ in range(100_000):
            if not ready:
                # Twice in a row empty: nothing woke in between.
                await asyncio.sleep(0)
                if not ready:
                    return
            await asyncio.sleep(0)

    async def run_for(self, seconds: float, *, settle_rounds: int = 50) -> None:
        """Let ``seconds`` pass as if in real time.

        Steps from one deadline to the next, and after each step yields to the
        event loop so woken tasks run and may schedule further timers inside the
        interval, which then fire too. Ends at exactly now + ``seconds``.
        """
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        target = self._mono + seconds
        await self.settle(settle_rounds)
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > target:
                break
            self.advance(max(0.0, nxt - self._mono))
            await self.settle(settle_rounds)
        self.advance(target - self._mono)
        await self.settle(settle_rounds)

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
