"""Cluster mode end to end: ``kubelet-kit run --kubeconfig`` against a real
kube-apiserver 1.20.2, its pods in the session's private containerd.

Each test starts the agent as a process of its own, as a user would, with a
KubeletConfiguration whose ``containerRuntimeEndpoint`` names the private
containerd, and a node name of its own. Everything is on loopback; every wait
is bounded in real time. Afterwards the agent is stopped, the node's objects are
deleted from the API server and its sandboxes from containerd.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hostproc import start_agent
from realtime import wait_until

from kubelet_kit.api.podsource import CONFIG_MIRROR_ANNOTATION
from kubelet_kit.container import ContainerFilter, ContainerInfo, ContainerState
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.runtimes.host import HostProcessRuntime

from .containerd import BUSYBOX_IMAGE, Containerd
from .kube_apiserver import LOOPBACK, KubeAPIServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HELLO = "hello-from-kk"


class Node:
    """One ``kubelet-kit run --kubeconfig`` process joined to the test API server."""

    def __init__(self, apiserver: KubeAPIServer, containerd: Containerd, tmp: Path) -> None:
        self.apiserver = apiserver
        self.containerd = containerd
        self.tmp = tmp
        self.name = f"kk-node-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.manifests = tmp / "manifests"  # the static-pod directory start_agent passes
        self.manifests.mkdir(exist_ok=True)
        self.config = tmp / "kubelet.yaml"
        self.config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "containerRuntimeEndpoint": containerd.endpoint,
                    # The host's cgroups stay as they are.
                    "cgroupsPerQOS": False,
                }
            )
        )
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None
        #: More flags for ``kubelet-kit run``.
        self.extra_args: list[str] = []

    def use_host_runtime(self) -> None:
        """Run the pods as host processes (the embedded runtime) instead of in
        containerd, and stop them when the agent stops."""
        config = json.loads(self.config.read_text())
        config.pop("containerRuntimeEndpoint", None)
        self.config.write_text(json.dumps(config))
        self.extra_args.append("--drain-on-exit")

    def start(self) -> None:
        self.proc, self.lines = start_agent(
            self.tmp,
            self.name,
            "--kubeconfig",
            str(self.apiserver.admin_kubeconfig),
            "--config",
            str(self.config),
            "--node-ip",
            LOOPBACK,
            "--address",
            LOOPBACK,
            "--port",
            str(self.port),
            "--healthz-port",
            "0",
            "--client-ca-file",
            str(self.apiserver.kubelet_client_ca),
            *self.extra_args,
            until=self.name,
            timeout=60,
        )
        # Keep reading its log, so that a full pipe never stalls the agent and a
        # failure can show what it said.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def log_tail(self, lines: int = 60) -> str:
        return "".join(self.lines[-lines:])

    def check(self) -> None:
        """Fail at once, with its log, if the agent has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            if self._reader is not None:
                self._reader.join(5)
            raise AssertionError(
                f"the agent exited with {self.proc.returncode}:\n" + self.log_tail()
            )

    async def until(
        self,
        predicate: Callable[[], object],
        what: str,
        timeout: float = 60.0,
        explain: Callable[[], str] | None = None,
    ) -> None:
        """Wait for ``predicate`` while the agent runs; the failure shows its log and
        what ``explain`` says about the state it is in."""

        def holds() -> bool:
            self.check()
            return bool(predicate())

        try:
            await wait_until(holds, what=what, timeout=timeout)
        except AssertionError as exc:
            more = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"{exc}{more}\nagent log (tail):\n{self.log_tail()}") from None

    def stop(self) -> None:
        """SIGTERM, a bounded wait, then SIGKILL."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)

    # ---------------------------------------------------------------- the API side

    def node(self) -> dict[str, Any] | None:
        return self.apiserver.get_json(f"/api/v1/nodes/{self.name}")

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.apiserver.get_json(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def kubectl(self, *args: str, input: str | None = None) -> str:
        """Run kubectl as admin; fail with its output unless it succeeds."""
        done = self.apiserver.kubectl(*args, input=input)
        assert done.rc == 0, f"kubectl {' '.join(args)} failed: {done}"
        return done.stdout

    # ---------------------------------------------------------------- the runtime side

    async def containers(self, pod_name: str) -> list[ContainerInfo]:
        """The containers containerd holds for the pod ``pod_name`` in default."""
        async with CRIRuntime(self.containerd.endpoint, timeout=30) as rt:
            return await rt.list_containers(
                ContainerFilter(label_selector={kl.POD_NAME: pod_name, kl.POD_NAMESPACE: "default"})
            )

    async def cleanup(self) -> None:
        """Stop the agent, delete the node's objects from the API server and its
        sandboxes from containerd."""
        self.stop()
        for args in (
            # Without a kubelet a graceful delete never finishes: delete at once.
            (
                "delete",
                "pods",
                "--all-namespaces",
                "--force",
                "--grace-period=0",
                f"--field-selector=spec.nodeName={self.name}",
            ),
            ("delete", "node", self.name, "--ignore-not-found"),
            ("delete", "lease", self.name, "-n", "kube-node-lease", "--ignore-not-found"),
        ):
            with contextlib.suppress(AssertionError):  # a hung kubectl: go on cleaning
                self.apiserver.kubectl(*args, "--wait=false", timeout=30)
        if self.containerd.proc is None or self.containerd.proc.poll() is not None:
            return  # the session's teardown removes what is left
        async with CRIRuntime(self.containerd.endpoint, timeout=30) as rt:
            # Every pod of these tests carries the node's name in its own name.
            for sandbox in await rt.list_pod_sandboxes():
                if self.name not in sandbox.labels.get(kl.POD_NAME, ""):
                    continue
                with contextlib.suppress(Exception):
                    await rt.stop_pod_sandbox(sandbox.id)
                with contextlib.suppress(Exception):
                    await rt.remove_pod_sandbox(sandbox.id)


@pytest.fixture
async def node(
    kube_apiserver: KubeAPIServer, containerd: Containerd, tmp_path: Path
) -> AsyncIterator[Node]:
    """A node agent not yet started (static pods go into ``node.manifests`` first)."""
    agent = Node(kube_apiserver, containerd, tmp_path)
    try:
        yield agent
    finally:
        await agent.cleanup()


def condition(obj: dict[str, Any] | None, kind: str) -> str:
    """The status (True/False/Unknown) of the condition ``kind``, or ""."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return str(c.get("status", ""))
    return ""


