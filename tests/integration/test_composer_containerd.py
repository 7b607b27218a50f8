"""The Kubelet composer on a real containerd, through CRIRuntime.

Pods come from a ProgrammaticSource and run, on the host network, in the
session's private containerd; pod logs go under the test's temporary directory.
Real clock, bounded waits. Every test removes the sandboxes of the pods it made,
even when it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubelet_kit.api import Pod, PodStatus, load_pod
from kubelet_kit.api.status import ContainerStatus as PodContainerStatus
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import (
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    PodSandbox,
    PodSandboxFilter,
    PodSandboxState,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.errors import ContainerRuntimeError, RuntimeUnavailableError
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.pleg import EventedPLEG
from kubelet_kit.testing.env import stub_parts

from .containerd import BUSYBOX_IMAGE, Containerd

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NODE = "cri-node"
# The CRI log format: <RFC3339Nano> <stream> <P|F> <text>
LOG_LINE = re.compile(r"^(\S+) (stdout|stderr) ([PF]) (.*)$")
# A long-running container that stops at once, and with exit 0, on SIGTERM (a
# plain `sleep` as PID 1 would ignore it and wait out the grace period).
SERVE = "trap 'exit 0' TERM; echo up; while true; do sleep 1; done"


def manifest(name: str, containers: list[dict[str, Any]], *, restart: str = "Never") -> Pod:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "restartPolicy": restart,
                # containerd 1.6 refuses a pod network without an eth0 (the
                # harness's CNI is loopback only), so the pods use the host's.
                "hostNetwork": True,
                "terminationGracePeriodSeconds": 5,
                "containers": containers,
            },
        },
        source="test",
        node_name=NODE,
    )


def container(name: str, script: str = SERVE, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX_IMAGE, "command": ["sh", "-c", script], **more}


class Agent:
    """A Kubelet over a CRIRuntime of the session's containerd, run in a task."""

    def __init__(
        self,
        containerd: Containerd,
        tmp: Path,
        source: ProgrammaticSource,
        *,
        evented: bool = False,
        wrap: Callable[[CRIRuntime], Any] | None = None,
    ) -> None:
        self.cri = CRIRuntime(containerd.endpoint, timeout=30, backoff_initial=0.05)
        # ``wrap`` puts something between the agent and the CRI client (a fault).
        self.runtime = wrap(self.cri) if wrap is not None else self.cri
        self.logs = tmp / "pod-logs"
        self.registry = CollectorRegistry()
        self.pleg = EventedPLEG(self.cri, registry=self.registry) if evented else None
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=self.runtime,
                pleg=self.pleg,
                registry=self.registry,
                sources=[source],
                node_name=NODE,
                root_dir=tmp / "state",
                pod_logs_dir=self.logs,
                housekeeping_period=1.0,
            )
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Agent:
        self.task = asyncio.create_task(self.kubelet.run(), name="kubelet")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kubelet.stop()
        if self.task is not None:
            await asyncio.wait_for(self.task, 30)
        await self.cri.close()

    def check(self) -> None:
        """Raise what the agent died of, if it died."""
        if self.task is not None and self.task.done():
            self.task.result()
            raise AssertionError("the agent stopped by itself")

    def sync_count(self, operation: str) -> float:
        """How many pod syncs of ``operation`` the agent finished (or failed)."""
        return (
            self.registry.get_sample_value(
                "kubelet_pod_worker_duration_seconds_count", {"operation": operation}
            )
            or 0.0
        )

    def status(self, pod: Pod) -> PodStatus:
        return self.kubelet.pod_status(pod.uid) or PodStatus()

    async def eventually(self, probe: Callable[[], object], what: str, within: float = 30.0) -> Any:
        """Poll ``probe`` (plain or async) until it returns something other than
        None or False, and return that."""
        deadline = time.monotonic() + within
        while True:
            self.check()
            got = probe()
            if isinstance(got, Awaitable):
                got = await got
            if got is not None and got is not False:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {within}s")
            await asyncio.sleep(0.1)


def by_name(status: PodStatus) -> dict[str, PodContainerStatus]:
    return {cs.name: cs for cs in status.container_statuses}


