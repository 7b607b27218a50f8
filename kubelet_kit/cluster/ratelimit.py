"""The API client's request budget: client-go's token bucket rate limiter.

The kubelet builds its API client with ``flowcontrol.NewTokenBucketRateLimiter(
kubeAPIQPS, kubeAPIBurst)``: the bucket holds at most ``burst`` tokens, refills at
``qps`` tokens a second, and every request takes one token before it is sent,
waiting until one is due. A burst of ``burst`` requests therefore goes out at once
and the rest at ``qps`` a second.

The bucket works like ``golang.org/x/time/rate.Limiter``: taking a token is a
reservation made under a lock, which may leave the bucket in debt, and the taker
then sleeps on the injected clock until its token is due. Reservations are served
in the order they were made, and because the reservation itself is a plain
synchronous step, one bucket can be shared by clients on different event loops
and threads.
"""

from __future__ import annotations

import threading

from kubelet_kit.clock import Clock, RealClock

__all__ = ["TokenBucket"]


class TokenBucket:
    """A token bucket of ``burst`` tokens refilled at ``qps`` tokens a second.

    The bucket starts full. Time comes from ``clock`` (its ``monotonic()`` for the
    refill, its ``sleep()`` for the wait), so a test on a
    :class:`kubelet_kit.testing.FakeClock` sees the budget without waiting.

    Args:
        qps: Tokens added per second; greater than zero.
        burst: Tokens the bucket holds at most (requests that may go at once);
            at least 1.
        clock: The clock to read and sleep on (default: the machine's).

    Raises:
        ValueError: ``qps`` is not greater than zero or ``burst`` is below 1
            (naming the argument).
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        if not qps > 0:
            raise ValueError(f"qps: {qps!r} must be greater than zero")
        if burst < 1:
            raise ValueError(f"burst: {burst!r} must be at least 1")
        self.qps = float(qps)
        self.burst = int(burst)
        self.clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = self.clock.monotonic()

    def reserve(self) -> float:
        """Take one token now, and say when it is due.

        Never blocks (beyond a lock held for a few arithmetic steps); thread-safe.
        The token is taken even when it is not there yet: the bucket goes into
        debt, so later reservations are due later, in order.

        Returns:
            Seconds to wait before the request may be sent; 0 when a token was there.
        """
        with self._lock:
            now = self.clock.monotonic()
            # Refill for the time since the last reservation, never above burst;
            # a clock that stood still (or a debt) adds nothing.
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = max(self._last, now)
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.qps

    async def acquire(self) -> float:
        """Wait until this caller's token is due (at once when one is there).

        Cancellable. A caller cancelled while waiting leaves its token spent, so
        the requests sent never exceed the budget (the slot is lost, not reused).

        Returns:
            The seconds waited (0 when a token was there).
        """
        delay = self.reserve()
        if delay > 0:
            await self.clock.sleep(delay)
        return delay

    def tokens(self) -> float:
        """Tokens in the bucket now (negative while callers wait). Never blocks."""
        with self._lock:
            elapsed = max(0.0, self.clock.monotonic() - self._last)
            return min(float(self.burst), self._tokens + elapsed * self.qps)

    def __repr__(self) -> str:
        return f"TokenBucket(qps={self.qps:g}, burst={self.burst})"
