"""FakePLEG on its own: events by hand, the queue's contract, scripted health, the
call log, injected errors, following a runtime, and the agent driven by it."""

from __future__ import annotations

import asyncio

import pytest

from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.pleg import PLEG, PodCache, PodLifecycleEvent, PodLifecycleEventType
from kubelet_kit.testing import Call, FakeClock, FakePLEG, FakeRuntime
from kubelet_kit.testing._pleg_kit_support import add_pod

STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED
REMOVED = PodLifecycleEventType.CONTAINER_REMOVED


async def drain(pleg: FakePLEG) -> list[PodLifecycleEvent]:
    """Every queued event, once the fake is stopped."""
    pleg.stop()
    return [event async for event in pleg.watch()]


def test_satisfies_the_protocol() -> None:
    assert isinstance(FakePLEG(), PLEG)
    assert isinstance(FakePLEG.following(FakeRuntime()), PLEG)


def test_rejects_bad_periods_naming_them() -> None:
    with pytest.raises(ValueError, match="relist_period"):
        FakePLEG(relist_period=0)
    with pytest.raises(ValueError, match="relist_threshold"):
        FakePLEG(relist_threshold=-1)


async def test_events_by_hand_in_order_with_the_cache_first() -> None:
    clock = FakeClock()
    pleg = FakePLEG(clock)
    status = PodRuntimeStatus(uid="u1", name="web", namespace="default")
    assert pleg.emit_started("u1", "c1", status=status)
    # The status is in the cache before anyone reads the event.
    entry = pleg.cache.get("u1")
    assert entry.status == status and entry.timestamp == clock.now()
    pleg.emit_died("u1", "c1")
    pleg.emit_removed("u1", "c1", pod_gone=True)
    assert "u1" not in pleg.cache
    pleg.emit_sync("u2")
    pleg.emit(PodLifecycleEvent("u3", STARTED, "c3"))
    assert pleg.pending_events == 5
    assert [(e.pod_uid, e.type, e.data) for e in await drain(pleg)] == [
        ("u1", STARTED, "c1"),
        ("u1", DIED, "c1"),
        ("u1", REMOVED, "c1"),
        ("u2", PodLifecycleEventType.POD_SYNC, ""),
        ("u3", STARTED, "c3"),
    ]


def test_emit_refuses_what_no_pleg_sends() -> None:
    pleg = FakePLEG()
    with pytest.raises(ValueError, match="never sent"):
        pleg.emit(PodLifecycleEvent("u1", PodLifecycleEventType.CONTAINER_CHANGED, "c1"))
    with pytest.raises(ValueError, match="status is of pod"):
        pleg.emit_started("u1", "c1", status=PodRuntimeStatus(uid="u2"))


async def test_a_full_queue_drops_and_counts() -> None:
    pleg = FakePLEG(capacity=2)
    assert pleg.emit_started("u1", "a") and pleg.emit_started("u1", "b")
    assert not pleg.emit_started("u1", "c")
    assert pleg.dropped_events == 1
    assert pleg.metrics.registry.get_sample_value("kubelet_pleg_discard_events") == 1.0
    assert [e.data for e in await drain(pleg)] == ["a", "b"]


async def test_run_blocks_until_stop_and_stop_ends_watch() -> None:
    pleg = FakePLEG()
    seen: list[PodLifecycleEvent] = []

    async def read() -> None:
        async for event in pleg.watch():
            seen.append(event)

    reader = asyncio.create_task(read())
    runner = asyncio.create_task(pleg.run())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already running"):
        await pleg.run()
    with pytest.raises(RuntimeError, match="single watcher"):
        await anext(pleg.watch())
    pleg.emit_started("u1", "c1")
    await asyncio.sleep(0)
    assert not runner.done()
    pleg.stop()
    pleg.stop()  # idempotent
    await asyncio.wait_for(runner, 1)
    await asyncio.wait_for(reader, 1)
    assert [e.data for e in seen] == ["c1"]


async def test_stop_without_run_ends_watch_and_run_opens_it_again() -> None:
    pleg = FakePLEG()
    pleg.emit_started("u1", "c1")
    assert [e.data for e in await drain(pleg)] == ["c1"]
    async with pleg:
        pleg.emit_started("u1", "c2")
        assert [e.data for e in [await anext(pleg.watch())]] == ["c2"]


