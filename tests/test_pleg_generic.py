"""GenericPLEG on FakeRuntime + FakeClock: events, cache, retries, deadlines, health."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from kubelet_kit.api.duration import format_duration
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
    PodSandboxStatus,
)
from kubelet_kit.errors import DeadlineExceededError, RuntimeUnavailableError
from kubelet_kit.pleg import (
    PLEG,
    GenericPLEG,
    PodCache,
    PodLifecycleEvent,
    PodLifecycleEventType,
)
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED
REMOVED = PodLifecycleEventType.CONTAINER_REMOVED


# --------------------------------------------------------------------- helpers


def sandbox_config(uid: str, attempt: int = 0) -> PodSandboxConfig:
    name = f"pod-{uid}"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name, "default", uid, attempt),
        labels={kl.POD_UID: uid, kl.POD_NAME: name, kl.POD_NAMESPACE: "default"},
    )


def container_config(uid: str, name: str, attempt: int = 0) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name, attempt),
        image=ImageSpec("busybox"),
        labels={
            kl.POD_UID: uid,
            kl.POD_NAME: f"pod-{uid}",
            kl.POD_NAMESPACE: "default",
            kl.CONTAINER_NAME: name,
        },
    )


async def start_pod(rt: FakeRuntime, uid: str, *names: str) -> tuple[str, list[str]]:
    """Run a sandbox and start one container per name; returns (sandbox, containers)."""
    cfg = sandbox_config(uid)
    sid = await rt.run_pod_sandbox(cfg)
    ids = []
    for name in names or ("app",):
        ids.append(await start_container(rt, sid, uid, name))
    return sid, ids


async def start_container(rt: FakeRuntime, sid: str, uid: str, name: str, attempt: int = 0) -> str:
    cid = await rt.create_container(sid, container_config(uid, name, attempt), sandbox_config(uid))
    await rt.start_container(cid)
    return cid


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class Collector:
    """Reads a PLEG's events into a list, as an agent's sync loop would."""

    def __init__(self, pleg: PLEG) -> None:
        self.events: list[PodLifecycleEvent] = []
        self.pleg = pleg
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for event in self.pleg.watch():
            self.events.append(event)

    async def take(self) -> list[tuple[str, PodLifecycleEventType, str]]:
        await settle()
        got = [(e.pod_uid, e.type, e.data) for e in self.events]
        self.events.clear()
        return got

    async def close(self) -> None:
        # The watch may already have ended (the PLEG stopped); then there is
        # nothing to cancel.
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def runtime(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock)


@pytest.fixture
def pleg(runtime: FakeRuntime, clock: FakeClock) -> GenericPLEG:
    return GenericPLEG(runtime, clock, inspect_timeout=5.0)


@pytest.fixture
async def events(pleg: GenericPLEG) -> AsyncIterator[Collector]:
    collector = Collector(pleg)
    yield collector
    await collector.close()


def metric(pleg: GenericPLEG, name: str, labels: dict[str, str] | None = None) -> float | None:
    return pleg.metrics.registry.get_sample_value(name, labels or {})


# ----------------------------------------------------------------------- tests


def test_satisfies_the_protocol(pleg: GenericPLEG) -> None:
    assert isinstance(pleg, PLEG)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_rejects_bad_periods_naming_the_argument(runtime: FakeRuntime, bad: float) -> None:
    with pytest.raises(ValueError, match="relist_period"):
        GenericPLEG(runtime, relist_period=bad)
    with pytest.raises(ValueError, match="inspect_timeout"):
        GenericPLEG(runtime, inspect_timeout=bad)


async def test_first_relist_reports_running_sandbox_and_container(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    sid, (app,) = await start_pod(runtime, "u1")
    assert await pleg.relist()
    assert await events.take() == [("u1", STARTED, app), ("u1", STARTED, sid)]


async def test_no_change_sends_nothing_and_inspects_nothing(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    await start_pod(runtime, "u1", "a", "b")
    await pleg.relist()
    await events.take()
    runtime.clear_calls()
    await pleg.relist()
    assert await events.take() == []
    assert runtime.calls_to("container_status") == []
    assert runtime.calls_to("pod_sandbox_status") == []


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        pytest.param("exit", [DIED], id="exited->ContainerDied"),
        pytest.param("exit+remove", [DIED, REMOVED], id="exited-and-removed-in-one-period"),
        pytest.param("remove-running", [DIED, REMOVED], id="gone-while-running->Died+Removed"),
    ],
)
async def test_container_transitions(
    pleg: GenericPLEG,
    runtime: FakeRuntime,
    events: Collector,
    action: str,
    expected: list[PodLifecycleEventType],
) -> None:
    _, (app,) = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    if action.startswith("exit"):
        runtime.exit_container(app, 1)
    if action.endswith("remove") or action == "remove-running":
        await runtime.remove_container(app)
    await pleg.relist()
    assert await events.take() == [("u1", t, app) for t in expected]


async def test_exit_then_removal_in_later_relist_reports_only_removed(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    _, (app,) = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    runtime.exit_container(app, 0)
    await pleg.relist()
    assert await events.take() == [("u1", DIED, app)]
    await runtime.remove_container(app)
    await pleg.relist()
    assert await events.take() == [("u1", REMOVED, app)]


def _sid(runtime: FakeRuntime) -> str:
    return next(iter(runtime._sandboxes))


async def test_restart_between_relists(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    sid, (app,) = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    runtime.exit_container(app, 1)
    app2 = await start_container(runtime, sid, "u1", "app", attempt=1)
    await pleg.relist()
    assert await events.take() == [("u1", DIED, app), ("u1", STARTED, app2)]
    status = pleg.cache.get("u1").status
    assert status is not None
    newest = status.find_container_status("app")
    assert newest is not None and newest.id == app2


async def test_created_container_is_not_reported_until_it_runs(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    sid, _ = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    cid = await runtime.create_container(sid, container_config("u1", "side"), sandbox_config("u1"))
    await pleg.relist()
    assert await events.take() == []  # ContainerChanged is computed, not sent
    await runtime.start_container(cid)
    await pleg.relist()
    assert await events.take() == [("u1", STARTED, cid)]


async def test_pods_appearing_and_disappearing(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    sid1, (c1,) = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    sid2, (c2,) = await start_pod(runtime, "u2")
    await runtime.remove_pod_sandbox(sid1)
    await pleg.relist()
    got = await events.take()
    assert set(got) == set(
        [
            ("u1", DIED, c1),
            ("u1", REMOVED, c1),
            ("u1", DIED, sid1),
            ("u1", REMOVED, sid1),
            ("u2", STARTED, c2),
            ("u2", STARTED, sid2),
        ]
    )
    assert "u1" not in pleg.cache
    assert "u2" in pleg.cache


async def test_cache_is_updated_before_the_event_is_seen(
    pleg: GenericPLEG, runtime: FakeRuntime
) -> None:
    _, (app,) = await start_pod(runtime, "u1")
    seen: list[ContainerState | None] = []

    async def agent() -> None:
        async for event in pleg.watch():
            status = pleg.cache.get(event.pod_uid).status
            found = status.find_container_status_by_id(app) if status else None
            seen.append(found.state if found else None)
            return

    task = asyncio.create_task(agent())
    await settle()
    await pleg.relist()
    await asyncio.wait_for(task, 1)
    assert seen == [ContainerState.RUNNING]


async def test_inspection_failure_is_retried_next_relist(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    sid, (app,) = await start_pod(runtime, "u1")
    err = RuntimeUnavailableError("status failed")
    runtime.inject_error("container_status", err)
    assert await pleg.relist()
    assert await events.take() == []  # no events for a pod that could not be inspected
    entry = pleg.cache.get("u1")
    assert entry.error is err and entry.status is None
    assert pleg.healthy()[0]

    # Nothing changed in the runtime, but the pod is inspected again and its
    # events go out now.
    assert await pleg.relist()
    assert await events.take() == [("u1", STARTED, app), ("u1", STARTED, sid)]
    entry = pleg.cache.get("u1")
    assert entry.error is None and entry.status is not None


async def test_reinspection_of_a_pod_without_new_events(
    pleg: GenericPLEG, runtime: FakeRuntime, events: Collector
) -> None:
    _, (app,) = await start_pod(runtime, "u1")
    await pleg.relist()
    await events.take()
    runtime.exit_container(app, 2)
    runtime.inject_error("container_status", RuntimeUnavailableError("x"))
    await pleg.relist()
    assert await events.take() == []
    await pleg.relist()
    assert await events.take() == [("u1", DIED, app)]
    status = pleg.cache.get("u1").status
    assert status is not None
    found = status.find_container_status_by_id(app)
    assert found is not None and found.exit_code == 2


class HangingRuntime(FakeRuntime):
    """container_status of the containers in ``hang`` never answers."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.hang: set[str] = set()

    async def container_status(self, container_id: str) -> ContainerStatus:
        if container_id in self.hang:
            await asyncio.get_running_loop().create_future()
        return await super().container_status(container_id)


