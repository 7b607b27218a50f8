"""PodCache: newest-wins storage and the "newer than" waits the agent relies on."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubelet_kit.container.interfaces import ContainerMetadata, ContainerState, ContainerStatus
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.pleg import PodCache


def pod_status(uid: str, ts: float, state: ContainerState | None = None) -> PodRuntimeStatus:
    containers = ()
    if state is not None:
        containers = (
            ContainerStatus(
                id="c1",
                metadata=ContainerMetadata("app"),
                state=state,
                created_at=1.0,
                image="busybox",
            ),
        )
    return PodRuntimeStatus(uid=uid, container_statuses=containers, timestamp=ts)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_unknown_pod_reads_as_empty_status() -> None:
    cache = PodCache()
    entry = cache.get("u1")
    assert entry.status == PodRuntimeStatus(uid="u1")
    assert entry.error is None and entry.timestamp == 0.0
    assert "u1" not in cache


def test_set_then_get() -> None:
    cache = PodCache()
    status = pod_status("u1", 10.0)
    assert cache.set("u1", status, None, 10.0)
    entry = cache.get("u1")
    assert entry.status is status and entry.timestamp == 10.0
    assert "u1" in cache and cache.uids() == ["u1"] and len(cache) == 1


def test_error_is_stored_with_its_time() -> None:
    cache = PodCache()
    err = RuntimeUnavailableError("down")
    assert cache.set("u1", None, err, 3.0)
    entry = cache.get("u1")
    assert entry.status is None and entry.error is err and entry.timestamp == 3.0


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [
        pytest.param(10.0, 5.0, 10.0, id="older-refused"),
        pytest.param(10.0, 10.0, 10.0, id="same-time-replaces"),
        pytest.param(10.0, 11.0, 11.0, id="newer-replaces"),
    ],
)
def test_never_replaced_by_older(first: float, second: float, kept: float) -> None:
    cache = PodCache()
    a = pod_status("u1", first, ContainerState.RUNNING)
    b = pod_status("u1", second, ContainerState.CREATED)
    cache.set("u1", a, None, first)
    took = cache.set("u1", b, None, second)
    assert took == (second >= first)
    assert cache.get("u1").timestamp == kept
    assert cache.get("u1").status is (b if took else a)


def test_event_then_stale_relist_keeps_the_running_container() -> None:
    """The evented race: the relist inspected the pod at t=9 (container created,
    not started), the event reported it running at t=10, and the relist's status
    lands last. The agent must keep reading "running"."""
    cache = PodCache()
    event_status = pod_status("u1", 10.0, ContainerState.RUNNING)
    relist_status = pod_status("u1", 9.0, ContainerState.CREATED)
    assert cache.set("u1", event_status, None, 10.0)
    assert not cache.set("u1", relist_status, None, 9.0)
    status = cache.get("u1").status
    assert status is not None
    found = status.find_container_status("app")
    assert found is not None and found.state is ContainerState.RUNNING


def test_error_does_not_replace_a_newer_status() -> None:
    cache = PodCache()
    cache.set("u1", pod_status("u1", 10.0), None, 10.0)
    assert not cache.set("u1", None, RuntimeUnavailableError("late"), 8.0)
    assert cache.get("u1").error is None


def test_delete_is_idempotent_and_forgets() -> None:
    cache = PodCache()
    cache.set("u1", pod_status("u1", 1.0), None, 1.0)
    cache.delete("u1")
    cache.delete("u1")
    assert "u1" not in cache
    assert cache.get("u1").timestamp == 0.0


def test_deleted_pod_is_not_brought_back_by_an_older_status() -> None:
    cache = PodCache()
    cache.set("u1", pod_status("u1", 5.0), None, 5.0)
    cache.delete("u1", timestamp=10.0)
    assert not cache.set("u1", pod_status("u1", 8.0), None, 8.0)
    assert "u1" not in cache
    # A status observed after the deletion is a new life of the pod.
    assert cache.set("u1", pod_status("u1", 12.0), None, 12.0)
    assert cache.get("u1").timestamp == 12.0


def test_deletion_times_are_forgotten_long_after() -> None:
    cache = PodCache()
    cache.delete("u1", timestamp=10.0)
    cache.update_time(10.0 + 601.0)
    # Long past: a (very late) status is taken again rather than the tombstone
    # being kept forever.
    assert cache.set("u1", pod_status("u1", 9.0), None, 9.0)


def test_update_time_never_goes_back() -> None:
    cache = PodCache()
    assert cache.timestamp is None
    cache.update_time(10.0)
    cache.update_time(5.0)
    assert cache.timestamp == 10.0


async def test_get_newer_than_returns_at_once_when_entry_is_newer() -> None:
    cache = PodCache()
    cache.set("u1", pod_status("u1", 10.0), None, 10.0)
    entry = await asyncio.wait_for(cache.get_newer_than("u1", 9.0), 1)
    assert entry.timestamp == 10.0


async def test_get_newer_than_waits_for_a_newer_set() -> None:
    cache = PodCache()
    cache.set("u1", pod_status("u1", 10.0), None, 10.0)
    task = asyncio.create_task(cache.get_newer_than("u1", 10.0))
    await settle()
    assert not task.done(), "an entry stamped exactly t is not newer than t"
    cache.set("u2", pod_status("u2", 20.0), None, 20.0)  # another pod: no wake-up
    await settle()
    assert not task.done()
    cache.set("u1", pod_status("u1", 11.0), None, 11.0)
    entry = await asyncio.wait_for(task, 1)
    assert entry.timestamp == 11.0


async def test_get_newer_than_released_by_global_timestamp() -> None:
    """A relist that found the pod unchanged releases its waiters through update_time."""
    cache = PodCache()
    cache.set("u1", pod_status("u1", 10.0), None, 10.0)
    known = asyncio.create_task(cache.get_newer_than("u1", 12.0))
    unknown = asyncio.create_task(cache.get_newer_than("ghost", 12.0))
    await settle()
    cache.update_time(12.0)
    await settle()
    assert not known.done() and not unknown.done()
    cache.update_time(13.0)
    entry = await asyncio.wait_for(known, 1)
    assert entry.timestamp == 10.0  # the current entry: nothing changed
    ghost = await asyncio.wait_for(unknown, 1)
    assert ghost.status == PodRuntimeStatus(uid="ghost") and ghost.timestamp == 0.0


async def test_waiters_with_different_times_wake_in_turn() -> None:
    cache = PodCache()
    early = asyncio.create_task(cache.get_newer_than("u1", 1.0))
    late = asyncio.create_task(cache.get_newer_than("u1", 5.0))
    await settle()
    cache.set("u1", pod_status("u1", 3.0), None, 3.0)
    assert (await asyncio.wait_for(early, 1)).timestamp == 3.0
    await settle()
    assert not late.done()
    cache.set("u1", pod_status("u1", 6.0), None, 6.0)
    assert (await asyncio.wait_for(late, 1)).timestamp == 6.0


async def test_cancelled_waiter_is_forgotten() -> None:
    cache = PodCache()
    task = asyncio.create_task(cache.get_newer_than("u1", 1.0))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cache._waiters == {}
    # A later set with nobody waiting must not fail.
    cache.set("u1", pod_status("u1", 2.0), None, 2.0)


async def test_racing_event_and_relist_writers() -> None:
    """Two writers (event stream and relist) deliver interleaved, out of order;
    a reader waiting for "newer than 10" only ever sees the newest status."""
    cache = PodCache()
    seen: list[float] = []

    async def reader() -> None:
        entry = await cache.get_newer_than("u1", 10.0)
        seen.append(entry.timestamp)

    async def writer(stamps: list[float]) -> None:
        for ts in stamps:
            cache.set("u1", pod_status("u1", ts), None, ts)
            await asyncio.sleep(0)

    task = asyncio.create_task(reader())
    await asyncio.gather(writer([9.0, 12.0, 11.0]), writer([10.0, 8.0, 13.0]))
    await asyncio.wait_for(task, 1)
    assert seen and seen[0] > 10.0
    assert cache.get("u1").timestamp == 13.0


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1, max_size=30))
def test_final_entry_is_the_newest_whatever_the_order(stamps: list[float]) -> None:
    cache = PodCache()
    statuses = [pod_status("u1", ts) for ts in stamps]
    for status in statuses:
        cache.set("u1", status, None, status.timestamp)
    newest = max(stamps)
    entry = cache.get("u1")
    assert entry.timestamp == newest
    # Among equal newest stamps the last write wins, as in the kubelet.
    last_newest = [s for s in statuses if s.timestamp == newest][-1]
    assert entry.status is last_newest
