"""Fixtures of the integration tests: a private containerd, and a kube-apiserver on
loopback, each for the whole session."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import PodSandboxFilter
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.errors import ContainerRuntimeError

from .containerd import Containerd, missing_parts
from .kube_apiserver import KubeAPIServer
from .kube_apiserver import missing_parts as apiserver_missing_parts
from .real_kubelet import StandaloneNode, start_node
from .real_kubelet import missing_parts as real_kubelet_missing_parts


async def _remove_everything(endpoint: str) -> None:
    async with CRIRuntime(endpoint, timeout=30) as rt:
        for sandbox in await rt.list_pod_sandboxes():
            with contextlib.suppress(Exception):
                await rt.stop_pod_sandbox(sandbox.id)
            with contextlib.suppress(Exception):
                await rt.remove_pod_sandbox(sandbox.id)


@pytest.fixture(scope="session")
def containerd_env() -> Iterator[Containerd | str]:
    """A running private containerd, or the reason there cannot be one."""
    missing = missing_parts()
    if missing:
        yield "containerd harness needs " + ", ".join(missing)
        return
    base = Path(tempfile.mkdtemp(prefix="kk-containerd-"))
    harness = Containerd(base)
    try:
        harness.write_config()
        harness.start()
        harness.import_images()
    except Exception as exc:
        harness.cleanup()
        yield f"containerd did not start: {exc}"
        return
    try:
        yield harness
    finally:
        with contextlib.suppress(Exception):
            if harness.proc is None:
                harness.start()
            asyncio.run(_remove_everything(harness.endpoint))
        harness.cleanup()


@pytest.fixture
def containerd(
    containerd_env: Containerd | str, require_real: Callable[[bool, str], None]
) -> Containerd:
    """The session's containerd; skips (or fails under CI) where there is none."""
    if isinstance(containerd_env, str):
        require_real(False, containerd_env)
        raise AssertionError("unreachable")
    if containerd_env.proc is None or containerd_env.proc.poll() is not None:
        # A test that crashed containerd on purpose failed before restarting it.
        containerd_env.start()
    return containerd_env


@pytest.fixture
def source() -> ProgrammaticSource:
    """A programmatic pod source for the test's agent."""
    return ProgrammaticSource()


@pytest.fixture
async def cleanup(containerd: Containerd, source: ProgrammaticSource) -> AsyncIterator[None]:
    """Remove the sandboxes of the test's pods from containerd afterwards
    (starting containerd again when the test left it killed)."""
    yield
    if containerd.proc is None or containerd.proc.poll() is not None:
        await asyncio.to_thread(containerd.start)
    async with CRIRuntime(containerd.endpoint, timeout=30) as rt:
        for pod in source.pods():
            selector = PodSandboxFilter(label_selector={kl.POD_UID: pod.uid})
            for _ in range(40):  # a just restarted containerd is not initialized at once
                try:
                    found = await rt.list_pod_sandboxes(selector)
                    break
                except ContainerRuntimeError:
                    await asyncio.sleep(0.25)
            else:
                found = []  # the session's teardown removes whatever is left
            for sandbox in found:
                with contextlib.suppress(Exception):
                    await rt.stop_pod_sandbox(sandbox.id)
                with contextlib.suppress(Exception):
                    await rt.remove_pod_sandbox(sandbox.id)


@pytest.fixture(params=["direct", "via-cri-server"])
async def cri(request: pytest.FixtureRequest, containerd: Containerd) -> AsyncIterator[CRIRuntime]:
    """A connected CRIRuntime on the session's containerd: directly, or through the
    project's CRIServer serving a CRIRuntime of containerd (a CRI proxy), which
    checks the server's conversions and error mapping against a real runtime."""
    if request.param == "direct":
        async with CRIRuntime(containerd.endpoint, timeout=60) as rt:
            yield rt
        return
    sock_dir = Path(tempfile.mkdtemp(prefix="kkproxy-"))
    try:
        async with (
            CRIRuntime(containerd.endpoint, timeout=60) as inner,
            CRIServer(inner, sock_dir / "proxy.sock") as server,
            CRIRuntime(server.endpoint, timeout=60) as rt,
        ):
            yield rt
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def kube_apiserver_env() -> Iterator[KubeAPIServer | str]:
    """A running etcd and kube-apiserver on loopback for the session, or the reason
    there cannot be one."""
    missing = apiserver_missing_parts()
    if missing:
        yield "kube-apiserver harness needs " + ", ".join(missing)
        return
    harness = KubeAPIServer(Path(tempfile.mkdtemp(prefix="kk-apiserver-")))
    try:
        harness.start()
    except Exception as exc:
        harness.cleanup()
        yield f"kube-apiserver did not start: {exc}"
        return
    try:
        yield harness
    finally:
        harness.cleanup()


@pytest.fixture
def kube_apiserver(
    kube_apiserver_env: KubeAPIServer | str, require_real: Callable[[bool, str], None]
) -> KubeAPIServer:
    """The session's kube-apiserver; skips (or fails under CI) where there is none."""
    if isinstance(kube_apiserver_env, str):
        require_real(False, kube_apiserver_env)
        raise AssertionError("unreachable")
    return kube_apiserver_env


@pytest.fixture(scope="module", params=["kubelet", "kubelet-kit"])
def standalone_node_env(
    request: pytest.FixtureRequest, containerd_env: Containerd | str
) -> Iterator[StandaloneNode | str]:
    """A standalone node on the session's containerd for the module's tests: the
    real kubelet 1.20.2, then ``kubelet-kit run``, with the same node API settings
    (client certificates only); or the reason there cannot be one.

    One at a time, and only for one module: the real kubelet stops every
    kubelet-labelled pod in the runtime that is not one of its own.
    """
    kind = str(request.param)
    if isinstance(containerd_env, str):
        yield containerd_env
        return
    missing = real_kubelet_missing_parts() if kind == "kubelet" else []
    if shutil.which("openssl") is None:
        missing.append("openssl")
    if missing:
        yield f"the {kind} node needs " + ", ".join(missing)
        return
    if containerd_env.proc is None or containerd_env.proc.poll() is not None:
        containerd_env.start()  # a test that crashed it on purpose failed before restarting
    try:
        node = start_node(
            kind, Path(tempfile.mkdtemp(prefix=f"kk-{kind}-")), containerd_env.endpoint
        )
    except Exception as exc:
        yield f"the {kind} node did not start: {exc}"
        return

    def runtime_up() -> bool:
        return containerd_env.proc is not None and containerd_env.proc.poll() is None

    try:
        yield node
    finally:
        node.cleanup(runtime_up)


@pytest.fixture
def standalone_node(
    standalone_node_env: StandaloneNode | str, require_real: Callable[[bool, str], None]
) -> StandaloneNode:
    """The module's standalone node; skips (or fails under CI) where there is none."""
    if isinstance(standalone_node_env, str):
        require_real(False, standalone_node_env)
        raise AssertionError("unreachable")
    standalone_node_env.check()
    return standalone_node_env