async def test_hung_inspection_does_not_stall_the_relist(clock: FakeClock) -> None:
    runtime = HangingRuntime(clock)
    pleg = GenericPLEG(runtime, clock, inspect_timeout=5.0)
    events = Collector(pleg)
    _, (stuck,) = await start_pod(runtime, "stuck")
    sid, (fine,) = await start_pod(runtime, "fine")
    runtime.hang.add(stuck)

    relist = asyncio.create_task(pleg.relist())
    await clock.run_for(4.9)
    assert not relist.done()
    await clock.run_for(0.2)
    assert await asyncio.wait_for(relist, 1)
    assert await events.take() == [("fine", STARTED, fine), ("fine", STARTED, sid)]
    assert isinstance(pleg.cache.get("stuck").error, DeadlineExceededError)
    assert "stuck" in str(pleg.cache.get("stuck").error)
    assert pleg.healthy() == (True, "")

    # Once it answers, the next relist catches up.
    runtime.hang.clear()
    await pleg.relist()
    got = await events.take()
    assert ("stuck", STARTED, stuck) in got
    assert pleg.cache.get("stuck").error is None
    await events.close()


async def test_pods_are_inspected_concurrently(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, latency={"container_status": 1.0})
    pleg = GenericPLEG(runtime, clock, inspect_timeout=5.0)
    for i in range(10):
        await start_pod(runtime, f"u{i}")
    relist = asyncio.create_task(pleg.relist())
    # Ten pods of one 1 s container_status each: one second, not ten.
    await clock.run_for(1.0)
    assert relist.done() and relist.result()
    assert len(pleg.cache) == 10


