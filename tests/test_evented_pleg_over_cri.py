"""EventedPLEG end to end over the project's CRI server.

The agent (Kubelet, EventedPLEG, pod syncer) talks to a :class:`CRIRuntime` on a
unix socket, served by a :class:`CRIServer` in front of a :class:`FakeRuntime`
or the host-process runtime. The agent runs on a FakeClock; the gRPC traffic is
real.

Holding the agent's clock still proves where a change was learnt from: with no
clock time passing, neither the safety relist (every 300 s) nor any periodic
resync can run, so a container exit that reaches the pod status came through the
runtime's event stream. Without a stream (a runtime whose events are off) the
PLEG falls back to relisting every second of clock time, and the pod still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
from prometheus_client import CollectorRegistry

from kubelet_kit.api import Pod, PodStatus, load_pod
from kubelet_kit.api.status import ContainerStatus as PodContainerStatus
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import ContainerEvent, ContainerFilter, Runtime
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.pleg import EventedPLEG
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.timeout(60)

#: Real seconds a test waits for gRPC round trips before giving up; a guard only,
#: the agent's own time never moves while the test waits on it.
IO_GUARD = 20.0


def two_container_pod(name: str, job_script: str = "sleep 300") -> Pod:
    """``app`` runs on; ``job`` runs ``job_script``; restartPolicy Never."""
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {"name": "app", "image": "busybox", "command": ["sh", "-c", "sleep 300"]},
                    {"name": "job", "image": "busybox", "command": ["sh", "-c", job_script]},
                ],
            },
        },
        source="test",
    )


class Subscribed:
    """Delegates to a runtime; notes when an event stream is opened on it, so a
    test knows the server listens before it makes anything happen."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner
        self.subscribed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        stream = self.inner.get_container_events()
        self.subscribed.set()
        return stream


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
    """The agent, over the CRI, in front of ``runtime``."""

    clock: FakeClock
    runtime: Runtime
    pleg: EventedPLEG
    kubelet: Kubelet
    source: ProgrammaticSource
    registry: CollectorRegistry

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    @property
    def relists(self) -> float:
        return self.metric("kubelet_pleg_relist_duration_seconds_count")

    def events(self, kind: str) -> float:
        """Pod lifecycle events of ``kind`` the PLEG sent."""
        return self.metric("kubelet_pleg_events_total", type=kind)

    async def container_id(self, pod_uid: str, name: str) -> str:
        found = await self.runtime.list_containers(
            ContainerFilter(label_selector={kl.POD_UID: pod_uid, kl.CONTAINER_NAME: name})
        )
        assert len(found) == 1, found
        return found[0].id


@contextlib.asynccontextmanager
async def node(
    sock_dir: Path, runtime: Runtime, clock: FakeClock, *, stream: bool
) -> AsyncIterator[Node]:
    """An agent on ``clock`` whose runtime is ``runtime`` behind a CRIServer.

    ``stream``: whether the runtime has an event stream; before yielding, waits
    until the PLEG subscribed to it, or (without one) fell back to relisting.
    """
    watched = Subscribed(runtime)
    registry = CollectorRegistry()
    async with (
        CRIServer(cast(Runtime, watched), sock_dir / "cri.sock", clock=clock) as server,
        CRIRuntime(server.endpoint, clock=clock, timeout=30) as cri,
    ):
        pleg = EventedPLEG(cri, clock, registry=registry)
        source = ProgrammaticSource(clock=clock)
        kubelet = Kubelet(
            **stub_parts(
                runtime=cri,
                pleg=pleg,
                clock=clock,
                sources=[source],
                node_name="evented-node",
                root_dir=sock_dir / "state",
                pod_logs_dir=sock_dir / "logs",
                registry=registry,
            )
        )
        task = asyncio.create_task(kubelet.run(), name="kubelet")
        try:
            if stream:
                await until(watched.subscribed.is_set, "the PLEG's subscription")
            else:
                await until(lambda: pleg.fallen_back, "the PLEG's fallback")
            yield Node(clock, runtime, pleg, kubelet, source, registry)
        finally:
            kubelet.stop()
            await asyncio.wait_for(task, IO_GUARD)


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


def by_name(status: PodStatus) -> dict[str, PodContainerStatus]:
    return {cs.name: cs for cs in status.container_statuses}


def running(status: PodStatus) -> bool:
    cs = by_name(status)
    return (
        status.phase == "Running"
        and set(cs) == {"app", "job"}
        and all(s.state.running is not None for s in cs.values())
    )


def job_terminated(status: PodStatus) -> bool:
    job = by_name(status).get("job")
    return job is not None and job.state.terminated is not None


def all_terminated(status: PodStatus) -> bool:
    cs = by_name(status)
    return set(cs) == {"app", "job"} and all(s.state.terminated is not None for s in cs.values())


