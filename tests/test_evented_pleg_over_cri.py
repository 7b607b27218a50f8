"""EventedPLEG end to end over the project's CRI server.

The agent (Kubelet, EventedPLEG, pod syncer) talks to a :class:`CRIRuntime` on a
unix socket, served by a :class:`CRIServer` in front of a :class:`FakeRuntime`.
Everything runs on one FakeClock; the gRPC traffic is real.

Holding the clock still proves where a change was learnt from: with no clock time
passing, neither the safety relist (every 300 s) nor any periodic resync can run,
so a container exit that reaches the pod status came through the runtime's event
stream. Without a stream (a runtime whose events are off) the PLEG falls back to
relisting every second of clock time, and the pod still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from prometheus_client import CollectorRegistry

from kubelet_kit.api import PodStatus, load_pod
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import ContainerFilter
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.pleg import EventedPLEG
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.timeout(60)

#: Real seconds a test waits for gRPC round trips before giving up; a guard only,
#: the agent's own time never moves while the test waits on it.
IO_GUARD = 20.0


def manifest(name: str, *, restart: str = "Never") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {"name": "app", "image": "busybox", "command": ["sh", "-c", "sleep infinity"]},
                {"name": "job", "image": "busybox", "command": ["sh", "-c", "sleep infinity"]},
            ],
        },
    }


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # A short path: a unix socket path must fit in 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="kkev-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@attrs.define
class Node:
    """The agent over the CRI, and the fake behind the server."""

    clock: FakeClock
    fake: FakeRuntime
    cri: CRIRuntime
    pleg: EventedPLEG
    kubelet: Kubelet
    source: ProgrammaticSource
    registry: CollectorRegistry

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    @property
    def relists(self) -> float:
        return self.metric("kubelet_pleg_relist_duration_seconds_count")

    def died_events(self) -> float:
        return self.metric("kubelet_pleg_events_total", type="ContainerDied")

    def removed_events(self) -> float:
        return self.metric("kubelet_pleg_events_total", type="ContainerRemoved")

    async def container_id(self, pod_uid: str, name: str) -> str:
        found = await self.fake.list_containers(
            ContainerFilter(label_selector={kl.POD_UID: pod_uid, kl.CONTAINER_NAME: name})
        )
        assert len(found) == 1, found
        return found[0].id


@contextlib.asynccontextmanager
async def node(sock_dir: Path, *, events: bool) -> AsyncIterator[Node]:
    clock = FakeClock()
    fake = FakeRuntime(clock, events=events, images=["busybox"])
    registry = CollectorRegistry()
    async with (
        CRIServer(fake, sock_dir / "cri.sock", clock=clock) as server,
        CRIRuntime(server.endpoint, clock=clock, timeout=30) as cri,
    ):
        pleg = EventedPLEG(cri, clock, registry=registry)
        source = ProgrammaticSource(clock=clock)
        kubelet = Kubelet(
            runtime=cri,
            pleg=pleg,
            clock=clock,
            sources=[source],
            node_name="evented-node",
            root_dir=sock_dir / "state",
            pod_logs_dir=sock_dir / "logs",
            registry=registry,
        )
        task = asyncio.create_task(kubelet.run(), name="kubelet")
        try:
            # Before any pod: the PLEG has subscribed to the stream, or (no events)
            # has been refused and fallen back to relisting.
            if events:
                await until(lambda: fake.event_subscribers == 1, "the PLEG's subscription")
            else:
                await until(lambda: pleg.fallen_back, "the PLEG's fallback")
            yield Node(clock, fake, cri, pleg, kubelet, source, registry)
        finally:
            kubelet.stop()
            await asyncio.wait_for(task, IO_GUARD)


async def status_where(
    n: Node, uid: str, predicate: Callable[[PodStatus], bool], what: str
) -> PodStatus:
    """Wait, on real I/O only, until the pod's status satisfies ``predicate``."""
    updates = n.kubelet.subscribe()
    current = n.kubelet.pod_status(uid)
    if current is not None and predicate(current):
        return current
    try:
        async with asyncio.timeout(IO_GUARD):
            async for pod, status in updates:
                if pod.metadata.uid == uid and predicate(status):
                    return status
    except TimeoutError:
        raise AssertionError(
            f"{what}: not reached; last status {n.kubelet.pod_status(uid)}"
        ) from None
    raise AssertionError(f"{what}: the status stream ended")


