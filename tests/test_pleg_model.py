"""GenericPLEG against a model: random runtime histories, relists at random points.

Whatever happens between two relists (starts, exits, restarts, removals, pods
coming and going), folding the events a watcher received must give back what
the runtime holds, and the cache must hold every pod's current containers.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pleg_generic import container_config, sandbox_config, start_container

from kubelet_kit.container.interfaces import ContainerState, PodSandboxState
from kubelet_kit.pleg import EventedPLEG, GenericPLEG, PodLifecycleEvent, PodLifecycleEventType
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

OPS = ["new_pod", "exit", "remove", "restart", "create", "stop_pod", "remove_pod", "relist"]

FOLD = {
    PodLifecycleEventType.CONTAINER_STARTED: "running",
    PodLifecycleEventType.CONTAINER_DIED: "exited",
    PodLifecycleEventType.CONTAINER_REMOVED: "gone",
}


async def check(
    runtime: FakeRuntime, pleg: GenericPLEG, received: list[PodLifecycleEvent], pods: dict[str, str]
) -> None:
    """Events folded per container equal the runtime's states; the cache holds
    every present pod with exactly its current containers."""
    for _ in range(20):
        await asyncio.sleep(0)
    folded: dict[str, str] = {}
    for event in received:
        folded[event.data] = FOLD[event.type]
    truth: dict[str, str] = {}
    for s in await runtime.list_pod_sandboxes():
        truth[s.id] = "running" if s.state is PodSandboxState.READY else "exited"
    listed = await runtime.list_containers()
    for c in listed:
        if c.state is ContainerState.RUNNING:
            truth[c.id] = "running"
        elif c.state is ContainerState.EXITED:
            truth[c.id] = "exited"
        else:
            truth[c.id] = "created"
    for cid, state in truth.items():
        if state == "created":
            assert folded.get(cid) is None, f"{cid}: created containers are not announced"
        else:
            assert folded.get(cid) == state, (
                f"{cid}: runtime says {state}, events {folded.get(cid)}"
            )
    for cid, state in folded.items():
        if cid not in truth:
            assert state == "gone", f"{cid} is gone from the runtime but events say {state}"
    for uid in pods:
        status = pleg.cache.get(uid).status
        assert status is not None
        mine = {c.id for c in listed if c.labels["io.kubernetes.pod.uid"] == uid}
        assert {c.id for c in status.container_statuses} == mine
    assert set(pleg.cache.uids()) == set(pods)


async def play(ops: list[tuple[str, int, bool]]) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    pleg = GenericPLEG(runtime, clock)
    received: list[PodLifecycleEvent] = []

    async def watcher() -> None:
        async for event in pleg.watch():
            received.append(event)

    reader = asyncio.create_task(watcher())
    pods: dict[str, str] = {}  # uid -> sandbox id
    attempts: dict[str, int] = {}
    serial = 0

    async def containers(state: ContainerState | None = None) -> list[tuple[str, str]]:
        listed = await runtime.list_containers()
        return [
            (c.labels["io.kubernetes.pod.uid"], c.id)
            for c in listed
            if state is None or c.state is state
        ]

    for op, n, relist_after in [*ops, ("relist", 0, False)]:
        clock.advance(1)
        if op == "new_pod":
            uid = f"u{serial}"
            serial += 1
            pods[uid] = await runtime.run_pod_sandbox(sandbox_config(uid))
            attempts[uid] = 0
            await start_container(runtime, pods[uid], uid, "app")
        elif op == "relist":
            await pleg.relist()
            # After every relist, not only at the end: a change missed now may be
            # papered over by a later relist.
            await check(runtime, pleg, received, pods)
        elif not pods:
            continue
        elif op in ("stop_pod", "remove_pod", "restart", "create"):
            uid = sorted(pods)[n % len(pods)]
            sid = pods[uid]
            if op == "stop_pod":
                await runtime.stop_pod_sandbox(sid)
            elif op == "remove_pod":
                await runtime.remove_pod_sandbox(sid)
                del pods[uid]
            else:
                sandbox = await runtime.pod_sandbox_status(sid)
                if sandbox.state is not PodSandboxState.READY:
                    continue
                attempts[uid] += 1
                if op == "create":
                    await runtime.create_container(
                        sid, container_config(uid, "side", attempts[uid]), sandbox_config(uid)
                    )
                    continue
                for pod_uid, cid in await containers(ContainerState.RUNNING):
                    if pod_uid == uid:
                        runtime.exit_container(cid, 1)
                await start_container(runtime, sid, uid, "app", attempts[uid])
        else:
            targets = await containers(ContainerState.RUNNING if op == "exit" else None)
            if not targets:
                continue
            _, cid = targets[n % len(targets)]
            if op == "exit":
                runtime.exit_container(cid, 0)
            else:
                await runtime.remove_container(cid)
        if relist_after:
            await pleg.relist()
            await check(runtime, pleg, received, pods)
    reader.cancel()


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.booleans()),
        max_size=25,
    )
)
def test_events_fold_into_the_runtime_state(ops: list[tuple[str, int, bool]]) -> None:
    asyncio.run(play(ops))


EVENTED_OPS = [*OPS, "break_stream", "break_stream"]


async def play_evented(ops: list[tuple[str, int]]) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, events=True)
    pleg = EventedPLEG(runtime, clock)
    received: list[PodLifecycleEvent] = []

    async def watcher() -> None:
        async for event in pleg.watch():
            received.append(event)

    reader = asyncio.create_task(watcher())
    run = asyncio.create_task(pleg.run())
    await clock.run_for(0)
    pods: dict[str, str] = {}
    attempts: dict[str, int] = {}
    serial = 0

    async def running_of(uid: str | None = None) -> list[str]:
        return [
            c.id
            for c in await runtime.list_containers()
            if c.state is ContainerState.RUNNING
            and (uid is None or c.labels["io.kubernetes.pod.uid"] == uid)
        ]

    for op, n in ops:
        if op == "new_pod":
            uid = f"u{serial}"
            serial += 1
            pods[uid] = await runtime.run_pod_sandbox(sandbox_config(uid))
            attempts[uid] = 0
            await start_container(runtime, pods[uid], uid, "app")
        elif op == "relist":
            await pleg.generic.relist()
        elif op == "break_stream":
            runtime.break_event_stream()
        elif pods and op in ("stop_pod", "remove_pod", "restart", "create"):
            uid = sorted(pods)[n % len(pods)]
            sid = pods[uid]
            if op == "stop_pod":
                await runtime.stop_pod_sandbox(sid)
            elif op == "remove_pod":
                await runtime.remove_pod_sandbox(sid)
                del pods[uid]
            elif (await runtime.pod_sandbox_status(sid)).state is PodSandboxState.READY:
                attempts[uid] += 1
                if op == "create":
                    await runtime.create_container(
                        sid, container_config(uid, "side", attempts[uid]), sandbox_config(uid)
                    )
                else:
                    for cid in await running_of(uid):
                        runtime.exit_container(cid, 1)
                    await start_container(runtime, sid, uid, "app", attempts[uid])
        elif op in ("exit", "remove"):
            targets = (
                await running_of()
                if op == "exit"
                else [c.id for c in await runtime.list_containers()]
            )
            if targets:
                cid = targets[n % len(targets)]
                if op == "exit":
                    runtime.exit_container(cid, 0)
                else:
                    await runtime.remove_container(cid)
        await clock.run_for(0.5)

    # Let a broken stream come back (the longest back-off is 30 s), then relist.
    await clock.run_for(32)
    await pleg.generic.relist()
    await clock.run_for(0)
    pleg.stop()
    await run
    await reader

    started = [e.data for e in received if e.type is PodLifecycleEventType.CONTAINER_STARTED]
    assert len(started) == len(set(started)), "a container was announced as started twice"
    folded: dict[str, str] = {}
    for event in received:
        folded[event.data] = FOLD[event.type]
    truth: dict[str, str] = {}
    for s in await runtime.list_pod_sandboxes():
        truth[s.id] = "running" if s.state is PodSandboxState.READY else "exited"
    for c in await runtime.list_containers():
        if c.state is not ContainerState.CREATED:
            truth[c.id] = "running" if c.state is ContainerState.RUNNING else "exited"
    for cid, state in truth.items():
        assert folded.get(cid) == state, f"{cid}: runtime says {state}, events {folded.get(cid)}"
    for cid, state in folded.items():
        if cid not in truth and state != "gone":
            # Only a created-never-started container may have no event at all.
            raise AssertionError(f"{cid} is not running or exited, but events say {state}")
    for uid in pods:
        status = pleg.cache.get(uid).status
        assert status is not None
        listed = {
            c.id
            for c in await runtime.list_containers()
            if c.labels["io.kubernetes.pod.uid"] == uid
        }
        assert {c.id for c in status.container_statuses} == listed, uid
    assert set(pleg.cache.uids()) == set(pods)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(EVENTED_OPS), st.integers(0, 7)), max_size=20))
def test_evented_events_fold_into_the_runtime_state(ops: list[tuple[str, int]]) -> None:
    asyncio.run(play_evented(ops))
