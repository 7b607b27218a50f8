"""Faults in the middle of pod creation, on a real containerd.

containerd is killed (SIGKILL, as a crash) at each step of making a pod: during
or right after RunPodSandbox, CreateContainer and StartContainer. The agent that
saw the fault is stopped too, containerd comes back, and a new agent takes over
the same state, as after a node's power cut. The end state must be the kubelet's:
one ready sandbox, each container running once and in it, whatever the first
attempt left (a NOTREADY or half-made sandbox, a created but never started
container) stopped rather than adopted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import PodStatus
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import ContainerState, PodSandboxState
from kubelet_kit.cri import CRIRuntime

from .containerd import Containerd
from .test_composer_containerd import (
    Agent,
    all_running,
    container,
    containers,
    manifest,
    sandboxes,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


class KillingRuntime:
    """A CRIRuntime that kills containerd at one step, once.

    ``when`` is ``"during"`` (the call is sent, containerd is killed while it
    works), ``"after"`` (the call succeeds, containerd is killed before the
    agent hears back) or ``"bounce"`` (killed while it works and started again
    at once, so the agent's own retry of the call meets a restarted containerd).
    Every other call passes through.
    """

    def __init__(self, inner: CRIRuntime, containerd: Containerd, step: str, when: str) -> None:
        self._inner = inner
        self._containerd = containerd
        self._step = step
        self._when = when
        self.fired = asyncio.Event()
        #: The sandbox of every CreateContainer the agent sent.
        self.created_in: list[str] = []

    async def create_container(self, pod_sandbox_id: str, *args: Any, **kwargs: Any) -> str:
        """Record the sandbox, then as any other call."""
        self.created_in.append(pod_sandbox_id)
        return await self.__getattr__("create_container")(pod_sandbox_id, *args, **kwargs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._step or self.fired.is_set():
            return attr

        async def faulty(*args: Any, **kwargs: Any) -> Any:
            self.fired.set()
            call = asyncio.ensure_future(attr(*args, **kwargs))
            if self._when in ("during", "bounce"):
                # Long enough for the request to reach containerd and start work
                # (a sandbox's shim, a container's snapshot), short of its end.
                await asyncio.sleep(0.03)
                await asyncio.to_thread(self._containerd.kill)
                if self._when == "bounce":
                    await asyncio.to_thread(self._containerd.start)
                return await call
            result = await call
            await asyncio.to_thread(self._containerd.kill)
            return result

        return faulty


@pytest.mark.parametrize("when", ["during", "after", "bounce"])
@pytest.mark.parametrize("step", ["run_pod_sandbox", "create_container", "start_container"])
async def test_a_crash_mid_creation_ends_in_one_ready_sandbox_and_each_container_once(
    containerd: Containerd,
    source: ProgrammaticSource,
    tmp_path: Path,
    cleanup: None,
    step: str,
    when: str,
) -> None:
    pod = manifest("crashed", [container("app"), container("side")], restart="Always")
    first = Agent(
        containerd, tmp_path, source, wrap=lambda cri: KillingRuntime(cri, containerd, step, when)
    )
    faulty: KillingRuntime = first.runtime
    source.add(pod)
    if when == "bounce":
        # One agent throughout: it must not take what the killed call left.
        second = first
    else:
        async with first:
            await asyncio.wait_for(faulty.fired.wait(), 60)
            await asyncio.sleep(1)  # the agent meets the dead runtime
            first.check()
        await asyncio.to_thread(containerd.start)
        second = Agent(
            containerd, tmp_path, source, wrap=lambda cri: KillingRuntime(cri, containerd, "", when)
        )
    async with second:
        await second.eventually(
            lambda: all_running(second.status(pod), 2), "pod Running", within=60
        )
        await asyncio.sleep(3)  # relists, syncs and housekeeping of the second agent

        async def settled() -> bool:
            boxes = await sandboxes(second.cri, pod.uid)
            ready = [b for b in boxes if b.state is PodSandboxState.READY]
            running = [
                c
                for c in await containers(second.cri, pod.uid)
                if c.state is ContainerState.RUNNING
            ]
            return len(ready) == 1 and len(running) == 2

        await second.eventually(settled, "one ready sandbox, two running containers", within=30)
        boxes = await sandboxes(second.cri, pod.uid)
        [ready] = [b for b in boxes if b.state is PodSandboxState.READY]
        ctrs = await containers(second.cri, pod.uid)
        running = sorted(
            (c.metadata.name, c.pod_sandbox_id) for c in ctrs if c.state is ContainerState.RUNNING
        )
        assert running == [("app", ready.id), ("side", ready.id)], ctrs
        # No container was ever put in a sandbox that was not ready.
        made_in = set(faulty.created_in) | set(second.runtime.created_in)
        assert made_in == {ready.id}, (made_in, boxes)
        # Whatever the crash left is stopped, never running beside the new pod.
        for c in ctrs:
            if c.pod_sandbox_id != ready.id:
                assert c.state is not ContainerState.RUNNING, c
        status = second.status(pod)
        assert all_running(status, 2), status
        assert {
            cs.container_id.removeprefix("containerd://") for cs in status.container_statuses
        } == {c.id for c in ctrs if c.state is ContainerState.RUNNING}
        second.check()


@pytest.mark.parametrize("delay", [0.1, 0.2, 0.3])
async def test_a_pod_removed_while_being_made_is_only_stopped(
    containerd: Containerd,
    source: ProgrammaticSource,
    tmp_path: Path,
    cleanup: None,
    delay: float,
) -> None:
    # Removed (as a static pod whose file is deleted) a moment after it is added,
    # while its sandbox or containers are being made: what was being made is let
    # finish and then stopped; nothing is started after the removal, and nothing
    # is left half-started (a shim killed mid-start is a StartError, exit 128).
    pod = manifest("removed", [container("app"), container("side")], restart="Always")
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as agent:
        last: dict[str, PodStatus] = {}

        async def record() -> None:
            async for got, status in agent.kubelet.subscribe():
                last[got.uid] = status

        recorder = asyncio.create_task(record())
        await asyncio.sleep(delay)
        source.remove(pod.uid)

        async def stopped() -> bool:
            workers = agent.kubelet.workers
            if not (workers.is_finished(pod.uid) or workers.phase(pod.uid) is None):
                return False  # a finished pod's worker is soon forgotten
            return not [
                c for c in await containers(agent.cri, pod.uid) if c.state is ContainerState.RUNNING
            ]

        await agent.eventually(stopped, "the pod stopped", within=60)
        events = agent.kubelet.events.events(pod.uid)
        assert not [e for e in events if e.type == "Warning"], events
        started = [e.message for e in events if e.reason == "Started"]
        stopping = [e.message for e in events if e.reason == "Killing"]
        # Every container that started was stopped by the termination.
        assert len(stopping) == len(started), events
        recorder.cancel()
        if pod.uid not in last:  # removed before the agent saw it at all
            assert events == [] and await containers(agent.cri, pod.uid) == []
            return
        status = last[pod.uid]  # the last one the agent published
        assert len(status.container_statuses) == 2, status
        for cs in status.container_statuses:
            terminated = cs.state.terminated
            assert terminated is not None, cs
            # Stopped by its SIGTERM trap, or never made (the kubelet's unknown).
            assert (terminated.reason, terminated.exit_code) in (
                ("Completed", 0),
                ("ContainerStatusUnknown", 137),
            ), cs
