"""The pod syncer starts from the PLEG's pod cache when the cache is fresh enough,
and the generic PLEG does not inspect a pod the cache already holds as listed.

The rule under test: a sync may use a status observed after the syncer last acted
on the pod (the kubelet's pod workers start from the cache the same way); a status
from before those actions would start containers twice or miss a kill, so then
the syncer reads afresh.
"""

from __future__ import annotations

from pathlib import Path

from _podsync_syncer_helpers import IMAGE, RecordingRuntime, mkcontainer, mkpod
from test_pleg_generic import Collector

from kubelet_kit.container.interfaces import ContainerState
from kubelet_kit.node.podworkers import UpdateType
from kubelet_kit.pleg import GenericPLEG, PodCache
from kubelet_kit.pleg.interfaces import PodLifecycleEventType
from kubelet_kit.podsync.syncer import PodStatusSource, RuntimePodSyncer
from kubelet_kit.status import StatusManager
from kubelet_kit.testing import FakeClock


class TickingClock(FakeClock):
    """A fake clock whose wall time moves on by a microsecond at each reading, as a
    real one does between two steps of a sync (a FakeClock's stands still, and
    a read stamped at the very instant the last action ended may have begun
    before it: the syncer then reads afresh, as the next test shows)."""

    def now(self) -> float:
        self.set_wall_time(super().now() + 1e-6)
        return super().now()


INSPECTION_CALLS = ("list_pod_sandboxes", "list_containers", "pod_sandbox_status")


def make_syncer(
    tmp_path: Path, clock: FakeClock | None = None
) -> tuple[FakeClock, RecordingRuntime, PodCache, StatusManager, RuntimePodSyncer]:
    clock = clock or FakeClock()
    runtime = RecordingRuntime(clock, images=[IMAGE])
    cache = PodCache()
    status = StatusManager(clock)
    syncer = RuntimePodSyncer(
        runtime, clock, status_manager=status, pod_logs_dir=str(tmp_path), pod_cache=cache
    )
    return clock, runtime, cache, status, syncer


def inspections(runtime: RecordingRuntime) -> list[str]:
    return [c.method for c in runtime.calls if c.method in INSPECTION_CALLS]


def test_the_pleg_cache_answers_reads() -> None:
    assert isinstance(PodCache(), PodStatusSource)


async def test_a_new_pod_after_a_relist_starts_without_asking_the_runtime(
    tmp_path: Path,
) -> None:
    clock, runtime, cache, _, syncer = make_syncer(tmp_path)
    cache.update_time(clock.now())  # a relist found nothing of the pod
    clock.advance(1.0)
    await syncer.sync_pod(UpdateType.CREATE, mkpod())
    methods = [c.method for c in runtime.calls]
    # Nothing is read before the sandbox is made; the one read after the starts
    # is what the status comes from, and it is in the cache.
    assert methods.index("run_pod_sandbox") < methods.index("list_pod_sandboxes")
    held = cache.get("u1")
    assert held.status is not None
    assert [c.state for c in held.status.container_statuses] == [ContainerState.RUNNING]


async def test_a_sync_after_the_last_actions_uses_the_cache(tmp_path: Path) -> None:
    clock, runtime, _, status, syncer = make_syncer(tmp_path, TickingClock())
    pod = mkpod()
    await syncer.sync_pod(UpdateType.CREATE, pod)
    clock.advance(1.0)
    runtime.clear_calls()
    await syncer.sync_pod(UpdateType.SYNC, pod)
    # The cache holds the read taken after the starts: nothing to ask, nothing to do.
    assert runtime.calls == []
    pod_status = status.get_pod_status("u1")
    assert pod_status is not None and pod_status.phase == "Running"
    assert [n for n, _ in runtime.started] == ["app"]


async def test_a_status_from_before_the_last_actions_is_read_again(tmp_path: Path) -> None:
    clock, runtime, cache, _, syncer = make_syncer(tmp_path)
    pod = mkpod()
    await syncer.sync_pod(UpdateType.CREATE, pod)
    # A clock standing still: the cache's entry is not later than the actions, so
    # it might have been read before they ended.
    cache.update_time(clock.now())
    runtime.clear_calls()
    await syncer.sync_pod(UpdateType.SYNC, pod)
    assert inspections(runtime) == [
        "list_pod_sandboxes",
        "pod_sandbox_status",
        "list_containers",
    ]
    assert [n for n, _ in runtime.started] == ["app"]


async def test_a_died_container_the_cache_learns_of_is_restarted(tmp_path: Path) -> None:
    clock, runtime, cache, _, syncer = make_syncer(tmp_path)
    pleg = GenericPLEG(runtime, clock, cache=cache)
    pod = mkpod()
    await syncer.sync_pod(UpdateType.CREATE, pod)
    clock.advance(1.0)
    await pleg.relist()
    (app,) = [c for c in await runtime.list_containers()]
    runtime.exit_container(app.id, 1)
    clock.advance(1.0)
    await pleg.relist()  # inspects the pod: its container died
    clock.advance(1.0)
    await syncer.sync_pod(UpdateType.SYNC, pod)
    assert [n for n, _ in runtime.started] == ["app", "app"]


async def test_a_pod_added_again_after_removal_starts_afresh(tmp_path: Path) -> None:
    clock, runtime, cache, status, syncer = make_syncer(tmp_path)
    # Never restarted: a sync that believed the old, exited containers still
    # there would call the pod finished instead of running it.
    pod = mkpod(mkcontainer(command=("sh", "-c", "exit 0")), restart="Never")
    await syncer.sync_pod(UpdateType.CREATE, pod)
    await syncer.sync_terminating_pod(pod, 30.0)
    await syncer.sync_terminated_pod(pod)
    assert await runtime.list_containers() == []
    clock.advance(1.0)
    cache.update_time(clock.now())
    clock.advance(1.0)
    status.remove("u1")
    await syncer.sync_pod(UpdateType.CREATE, pod)
    assert [n for n, _ in runtime.started] == ["app", "app"]


async def test_the_pleg_does_not_inspect_a_pod_the_cache_holds_as_listed(
    tmp_path: Path,
) -> None:
    clock, runtime, cache, _, syncer = make_syncer(tmp_path)
    pleg = GenericPLEG(runtime, clock, cache=cache)
    await pleg.relist()
    clock.advance(1.0)
    await syncer.sync_pod(UpdateType.CREATE, mkpod())
    held = cache.get("u1")
    clock.advance(1.0)
    runtime.clear_calls()
    events = Collector(pleg)
    await pleg.relist()
    # The events are sent; the status the syncer read after its starts stands.
    types = [t for _, t, _ in await events.take()]
    await events.close()
    assert types == [PodLifecycleEventType.CONTAINER_STARTED] * 2
    assert runtime.calls_to("container_status") == []
    assert runtime.calls_to("pod_sandbox_status") == []
    assert cache.get("u1") is held


async def test_the_pleg_inspects_a_pod_whose_cached_status_differs(tmp_path: Path) -> None:
    clock, runtime, cache, _, syncer = make_syncer(tmp_path)
    pleg = GenericPLEG(runtime, clock, cache=cache)
    await pleg.relist()
    clock.advance(1.0)
    await syncer.sync_pod(UpdateType.CREATE, mkpod())
    (app,) = [c for c in await runtime.list_containers()]
    runtime.exit_container(app.id, 2)
    clock.advance(1.0)
    runtime.clear_calls()
    await pleg.relist()
    assert len(runtime.calls_to("container_status")) == 1
    held = cache.get("u1").status
    assert held is not None
    assert [c.state for c in held.container_statuses] == [ContainerState.EXITED]
