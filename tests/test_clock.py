"""FakeClock and the clock-based wait_for."""

from __future__ import annotations

import asyncio

import pytest

from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.testing import FakeClock


def test_both_clocks_satisfy_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(FakeClock(), Clock)


async def test_sleepers_wake_in_deadline_order_then_registration_order() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [
        asyncio.create_task(sleeper(name, secs))
        for name, secs in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2), ("late", 10)]
    ]
    await clock.settle()
    clock.advance(2.5)
    await clock.settle()
    assert woke == ["a", "b1", "b2"]
    clock.advance(0.5)
    await clock.settle()
    assert woke == ["a", "b1", "b2", "c"]
    assert not tasks[4].done()
    tasks[4].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert clock.pending == 0


async def test_time_moves_only_when_advanced() -> None:
    clock = FakeClock(start=1000.0, monotonic_start=5.0)
    assert (clock.now(), clock.monotonic()) == (1000.0, 5.0)
    clock.advance(1.25)
    assert (clock.now(), clock.monotonic()) == (1001.25, 6.25)
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_timer_sees_its_own_deadline_as_now() -> None:
    clock = FakeClock(monotonic_start=0.0)
    seen: list[float] = []
    clock.call_later(3, lambda: seen.append(clock.monotonic()))
    clock.call_later(1, lambda: seen.append(clock.monotonic()))
    cancelled = clock.call_later(2, lambda: seen.append(-1))
    cancelled.cancel()
    clock.advance(10)
    assert seen == [1.0, 3.0]
    assert clock.monotonic() == 10.0


async def test_run_for_lets_a_periodic_loop_tick_every_period() -> None:
    clock = FakeClock(monotonic_start=0.0)
    ticks: list[float] = []

    async def loop() -> None:
        while True:
            ticks.append(clock.monotonic())
            await clock.sleep(1.0)

    task = asyncio.create_task(loop())
    await clock.run_for(5.0)
    # advance() alone would only fire the first sleep; run_for lets each new one fire.
    assert ticks == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_wait_for_times_out_on_the_fake_clock_without_sleeping() -> None:
    clock = FakeClock()
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(wait_for(clock, never, 5.0))
    await clock.settle()
    clock.advance(4.9)
    await clock.settle()
    assert not waiter.done()
    clock.advance(0.1)
    with pytest.raises(TimeoutError):
        await waiter
    assert never.cancelled()


async def test_wait_for_returns_the_result_and_cancels_its_timer() -> None:
    clock = FakeClock()

    async def quick() -> int:
        await clock.sleep(1)
        return 7

    waiter = asyncio.create_task(wait_for(clock, quick(), 5.0))
    await clock.run_for(1)
    assert await waiter == 7
    assert clock.pending == 0


async def test_wait_for_propagates_outer_cancellation() -> None:
    clock = FakeClock()
    inner: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(wait_for(clock, inner, 5.0))
    await clock.settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert inner.cancelled()