async def test_update_cache_refreshes_one_pod_now(pleg: GenericPLEG, runtime: FakeRuntime) -> None:
    _, (app,) = await start_pod(runtime, "u1")
    await pleg.relist()
    runtime.exit_container(app, 3)
    assert await pleg.update_cache("u1")
    status = pleg.cache.get("u1").status
    assert status is not None
    found = status.find_container_status_by_id(app)
    assert found is not None and found.state is ContainerState.EXITED

    await runtime.remove_pod_sandbox(_sid(runtime))
    await pleg.update_cache("u1")
    assert "u1" not in pleg.cache


async def test_update_cache_raises_and_caches_the_error(
    pleg: GenericPLEG, runtime: FakeRuntime
) -> None:
    await start_pod(runtime, "u1")
    err = RuntimeUnavailableError("no")
    runtime.inject_error("container_status", err)
    with pytest.raises(RuntimeUnavailableError):
        await pleg.update_cache("u1")
    assert pleg.cache.get("u1").error is err


async def test_relist_releases_waiters_of_unchanged_pods(
    pleg: GenericPLEG, runtime: FakeRuntime, clock: FakeClock
) -> None:
    await start_pod(runtime, "u1")
    await pleg.relist()
    asked_at = clock.now()
    waiter = asyncio.create_task(pleg.cache.get_newer_than("u1", asked_at))
    await settle()
    await pleg.relist()  # same instant: not newer
    await settle()
    assert not waiter.done()
    clock.advance(1)
    await pleg.relist()  # no change, but it happened later
    entry = await asyncio.wait_for(waiter, 1)
    assert entry.status is not None and entry.status.uid == "u1"


