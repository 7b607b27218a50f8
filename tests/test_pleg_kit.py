"""The PLEG kit against every PLEG the project has, and against broken ones it must fail.

GenericPLEG, EventedPLEG (over a FakeRuntime with its event stream on) and the
FakePLEG following a runtime pass the same checks; each broken PLEG below has one
defect of the kind the agent would suffer from, and fails the checks about it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import Runtime
from kubelet_kit.pleg import (
    PLEG,
    EventChannel,
    EventedPLEG,
    GenericPLEG,
    PLEGMetrics,
    PodCache,
    PodLifecycleEvent,
)
from kubelet_kit.testing import ConformanceFailure
from kubelet_kit.testing.fake_pleg import FakePLEG
from kubelet_kit.testing.kit import KitContext
from kubelet_kit.testing.pleg_kit import CHECKS, PLEGConformance, check_pleg, pleg_kit_options

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "custom_pleg.py"

# ------------------------------------------------------------- the project's PLEGs


class TestGenericPLEG(PLEGConformance):
    def make(self, ctx: KitContext[PLEG]) -> PLEG:
        return GenericPLEG(ctx.options["runtime"], ctx.options["clock"])


class TestEventedPLEG(PLEGConformance):
    def make(self, ctx: KitContext[PLEG]) -> PLEG:
        return EventedPLEG(ctx.options["runtime"], ctx.options["clock"])

    def kit_options(self) -> dict[str, Any]:
        # The safety relist every 300 s while the stream works; without a runtime
        # it falls back to relisting every second, with the 3-minute threshold.
        return pleg_kit_options(relist_period=300.0)


class TestFakePLEG(PLEGConformance):
    def make(self, ctx: KitContext[PLEG]) -> PLEG:
        return FakePLEG.following(ctx.options["runtime"], ctx.options["clock"])


#: The checks a PLEG passes without reporting container events: the example's bus
#: PLEG sends PodSync for the pods announced on its bus, by design.
LIFECYCLE_CHECKS = [
    "protocol_shape",
    "update_cache_inspects_one_pod",
    "run_twice_refused",
    "healthy_while_relisting",
    "unhealthy_when_relisting_stalls",
    "relists_every_period",
]


async def test_the_example_bus_pleg_keeps_the_lifecycle_contract() -> None:
    spec = importlib.util.spec_from_file_location("custom_pleg_kit_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    report = await check_pleg(
        lambda ctx: example.BusPLEG(ctx.options["runtime"], asyncio.Queue(), ctx.options["clock"]),
        names=LIFECYCLE_CHECKS,
        relist_threshold=None,  # it does not relist: the relist checks skip
        relist_period=None,
    )
    assert [r.status for r in report.results] == ["passed"] * 4 + ["skipped"] * 2


async def test_evented_pleg_without_a_stream_passes_as_a_generic_one() -> None:
    from kubelet_kit.testing import FakeRuntime

    report = await check_pleg(
        lambda ctx: EventedPLEG(ctx.options["runtime"], ctx.options["clock"]),
        runtime_factory=lambda clock: FakeRuntime(clock, events=False),
    )
    assert report.ok and not any(r.status == "skipped" for r in report.results)


async def test_check_pleg_runs_every_check_on_a_fresh_runtime() -> None:
    runtimes: list[object] = []

    def factory(ctx: KitContext[PLEG]) -> PLEG:
        runtimes.append(ctx.options["runtime"])
        return FakePLEG.following(ctx.options["runtime"], ctx.options["clock"])

    report = await check_pleg(factory)
    assert [r.name for r in report.results] == list(CHECKS)
    assert report.ok, report.summary()
    assert len({id(r) for r in runtimes}) == len(CHECKS)


async def test_relist_checks_skip_with_a_reason_when_told_there_is_no_relist() -> None:
    report = await check_pleg(
        lambda ctx: GenericPLEG(ctx.options["runtime"], ctx.options["clock"]),
        names=["unhealthy_when_relisting_stalls", "relists_every_period"],
        relist_threshold=None,
        relist_period=None,
    )
    assert [r.status for r in report.results] == ["skipped", "skipped"]
    assert "relist_threshold is None" in report.result("unhealthy_when_relisting_stalls").message


def test_options_refuse_a_shared_runtime_and_unknown_settings() -> None:
    options = pleg_kit_options(event_latency=2.0)
    assert options["event_latency"] == 2.0
    assert options["runtime"].clock is options["clock"]
    assert pleg_kit_options()["runtime"] is not pleg_kit_options()["runtime"]
    with pytest.raises(ValueError, match="runtime_factory"):
        pleg_kit_options(runtime=object())
    with pytest.raises(ValueError, match="unknown PLEG kit option"):
        pleg_kit_options(relist_perod=1.0)


# ----------------------------------------------------------------- broken PLEGs


class AlwaysHealthy(GenericPLEG):
    """Never reports a problem (a stuck relist goes unnoticed by the node)."""

    def healthy(self) -> tuple[bool, str]:
        return True, ""


class IgnoresStop(GenericPLEG):
    """stop() does nothing: the agent cannot shut down."""

    def stop(self) -> None:
        pass


class Unbounded(GenericPLEG):
    """Queues without limit: a stuck reader makes it grow forever."""

    def __init__(self, runtime: Runtime, clock: Clock) -> None:
        metrics = PLEGMetrics()
        super().__init__(runtime, clock, metrics=metrics, channel=EventChannel(metrics, 10**6))
        self._owns_channel = True


class Forgetful(GenericPLEG):
    """Forgets what it saw: reports every container again on every relist."""

    async def relist(self) -> bool:
        self._records.clear()
        self._last_listing = None
        return await super().relist()


class Restless(GenericPLEG):
    """Never waits for its relist period: relists again at once, forever."""

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(0)


class Reversing(GenericPLEG):
    """Sends each relist's events in reverse order."""

    def __init__(self, runtime: Runtime, clock: Clock) -> None:
        metrics = PLEGMetrics()
        self.out = EventChannel(metrics)
        super().__init__(runtime, clock, metrics=metrics, channel=self.out)
        self.batch: list[PodLifecycleEvent] = []
        self.on_event = self._hold

    def _hold(self, event: PodLifecycleEvent) -> bool:
        self.batch.append(event)
        return False

    async def relist(self) -> bool:
        ok = await super().relist()
        for event in reversed(self.batch):
            self.out.send(event)
        self.batch.clear()
        return ok

    async def run(self) -> None:
        self.out.open()
        try:
            await super().run()
        finally:
            self.out.close()


