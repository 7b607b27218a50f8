"""End to end: the agent running real host processes from a static-pod directory.

These tests use real time (the host-process runtime runs real processes), with
short check periods; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hostproc import start_agent, stop_host_pods
from realtime import wait_until

from kubelet_kit.config import FileSource
from kubelet_kit.container import ContainerState, labels
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "pods"
NODE = "e2e-node"


class Agent:
    """An in-process agent over a manifest directory, on the host-process runtime."""

    def __init__(self, tmp: Path) -> None:
        self.manifests = tmp / "manifests"
        self.manifests.mkdir(exist_ok=True)
        self.root = tmp / "state"
        self.logs = tmp / "logs"
        self.problems: list[str] = []
        self.kubelet: Kubelet | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Kubelet:
        self.kubelet = Kubelet(
            **stub_parts(
                runtime=HostProcessRuntime(self.root / "runtime"),
                sources=[FileSource(self.manifests, node_name=NODE, check_frequency=0.3)],
                node_name=NODE,
                root_dir=self.root,
                pod_logs_dir=self.logs,
                on_pod_problem=self.problems.append,
            )
        )
        self.task = asyncio.create_task(self.kubelet.run())
        return self.kubelet

    async def stop(self) -> None:
        if self.kubelet is not None and self.task is not None:
            self.kubelet.stop()
            await asyncio.wait_for(self.task, 30)

    def phase(self, name: str) -> str:
        assert self.kubelet is not None
        for pod in self.kubelet.pods():
            if pod.metadata.name == f"{name}-{NODE}":
                status = self.kubelet.pod_status(pod.metadata.uid)
                return status.phase if status else ""
        return ""

    def status(self, name: str) -> Any:
        assert self.kubelet is not None
        pod = next(p for p in self.kubelet.pods() if p.metadata.name == f"{name}-{NODE}")
        return self.kubelet.pod_status(pod.metadata.uid)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    a = Agent(tmp_path)
    try:
        yield a
    finally:
        if a.task is not None and not a.task.done():
            await a.stop()
        await stop_host_pods(a.root / "runtime")


def copy_examples(dest: Path, *names: str) -> None:
    for name in names:
        shutil.copy(EXAMPLES / f"{name}.yaml", dest / f"{name}.yaml")


async def test_the_examples_reach_their_phases(agent: Agent) -> None:
    copy_examples(agent.manifests, "job", "init", "sidecar", "crasher")
    await agent.start()
    await wait_until(lambda: agent.phase("job") == "Succeeded", what="job Succeeded")
    await wait_until(lambda: agent.phase("with-init") == "Running", what="init pod Running")
    init = agent.status("with-init").init_container_statuses[0]
    assert init.state.terminated is not None and init.state.terminated.reason == "Completed"
    await wait_until(lambda: agent.phase("with-sidecar") == "Running", what="sidecar pod Running")
    sidecar = agent.status("with-sidecar").init_container_statuses[0]
    assert sidecar.state.running is not None
    await wait_until(
        lambda: (
            (agent.status("crasher").container_statuses or [None])[0] is not None
            and agent.status("crasher").container_statuses[0].restart_count >= 1
            and agent.status("crasher").container_statuses[0].state.waiting is not None
        ),
        what="crasher in back-off",
    )
    waiting = agent.status("crasher").container_statuses[0].state.waiting
    assert waiting.reason == "CrashLoopBackOff"
    assert waiting.message.startswith("back-off 10s restarting failed container=crash pod=")
    # The job's log line is in the CRI log file, where the kubelet keeps it.
    logs = list(agent.logs.glob(f"default_job-{NODE}_*/compute/0.log"))
    assert logs and " stdout F done" in logs[0].read_text()


async def test_a_malformed_manifest_is_reported_and_the_others_keep_running(
    agent: Agent,
) -> None:
    copy_examples(agent.manifests, "init")
    kubelet = await agent.start()
    await wait_until(lambda: agent.phase("with-init") == "Running")
    (agent.manifests / "broken.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\n"
        "spec: {containers: [{name: c, image: busybox, ports: [{containerPort: 70000}]}]}\n"
    )
    await wait_until(lambda: any("broken.yaml" in p for p in agent.problems), what="report")
    line = next(p for p in agent.problems if "broken.yaml" in p)
    assert "spec.containers[0].ports[0].containerPort" in line
    await asyncio.sleep(1.5)
    assert agent.phase("with-init") == "Running"
    assert len(kubelet.pods()) == 1


#: Manifests that each used to escape the loader (tests/test_manifest_crashes.py)
#: and, dropped into the static-pod directory, end the running agent.
CRASHERS = {
    "bad-int.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"
    "spec: {terminationGracePeriodSeconds: !!int 0xZZ, containers: []}\n",
    "float-key.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: fk}\n"
    "spec: {containers: [{name: c, image: busybox, command: [sleep, '60']}]}\n"
    "x: {1.5: a, b: c}\n",
    "long-int.json": '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}, '
    '"spec": {"terminationGracePeriodSeconds": ' + "9" * 5000 + "}}",
}


async def test_crashing_manifests_are_reported_and_the_agent_keeps_running(
    agent: Agent,
) -> None:
    copy_examples(agent.manifests, "init")
    kubelet = await agent.start()
    await wait_until(lambda: agent.phase("with-init") == "Running")
    for name, text in CRASHERS.items():
        (agent.manifests / name).write_text(text)
    for name in ("bad-int.yaml", "long-int.json"):
        await wait_until(lambda n=name: any(n in p for p in agent.problems), what=name)
    # the float key is no error: a key JSON spells as a string, so that pod runs
    await wait_until(lambda: agent.phase("fk") == "Running", what="float-key pod Running")
    await asyncio.sleep(1)
    assert agent.task is not None and not agent.task.done()
    assert agent.phase("with-init") == "Running"
    assert len(kubelet.pods()) == 2
    # fixed, the file is read again and its pod runs
    (agent.manifests / "bad-int.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {terminationGracePeriodSeconds: 1,"
        " containers: [{name: c, image: busybox, command: [sleep, '60']}]}\n"
    )
    await wait_until(lambda: agent.phase("a") == "Running", what="fixed pod Running")


async def test_deleting_a_manifest_stops_its_pod_gracefully(agent: Agent) -> None:
    (agent.manifests / "trap.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: trap}\n"
        "spec:\n  terminationGracePeriodSeconds: 10\n  containers:\n"
        "  - name: c\n    image: busybox\n    command: [sh, -c, "
        "'trap \"echo got TERM; exit 0\" TERM; echo ready; while true; do sleep 0.1; done']\n"
    )
    kubelet = await agent.start()
    await wait_until(lambda: agent.phase("trap") == "Running")
    runtime = kubelet.runtime
    (agent.manifests / "trap.yaml").unlink()
    started = time.monotonic()

    async def stopped() -> bool:
        return not [c for c in await runtime.list_containers() if c.state is ContainerState.RUNNING]

    while not await stopped():
        assert time.monotonic() - started < 20, "pod was not stopped"
        await asyncio.sleep(0.1)
    # It stopped on SIGTERM (exit 0 from its trap), well before the grace period.
    exited = [await runtime.container_status(c.id) for c in await runtime.list_containers()]
    assert [s.exit_code for s in exited] in ([0], [])
    assert time.monotonic() - started < 10


async def test_a_restarted_agent_adopts_its_running_containers(agent: Agent) -> None:
    copy_examples(agent.manifests, "init", "sidecar")
    kubelet = await agent.start()
    await wait_until(
        lambda: agent.phase("with-init") == "Running" and agent.phase("with-sidecar") == "Running"
    )
    before = {
        c.id: c.labels[labels.CONTAINER_NAME]
        for c in await kubelet.runtime.list_containers()
        if c.state is ContainerState.RUNNING
    }
    await agent.stop()
    # Containers outlive the agent.
    runtime = HostProcessRuntime(agent.root / "runtime")
    still = {c.id for c in await runtime.list_containers() if c.state is ContainerState.RUNNING}
    assert still == set(before)

    kubelet = await agent.start()
    await wait_until(
        lambda: agent.phase("with-init") == "Running" and agent.phase("with-sidecar") == "Running",
        what="adopted",
    )
    await asyncio.sleep(3)  # a few relists and syncs
    after = {
        c.id for c in await kubelet.runtime.list_containers() if c.state is ContainerState.RUNNING
    }
    assert after == set(before), "containers were started again instead of adopted"
    assert all(cs.restart_count == 0 for cs in agent.status("with-sidecar").container_statuses)


def test_kubelet_kit_run_logs_transitions_and_leaves_pods_running_on_sigterm(
    tmp_path: Path,
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    copy_examples(manifests, "init")
    root = tmp_path / "state"
    proc = None
    try:
        proc, lines = start_agent(
            tmp_path,
            NODE,
            "--port",
            "0",
            "--healthz-port",
            "0",
            "--cgroups-per-qos=false",  # the host's cgroups stay as they are
            until=f"pod default/with-init-{NODE}: Running",
        )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        lines.append(err)
        assert proc.returncode == 0, "".join(lines)
        assert "Traceback" not in "".join(lines)
        runtime = HostProcessRuntime(root / "runtime")
        running = asyncio.run(runtime.list_containers())
        assert [
            c.labels[labels.CONTAINER_NAME] for c in running if c.state is ContainerState.RUNNING
        ] == ["app"]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        asyncio.run(stop_host_pods(root / "runtime"))


async def test_the_web_example_becomes_ready_through_its_http_probe(agent: Agent) -> None:
    copy_examples(agent.manifests, "web")
    await agent.start()

    def ready() -> str:
        status = agent.status("web") if agent.phase("web") else None
        condition = status.condition("Ready") if status else None
        return condition.status if condition else ""

    await wait_until(lambda: ready() == "True", what="web Ready through its HTTP probe")
    assert agent.status("web").container_statuses[0].ready