async def test_exited_pod_keeps_its_ip(pleg: GenericPLEG, runtime: FakeRuntime) -> None:
    sid, _ = await start_pod(runtime, "u1")
    await pleg.relist()
    status = pleg.cache.get("u1").status
    assert status is not None and status.ips
    ips = status.ips
    await runtime.stop_pod_sandbox(sid)
    await pleg.relist()
    status = pleg.cache.get("u1").status
    assert status is not None and status.ips == ips


async def test_health(runtime: FakeRuntime, clock: FakeClock) -> None:
    pleg = GenericPLEG(runtime, clock)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    clock.advance(600)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    await pleg.relist()
    clock.advance(60)
    assert pleg.healthy() == (True, "")
    runtime.set_unavailable()
    assert not await pleg.relist()  # a failed listing does not count
    clock.advance(121)
    assert pleg.healthy() == (
        False,
        "pleg was last seen active 3m1s ago; threshold is 3m0s",
    )
    runtime.set_unavailable(False)
    assert await pleg.relist()
    assert pleg.healthy() == (True, "")


async def test_hung_listing_fails_the_relist_within_the_deadline(clock: FakeClock) -> None:
    runtime = FakeRuntime(clock, latency={"list_pod_sandboxes": 1e9})
    pleg = GenericPLEG(runtime, clock, inspect_timeout=5.0)
    relist = asyncio.create_task(pleg.relist())
    await clock.run_for(5.0)
    assert relist.done() and relist.result() is False
    assert pleg.healthy() == (False, "pleg has yet to be successful")


async def test_run_relists_every_period_and_stops(runtime: FakeRuntime, clock: FakeClock) -> None:
    pleg = GenericPLEG(runtime, clock, relist_period=1.0)
    events = Collector(pleg)

    def relists() -> int:
        # Inspections list one pod's sandboxes with a filter; relists list all.
        return sum(1 for c in runtime.calls_to("list_pod_sandboxes") if c.args[0] is None)

    task = asyncio.create_task(pleg.run())
    await settle()
    assert relists() == 1  # at once
    _, (app,) = await start_pod(runtime, "u1")
    await clock.run_for(1.0)
    assert relists() == 2
    assert ("u1", STARTED, app) in await events.take()
    await clock.run_for(3.0)
    assert relists() == 5
    pleg.stop()
    pleg.stop()  # idempotent
    await asyncio.wait_for(task, 1)
    await asyncio.wait_for(events.task, 1)  # watch() ends once stopped


async def test_run_twice_is_refused(runtime: FakeRuntime, clock: FakeClock) -> None:
    pleg = GenericPLEG(runtime, clock)
    task = asyncio.create_task(pleg.run())
    await settle()
    with pytest.raises(RuntimeError, match="already running"):
        await pleg.run()
    pleg.stop()
    await task


async def test_async_with_runs_and_stops(runtime: FakeRuntime, clock: FakeClock) -> None:
    async with GenericPLEG(runtime, clock) as pleg:
        await settle()
        assert pleg.healthy()[0]
    assert runtime.calls_to("list_pod_sandboxes")


