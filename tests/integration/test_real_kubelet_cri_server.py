"""The real kubelet 1.20.2 as a client of ``kubelet-kit cri-server``: standalone, in
its private mount namespace (:class:`~.real_kubelet.RealKubelet`), on the project's
CRI server serving the fake runtime and then the host-process runtime, each from a
directory of its own.

A 1.20 kubelet speaks ``runtime.v1alpha2`` and checks more than our own client
does: a ``Version.version`` of ``0.1.0``, images with an id and a non-zero size,
``ImageFsInfo``, stats whose attributes carry the container's metadata. What is
checked here is what its users see: the static pod runs, its container status
names the image, the image id and the runtime's container id, ``/stats/summary``
lists the pod and its container, the container's log is served, and deleting the
manifest stops the pod in the runtime. Every wait is bounded in real time.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_kit.container import ContainerState, ImageSpec, PodSandboxState, VersionInfo
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime

from .containerd import BUSYBOX_IMAGE
from .cri_server_process import start_cri_server, stop_cri_server
from .real_kubelet import RealKubelet, busybox_container, static_pod
from .real_kubelet import missing_parts as real_kubelet_missing_parts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: The line the web pod's container writes first.
GREETING = "hello from the cri-server"


@attrs.define
class ServedKubelet:
    """A ``kubelet-kit cri-server`` process and the real kubelet using it."""

    runtime: str
    server: subprocess.Popen[bytes]
    endpoint: str
    kubelet: RealKubelet
    web: str = ""  # the running web pod's name on the node

    def server_up(self) -> bool:
        return self.server.poll() is None

    async def cri(self, call: Callable[[CRIRuntime], Any]) -> Any:
        """``call(runtime)`` on a fresh client of the server; awaited."""
        async with CRIRuntime(self.endpoint, timeout=30) as rt:
            return await call(rt)


@pytest.fixture(scope="module", params=["fake", "host"])
def served_env(request: pytest.FixtureRequest) -> Iterator[ServedKubelet | str]:
    """The real kubelet on a cri-server of the module's runtime, with the web pod
    running; or the reason there cannot be one."""
    runtime = str(request.param)
    missing = real_kubelet_missing_parts()
    if missing:
        yield "the real kubelet needs " + ", ".join(missing)
        return
    base = Path(tempfile.mkdtemp(prefix=f"kk-served-{runtime}-"))
    try:
        server, endpoint = start_cri_server(runtime, base)
    except RuntimeError as exc:
        shutil.rmtree(base, ignore_errors=True)
        yield str(exc)
        return
    served = ServedKubelet(runtime, server, endpoint, RealKubelet(base / "kubelet", endpoint))
    try:
        served.kubelet.start()
        served.web = served.kubelet.add_pod(
            static_pod("web", busybox_container("main", f"echo {GREETING}; exec sleep 3600"))
        )
        served.kubelet.wait_running(served.web)
    except Exception as exc:  # the reason goes to the tests
        served.kubelet.cleanup(served.server_up)
        stop_cri_server(server)
        shutil.rmtree(base, ignore_errors=True)
        yield f"the real kubelet did not run a pod on cri-server --runtime {runtime}: {exc}"
        return
    try:
        yield served
    finally:
        # Pods go through the CRI before the server stops: the host runtime's
        # containers outlive the server, to be adopted by the next one.
        served.kubelet.cleanup(served.server_up)
        stop_cri_server(server)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def served(
    served_env: ServedKubelet | str, require_real: Callable[[bool, str], None]
) -> ServedKubelet:
    """The module's kubelet on its cri-server; skips (or fails under CI) without."""
    if isinstance(served_env, str):
        require_real(False, served_env)
        raise AssertionError("unreachable")
    assert served_env.server_up(), "the cri-server exited"
    served_env.kubelet.check()
    return served_env


def _wait(what: str, done: Callable[[], bool], node: RealKubelet, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        node.check()
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout:g}s; log:\n{node.log_tail()}")
        time.sleep(0.2)


def test_container_status_names_the_image_and_the_runtimes_container(
    served: ServedKubelet,
) -> None:
    pod = served.kubelet.pod(served.web)
    assert pod is not None
    [status] = pod["status"]["containerStatuses"]
    version: VersionInfo = asyncio.run(served.cri(lambda rt: rt.version()))
    image = asyncio.run(served.cri(lambda rt: rt.image_status(ImageSpec(BUSYBOX_IMAGE))))
    containers = asyncio.run(served.cri(lambda rt: rt.list_containers()))
    [ours] = [
        c
        for c in containers
        if c.labels.get(kl.POD_NAME) == served.web and c.metadata.name == "main"
    ]
    assert status["name"] == "main"
    assert status["image"] == BUSYBOX_IMAGE
    assert image is not None and status["imageID"] == image.id
    assert status["containerID"] == f"{version.runtime_name}://{ours.id}"
    assert (status["ready"], status["started"], status["restartCount"]) == (True, True, 0)
    assert ours.state is ContainerState.RUNNING
    assert pod["status"]["qosClass"] == "BestEffort"


def test_stats_summary_lists_the_pod_and_its_container(served: ServedKubelet) -> None:
    code, body = served.kubelet.get("/stats/summary", timeout=30)
    assert code == 200, body[:500]
    summary = json.loads(body)
    [pod] = [p for p in summary["pods"] if p["podRef"]["name"] == served.web]
    assert pod["podRef"]["namespace"] == "default"
    assert [c["name"] for c in pod["containers"]] == ["main"]
    assert summary["node"]["nodeName"] == served.kubelet.name
    assert summary["node"]["runtime"]["imageFs"]["usedBytes"] > 0


def test_container_log_is_served(served: ServedKubelet) -> None:
    code, body = served.kubelet.get(f"/containerLogs/default/{served.web}/main")
    assert code == 200, body[:500]
    # The fake plays the script's echo; the host runtime runs it.
    assert body.decode().splitlines() == [GREETING]


def test_deleting_the_manifest_stops_the_pod(served: ServedKubelet) -> None:
    node = served.kubelet
    name = node.add_pod(static_pod("gone", busybox_container("main", "exec sleep 3600")))
    node.wait_running(name)
    (node.manifests / "gone.json").unlink()
    _wait(f"{name} gone from /pods", lambda: node.pod(name) is None, node)

    def stopped() -> bool:
        sandboxes = asyncio.run(served.cri(lambda rt: rt.list_pod_sandboxes()))
        containers = asyncio.run(served.cri(lambda rt: rt.list_containers()))
        mine = [s for s in sandboxes if s.labels.get(kl.POD_NAME) == name]
        # Stopped, or already collected.
        return all(s.state is PodSandboxState.NOTREADY for s in mine) and all(
            c.state is not ContainerState.RUNNING
            for c in containers
            if c.labels.get(kl.POD_NAME) == name
        )

    _wait(f"{name}'s sandbox and containers stopped in the runtime", stopped, node)
    # The web pod is untouched.
    assert node.running(served.web)
