"""The Clock conformance kit: what every loop of the agent relies on from its clock.

Every period, deadline and back-off of kubelet-kit reads an injected
:class:`~kubelet_kit.clock.Clock`; a clock of your own (one driven by a simulation,
say) must keep the same promises as :class:`~kubelet_kit.clock.RealClock` and
:class:`~kubelet_kit.testing.FakeClock`, which both pass this kit::

    from kubelet_kit.testing.clock_kit import check_clock

    async def test_my_clock():
        await check_clock(MyClock, let_pass=my_clock_advance)

or, one pytest case per check::

    class TestMyClock(ClockConformance):
        def make(self):
            return MyClock()

Time passes through the ``let_pass(clock, seconds)`` option: by default a
clock's own ``run_for(seconds)`` when it has one (FakeClock), else a real
``asyncio.sleep``. The kit works in units of :data:`UNIT` seconds so a real clock
passes it in well under a second.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubelet_kit.clock import Clock, wait_for
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "UNIT", "ClockConformance", "check_clock"]

#: The kit's unit of time in seconds: short enough for a real clock to be quick,
#: long enough for the event loop's own scheduling jitter to stay well inside it.
UNIT = 0.05

LetPass = Callable[[Clock, float], Awaitable[None]]


async def _default_let_pass(clock: Clock, seconds: float) -> None:
    run_for = getattr(clock, "run_for", None)
    if callable(run_for):
        await run_for(seconds)
    else:
        await asyncio.sleep(seconds)


def _let_pass(ctx: KitContext[Clock]) -> LetPass:
    given = ctx.options.get("let_pass")
    return given if given is not None else _default_let_pass


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _check_monotonic_never_goes_back(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    ctx.at("read monotonic() many times")
    readings = [clock.monotonic() for _ in range(1000)]
    ctx.expect(
        all(b >= a for a, b in itertools.pairwise(readings)),
        "monotonic() went backwards between two readings",
    )
    ctx.at(f"let {2 * UNIT:g}s pass")
    before = clock.monotonic()
    await _let_pass(ctx)(clock, 2 * UNIT)
    moved = clock.monotonic() - before
    ctx.expect(moved >= 2 * UNIT * 0.99, f"monotonic() moved {moved:g}s over {2 * UNIT:g}s")


async def _check_now_moves_with_monotonic(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    ctx.at("now() is seconds since the epoch")
    now = clock.now()
    ctx.expect(isinstance(now, float) and now > 0, f"now() is {now!r}")
    ctx.at(f"let {4 * UNIT:g}s pass")
    wall, mono = clock.now(), clock.monotonic()
    await _let_pass(ctx)(clock, 4 * UNIT)
    d_wall, d_mono = clock.now() - wall, clock.monotonic() - mono
    # Wall time may be stepped on a real machine; over a fraction of a second it
    # moves with monotonic time.
    ctx.expect(
        abs(d_wall - d_mono) < 2 * UNIT,
        f"now() moved {d_wall:g}s while monotonic() moved {d_mono:g}s",
    )


async def _check_sleep_waits_its_time(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    let_pass = _let_pass(ctx)
    ctx.at(f"sleep({4 * UNIT:g}) in a task")
    start = clock.monotonic()
    task = asyncio.ensure_future(clock.sleep(4 * UNIT))
    ctx.defer(task.cancel)
    await let_pass(clock, 2 * UNIT)
    ctx.expect(not task.done(), f"sleep({4 * UNIT:g}) returned after {2 * UNIT:g}s")
    ctx.at("let the rest of its time pass")
    await let_pass(clock, 3 * UNIT)
    await _settle()
    ctx.expect(task.done(), f"sleep({4 * UNIT:g}) had not returned after {5 * UNIT:g}s")
    slept = clock.monotonic() - start
    ctx.expect(slept >= 4 * UNIT * 0.99, f"sleep({4 * UNIT:g}) took {slept:g}s of the clock")


async def _check_sleep_of_nothing_yields(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    for seconds in (0.0, -1.0):
        ctx.at(f"sleep({seconds:g})")
        started = time.monotonic()
        try:
            async with asyncio.timeout(1.0):
                await clock.sleep(seconds)
        except TimeoutError:
            ctx.fail(f"sleep({seconds:g}) did not return without time passing")
        ctx.expect(time.monotonic() - started < 1.0, f"sleep({seconds:g}) blocked")


async def _check_sleep_is_cancellable(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    ctx.at("cancel a sleep(3600)")
    task = asyncio.ensure_future(clock.sleep(3600))
    await _settle()
    task.cancel()
    try:
        async with asyncio.timeout(1.0):
            await task
    except asyncio.CancelledError:
        pass
    except TimeoutError:
        ctx.fail("a cancelled sleep did not end within 1s")
    else:
        ctx.fail("a cancelled sleep returned instead of raising CancelledError")


async def _check_timers_fire_in_deadline_order(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    fired: list[str] = []
    ctx.at("call_later 3, 1 and 2 units")
    handles = [
        clock.call_later(3 * UNIT, lambda: fired.append("third")),
        clock.call_later(1 * UNIT, lambda: fired.append("first")),
        clock.call_later(2 * UNIT, lambda: fired.append("second")),
    ]
    for handle in handles:
        ctx.defer(handle.cancel)
    await _settle()
    ctx.expect_eq("fired before any time passed", fired, [])
    ctx.at(f"let {1.5 * UNIT:g}s pass")
    await _let_pass(ctx)(clock, 1.5 * UNIT)
    await _settle()
    ctx.expect_eq(f"fired after {1.5 * UNIT:g}s", fired, ["first"])
    ctx.at(f"let {2 * UNIT:g}s more pass")
    await _let_pass(ctx)(clock, 2 * UNIT)
    await _settle()
    ctx.expect_eq("the order timers fired in", fired, ["first", "second", "third"])


async def _check_cancelled_timer_never_fires(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    fired: list[str] = []
    ctx.at("cancel a timer before its deadline")
    handle = clock.call_later(UNIT, lambda: fired.append("cancelled"))
    kept = clock.call_later(UNIT, lambda: fired.append("kept"))
    handle.cancel()
    handle.cancel()  # idempotent
    await _let_pass(ctx)(clock, 2 * UNIT)
    await _settle()
    ctx.expect_eq("timers fired", fired, ["kept"])
    ctx.at("cancel a timer that has fired")
    kept.cancel()


async def _check_wait_for_times_out_on_the_clock(ctx: KitContext[Clock]) -> None:
    clock = ctx.subject
    ctx.at(f"wait_for(clock, sleep(3600), {2 * UNIT:g})")
    task = asyncio.ensure_future(wait_for(clock, clock.sleep(3600), 2 * UNIT))
    ctx.defer(task.cancel)
    await _let_pass(ctx)(clock, 3 * UNIT)
    await _settle()
    ctx.expect(task.done(), f"wait_for had not given up after {3 * UNIT:g}s")
    ctx.expect(
        isinstance(task.exception(), TimeoutError),
        f"wait_for ended with {task.exception()!r}, not TimeoutError",
    )
    ctx.at("wait_for of something quicker than its timeout")
    result = asyncio.ensure_future(wait_for(clock, _value_after(clock, UNIT), 4 * UNIT))
    ctx.defer(result.cancel)
    await _let_pass(ctx)(clock, 2 * UNIT)
    await _settle()
    ctx.expect(result.done() and result.result() == "done", "wait_for lost the result")


async def _value_after(clock: Clock, seconds: float) -> str:
    await clock.sleep(seconds)
    return "done"


#: Every check, by name, in the order they run.
CHECKS: dict[str, KitCheck[Clock]] = {
    "monotonic_never_goes_back": _check_monotonic_never_goes_back,
    "now_moves_with_monotonic": _check_now_moves_with_monotonic,
    "sleep_waits_its_time": _check_sleep_waits_its_time,
    "sleep_of_nothing_yields": _check_sleep_of_nothing_yields,
    "sleep_is_cancellable": _check_sleep_is_cancellable,
    "timers_fire_in_deadline_order": _check_timers_fire_in_deadline_order,
    "cancelled_timer_never_fires": _check_cancelled_timer_never_fires,
    "wait_for_times_out_on_the_clock": _check_wait_for_times_out_on_the_clock,
}


async def check_clock(
    factory: Callable[..., Any],
    *,
    let_pass: LetPass | None = None,
    names: list[str] | None = None,
) -> ConformanceReport:
    """Run the Clock kit against clocks built by ``factory`` (one per check).

    Args:
        factory: Builds the clock under test (may take the check's KitContext).
        let_pass: Lets ``seconds`` of the clock's time pass (default: its
            ``run_for`` if it has one, else a real sleep).
        names: The checks to run (default: all of :data:`CHECKS`).

    Returns:
        The report, when no check failed.

    Raises:
        ConformanceFailure: a check failed; its message lists every result.
    """
    report = await run_kit(CHECKS, factory, names=names, options={"let_pass": let_pass})
    report.raise_for_failures()
    return report


def _options(test: Any) -> Mapping[str, Any]:
    return {"let_pass": getattr(test, "let_pass", None)}


ClockConformance = kit_test_class(
    "ClockConformance",
    CHECKS,
    doc="""Subclass to run the Clock kit: define ``make(self)`` returning a clock, and
    optionally ``let_pass`` (an async ``(clock, seconds)`` function, as a
    staticmethod) when the clock's time is moved some other way than ``run_for``.""",
    options=_options,
)