def all_running(status: PodStatus, count: int) -> bool:
    states = [cs.state.running is not None for cs in status.container_statuses]
    return status.phase == "Running" and len(states) == count and all(states)


async def sandboxes(rt: CRIRuntime, uid: str) -> list[PodSandbox]:
    return await rt.list_pod_sandboxes(PodSandboxFilter(label_selector={kl.POD_UID: uid}))


async def containers(rt: CRIRuntime, uid: str) -> list[ContainerInfo]:
    return await rt.list_containers(ContainerFilter(label_selector={kl.POD_UID: uid}))


async def snapshot(rt: CRIRuntime, uid: str) -> tuple[list[str], dict[str, str]]:
    """The pod's sandbox ids and its container ids by name, as containerd has them."""
    boxes = sorted(s.id for s in await sandboxes(rt, uid))
    ctrs = {c.metadata.name: c.id for c in await containers(rt, uid)}
    return boxes, ctrs


async def test_two_containers_run_exit_log_exec_and_are_deleted(
    containerd: Containerd, source: ProgrammaticSource, tmp_path: Path, cleanup: None
) -> None:
    pod = manifest(
        "web",
        [
            container("app", env=[{"name": "GREETING", "value": "hello from the pod"}]),
            container("job", "echo hello; exit 3"),
        ],
    )
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as agent:

        def settled() -> PodStatus | None:
            status = agent.status(pod)
            cs = by_name(status)
            if status.phase != "Running" or set(cs) != {"app", "job"}:
                return None
            if cs["app"].state.running is None or cs["job"].state.terminated is None:
                return None
            return status

        status = await agent.eventually(settled, "app running and job terminated")
        job = by_name(status)["job"]
        assert job.state.terminated is not None
        assert (job.state.terminated.exit_code, job.state.terminated.reason) == (3, "Error")
        assert job.restart_count == 0  # restartPolicy Never
        app = by_name(status)["app"]
        assert app.ready and app.image == BUSYBOX_IMAGE

        # One sandbox, the two containers, and the ids the status reports.
        boxes, ids = await snapshot(agent.cri, pod.uid)
        assert len(boxes) == 1 and set(ids) == {"app", "job"}
        # The kubelet's "<runtime>://<id>" form.
        assert (app.container_id, job.container_id) == (
            f"containerd://{ids['app']}",
            f"containerd://{ids['job']}",
        )
        [sandbox] = await sandboxes(agent.cri, pod.uid)
        assert sandbox.state is PodSandboxState.READY
        assert (sandbox.metadata.name, sandbox.metadata.namespace) == ("web", "default")

        # The job's CRI log, where the kubelet puts it.
        log_file = agent.logs / f"default_web_{pod.uid}" / "job" / "0.log"

        def log_lines() -> list[tuple[str, str, str]] | None:
            lines = log_file.read_text().splitlines() if log_file.exists() else []
            parsed = [(m[2], m[3], m[4]) for m in map(LOG_LINE.match, lines) if m]
            return parsed or None

        assert await agent.eventually(log_lines, "the job's log") == [("stdout", "F", "hello")]

        # Exec into the running container sees its environment.
        result = await agent.cri.exec_sync(ids["app"], ["sh", "-c", 'echo "$GREETING"'], timeout=10)
        assert (result.exit_code, result.stdout) == (0, b"hello from the pod\n")

        # A graceful delete stops the pod and removes it from containerd.
        source.delete(pod.uid, grace_period_seconds=3)

        async def gone() -> bool:
            return await snapshot(agent.cri, pod.uid) == ([], {})

        await agent.eventually(gone, "sandbox and containers removed from containerd")
        assert agent.kubelet.workers.is_finished(pod.uid)
        final = by_name(agent.status(pod))
        assert final["app"].state.terminated is not None
        assert final["app"].state.terminated.exit_code == 0  # stopped by its SIGTERM trap
        reasons = [e.reason for e in agent.kubelet.events.events(pod.uid)]
        assert "Killing" in reasons