def hello_pod(name: str, node: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                # The harness's CNI is loopback only, and containerd 1.6 refuses a pod
                # network without an eth0, so the pods use the host's.
                "hostNetwork": True,
                "terminationGracePeriodSeconds": 1,
                # IfNotPresent: an earlier test may have removed the image, and the
                # harness's registry serves it again.
                "containers": [
                    {
                        "name": "hello",
                        "image": BUSYBOX_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", f"echo {HELLO}; sleep 3600"],
                    }
                ],
            },
        }
    )


async def run_hello_pod(node: Node) -> str:
    """Start the agent, create the hello pod through the API, wait until the API
    server has it Running; returns its name."""
    node.start()
    await node.until(lambda: node.node() is not None, "the Node to register")
    name = f"hello-{node.name}"
    node.kubectl("apply", "-f", "-", input=hello_pod(name, node.name))
    await node.until(
        lambda: ((node.pod(name) or {}).get("status") or {}).get("phase") == "Running",
        f"pod {name} Running on the API server",
        timeout=90,
        explain=lambda: f"its status: {(node.pod(name) or {}).get('status')}",
    )
    return name


async def test_the_node_registers_with_its_port_and_address_and_gets_ready(
    node: Node,
) -> None:
    node.start()
    await node.until(lambda: node.node() is not None, "the Node to register")
    await node.until(
        lambda: condition(node.node(), "Ready") == "True",
        "the Node's Ready condition to be True",
        timeout=90,
    )
    status = (node.node() or {})["status"]
    endpoint = status.get("daemonEndpoints", {}).get("kubeletEndpoint", {})
    assert endpoint.get("Port") == node.port, (
        f"daemonEndpoints.kubeletEndpoint.Port is {endpoint.get('Port')}, the agent serves "
        f"on {node.port}: the API server could not reach it"
    )
    addresses = [(a.get("type"), a.get("address")) for a in status.get("addresses", ())]
    assert ("InternalIP", LOOPBACK) in addresses, (
        f"status.addresses {addresses} lack InternalIP {LOOPBACK} (--node-ip)"
    )


