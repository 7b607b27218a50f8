"""FakeRuntime's call log, injected faults and latency, unavailability, conditions."""

from __future__ import annotations

import asyncio

import pytest
from _fake_runtime_helpers import start, start_other

from kubelet_kit.container import ImageSpec
from kubelet_kit.errors import NotFoundError, RuntimeUnavailableError, UnimplementedError
from kubelet_kit.testing import FakeClock, FakeRuntime


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, events=True)


# ------------------------------------------------------------ faults and latency


async def test_injected_fault_raised_times_then_gone(rt: FakeRuntime) -> None:
    err = RuntimeUnavailableError("boom")
    rt.inject_error("list_containers", err, times=2)
    for _ in range(2):
        with pytest.raises(RuntimeUnavailableError) as info:
            await rt.list_containers()
        assert info.value is err
    assert rt.pending_errors() == []
    assert await rt.list_containers() == []


async def test_fault_with_predicate_waits_for_matching_call(rt: FakeRuntime) -> None:
    _, a = await start(rt, None)
    _, b = await start_other(rt)
    rt.inject_error("container_status", NotFoundError("gone"), when=lambda cid: cid == b)
    await rt.container_status(a)
    await rt.container_status(a)
    (pending,) = rt.pending_errors("container_status")
    assert pending.remaining == 1
    with pytest.raises(NotFoundError, match="gone"):
        await rt.container_status(b)
    await rt.container_status(b)
    assert rt.pending_errors() == []


async def test_fault_not_lost_when_call_cancelled_during_latency(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    rt.set_latency("version", 5)
    rt.inject_error("version", UnimplementedError("x"))
    task = asyncio.create_task(rt.version())
    await clock.run_for(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(rt.pending_errors("version")) == 1


async def test_latency_is_applied_on_the_clock(clock: FakeClock) -> None:
    rt = FakeRuntime(clock, latency={"container_status": 3, "*": 0.5})
    assert rt.latency_of("list_containers") == 0.5
    task = asyncio.create_task(rt.list_containers())
    await clock.run_for(0.4)
    assert not task.done()
    await clock.run_for(0.1)
    assert task.done()
    rt.set_latency("list_containers", 1e9)  # hangs
    hung = asyncio.create_task(rt.list_containers())
    await clock.run_for(3600)
    assert not hung.done()
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung


def test_unknown_method_names_are_refused() -> None:
    rt = FakeRuntime()
    with pytest.raises(ValueError, match="'contaner_status' is not a Runtime method"):
        rt.inject_error("contaner_status", NotFoundError())
    with pytest.raises(ValueError, match="not a Runtime method"):
        rt.set_latency("nope", 1)
    with pytest.raises(ValueError, match="not a Runtime method"):
        FakeRuntime(latency={"nope": 1})


async def test_unavailable_runtime_fails_every_call(rt: FakeRuntime) -> None:
    rt.set_unavailable(True)
    for call in (rt.version(), rt.list_containers(), rt.pull_image(ImageSpec("busybox"))):
        with pytest.raises(RuntimeUnavailableError):
            await call
    rt.set_unavailable(False)
    assert (await rt.version()).runtime_name == "fake"


async def test_call_log_records_arguments_by_position_and_name(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    rt.clear_calls()
    await rt.stop_container(cid, timeout=10)
    (call,) = rt.calls_to("stop_container")
    assert call.args == (cid, 10)
    assert call.kwargs == {"container_id": cid, "timeout": 10}
    assert [c.method for c in rt.calls] == ["stop_container"]


async def test_call_log_of_calls_with_no_argument_and_with_one(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    rt.clear_calls()
    await rt.version()
    await rt.list_images()
    await rt.container_status(cid)
    await rt.list_containers()
    assert [(c.method, c.args, dict(c.kwargs)) for c in rt.calls] == [
        ("version", (), {}),
        ("list_images", (), {}),
        ("container_status", (cid,), {"container_id": cid}),
        ("list_containers", (None,), {"filter": None}),
    ]
    # Each call has a record, and an argument map, of its own.
    assert rt.calls[0].kwargs is not rt.calls[1].kwargs


async def test_status_conditions(rt: FakeRuntime) -> None:
    st = await rt.status()
    assert st.condition("RuntimeReady").status is True  # type: ignore[union-attr]
    rt.set_condition("NetworkReady", False, "NetworkPluginNotReady")
    nr = (await rt.status()).condition("NetworkReady")
    assert nr is not None and (nr.status, nr.reason) == (False, "NetworkPluginNotReady")


async def test_inject_latency_hits_only_matching_calls(rt: FakeRuntime, clock: FakeClock) -> None:
    _, a = await start(rt, None)
    _, b = await start_other(rt)
    rt.inject_latency("container_status", 1e9, when=lambda cid: cid == b)
    hung = asyncio.create_task(rt.container_status(b))
    await clock.run_for(60)
    assert not hung.done()
    assert (await rt.container_status(a)).id == a  # others answer at once
    assert (await rt.container_status(b)).id == b  # the delay was used once
    hung.cancel()
    await asyncio.gather(hung, return_exceptions=True)
