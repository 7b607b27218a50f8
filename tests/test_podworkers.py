"""Pod workers: coalescing, isolation, and the syncing -> terminating -> terminated
progression, on a FakeClock."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kubelet_kit.node.podworkers import PodWorkers, SyncResult, UpdateType, WorkerPhase
from kubelet_kit.testing import FakeClock


def make_pod(uid: str, *, version: int = 0, grace: int | None = 30, deleted: bool = False) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(
            uid=uid,
            name=f"pod-{uid}",
            namespace="default",
            deletion_timestamp="now" if deleted else None,
            deletion_grace_period_seconds=None,
            version=version,
        ),
        spec=SimpleNamespace(termination_grace_period_seconds=grace),
    )


class RecordingSyncer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.results: dict[str, SyncResult] = {}
        self.fail: dict[str, int] = {}
        self.terminating_gate: asyncio.Event | None = None

    async def sync_pod(self, update_type: UpdateType, pod: Any) -> SyncResult:
        uid = pod.metadata.uid
        self.calls.append(("sync", uid, (update_type, pod.metadata.version)))
        gate = self.gates.get(uid)
        if gate is not None:
            await gate.wait()
        if self.fail.get(uid, 0) > 0:
            self.fail[uid] -= 1
            raise RuntimeError("runtime said no")
        return self.results.get(uid, SyncResult())

    async def sync_terminating_pod(self, pod: Any, grace_period: float) -> None:
        self.calls.append(("terminating", pod.metadata.uid, grace_period))
        if self.terminating_gate is not None:
            await self.terminating_gate.wait()

    async def sync_terminated_pod(self, pod: Any) -> None:
        self.calls.append(("terminated", pod.metadata.uid, None))

    def of(self, kind: str, uid: str) -> list[Any]:
        return [c[2] for c in self.calls if c[0] == kind and c[1] == uid]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def env(clock: FakeClock) -> Any:
    syncer = RecordingSyncer()
    workers = PodWorkers(syncer, clock, resync_interval=60, backoff_period=10)
    yield SimpleNamespace(syncer=syncer, workers=workers, clock=clock)
    await workers.shutdown()


async def test_updates_during_a_sync_coalesce_into_one_with_the_latest_pod(env: Any) -> None:
    env.syncer.gates["a"] = gate = asyncio.Event()
    env.workers.update_pod(make_pod("a", version=0), UpdateType.CREATE)
    await env.clock.settle()
    for v in range(1, 11):
        env.workers.update_pod(make_pod("a", version=v), UpdateType.UPDATE)
    gate.set()
    await env.clock.settle()
    assert env.syncer.of("sync", "a") == [(UpdateType.CREATE, 0), (UpdateType.UPDATE, 10)]


async def test_a_stuck_pod_does_not_delay_another(env: Any) -> None:
    env.syncer.gates["stuck"] = asyncio.Event()  # never set
    env.workers.update_pod(make_pod("stuck"), UpdateType.CREATE)
    env.workers.update_pod(make_pod("b"), UpdateType.CREATE)
    await env.clock.settle()
    assert env.syncer.of("sync", "b") == [(UpdateType.CREATE, 0)]
    assert env.workers.phase("stuck") is WorkerPhase.SYNCING


async def test_periodic_resync_and_requeue_after(env: Any) -> None:
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    await env.clock.run_for(59)
    assert len(env.syncer.of("sync", "a")) == 1
    await env.clock.run_for(1)
    assert env.syncer.of("sync", "a")[-1] == (UpdateType.SYNC, 0)
    env.syncer.results["a"] = SyncResult(requeue_after=5)
    env.workers.update_pod(make_pod("a"))
    await env.clock.run_for(4.9)
    n = len(env.syncer.of("sync", "a"))
    await env.clock.run_for(0.1)
    assert len(env.syncer.of("sync", "a")) == n + 1


async def test_failed_sync_is_retried_after_the_backoff_period(env: Any) -> None:
    env.syncer.fail["a"] = 1
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    await env.clock.run_for(9.9)
    assert len(env.syncer.of("sync", "a")) == 1
    await env.clock.run_for(0.1)
    assert len(env.syncer.of("sync", "a")) == 2


async def test_kill_cancels_the_sync_in_flight_and_runs_the_progression(env: Any) -> None:
    env.syncer.gates["a"] = asyncio.Event()  # the sync hangs until cancelled
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=7)
    await env.clock.settle()
    kinds = [c[0] for c in env.syncer.calls if c[1] == "a"]
    assert kinds == ["sync", "terminating", "terminated"]
    assert env.syncer.of("terminating", "a") == [7]
    assert env.workers.is_finished("a")
    assert env.workers.phase("a") is WorkerPhase.TERMINATED


async def test_an_interrupted_sync_leaves_the_worker_uncancelled(env: Any) -> None:
    # The sync runs in the worker's own task: the termination's cancellation is
    # taken back, so the calls after it run as in an uncancelled task.
    seen: list[int] = []
    syncer = env.syncer
    original = syncer.sync_terminating_pod

    async def terminating(pod: Any, grace_period: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        seen.append(task.cancelling())
        await asyncio.sleep(0)  # a pending cancellation would land here
        await original(pod, grace_period)

    syncer.sync_terminating_pod = terminating
    syncer.gates["a"] = asyncio.Event()
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=7)
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=5)  # before it lands
    await env.clock.settle()
    assert seen == [0]
    assert env.syncer.of("terminating", "a") == [5]
    assert env.workers.is_finished("a")


async def test_a_sync_that_swallows_its_interruption_still_counts_as_done(env: Any) -> None:
    calls: list[str] = []

    async def stubborn(update_type: UpdateType, pod: Any) -> SyncResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            calls.append("swallowed")
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 1  # not taken back yet
        return SyncResult()

    env.syncer.sync_pod = stubborn
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=1)
    await env.clock.settle()
    assert calls == ["swallowed"]
    assert env.syncer.of("terminating", "a") == [1]
    assert env.workers.is_finished("a")


async def test_shutdown_during_an_interrupted_sync_still_stops_the_worker(env: Any) -> None:
    env.syncer.gates["a"] = asyncio.Event()
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=1)
    await env.workers.shutdown()  # before the interruption landed
    assert env.syncer.of("terminating", "a") == []


async def test_a_terminated_uid_never_runs_again_until_forgotten(env: Any) -> None:
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=0)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a", version=2), UpdateType.CREATE)
    await env.clock.run_for(120)
    assert all(c[0] != "sync" or c[2][1] != 2 for c in env.syncer.calls)
    assert env.workers.sync_known_pods(desired=["a"]) == []
    assert env.workers.sync_known_pods(desired=[]) == ["a"]
    assert env.workers.phase("a") is None


async def test_terminal_pod_goes_through_terminating_with_its_own_grace(env: Any) -> None:
    env.syncer.results["job"] = SyncResult(terminal=True)
    env.workers.update_pod(make_pod("job", grace=12), UpdateType.CREATE)
    await env.clock.settle()
    assert env.syncer.of("terminating", "job") == [12.0]
    assert env.workers.is_finished("job")


async def test_deletion_timestamp_counts_as_kill(env: Any) -> None:
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a", deleted=True, grace=3), UpdateType.UPDATE)
    await env.clock.settle()
    assert env.syncer.of("terminating", "a") == [3.0]


async def test_grace_period_only_shrinks_and_a_shorter_one_restarts_termination(env: Any) -> None:
    env.syncer.terminating_gate = gate = asyncio.Event()
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=30)
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=60)  # longer: ignored
    await env.clock.settle()
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=2)  # shorter: restart
    await env.clock.settle()
    gate.set()
    await env.clock.settle()
    assert env.syncer.of("terminating", "a") == [30, 2]
    assert env.workers.is_finished("a")


async def test_shutdown_cancels_workers_without_terminating_pods(env: Any) -> None:
    env.syncer.gates["a"] = asyncio.Event()
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    await env.workers.shutdown()
    assert env.syncer.of("terminating", "a") == []
    env.workers.update_pod(make_pod("a"), UpdateType.KILL)  # after shutdown: ignored
    await env.clock.settle()
    assert env.syncer.of("terminating", "a") == []


async def test_wait_terminated_returns_once_containers_are_stopped(env: Any) -> None:
    env.syncer.terminating_gate = gate = asyncio.Event()
    env.workers.update_pod(make_pod("a"), UpdateType.CREATE)
    await env.clock.settle()
    waiter = asyncio.create_task(env.workers.wait_terminated("a"))
    env.workers.update_pod(make_pod("a"), UpdateType.KILL, grace_period=1)
    await env.clock.settle()
    assert not waiter.done()
    gate.set()
    await env.clock.settle()
    assert waiter.done()
    await env.workers.wait_terminated("unknown")  # returns at once