async def test_a_pod_bound_through_the_api_runs_in_the_configured_containerd(
    node: Node,
) -> None:
    name = await run_hello_pod(node)
    pod = node.pod(name) or {}
    assert pod["status"].get("hostIP") == LOOPBACK, (
        f"status.hostIP is {pod['status'].get('hostIP')!r}, not the node's --node-ip"
    )
    uid = pod["metadata"]["uid"]
    containers = await node.containers(name)
    assert [(c.metadata.name, c.state) for c in containers] == [
        ("hello", ContainerState.RUNNING)
    ], (
        f"containerd at the configured containerRuntimeEndpoint should run the pod's one "
        f"container, it has {containers}"
    )
    assert containers[0].labels.get(kl.POD_UID) == uid, "the container is not the API pod's"
    host = await HostProcessRuntime(node.tmp / "state" / "runtime").list_containers()
    assert host == [], f"the pod also ran as host processes: {host}"


async def test_kubectl_logs_reaches_the_node_through_the_api_server(node: Node) -> None:
    name = await run_hello_pod(node)
    logs: list[Any] = []

    def said_hello() -> bool:
        # apiserver -> the node's published address and port, with its kubelet
        # client certificate, which the node trusts through --client-ca-file.
        logs.append(node.apiserver.kubectl("logs", name, "-c", "hello", timeout=30))
        return logs[-1].rc == 0 and HELLO in logs[-1].stdout

    try:
        await node.until(said_hello, f"kubectl logs {name} to print {HELLO}", timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nlast kubectl logs: {logs[-1] if logs else None}") from None


async def test_a_deleted_mirror_pod_is_recreated_and_the_static_pod_keeps_running(
    node: Node,
) -> None:
    (node.manifests / "static.yaml").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "static", "namespace": "default"},
                "spec": {
                    "hostNetwork": True,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", "sleep 3600"],
                        }
                    ],
                },
            }
        )
    )
    node.start()
    name = f"static-{node.name}"  # the kubelet suffixes static pods with the node name

    def mirror() -> dict[str, Any] | None:
        pod = node.pod(name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        if CONFIG_MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            return None
        return pod

    await node.until(lambda: mirror() is not None, f"a mirror pod {name}", timeout=60)

    async def running() -> list[ContainerInfo]:
        return [c for c in await node.containers(name) if c.state is ContainerState.RUNNING]

    deadline = time.monotonic() + 60
    while not (before := await running()):
        node.check()
        assert time.monotonic() < deadline, f"no running container of {name} in containerd"
        await asyncio.sleep(0.2)
    old_uid = (mirror() or {})["metadata"]["uid"]

    node.kubectl("delete", "pod", name, "--wait=false")  # graceful, as a user deletes

    def recreated() -> bool:
        again = mirror()
        return again is not None and again["metadata"]["uid"] != old_uid

    def kept() -> str:
        return f"the API server has: {(node.pod(name) or {}).get('metadata')}"

    await node.until(
        recreated, f"a new mirror pod {name} (uid other than {old_uid})", timeout=60, explain=kept
    )
    after = await running()
    assert [c.id for c in after] == [c.id for c in before], (
        f"deleting the mirror pod touched the static pod: containers {before} became {after}"
    )