async def until(predicate: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Wait for a runtime-side condition. The agent's clock stands still; only the
    gRPC round trips (real I/O) are waited for, in short polls."""
    try:
        async with asyncio.timeout(IO_GUARD):
            while True:
                got = predicate()
                if await got if inspect.isawaitable(got) else got:
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"{what}: not reached") from None


def running(status: PodStatus) -> bool:
    return status.phase == "Running" and all(
        cs.state.running is not None for cs in status.container_statuses
    ) and len(status.container_statuses) == 2


def job_terminated(status: PodStatus) -> bool:
    return any(
        cs.name == "job" and cs.state.terminated is not None for cs in status.container_statuses
    )


def all_terminated(status: PodStatus) -> bool:
    return len(status.container_statuses) == 2 and all(
        cs.state.terminated is not None for cs in status.container_statuses
    )


async def test_a_container_exit_arrives_through_the_event_stream(sock_dir: Path) -> None:
    async with node(sock_dir, events=True) as n:
        pod = load_pod(manifest("web"), source="test")
        n.source.add(pod)
        await status_where(n, pod.uid, running, "pod Running")
        assert n.pleg.fallen_back is False
        assert n.metric("kubelet_evented_pleg_connection_success_count") >= 1

        job = await n.container_id(pod.uid, "job")
        relists, died, now = n.relists, n.died_events(), n.clock.monotonic()
        n.fake.exit_container(job, 3)
        status = await status_where(n, pod.uid, job_terminated, "job terminated")

        # No clock time passed: no relist ran, the stream told the agent.
        assert n.clock.monotonic() == now
        assert n.relists == relists
        assert n.died_events() == died + 1
        [job_status] = [cs for cs in status.container_statuses if cs.name == "job"]
        assert job_status.state.terminated is not None
        assert (job_status.state.terminated.exit_code,
                job_status.state.terminated.reason) == (3, "Error")
        assert job_status.restart_count == 0
        [app_status] = [cs for cs in status.container_statuses if cs.name == "app"]
        assert app_status.state.running is not None
        assert status.phase == "Running"

        # A graceful delete through the source stops the pod and removes it from
        # the runtime, still without clock time; the removals stream back too.
        n.source.delete(pod.uid)
        final = await status_where(n, pod.uid, all_terminated, "every container terminated")
        assert final.phase == "Failed"  # restartPolicy Never and the job failed

        async def removed() -> bool:
            return await n.fake.list_pod_sandboxes() == [] and await n.fake.list_containers() == []

        await until(removed, "sandbox and containers removed")
        await until(lambda: n.removed_events() >= 3, "ContainerRemoved for both and the sandbox")
        assert n.relists == relists
        assert n.clock.monotonic() == now


async def test_without_an_event_stream_the_pleg_relists_and_the_pod_still_works(
    sock_dir: Path,
) -> None:
    async with node(sock_dir, events=False) as n:
        pod = load_pod(manifest("web"), source="test")
        n.source.add(pod)
        await status_where(n, pod.uid, running, "pod Running")
        # The first GetContainerEvents answered UNIMPLEMENTED through the server.
        assert n.pleg.fallen_back
        assert n.pleg.generic.relist_period == 1.0
        assert n.metric("kubelet_evented_pleg_connection_error_count") >= 1
        assert n.metric("kubelet_evented_pleg_connection_success_count") == 0

        job = await n.container_id(pod.uid, "job")
        relists, died = n.relists, n.died_events()
        n.fake.exit_container(job, 3)
        # One second of agent time: the fallback relist finds the exit.
        await n.clock.run_for(1.0)
        status = await status_where(n, pod.uid, job_terminated, "job terminated")
        assert n.relists > relists
        assert n.died_events() == died + 1
        [job_status] = [cs for cs in status.container_statuses if cs.name == "job"]
        assert job_status.state.terminated is not None
        assert job_status.state.terminated.exit_code == 3
        healthy, message = n.kubelet.healthy()
        assert healthy, message
