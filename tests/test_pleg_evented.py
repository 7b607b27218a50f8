"""EventedPLEG on FakeRuntime + FakeClock: event mapping, fallback, recovery, races."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from test_pleg_generic import (
    Collector,
    container_config,
    sandbox_config,
    settle,
    start_container,
    start_pod,
)

from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import ContainerStartError, RuntimeUnavailableError
from kubelet_kit.pleg import PLEG, EventedPLEG, PodCache, PodLifecycleEventType
from kubelet_kit.pleg.evented import pod_status_from_event
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED
REMOVED = PodLifecycleEventType.CONTAINER_REMOVED


def relists(runtime: FakeRuntime) -> int:
    """Full listings (inspections list one pod, with a filter)."""
    return sum(1 for c in runtime.calls_to("list_pod_sandboxes") if c.args[0] is None)


def metric(pleg: EventedPLEG, name: str, labels: dict[str, str] | None = None) -> float | None:
    return pleg.metrics.registry.get_sample_value(name, labels or {})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def running(clock: FakeClock) -> AsyncIterator[tuple[EventedPLEG, FakeRuntime, Collector]]:
    runtime = FakeRuntime(clock, events=True)
    pleg = EventedPLEG(runtime, clock)
    events = Collector(pleg)
    task = asyncio.create_task(pleg.run())
    await clock.run_for(0)
    yield pleg, runtime, events
    pleg.stop()
    await asyncio.wait_for(task, 1)
    await events.close()


def test_satisfies_the_protocol() -> None:
    assert isinstance(EventedPLEG(FakeRuntime()), PLEG)


def test_rejects_bad_settings_naming_them() -> None:
    with pytest.raises(ValueError, match="max_stream_retries"):
        EventedPLEG(FakeRuntime(), max_stream_retries=0)
    with pytest.raises(ValueError, match="initial_backoff"):
        EventedPLEG(FakeRuntime(), initial_backoff=0)


async def test_events_map_as_the_kubelet_does(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, events = running
    assert relists(runtime) == 1 and not pleg.fallen_back

    sid = await runtime.run_pod_sandbox(sandbox_config("u1"))  # CREATED + STARTED
    cid = await runtime.create_container(sid, container_config("u1", "app"), sandbox_config("u1"))
    assert await events.take() == [("u1", STARTED, sid)]  # CREATED: cache only
    status = pleg.cache.get("u1").status
    assert status is not None
    created = status.find_container_status("app")
    assert created is not None and created.state is ContainerState.CREATED

    clock.advance(1)
    await runtime.start_container(cid)
    assert await events.take() == [("u1", STARTED, cid)]
    entry = pleg.cache.get("u1")
    assert entry.timestamp == clock.now()  # the event's own time
    assert entry.status is not None and entry.status.ips

    runtime.exit_container(cid, 1)
    assert await events.take() == [("u1", DIED, cid)]
    await runtime.remove_container(cid)
    assert await events.take() == [("u1", DIED, cid), ("u1", REMOVED, cid)]

    await runtime.remove_pod_sandbox(sid)
    got = await events.take()
    assert ("u1", REMOVED, sid) in got
    assert "u1" not in pleg.cache
    # All of it without relisting.
    assert relists(runtime) == 1


async def test_safety_relist_every_300s(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, _ = running
    await clock.run_for(299)
    assert relists(runtime) == 1
    await clock.run_for(1)
    assert relists(runtime) == 2
    clock.advance(599)
    assert pleg.healthy() == (True, "")
    clock.advance(2)
    ok, message = pleg.healthy()
    assert not ok and message.endswith("threshold is 10m0s")


async def test_falls_back_at_once_when_the_runtime_has_no_stream(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, events=False)
    pleg = EventedPLEG(runtime, clock)
    events = Collector(pleg)
    async with pleg:
        await clock.run_for(0)
        assert pleg.fallen_back
        assert pleg.generic.relist_period == 1.0 and pleg.generic.relist_threshold == 180.0
        sid, (cid,) = await start_pod(runtime, "u1")
        await clock.run_for(1.0)
        assert set(await events.take()) == {("u1", STARTED, sid), ("u1", STARTED, cid)}
        before = relists(runtime)
        await clock.run_for(5.0)
        assert relists(runtime) == before + 5
        assert metric(pleg, "kubelet_evented_pleg_connection_error_count") == 1.0
        assert metric(pleg, "kubelet_evented_pleg_connection_success_count") == 0.0
    await events.close()


async def test_recovers_when_the_stream_comes_back(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, events=False)
    pleg = EventedPLEG(runtime, clock)
    events = Collector(pleg)
    async with pleg:
        await clock.run_for(0)
        assert pleg.fallen_back
        runtime.enable_events(True)
        await clock.run_for(29.0)
        assert pleg.fallen_back  # retried only every 30 s once fallen back
        await clock.run_for(1.0 + 1.0)  # the retry, then the stream stays up for 1 s
        assert not pleg.fallen_back
        assert pleg.generic.relist_period == 300.0
        assert metric(pleg, "kubelet_evented_pleg_connection_success_count") == 1.0
        before = relists(runtime)
        sid, (cid,) = await start_pod(runtime, "u1")
        assert set(await events.take()) == {("u1", STARTED, sid), ("u1", STARTED, cid)}
        await clock.run_for(10.0)
        assert relists(runtime) == before  # events, not relists, now
    await events.close()


async def test_backoff_then_fallback_after_five_failures(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, events=True)
    runtime.inject_error("get_container_events", RuntimeUnavailableError("down"), times=5)
    pleg = EventedPLEG(runtime, clock)
    async with pleg:

        def attempts() -> int:
            return len(runtime.calls_to("get_container_events"))

        # Attempts at 0, 0.25, 0.75, 1.75 and 3.75 s: 250 ms doubling.
        start = clock.monotonic()
        checkpoints = [(0.2, 1), (0.3, 2), (0.7, 2), (0.8, 3), (1.7, 3), (1.8, 4), (3.7, 4)]
        for at, expected in checkpoints:
            await clock.run_for(start + at - clock.monotonic())
            assert attempts() == expected, f"at {at}s"
            assert not pleg.fallen_back
        await clock.run_for(start + 3.8 - clock.monotonic())
        assert attempts() == 5 and pleg.fallen_back and pleg.stream_failures == 5
        assert pleg.generic.relist_period == 1.0
        # Every failure forced a relist, beside the first one at start.
        assert relists(runtime) >= 6
        assert metric(pleg, "kubelet_evented_pleg_connection_error_count") == 5.0

        # The next try comes at the cap (30 s) and works: back to events.
        await clock.run_for(start + 3.75 + 30.0 + 1.1 - clock.monotonic())
        assert attempts() == 6
        assert not pleg.fallen_back and pleg.stream_failures == 0
        assert pleg.generic.relist_period == 300.0


async def test_broken_stream_is_retried_and_forces_a_relist(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, events = running
    await clock.run_for(2.0)  # the stream has worked for a while
    assert metric(pleg, "kubelet_evented_pleg_connection_success_count") == 1.0
    before = relists(runtime)
    runtime.break_event_stream()
    await clock.run_for(0)
    assert pleg.stream_failures == 1 and relists(runtime) == before + 1
    # The events of a pod started while the stream is down are lost; the relist
    # made once the new stream works finds it.
    sid, (cid,) = await start_pod(runtime, "u1")
    await clock.run_for(0.25)
    assert runtime.event_subscribers == 1
    assert await events.take() == []
    await clock.run_for(1.0)
    assert pleg.stream_failures == 0 and not pleg.fallen_back
    assert relists(runtime) == before + 2
    assert set(await events.take()) == {("u1", STARTED, sid), ("u1", STARTED, cid)}
    runtime.exit_container(cid, 0)
    assert await events.take() == [("u1", DIED, cid)]


async def test_container_started_is_sent_once_whatever_the_source(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, events = running
    sid, (cid,) = await start_pod(runtime, "u1")
    await clock.run_for(1.0)
    await pleg.generic.relist()  # the relist sees the same running containers
    await clock.run_for(600.0)  # and the safety relists after it
    got = await events.take()
    assert got.count(("u1", STARTED, cid)) == 1
    assert got.count(("u1", STARTED, sid)) == 1


async def test_stale_event_changes_nothing(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, events = running
    sid, (cid,) = await start_pod(runtime, "u1")
    await events.take()
    fresh = pleg.cache.get("u1")
    sandbox = PodSandboxStatus(
        id=sid,
        metadata=PodSandboxMetadata("pod-u1", "default", "u1"),
        state=PodSandboxState.READY,
        created_at=0.0,
    )
    stale = ContainerEvent(
        container_id=cid,
        type=ContainerEventType.STOPPED,
        created_at=fresh.timestamp - 5,
        pod_sandbox_status=sandbox,
    )
    pleg.process_event(stale)
    assert await events.take() == []
    assert pleg.cache.get("u1") is fresh


def test_pod_status_from_event() -> None:
    sandbox = PodSandboxStatus(
        id="s1",
        metadata=PodSandboxMetadata("web", "prod", "u9"),
        state=PodSandboxState.READY,
        created_at=1.0,
        ip="10.0.0.2",
        additional_ips=("fd00::2",),
    )
    container = ContainerStatus(
        id="c1",
        metadata=ContainerMetadata("app"),
        state=ContainerState.RUNNING,
        created_at=2.0,
        image="busybox",
    )
    event = ContainerEvent("c1", ContainerEventType.STARTED, 42.0, sandbox, (container,))
    assert pod_status_from_event(event) == PodRuntimeStatus(
        uid="u9",
        name="web",
        namespace="prod",
        ips=("10.0.0.2", "fd00::2"),
        sandbox_statuses=(sandbox,),
        container_statuses=(container,),
        timestamp=42.0,
    )
    assert pod_status_from_event(ContainerEvent("c1", ContainerEventType.STARTED, 1.0)) is None


async def test_full_channel_makes_it_unhealthy(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, events=True)
    pleg = EventedPLEG(runtime, clock)
    async with pleg:
        await clock.run_for(0)
        for i in range(501):  # two STARTED events each: sandbox and container
            await start_pod(runtime, f"u{i}")
            await settle(5)  # let the PLEG read the runtime's stream as it goes
        await clock.run_for(0)
        ok, message = pleg.healthy()
        assert not ok
        assert message == "EventedPLEG: pleg event channel capacity is full with 1000 events"
        assert metric(pleg, "kubelet_pleg_discard_events") == 2.0


# ------------------------------------------------------------------ the race


class SlowReplyRuntime(FakeRuntime):
    """container_status reads the state at once but answers ``reply_delay`` later,
    so a relist can deliver a status older than an event that came meanwhile."""

    reply_delay = 1.0

    async def container_status(self, container_id: str) -> ContainerStatus:
        status = await super().container_status(container_id)
        await self.clock.sleep(self.reply_delay)
        return status


class LastWriteWinsCache(PodCache):
    """A cache without the ordering invariant, to show what it prevents."""

    def set(
        self,
        uid: str,
        status: PodRuntimeStatus | None,
        error: Exception | None,
        timestamp: float,
    ) -> bool:
        self._pods.pop(uid, None)
        return super().set(uid, status, error, timestamp)


@pytest.mark.parametrize(
    ("cache_type", "starts"),
    [
        pytest.param(PodCache, 1, id="ordered-cache:started-once"),
        pytest.param(LastWriteWinsCache, 2, id="last-write-wins:started-twice"),
    ],
)
async def test_event_and_relist_out_of_order_never_start_a_container_twice(
    clock: FakeClock, cache_type: type[PodCache], starts: int
) -> None:
    """An agent that starts a created container whenever an event wakes it, and
    reads the container's state from the cache, as the kubelet's pod worker does."""
    runtime = SlowReplyRuntime(clock, events=True)
    sid = await runtime.run_pod_sandbox(sandbox_config("u1"))
    cid = await runtime.create_container(sid, container_config("u1", "app"), sandbox_config("u1"))
    pleg = EventedPLEG(runtime, clock, cache=cache_type())
    refused: list[Exception] = []

    async def agent() -> None:
        async for event in pleg.watch():
            status = pleg.cache.get(event.pod_uid).status
            app = status.find_container_status("app") if status else None
            if app is not None and app.state is ContainerState.CREATED:
                try:
                    await runtime.start_container(app.id)
                except ContainerStartError as err:
                    refused.append(err)

    agent_task = asyncio.create_task(agent())
    async with pleg:
        # The first relist reads "created" now and delivers it 1 s later; the
        # container starts (and its STARTED event arrives) half-way through.
        await clock.run_for(0.5)
        await runtime.start_container(cid)
        await clock.run_for(0.6)
        await clock.run_for(700.0)  # and every safety relist after it
        app_status = pleg.cache.get("u1").status
        assert app_status is not None
        found = app_status.find_container_status("app")
        assert found is not None and found.state is ContainerState.RUNNING
    await asyncio.wait_for(agent_task, 1)  # the watch ends with the PLEG
    assert len(runtime.calls_to("start_container")) == starts
    assert len(refused) == starts - 1


async def test_stop_is_idempotent_and_run_ends(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, events=True)
    pleg = EventedPLEG(runtime, clock)
    task = asyncio.create_task(pleg.run())
    await clock.run_for(1)
    with pytest.raises(RuntimeError, match="already running"):
        await pleg.run()
    pleg.stop()
    pleg.stop()
    await asyncio.wait_for(task, 1)
    await settle()
    assert runtime.event_subscribers == 0


async def test_update_cache_delegates(
    running: tuple[EventedPLEG, FakeRuntime, Collector], clock: FakeClock
) -> None:
    pleg, runtime, _ = running
    runtime.enable_events(False)  # the stream is gone: only update_cache can tell
    await clock.run_for(0)
    sid = await runtime.run_pod_sandbox(sandbox_config("u2"))
    await start_container(runtime, sid, "u2", "app")
    clock.advance(1)
    assert await pleg.update_cache("u2")
    status = pleg.cache.get("u2").status
    assert status is not None and status.running_container_statuses()
