"""A pod that has ended keeps its final phase.

The kubelet's rules: a pod never leaves Failed or Succeeded; housekeeping
(``HandlePodCleanups``) kills only the orphaned runtime pods that still run (what
``GetPods(false)`` lists: running containers, ready sandboxes), and the exited
containers of a pod no source wants are removed by the container GC, without
stopping the pod again or writing a status for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest
from test_kubelet import leftover_sandbox_config, manifest, start_leftover

from kubelet_kit.container import (
    ContainerFilter,
    PodSandboxFilter,
    labels,
)
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.testing.fake_runtime import FakeRuntime


@asynccontextmanager
async def phases_of(env: KubeletEnv, uid: str) -> AsyncIterator[list[str]]:
    """Every phase the agent publishes for pod ``uid`` while the block runs."""
    seen: list[str] = []
    subscription = env.kubelet.subscribe()

    async def collect() -> None:
        async for pod, status in subscription:
            if pod.metadata.uid == uid:
                seen.append(status.phase)

    task = asyncio.ensure_future(collect())
    try:
        yield seen
    finally:
        await env.clock.settle()
        subscription.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def left_in_runtime(env: KubeletEnv, uid: str) -> tuple[int, int]:
    """How many containers and sandboxes of pod ``uid`` the runtime holds."""
    selector = {labels.POD_UID: uid}
    containers = await env.runtime.list_containers(ContainerFilter(label_selector=selector))
    sandboxes = await env.runtime.list_pod_sandboxes(PodSandboxFilter(label_selector=selector))
    return len(containers), len(sandboxes)


async def gone(env: KubeletEnv, uid: str) -> bool:
    return await left_in_runtime(env, uid) == (0, 0)


@contextmanager
def no_new_stops(env: KubeletEnv) -> Iterator[None]:
    before = (
        len(env.runtime.calls_to("stop_container")),
        len(env.runtime.calls_to("stop_pod_sandbox")),
    )
    yield
    after = (
        len(env.runtime.calls_to("stop_container")),
        len(env.runtime.calls_to("stop_pod_sandbox")),
    )
    assert after == before, "a pod that had ended was stopped again"


@pytest.mark.parametrize(("command", "final"), [("exit 0", "Succeeded"), ("exit 3", "Failed")])
async def test_a_pod_removed_after_it_ended_keeps_its_final_phase(command: str, final: str) -> None:
    async with KubeletEnv() as env:
        async with phases_of(env, "uid-job") as phases:
            env.add_pod(manifest("job", command=command, restart="Never"))
            await env.wait_for(lambda: env.phase("job") == final, what=f"job {final}")
            await env.sleep(10)  # its worker finishes; the dead container stays
            assert await left_in_runtime(env, "uid-job") == (1, 1)
            with no_new_stops(env):
                env.remove_pod("job")
                # Housekeeping forgets the worker, then finds the dead containers
                # in the runtime round after round, until the container GC.
                await env.sleep(CONTAINER_GC_PERIOD + 10)
        # Never back to Pending, never another phase: the final one throughout.
        assert set(phases[phases.index(final) :]) == {final}
        # What it left is gone, without a status written for it.
        assert await left_in_runtime(env, "uid-job") == (0, 0)
        assert env.kubelet.pod_status("uid-job") is None


async def test_dead_containers_of_a_pod_no_source_wants_are_removed_not_stopped() -> None:
    # A previous agent left an ended pod behind; no source wants it now.
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    sandbox, cid = await start_leftover(runtime, "ended", "sh", "-c", "exit 0")
    await runtime.stop_container(cid, 0)
    await runtime.stop_pod_sandbox(sandbox)
    async with KubeletEnv(clock=clock, runtime=runtime) as env:
        async with phases_of(env, "uid-ended") as phases:
            with no_new_stops(env):
                await env.wait_for(
                    lambda: gone(env, "uid-ended"),
                    timeout=CONTAINER_GC_PERIOD + 10,
                    what="leftovers removed",
                )
        assert phases == []
        assert env.kubelet.workers.phase("uid-ended") is None


async def test_a_running_orphan_is_still_stopped() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    # Only a ready sandbox: the kubelet's GetPods(false) lists it, so it is killed.
    await runtime.run_pod_sandbox(leftover_sandbox_config("ghost"))
    async with KubeletEnv(clock=clock, runtime=runtime) as env:
        await env.wait_for(
            lambda: bool(runtime.calls_to("stop_pod_sandbox")), what="orphan sandbox stopped"
        )