async def test_an_unknown_image_backs_off_with_the_kubelets_reasons(
    containerd: Containerd, source: ProgrammaticSource, tmp_path: Path, cleanup: None
) -> None:
    # Named by the test registry's loopback address, so containerd asks that
    # registry (plain HTTP for a loopback host) and no name is ever resolved.
    image = f"{containerd.registry.url.removeprefix('http://')}/nothing-here:1"
    pod = manifest(
        "badimage",
        [
            {"name": "app", "image": image, "command": ["sh", "-c", SERVE]},
            container("helper"),
        ],
    )
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as agent:
        # Every status the agent publishes, read as it is published: ErrImagePull
        # may last only until the next sync.
        seen: list[tuple[str, str]] = []

        async def record() -> None:
            async for got, status in agent.kubelet.subscribe():
                cs = by_name(status).get("app") if got.uid == pod.uid else None
                if cs is not None and cs.state.waiting is not None:
                    waiting = (cs.state.waiting.reason, cs.state.waiting.message)
                    if not seen or seen[-1] != waiting:
                        seen.append(waiting)

        recorder = asyncio.create_task(record())
        try:
            await agent.eventually(
                lambda: any(r == "ImagePullBackOff" for r, _ in seen), "ImagePullBackOff"
            )
        finally:
            recorder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recorder
        reasons = [r for r, _ in seen]
        assert reasons[:2] == ["ErrImagePull", "ImagePullBackOff"], seen
        pulled, backoff = seen[0][1], seen[1][1]
        # ErrImagePull carries the runtime's own error, as the kubelet reports it.
        assert f'failed to pull and unpack image "{image}"' in pulled
        assert pulled.endswith("not found")
        assert any(" /v2/nothing-here/manifests/1" in r for r in containerd.registry.requests)
        # The helper's start is a PLEG event; the sync it causes falls inside the
        # image's 10 s back-off.
        assert backoff == f'Back-off pulling image "{image}"'
        status = agent.status(pod)
        assert status.phase == "Pending"
        assert by_name(status)["helper"].state.running is not None

        events = [
            (e.reason, e.message)
            for e in agent.kubelet.events.events(pod.uid)
            if e.container == "app"
        ]
        assert ("Pulling", f'Pulling image "{image}"') in events
        assert any(
            r == "Failed" and m.startswith(f'Failed to pull image "{image}": ') for r, m in events
        )
        assert ("BackOff", f'Back-off pulling image "{image}"') in events
        # The app was never created in containerd.
        _, ids = await snapshot(agent.cri, pod.uid)
        assert set(ids) == {"helper"}


