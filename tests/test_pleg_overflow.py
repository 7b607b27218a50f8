"""A full PLEG event channel: drops are counted and logged once, and the state converges.

The consumer is held back (no watcher at all) while many pods change, so most
events meet a full channel. Once it reads again, every pod's last change must
still reach it, and the pod cache must hold every pod's last state.
"""

from __future__ import annotations

import logging

import pytest
from test_pleg_generic import Collector, start_pod

from kubelet_kit.container.interfaces import ContainerState
from kubelet_kit.pleg import (
    EventChannel,
    EventedPLEG,
    GenericPLEG,
    PLEGMetrics,
    PodLifecycleEventType,
)
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED

CAPACITY = 4
PODS = 20  # a sandbox and a container each: 40 events per wave, ten times the capacity
FULL = "Event channel is full"


def discards(metrics: PLEGMetrics) -> float:
    value = metrics.registry.get_sample_value("kubelet_pleg_discard_events")
    assert value is not None
    return value


def full_lines(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if FULL in r.getMessage())


def seen(collector: Collector, kind: PodLifecycleEventType) -> set[tuple[str, str]]:
    return {(e.pod_uid, e.data) for e in collector.events if e.type is kind}


async def start_pods(runtime: FakeRuntime) -> dict[str, tuple[str, list[str]]]:
    return {f"u{i}": await start_pod(runtime, f"u{i}") for i in range(PODS)}


async def stop_all(runtime: FakeRuntime, pods: dict[str, tuple[str, list[str]]]) -> None:
    for _, cids in pods.values():
        for cid in cids:
            await runtime.stop_container(cid, 0)


def assert_converged(
    pleg: GenericPLEG | EventedPLEG,
    collector: Collector,
    pods: dict[str, tuple[str, list[str]]],
    state: ContainerState,
) -> None:
    kind = STARTED if state is ContainerState.RUNNING else DIED
    expected = {(uid, cid) for uid, (_, cids) in pods.items() for cid in cids}
    if state is ContainerState.RUNNING:
        expected |= {(uid, sid) for uid, (sid, _) in pods.items()}
    missing = expected - seen(collector, kind)
    assert not missing, f"{len(missing)} {kind.value} events never reached the consumer"
    for uid, (_, cids) in pods.items():
        status = pleg.cache.get(uid).status
        assert status is not None
        assert {c.id: c.state for c in status.container_statuses} == dict.fromkeys(cids, state)


async def test_generic_pleg_recovers_what_a_full_channel_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="kubelet_kit.pleg")
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    metrics = PLEGMetrics()
    channel = EventChannel(metrics, capacity=CAPACITY)
    pleg = GenericPLEG(runtime, clock, metrics=metrics, channel=channel)
    pods = await start_pods(runtime)
    async with pleg:
        # Nobody reads: the first relist fills the channel and drops the rest.
        await clock.run_for(0)
        assert discards(metrics) == 2 * PODS - CAPACITY
        # Relists into a full channel drop again (and count it), but log nothing
        # more: it is still the same episode.
        await clock.run_for(3.0)
        assert discards(metrics) > 2 * PODS - CAPACITY
        assert full_lines(caplog) == 1

        collector = Collector(pleg)
        await clock.run_for(10.0)
        assert_converged(pleg, collector, pods, ContainerState.RUNNING)
        assert len(channel) == 0
        await collector.close()

        # A second episode: every container dies while nobody reads.
        before = discards(metrics)
        await stop_all(runtime, pods)
        await clock.run_for(3.0)
        assert discards(metrics) >= before + PODS - CAPACITY
        assert full_lines(caplog) == 2

        collector = Collector(pleg)
        await clock.run_for(10.0)
        assert_converged(pleg, collector, pods, ContainerState.EXITED)
        await collector.close()
    assert full_lines(caplog) == 2


async def test_generic_pleg_gives_a_reading_consumer_room_before_dropping(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The kubelet's reader drains the channel while a relist sends: a relist that
    # finds ten times the capacity in changes loses nothing to a reader that keeps
    # up, and logs no overflow.
    caplog.set_level(logging.ERROR, logger="kubelet_kit.pleg")
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    metrics = PLEGMetrics()
    pleg = GenericPLEG(runtime, clock, metrics=metrics, channel=EventChannel(metrics, CAPACITY))
    pods = await start_pods(runtime)
    async with pleg:
        collector = Collector(pleg)
        await clock.run_for(0)
        assert discards(metrics) == 0
        assert_converged(pleg, collector, pods, ContainerState.RUNNING)
        await stop_all(runtime, pods)
        await clock.run_for(1.0)
        assert discards(metrics) == 0
        assert_converged(pleg, collector, pods, ContainerState.EXITED)
        await collector.close()
    assert full_lines(caplog) == 0


async def test_evented_pleg_relists_to_recover_what_a_full_channel_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="kubelet_kit.pleg")
    clock = FakeClock()
    runtime = FakeRuntime(clock, events=True)
    pleg = EventedPLEG(runtime, clock, channel_capacity=CAPACITY)
    async with pleg:
        await clock.run_for(0)  # the stream is open, the first relist found nothing
        # Nobody reads: the stream's events fill the channel, the rest are dropped.
        pods = await start_pods(runtime)
        await clock.run_for(0)
        assert discards(pleg.metrics) == 2 * PODS - CAPACITY
        assert full_lines(caplog) == 1
        assert not pleg.fallen_back  # the stream works; only the consumer is slow

        # The consumer reads again, far sooner than the 300 s safety relist: the
        # lost events come back from a relist.
        collector = Collector(pleg)
        await clock.run_for(5.0)
        assert_converged(pleg, collector, pods, ContainerState.RUNNING)
        await collector.close()

        before = discards(pleg.metrics)
        await stop_all(runtime, pods)
        await clock.run_for(0)
        assert discards(pleg.metrics) == before + PODS - CAPACITY
        assert full_lines(caplog) == 2

        collector = Collector(pleg)
        await clock.run_for(5.0)
        assert_converged(pleg, collector, pods, ContainerState.EXITED)
        await collector.close()
    assert full_lines(caplog) == 2
