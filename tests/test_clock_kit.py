"""The Clock kit against the real clock, the fake clock and clocks that break it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kubelet_kit.clock import RealClock, TimerHandle
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.clock_kit import CHECKS, ClockConformance, check_clock
from kubelet_kit.testing.conformance import ConformanceFailure


class TestRealClock(ClockConformance):
    def make(self) -> RealClock:
        return RealClock()


class TestFakeClock(ClockConformance):
    def make(self) -> FakeClock:
        return FakeClock()


async def test_check_clock_passes_both_clocks() -> None:
    for factory in (RealClock, FakeClock):
        report = await check_clock(factory)
        assert [r.status for r in report.results] == ["passed"] * len(CHECKS)


class BackwardsClock(FakeClock):
    """Monotonic time that steps back now and then."""

    _reads = 0

    def monotonic(self) -> float:
        self._reads += 1
        return super().monotonic() - (1.0 if self._reads % 100 == 0 else 0.0)


class FifoTimersClock(RealClock):
    """Fires every timer at the earliest deadline asked for, in the order set."""

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(0.0, callback)


class UncancellableClock(FakeClock):
    """A timer handle whose cancel does nothing."""

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        handle = super().call_later(delay, callback)

        class Stuck:
            def cancel(self) -> None:
                pass

        _ = handle
        return Stuck()


@pytest.mark.parametrize(
    ("clock", "failing"),
    [
        (BackwardsClock, {"monotonic_never_goes_back"}),
        (FifoTimersClock, {"timers_fire_in_deadline_order", "wait_for_times_out_on_the_clock"}),
        (UncancellableClock, {"cancelled_timer_never_fires"}),
    ],
)
async def test_broken_clocks_fail_the_checks_about_their_defect(
    clock: type, failing: set[str]
) -> None:
    with pytest.raises(ConformanceFailure) as caught:
        await check_clock(clock)
    assert {r.name for r in caught.value.report.failures} == failing, caught.value.report.summary()