async def test_containerd_restart_loses_and_duplicates_nothing(
    containerd: Containerd,
    source: ProgrammaticSource,
    tmp_path: Path,
    cleanup: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pod = manifest("steady", [container("app"), container("side")], restart="Always")
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as agent:
        await agent.eventually(lambda: all_running(agent.status(pod), 2), "pod Running")
        before = await snapshot(agent.cri, pod.uid)
        assert len(before[0]) == 1 and set(before[1]) == {"app", "side"}

        await asyncio.to_thread(containerd.kill)

        async def unreachable() -> bool:
            # The agent's own loops (PLEG relist every second) hit the dead socket.
            try:
                await agent.cri.version()
            except RuntimeUnavailableError:
                return not agent.cri.ready
            return False

        await agent.eventually(unreachable, "the agent sees containerd gone", within=15)
        # A change now makes the pod's worker sync against the dead runtime: it
        # must fail and retry, not take "nothing listed" for "nothing there".
        source.update(_annotated(pod, "during-outage"))
        await asyncio.sleep(2)  # that sync, relists and housekeeping fail meanwhile
        agent.check()

        await asyncio.to_thread(containerd.start)

        async def answering() -> bool:
            # Right after its socket opens, containerd answers "server is not
            # initialized yet" (UNKNOWN) for a moment: wait for RuntimeReady.
            try:
                ready = (await agent.cri.status()).condition("RuntimeReady")
            except ContainerRuntimeError:
                return False
            return ready is not None and ready.status

        await agent.eventually(answering, "containerd answers again", within=30)
        caplog.clear()
        # A change from the source makes the agent sync the pod against the
        # restarted runtime at once, beside the PLEG's relists.
        updates = agent.sync_count("update")
        source.update(_annotated(pod, "after-restart"))
        await agent.eventually(
            lambda: agent.sync_count("update") > updates, "a sync after the restart"
        )
        await asyncio.sleep(2)  # relists and housekeeping on the restarted runtime
        failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert failures == []

        status = agent.status(pod)
        assert all_running(status, 2), status
        assert [cs.restart_count for cs in status.container_statuses] == [0, 0]
        assert await snapshot(agent.cri, pod.uid) == before
        assert all(c.state is ContainerState.RUNNING for c in await containers(agent.cri, pod.uid))
        healthy, message = agent.kubelet.healthy()
        assert healthy, message


async def test_a_restarted_agent_adopts_its_pods(
    containerd: Containerd, source: ProgrammaticSource, tmp_path: Path, cleanup: None
) -> None:
    pod = manifest("adopted", [container("app"), container("side")], restart="Always")
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as first:
        await first.eventually(lambda: all_running(first.status(pod), 2), "pod Running")
        before = await snapshot(first.cri, pod.uid)
        started = {
            cs.name: cs.state.running.started_at
            for cs in first.status(pod).container_statuses
            if cs.state.running is not None
        }
    # The first agent is gone; its pod keeps running in containerd.
    async with Agent(containerd, tmp_path, source) as second:
        await second.eventually(lambda: all_running(second.status(pod), 2), "pod Running")
        await asyncio.sleep(3)  # relists, housekeeping and syncs of the second agent
        status = second.status(pod)
        assert all_running(status, 2), status
        assert await snapshot(second.cri, pod.uid) == before
        assert {
            cs.name: cs.state.running.started_at
            for cs in status.container_statuses
            if cs.state.running is not None
        } == started
        assert [cs.restart_count for cs in status.container_statuses] == [0, 0]
        reasons = {e.reason for e in second.kubelet.events.events(pod.uid)}
        assert not reasons & {"Created", "Started", "SandboxChanged", "Killing"}, reasons


async def test_a_privileged_container_runs_in_a_privileged_sandbox(
    containerd: Containerd, source: ProgrammaticSource, tmp_path: Path, cleanup: None
) -> None:
    """containerd creates a privileged container only in a privileged sandbox
    ("no privileged container allowed in sandbox"); the kubelet makes the sandbox
    privileged when any container, init containers included, is."""
    pod = manifest(
        "priv",
        [
            container("plain"),
            container("root", securityContext={"privileged": True}),
        ],
        restart="Always",
    )
    source.add(pod)
    async with Agent(containerd, tmp_path, source) as agent:
        await agent.eventually(lambda: all_running(agent.status(pod), 2), "pod Running")
        reasons = {e.reason for e in agent.kubelet.events.events(pod.uid)}
        assert "Failed" not in reasons, reasons


def _annotated(pod: Pod, note: str) -> Pod:
    import attrs

    meta = attrs.evolve(pod.metadata, annotations={**pod.metadata.annotations, "note": note})
    return attrs.evolve(pod, metadata=meta)


async def test_the_evented_pleg_falls_back_to_relisting_on_containerd(
    containerd: Containerd, source: ProgrammaticSource, tmp_path: Path, cleanup: None
) -> None:
    # containerd 1.6 answers GetContainerEvents with UNIMPLEMENTED: the PLEG relists
    # every second instead, and the agent works as with the generic PLEG.
    pod = manifest("relisted", [container("app"), container("job", "sleep 1; exit 3")])
    source.add(pod)
    async with Agent(containerd, tmp_path, source, evented=True) as agent:
        pleg = agent.pleg
        assert pleg is not None

        def job_exited() -> PodContainerStatus | None:
            cs = by_name(agent.status(pod)).get("job")
            return cs if cs is not None and cs.state.terminated is not None else None

        job = await agent.eventually(job_exited, "the job's exit, found by a relist")
        assert job.state.terminated is not None and job.state.terminated.exit_code == 3
        assert pleg.fallen_back and pleg.generic.relist_period == 1.0
        assert by_name(agent.status(pod))["app"].state.running is not None
        errors = agent.registry.get_sample_value("kubelet_evented_pleg_connection_error_count")
        assert errors is not None and errors >= 1
        healthy, message = agent.kubelet.healthy()
        assert healthy, message