def test_health_is_scripted() -> None:
    pleg = FakePLEG()
    assert pleg.healthy() == (True, "")
    message = "pleg was last seen active 3m1s ago; threshold is 3m0s"
    pleg.set_healthy(False, message)
    assert pleg.healthy() == (False, message)
    pleg.set_healthy(None)
    assert pleg.healthy() == (True, "")


async def test_the_call_log() -> None:
    pleg = FakePLEG()
    pleg.healthy()
    await pleg.update_cache("u1")
    pleg.watch()
    pleg.stop()
    assert pleg.calls == [
        Call("healthy", ()),
        Call("update_cache", ("u1",), {"pod_uid": "u1"}),
        Call("watch", ()),
        Call("stop", ()),
    ]
    assert pleg.calls_to("update_cache") == [Call("update_cache", ("u1",), {"pod_uid": "u1"})]
    pleg.clear_calls()
    assert pleg.calls == []


async def test_inject_error() -> None:
    pleg = FakePLEG()
    boom = RuntimeUnavailableError("injected")
    pleg.inject_error("update_cache", boom, when=lambda uid: uid == "bad")
    assert not await pleg.update_cache("good")
    with pytest.raises(RuntimeUnavailableError) as caught:
        await pleg.update_cache("bad")
    assert caught.value is boom
    assert pleg.cache.get("bad").error is boom  # cached, as a real PLEG does
    assert not await pleg.update_cache("bad")  # used up

    pleg.inject_error("watch", OSError("stream broke"))
    stream = pleg.watch()
    with pytest.raises(OSError, match="stream broke"):
        await anext(stream)

    pleg.inject_error("run", RuntimeError("fatal"), times=2)
    assert [e.remaining for e in pleg.pending_errors("run")] == [2]
    with pytest.raises(RuntimeError, match="fatal"):
        await pleg.run()
    pleg.clear_errors()
    assert pleg.pending_errors() == []
    with pytest.raises(ValueError, match="cannot fail"):
        pleg.inject_error("healthy", RuntimeError())
    with pytest.raises(ValueError, match="times"):
        pleg.inject_error("run", RuntimeError(), times=0)


async def test_following_a_runtime_relists_it_on_the_clock() -> None:
    runtime = FakeRuntime()
    pleg = FakePLEG.following(runtime)
    assert pleg.clock is runtime.clock
    clock = runtime.clock
    assert isinstance(clock, FakeClock)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    runner = asyncio.create_task(pleg.run())
    await clock.settle()
    sid, (cid,) = await add_pod(runtime, "u1", "app")
    await clock.run_for(1.0)
    assert pleg.pending_events == 2
    status = pleg.cache.get("u1").status
    assert status is not None and status.find_container_status_by_id(cid) is not None
    # Events by hand go beside the relist's.
    pleg.emit_sync("u1")
    runtime.set_unavailable()
    await clock.run_for(181.0)
    ok, message = pleg.healthy()
    assert not ok and message.endswith("threshold is 3m0s")
    pleg.stop()
    await asyncio.wait_for(runner, 1)
    events = [(e.type, e.data) for e in [event async for event in pleg.watch()]]
    assert events == [(STARTED, cid), (STARTED, sid), (PodLifecycleEventType.POD_SYNC, "")]


async def test_update_cache_when_following() -> None:
    runtime = FakeRuntime()
    pleg = FakePLEG.following(runtime, cache=PodCache())
    _, (cid,) = await add_pod(runtime, "u1", "app")
    assert await pleg.update_cache("u1")
    status = pleg.cache.get("u1").status
    assert status is not None and status.find_container_status_by_id(cid) is not None
    runtime.inject_error("container_status", RuntimeUnavailableError("down"))
    with pytest.raises(RuntimeUnavailableError):
        await pleg.update_cache("u1")
    assert isinstance(pleg.cache.get("u1").error, RuntimeUnavailableError)


async def test_the_agent_runs_on_a_fake_pleg() -> None:
    from kubelet_kit.testing import KubeletEnv

    clock = FakeClock()
    pleg = FakePLEG(clock)
    env = KubeletEnv(clock=clock, pleg=pleg)
    async with env:
        await env.sleep(1)
        assert [c.method for c in pleg.calls if c.method in ("run", "watch")] == ["run", "watch"]
        message = "pleg was last seen active 3m1s ago; threshold is 3m0s"
        pleg.set_healthy(False, message)
        assert env.kubelet.healthy() == (False, message)
    assert pleg.calls_to("stop")
    # Its watch ended with the agent: a new watcher is allowed and ends at once.
    with pytest.raises(StopAsyncIteration):
        await anext(pleg.watch())