class LateCache:
    """Updates the cache the agent reads only after the event was delivered."""

    def __init__(self, runtime: Runtime, clock: Clock) -> None:
        self.inner = GenericPLEG(runtime, clock)
        self._cache = PodCache()

    @property
    def cache(self) -> PodCache:
        return self._cache

    async def run(self) -> None:
        await self.inner.run()

    def stop(self) -> None:
        self.inner.stop()

    def healthy(self) -> tuple[bool, str]:
        return self.inner.healthy()

    async def update_cache(self, pod_uid: str) -> bool:
        return await self.inner.update_cache(pod_uid)

    async def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        async for event in self.inner.watch():
            yield event
            entry = self.inner.cache.get(event.pod_uid)
            self._cache.set(event.pod_uid, entry.status, entry.error, entry.timestamp)


BROKEN: list[tuple[Callable[[Runtime, Clock], Any], set[str]]] = [
    (AlwaysHealthy, {"healthy_while_relisting", "unhealthy_when_relisting_stalls"}),
    (
        IgnoresStop,
        {"stop_ends_watch", "stop_delivers_queued_events", "full_queue_drops_instead_of_blocking"},
    ),
    (Unbounded, {"full_queue_drops_instead_of_blocking"}),
    (Forgetful, {"reports_started_containers", "quiet_when_nothing_changes"}),
    (Reversing, {"orders_events_of_a_pod", "reports_removal_of_running_containers"}),
    (LateCache, {"cache_updated_before_events", "update_cache_inspects_one_pod"}),
]


@pytest.mark.parametrize(
    ("broken", "failing"), BROKEN, ids=[getattr(b, "__name__", "?") for b, _ in BROKEN]
)
async def test_the_kit_fails_a_broken_pleg(
    broken: Callable[[Runtime, Clock], PLEG], failing: set[str]
) -> None:
    with pytest.raises(ConformanceFailure) as caught:
        await check_pleg(
            lambda ctx: broken(ctx.options["runtime"], ctx.options["clock"]),
            names=sorted(failing),
        )
    report = caught.value.report
    assert {r.name for r in report.failures} == failing, report.summary()


async def test_a_broken_pleg_fails_the_whole_kit_and_passes_what_it_gets_right() -> None:
    with pytest.raises(ConformanceFailure) as caught:
        await check_pleg(lambda ctx: AlwaysHealthy(ctx.options["runtime"], ctx.options["clock"]))
    report = caught.value.report
    assert {r.name for r in report.failures} == {
        "healthy_while_relisting",
        "unhealthy_when_relisting_stalls",
    }
    assert report.result("reports_started_containers").status == "passed"
    assert "still healthy 181s after the last relist" in str(caught.value)


async def test_a_pleg_that_never_waits_fails_on_the_time_limit() -> None:
    # Restless relists again at once after each relist: it never waits on the
    # clock, so the fake clock never gets to move time on.
    with pytest.raises(ConformanceFailure, match=r"still running after 0\.5s of real time"):
        await check_pleg(
            lambda ctx: Restless(ctx.options["runtime"], ctx.options["clock"]),
            names=["dropped_events_are_sent_again"],
            time_limit=0.5,
        )
