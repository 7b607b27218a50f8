"""FakeRuntime's container event stream: content, errors, a full queue."""

from __future__ import annotations

import asyncio

import pytest
from _fake_runtime_helpers import next_event, sandbox_config, start

from kubelet_kit.container import ContainerEventType, ContainerState
from kubelet_kit.errors import RuntimeUnavailableError, UnimplementedError
from kubelet_kit.testing import FakeClock, FakeRuntime


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, events=True)


# ----------------------------------------------------------------------- events


async def test_event_stream_content(rt: FakeRuntime, clock: FakeClock) -> None:
    stream = rt.get_container_events()
    sid, cid = await start(rt, "sleep 1; exit 2")
    await clock.run_for(1)
    await rt.remove_container(cid)
    events = [await asyncio.wait_for(stream.__anext__(), 1) for _ in range(6)]
    assert [(e.container_id, e.type) for e in events] == [
        (sid, ContainerEventType.CREATED),
        (sid, ContainerEventType.STARTED),
        (cid, ContainerEventType.CREATED),
        (cid, ContainerEventType.STARTED),
        (cid, ContainerEventType.STOPPED),
        (cid, ContainerEventType.DELETED),
    ]
    stopped = events[4]
    assert stopped.pod_sandbox_status is not None and stopped.pod_sandbox_status.id == sid
    (st,) = stopped.containers_statuses
    assert (st.id, st.state, st.exit_code) == (cid, ContainerState.EXITED, 2)
    assert stopped.created_at == clock.now()
    assert events[5].containers_statuses == ()


async def test_events_unimplemented_when_off(clock: FakeClock) -> None:
    rt = FakeRuntime(clock)
    with pytest.raises(UnimplementedError):
        async for _ in rt.get_container_events():
            pass
    rt.enable_events(True)
    stream = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())
    assert (await stream.__anext__()).type == ContainerEventType.CREATED
    rt.enable_events(False)
    await stream.__anext__()  # the STARTED event queued before
    with pytest.raises(UnimplementedError):
        await stream.__anext__()


async def test_break_event_stream_ends_current_streams_only(rt: FakeRuntime) -> None:
    stream = rt.get_container_events()
    waiter = asyncio.create_task(next_event(stream))
    await asyncio.sleep(0)
    rt.break_event_stream(RuntimeUnavailableError("stream reset"))
    with pytest.raises(RuntimeUnavailableError, match="stream reset"):
        await waiter
    fresh = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())
    assert (await fresh.__anext__()).type == ContainerEventType.CREATED


async def test_fault_on_event_stream_and_unavailable_runtime_end_streams(
    rt: FakeRuntime,
) -> None:
    rt.inject_error("get_container_events", RuntimeUnavailableError("no stream today"))
    with pytest.raises(RuntimeUnavailableError, match="no stream today"):
        await next_event(rt.get_container_events())
    assert rt.event_subscribers == 0
    stream = rt.get_container_events()
    waiter = asyncio.create_task(next_event(stream))
    await asyncio.sleep(0)
    rt.set_unavailable(True)
    with pytest.raises(RuntimeUnavailableError):
        await waiter


async def test_full_event_queue_drops_and_counts(
    rt: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubelet_kit.testing.fake_runtime as fr

    monkeypatch.setattr(fr, "EVENT_QUEUE_SIZE", 3)
    slow = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())  # CREATED + STARTED
    await rt.run_pod_sandbox(sandbox_config(attempt=1))  # two more: one dropped
    assert rt.dropped_events == 1
    got = [(await next_event(slow)).type for _ in range(3)]
    assert got == [
        ContainerEventType.CREATED,
        ContainerEventType.STARTED,
        ContainerEventType.CREATED,
    ]
