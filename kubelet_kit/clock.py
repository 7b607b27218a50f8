"""Time, injected.

Every period, deadline and back-off in kubelet-kit reads a :class:`Clock`, never
``time`` or ``asyncio.sleep`` directly. Production code gets :class:`RealClock`;
tests get :class:`kubelet_kit.testing.FakeClock`, whose ``advance(seconds)`` lets
hours of probe periods and eviction grace periods pass in milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Clock", "RealClock", "TimerHandle", "wait_for"]

T = TypeVar("T")


@runtime_checkable
class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled."""

    def cancel(self) -> None:
        """Cancel the callback if it has not run yet. Idempotent."""


@runtime_checkable
class Clock(Protocol):
    """The source of all time.

    ``now()`` is wall time (seconds since the epoch, for timestamps a user reads);
    ``monotonic()`` never goes backwards (for durations and deadlines).
    """

    def now(self) -> float:
        """Wall-clock time in seconds since the Unix epoch. Never blocks."""

    def monotonic(self) -> float:
        """Monotonic time in seconds. Never blocks."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time. Cancellable; ``<= 0`` yields once."""

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` on the event loop after ``delay`` seconds of this clock."""


class RealClock:
    """The clock of the machine: ``time.time``, ``time.monotonic``, the asyncio loop."""

    def now(self) -> float:
        """Return ``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep on the running event loop."""
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Schedule ``callback`` with the running loop's ``call_later``."""
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


async def wait_for(clock: Clock, awaitable: Awaitable[T], timeout: float | None) -> T:
    """Await ``awaitable`` but give up after ``timeout`` seconds of ``clock`` time.

    Like :func:`asyncio.wait_for`, except the deadline is measured on the injected
    clock, so a FakeClock test can make an operation time out without waiting.

    Raises:
        TimeoutError: the deadline passed first; the awaitable is cancelled.
    """
    if timeout is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    timed_out = False

    def expire() -> None:
        nonlocal timed_out
        if not task.done():
            timed_out = True
            task.cancel()

    handle = clock.call_later(timeout, expire)
    try:
        return await task
    except asyncio.CancelledError:
        if timed_out:
            raise TimeoutError(f"timed out after {timeout:g}s") from None
        raise
    finally:
        handle.cancel()
        if not task.done():
            task.cancel()