async def test_a_container_exit_arrives_through_the_event_stream(sock_dir: Path) -> None:
    clock = FakeClock()
    fake = FakeRuntime(clock, events=True, images=["busybox"])
    async with node(sock_dir, fake, clock, stream=True) as n:
        pod = two_container_pod("web")
        n.source.add(pod)
        await status_where(n, pod.uid, running, "pod Running")
        assert not n.pleg.fallen_back
        assert n.metric("kubelet_evented_pleg_connection_success_count") >= 1

        job = await n.container_id(pod.uid, "job")
        relists, died, now = n.relists, n.events("ContainerDied"), clock.monotonic()
        fake.exit_container(job, 3)
        status = await status_where(n, pod.uid, job_terminated, "job terminated")

        # No clock time passed: no relist ran, the stream told the agent. (The
        # status may come from a sync another streamed event caused a moment
        # earlier; the exit's own ContainerDied follows.)
        await until(lambda: n.events("ContainerDied") == died + 1, "ContainerDied sent")
        assert (clock.monotonic(), n.relists) == (now, relists)
        terminated = by_name(status)["job"].state.terminated
        assert terminated is not None
        assert (terminated.exit_code, terminated.reason) == (3, "Error")
        assert by_name(status)["job"].restart_count == 0
        assert by_name(status)["app"].state.running is not None
        assert status.phase == "Running"

        # A graceful delete through the source stops the pod and removes it from
        # the runtime, still without clock time; the removals stream back too.
        n.source.delete(pod.uid)
        final = await status_where(n, pod.uid, all_terminated, "every container terminated")
        assert final.phase == "Failed"  # restartPolicy Never and the job failed

        async def removed() -> bool:
            return await fake.list_pod_sandboxes() == [] and await fake.list_containers() == []

        await until(removed, "sandbox and containers removed")
        await until(
            lambda: n.events("ContainerRemoved") >= 3,
            "ContainerRemoved for both containers and the sandbox",
        )
        assert (clock.monotonic(), n.relists) == (now, relists)


async def test_without_an_event_stream_the_pleg_relists_and_the_pod_still_works(
    sock_dir: Path,
) -> None:
    clock = FakeClock()
    fake = FakeRuntime(clock, events=False, images=["busybox"])
    async with node(sock_dir, fake, clock, stream=False) as n:
        pod = two_container_pod("web")
        n.source.add(pod)
        await status_where(n, pod.uid, running, "pod Running")
        # The first GetContainerEvents answered UNIMPLEMENTED through the server.
        assert n.pleg.fallen_back
        assert n.pleg.generic.relist_period == 1.0
        assert n.metric("kubelet_evented_pleg_connection_error_count") >= 1
        assert n.metric("kubelet_evented_pleg_connection_success_count") == 0

        job = await n.container_id(pod.uid, "job")
        relists, died = n.relists, n.events("ContainerDied")
        fake.exit_container(job, 3)
        # One second of agent time: the fallback relist finds the exit.
        await clock.run_for(1.0)
        status = await status_where(n, pod.uid, job_terminated, "job terminated")
        assert n.relists > relists
        assert n.events("ContainerDied") == died + 1
        terminated = by_name(status)["job"].state.terminated
        assert terminated is not None and terminated.exit_code == 3
        healthy, message = n.kubelet.healthy()
        assert healthy, message


async def test_a_real_process_exit_arrives_through_the_host_runtimes_stream(
    sock_dir: Path,
) -> None:
    # Real processes, their exits seen through each shim and streamed over the
    # CRI. The agent's clock starts at the real time and stands still, so the
    # runtime's event stamps are newer than anything the agent wrote in its cache.
    clock = FakeClock(start=time.time())
    host = HostProcessRuntime(sock_dir / "host-root")
    go = sock_dir / "go"
    pod = two_container_pod("real", f"echo hello; while [ ! -e {go} ]; do sleep 0.05; done; exit 3")
    try:
        async with node(sock_dir, host, clock, stream=True) as n:
            n.source.add(pod)
            await status_where(n, pod.uid, running, "pod Running")
            relists, died, now = n.relists, n.events("ContainerDied"), clock.monotonic()
            go.touch()  # the job exits 3 by itself
            status = await status_where(n, pod.uid, job_terminated, "job terminated")
            await until(lambda: n.events("ContainerDied") == died + 1, "ContainerDied sent")
            assert (clock.monotonic(), n.relists) == (now, relists)
            terminated = by_name(status)["job"].state.terminated
            assert terminated is not None and terminated.exit_code == 3
            assert by_name(status)["app"].state.running is not None
    finally:
        for c in await host.list_containers():
            await host.stop_container(c.id, 0)
        for s in await host.list_pod_sandboxes():
            await host.remove_pod_sandbox(s.id)