async def test_second_concurrent_watcher_is_refused(pleg: GenericPLEG) -> None:
    first = pleg.watch()
    task = asyncio.create_task(first.__anext__())
    await settle()
    with pytest.raises(RuntimeError, match="single watcher"):
        await pleg.watch().__anext__()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_full_channel_drops_and_counts(runtime: FakeRuntime, clock: FakeClock) -> None:
    from kubelet_kit.pleg import EventChannel, PLEGMetrics

    metrics = PLEGMetrics()
    pleg = GenericPLEG(runtime, clock, metrics=metrics, channel=EventChannel(metrics, capacity=3))
    for i in range(3):
        await start_pod(runtime, f"u{i}")  # 6 events: 3 sandboxes, 3 containers
    await pleg.relist()
    assert metric(pleg, "kubelet_pleg_discard_events") == 3.0
    assert metric(pleg, "kubelet_pleg_events_total", {"type": "ContainerStarted"}) == 3.0
    collector = Collector(pleg)
    assert len(await collector.take()) == 3
    await collector.close()


async def test_metrics(runtime: FakeRuntime, clock: FakeClock) -> None:
    runtime.set_latency("list_containers", 0.5)
    pleg = GenericPLEG(runtime, clock)
    await start_pod(runtime, "u1")
    # First relist: listing (0.5 s) plus inspecting the new pod (0.5 s more).
    task = asyncio.create_task(pleg.relist())
    await clock.run_for(1.0)
    assert task.done()
    clock.advance(2.0)
    # Second relist: nothing changed, only the listing.
    task = asyncio.create_task(pleg.relist())
    await clock.run_for(0.5)
    assert task.done()
    assert metric(pleg, "kubelet_pleg_relist_duration_seconds_count") == 2.0
    assert metric(pleg, "kubelet_pleg_relist_duration_seconds_sum") == pytest.approx(1.5)
    assert metric(pleg, "kubelet_pleg_relist_interval_seconds_count") == 1.0
    assert metric(pleg, "kubelet_pleg_relist_interval_seconds_sum") == pytest.approx(3.0)
    assert metric(pleg, "kubelet_pleg_last_seen_seconds") == pytest.approx(clock.now() - 0.5)
    assert metric(pleg, "kubelet_pleg_events_total", {"type": "ContainerStarted"}) == 2.0
    assert metric(pleg, "kubelet_pleg_discard_events") == 0.0


def test_each_pleg_has_its_own_registry(runtime: FakeRuntime) -> None:
    a, b = GenericPLEG(runtime), GenericPLEG(runtime)
    assert a.metrics.registry is not b.metrics.registry


async def test_shared_cache(runtime: FakeRuntime, clock: FakeClock) -> None:
    cache = PodCache()
    pleg = GenericPLEG(runtime, clock, cache=cache)
    await start_pod(runtime, "u1")
    await pleg.relist()
    assert pleg.cache is cache and "u1" in cache


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (180, "3m0s"),
        (181, "3m1s"),
        (181.5, "3m1.5s"),
        (600, "10m0s"),
        (3600, "1h0m0s"),
        (3725.25, "1h2m5.25s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (0.0015, "1.5ms"),
        (0.000002, "2µs"),
        (5e-9, "5ns"),
    ],
)
def test_format_duration_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


class BuggyRuntime(FakeRuntime):
    """Raises an untyped error for one pod's sandbox status."""

    bad_sandbox = ""

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        if pod_sandbox_id == self.bad_sandbox:
            raise OSError("socket closed")
        return await super().pod_sandbox_status(pod_sandbox_id)


async def test_untyped_error_of_one_pod_does_not_stop_the_others(clock: FakeClock) -> None:
    runtime = BuggyRuntime(clock)
    pleg = GenericPLEG(runtime, clock)
    events = Collector(pleg)
    runtime.bad_sandbox, _ = await start_pod(runtime, "bad")
    sid, (cid,) = await start_pod(runtime, "good")
    assert await pleg.relist()
    assert await events.take() == [("good", STARTED, cid), ("good", STARTED, sid)]
    assert isinstance(pleg.cache.get("bad").error, OSError)
    await events.close()
