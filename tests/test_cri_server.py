"""CRIServer: RPC coverage, and the round trip CRIRuntime -> CRIServer -> FakeRuntime."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from kubelet_kit.container import (
    AuthConfig,
    ContainerConfig,
    ContainerEventType,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ExecResult,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import SERVED_RPCS, UNSERVED_RPCS, CRIRuntime, CRIServer
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.errors import (
    AlreadyExistsError,
    ConfigurationError,
    ContainerStartError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)
from kubelet_kit.testing.fake_runtime import RUNTIME_METHODS, FakeRuntime

# ------------------------------------------------------------- coverage tables

#: RPC -> the Runtime method the client sends it from and the server serves it with.
RPC_TO_RUNTIME: dict[str, str] = {
    "Version": "version",
    "Status": "status",
    "RunPodSandbox": "run_pod_sandbox",
    "StopPodSandbox": "stop_pod_sandbox",
    "RemovePodSandbox": "remove_pod_sandbox",
    "PodSandboxStatus": "pod_sandbox_status",
    "ListPodSandbox": "list_pod_sandboxes",
    "CreateContainer": "create_container",
    "StartContainer": "start_container",
    "StopContainer": "stop_container",
    "RemoveContainer": "remove_container",
    "ListContainers": "list_containers",
    "ContainerStatus": "container_status",
    "UpdateContainerResources": "update_container_resources",
    "ExecSync": "exec_sync",
    "ContainerStats": "container_stats",
    "ListContainerStats": "list_container_stats",
    "PodSandboxStats": "pod_sandbox_stats",
    "GetContainerEvents": "get_container_events",
    "PullImage": "pull_image",
    "ImageStatus": "image_status",
    "ListImages": "list_images",
    "RemoveImage": "remove_image",
    "ImageFsInfo": "image_fs_info",
    "ReopenContainerLog": "reopen_container_log",
}

#: Served by the server from other Runtime methods, but never sent by the client
#: (the client has a one-shot equivalent or the Runtime protocol no counterpart).
SERVER_ONLY: dict[str, str] = {
    "StreamPodSandboxes": "chunked ListPodSandbox; the client uses ListPodSandbox",
    "StreamContainers": "chunked ListContainers",
    "StreamContainerStats": "chunked ListContainerStats",
    "StreamPodSandboxStats": "chunked ListPodSandboxStats",
    "StreamImages": "chunked ListImages",
    "ListPodSandboxStats": "built from list_pod_sandboxes + pod_sandbox_stats",
    "UpdateRuntimeConfig": "accepted and ignored (the kubelet sends the pod CIDR)",
}

#: Streaming RPCs: the client asks for a URL; the server answers with one of its
#: streaming server's, for a runtime that serves streams itself.
STREAM_RPCS: dict[str, str] = {
    "Exec": "get_exec_url",
    "Attach": "get_attach_url",
    "PortForward": "get_port_forward_url",
}

#: Neither side: answered UNIMPLEMENTED by the server, never sent by the client.
ALLOW_LIST: dict[str, str] = {
    "CheckpointContainer": "no checkpoints in the Runtime protocol",
    "ListMetricDescriptors": "no pod metrics in the Runtime protocol",
    "ListPodSandboxMetrics": "no pod metrics in the Runtime protocol",
    "StreamPodSandboxMetrics": "no pod metrics in the Runtime protocol",
    "RuntimeConfig": "no cgroup driver report in the Runtime protocol",
    "UpdatePodSandboxResources": "no pod-level resources in the Runtime protocol",
}


def _all_rpcs() -> set[str]:
    return {
        m.name
        for service in ("RuntimeService", "ImageService")
        for m in pb.DESCRIPTOR.services_by_name[service].methods
    }


def test_every_rpc_is_mapped_served_or_allow_listed() -> None:
    rpcs = _all_rpcs()
    parts = [set(RPC_TO_RUNTIME), set(SERVER_ONLY), set(STREAM_RPCS), set(ALLOW_LIST)]
    assert set().union(*parts) == rpcs
    assert sum(len(p) for p in parts) == len(rpcs)  # no RPC in two tables
    assert set(UNSERVED_RPCS) == set(ALLOW_LIST)
    assert rpcs - set(ALLOW_LIST) == SERVED_RPCS


def test_client_and_fake_have_every_mapped_runtime_method() -> None:
    methods = set(RPC_TO_RUNTIME.values())
    assert methods == set(RUNTIME_METHODS)
    for name in methods:
        assert callable(getattr(CRIRuntime, name)), name
        assert callable(getattr(FakeRuntime, name)), name
    for name in STREAM_RPCS.values():  # the client hands out the runtime's URLs
        assert callable(getattr(CRIRuntime, name)), name


# ------------------------------------------------------------------- fixtures


class Recorder(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Records the RPC names the server receives."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        self.seen.append(details.method.rsplit("/", 1)[1])
        return await continuation(details)


class SubscriptionSignal:
    """Delegates to a runtime; sets ``subscribed`` when an event stream is opened,
    so a test knows the server is listening before it makes events happen."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner
        self.subscribed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_container_events(self) -> Any:
        stream = self.inner.get_container_events()
        self.subscribed.set()
        return stream


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="kkcri-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fake() -> FakeRuntime:
    return FakeRuntime(events=True, images=["busybox"])


@pytest.fixture
def watched(fake: FakeRuntime) -> SubscriptionSignal:
    return SubscriptionSignal(fake)


@pytest.fixture
async def server(watched: SubscriptionSignal, sock_dir: Path) -> AsyncIterator[CRIServer]:
    async with CRIServer(watched, sock_dir / "cri.sock") as srv:  # type: ignore[arg-type]
        yield srv


@pytest.fixture
async def rt(server: CRIServer) -> AsyncIterator[CRIRuntime]:
    async with CRIRuntime(server.endpoint, retries=0) as client:
        yield client


def pod(uid: str = "u1") -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", uid),
        labels={kl.POD_UID: uid, kl.POD_NAME: "web", kl.POD_NAMESPACE: "default"},
        annotations={"note": "kept"},
    )


def container(name: str, *args: str) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name),
        image=ImageSpec("busybox"),
        args=args,
        envs=(KeyValue("GREETING", "hello"),),
        labels={kl.CONTAINER_NAME: name},
        annotations={kl.CONTAINER_HASH: "abc"},
    )


# ------------------------------------------------------------------ round trip


async def test_the_client_sends_every_mapped_rpc_and_the_server_serves_it(
    fake: FakeRuntime, watched: SubscriptionSignal, sock_dir: Path
) -> None:
    recorder = Recorder()
    srv = CRIServer(watched, sock_dir / "rec.sock", interceptors=[recorder])  # type: ignore[arg-type]
    await srv.start()
    try:
        async with CRIRuntime(srv.endpoint, retries=0) as client:
            await _exercise_every_method(client, fake, watched)
    finally:
        await srv.stop()
    assert set(RPC_TO_RUNTIME) <= set(recorder.seen)


async def _exercise_every_method(
    rt: CRIRuntime, fake: FakeRuntime, watched: SubscriptionSignal
) -> None:
    events = rt.get_container_events()
    first = asyncio.ensure_future(anext(aiter(events)))
    await asyncio.wait_for(watched.subscribed.wait(), 10)
    await rt.version()
    await rt.status()
    sb = await rt.run_pod_sandbox(pod())
    await rt.pod_sandbox_status(sb)
    await rt.list_pod_sandboxes()
    await rt.pull_image(ImageSpec("busybox"))
    await rt.image_status(ImageSpec("busybox"))
    await rt.list_images()
    cid = await rt.create_container(sb, container("app"), pod())
    await rt.start_container(cid)
    await rt.container_status(cid)
    await rt.reopen_container_log(cid)
    await rt.list_containers()
    await rt.exec_sync(cid, ["echo", "x"], timeout=5)
    await rt.update_container_resources(cid, LinuxContainerResources(cpu_shares=512))
    await rt.container_stats(cid)
    await rt.list_container_stats()
    await rt.pod_sandbox_stats(sb)
    await rt.stop_container(cid, 0)
    await rt.remove_container(cid)
    await rt.stop_pod_sandbox(sb)
    await rt.remove_pod_sandbox(sb)
    await rt.remove_image(ImageSpec("busybox"))
    await rt.image_fs_info()
    await asyncio.wait_for(first, 10)
    await events.aclose()  # type: ignore[attr-defined]


async def test_pod_round_trip(rt: CRIRuntime, fake: FakeRuntime) -> None:
    config = pod()
    sb = await rt.run_pod_sandbox(config)
    status = await rt.pod_sandbox_status(sb)
    assert status.state is PodSandboxState.READY
    assert status.metadata == config.metadata
    assert status.annotations == {"note": "kept"}
    assert [
        s.id
        for s in await rt.list_pod_sandboxes(PodSandboxFilter(label_selector={kl.POD_UID: "u1"}))
    ] == [sb]
    assert await rt.list_pod_sandboxes(PodSandboxFilter(label_selector={kl.POD_UID: "x"})) == []

    app = await rt.create_container(sb, container("app", "sh", "-c", "sleep infinity"), config)
    job = await rt.create_container(
        sb, container("job", "sh", "-c", "echo $GREETING; exit 3"), config
    )
    await rt.start_container(app)
    await rt.start_container(job)
    await fake.clock.settle()  # type: ignore[attr-defined]
    job_status = await rt.container_status(job)
    assert (job_status.state, job_status.exit_code, job_status.reason) == (
        ContainerState.EXITED,
        3,
        "Error",
    )
    assert job_status.annotations == {kl.CONTAINER_HASH: "abc"}
    assert [ln.text for ln in fake.logs(job)] == ["hello"]
    running = await rt.list_containers(ContainerFilter(state=ContainerState.RUNNING))
    assert [c.id for c in running] == [app]
    assert {c.id for c in await rt.list_containers(ContainerFilter(pod_sandbox_id=sb))} == {
        app,
        job,
    }

    fake.set_exec_handler(lambda c, cmd: ExecResult(7, b"", b"nope\n"))
    result = await rt.exec_sync(app, ["false"], timeout=2)
    assert (result.exit_code, result.stderr) == (7, b"nope\n")

    fake.set_stats(app, memory_working_set=4096, cpu_ns=0)
    stats = await rt.container_stats(app)
    assert (stats.memory_working_set_bytes, stats.cpu_usage_core_nanoseconds) == (4096, 0)
    assert stats.memory_usage_bytes is None or stats.memory_usage_bytes >= 0
    running_stats = await rt.list_container_stats(ContainerFilter(state=ContainerState.RUNNING))
    assert [s.container_id for s in running_stats] == [app]
    sandbox_stats = await rt.pod_sandbox_stats(sb)
    assert {c.container_id for c in sandbox_stats.containers} == {app, job}

    await rt.stop_pod_sandbox(sb)
    await rt.remove_pod_sandbox(sb)
    assert await rt.list_containers() == []
    with pytest.raises(NotFoundError):
        await rt.pod_sandbox_status(sb)


async def test_pull_credentials_reach_the_served_runtime(rt: CRIRuntime, fake: FakeRuntime) -> None:
    """PullImageRequest.auth travels client -> server -> runtime field for field;
    a pull without one reaches the runtime as None, not as empty credentials."""
    auth = AuthConfig(
        username="user",
        password="pass",
        auth="dXNlcjpwYXNz",
        server_address="https://registry.example",
        identity_token="id",
        registry_token="reg",
    )
    fake.add_image("registry.example/private:1")
    fake.require_auth("registry.example/private:1", "user", "pass")
    await rt.pull_image(ImageSpec("registry.example/private:1"), pod(), auth)
    await rt.pull_image(ImageSpec("busybox"))
    pulls = fake.calls_to("pull_image")
    assert pulls[0].kwargs["auth"] == auth
    assert pulls[0].kwargs["sandbox_config"].metadata == pod().metadata
    assert pulls[1].kwargs["auth"] is None


async def test_unchanged_answers_come_back_as_the_same_values_changes_as_new_ones(
    rt: CRIRuntime, fake: FakeRuntime
) -> None:
    config = pod()
    sb = await rt.run_pod_sandbox(config)
    cid = await rt.create_container(sb, container("app", "sh", "-c", "sleep infinity"), config)
    await rt.start_container(cid)

    status = await rt.container_status(cid)
    assert await rt.container_status(cid) is status
    (listed,) = await rt.list_containers()
    assert (await rt.list_containers())[0] is listed
    sandbox_status = await rt.pod_sandbox_status(sb)
    assert await rt.pod_sandbox_status(sb) is sandbox_status

    await rt.update_container_resources(cid, LinuxContainerResources(cpu_shares=512))
    resized = await rt.container_status(cid)
    assert resized.resources is not None and resized.resources.cpu_shares == 512
    assert status.resources is None or status.resources.cpu_shares != 512

    await rt.stop_container(cid, 0)
    await fake.clock.settle()  # type: ignore[attr-defined]
    stopped = await rt.container_status(cid)
    assert stopped.state is ContainerState.EXITED and stopped.finished_at > 0
    assert [c.state for c in await rt.list_containers()] == [ContainerState.EXITED]
    await rt.stop_pod_sandbox(sb)
    assert (await rt.pod_sandbox_status(sb)).state is PodSandboxState.NOTREADY
    assert [s.state for s in await rt.list_pod_sandboxes()] == [PodSandboxState.NOTREADY]


async def test_without_the_memo_every_answer_is_converted(server: CRIServer) -> None:
    async with CRIRuntime(server.endpoint, retries=0, memo_size=0) as client:
        config = pod()
        sb = await client.run_pod_sandbox(config)
        cid = await client.create_container(sb, container("app"), config)
        first, second = await client.container_status(cid), await client.container_status(cid)
        assert first == second and first is not second
    with pytest.raises(ConfigurationError, match="memo_size"):
        CRIRuntime(server.endpoint, memo_size=-1)


async def test_runtime_errors_come_back_as_the_same_class(
    rt: CRIRuntime, fake: FakeRuntime
) -> None:
    config = pod()
    sb = await rt.run_pod_sandbox(config)
    with pytest.raises(AlreadyExistsError):
        await rt.run_pod_sandbox(config)
    cid = await rt.create_container(sb, container("app"), config)
    await rt.start_container(cid)
    with pytest.raises(ContainerStartError):
        await rt.start_container(cid)  # already running
    with pytest.raises(NotFoundError):
        await rt.create_container("no-such-sandbox", container("x"), config)
    assert await rt.image_status(ImageSpec("absent")) is None


async def test_events_stream_through_the_server(
    rt: CRIRuntime, watched: SubscriptionSignal
) -> None:
    events = rt.get_container_events()
    first = asyncio.ensure_future(anext(aiter(events)))
    await asyncio.wait_for(watched.subscribed.wait(), 10)
    sb = await rt.run_pod_sandbox(pod())
    cid = await rt.create_container(sb, container("app"), pod())
    got = [await asyncio.wait_for(first, 10)]
    while not any(e.container_id == cid for e in got):
        got.append(await asyncio.wait_for(anext(aiter(events)), 10))
    event = next(e for e in got if e.container_id == cid)
    assert event.type is ContainerEventType.CREATED
    assert event.created_at > 0
    await events.aclose()  # type: ignore[attr-defined]


async def test_events_unimplemented_when_the_runtime_has_none(sock_dir: Path) -> None:
    async with (
        CRIServer(FakeRuntime(events=False), sock_dir / "noev.sock") as srv,
        CRIRuntime(srv.endpoint) as client,
    ):
        events = client.get_container_events()  # nothing sent yet: no error here
        with pytest.raises(UnimplementedError, match="GetContainerEvents"):
            await anext(aiter(events))


@pytest.mark.parametrize("rpc", sorted(ALLOW_LIST))
async def test_unserved_rpcs_answer_unimplemented_naming_themselves(
    rt: CRIRuntime, rpc: str
) -> None:
    service = "RuntimeService"
    method = pb.DESCRIPTOR.services_by_name[service].methods_by_name[rpc]
    stub = rt.image_stub if service == "ImageService" else rt.runtime_stub
    request = getattr(pb, method.input_type.name)()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        call = getattr(stub, rpc)(request, timeout=10)
        if method.server_streaming:
            async for _ in call:
                pass
        else:
            await call
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED
    assert rpc in (info.value.details() or "")


async def test_streaming_lists_return_the_same_items(rt: CRIRuntime) -> None:
    sb = await rt.run_pod_sandbox(pod())
    await rt.create_container(sb, container("app"), pod())
    chunks = [r async for r in rt.runtime_stub.StreamPodSandboxes(pb.StreamPodSandboxesRequest())]
    assert [s.id for c in chunks for s in c.pod_sandboxes] == [sb]
    chunks = [r async for r in rt.runtime_stub.StreamContainers(pb.StreamContainersRequest())]
    assert len([c for chunk in chunks for c in chunk.containers]) == 1
    images = [r async for r in rt.image_stub.StreamImages(pb.StreamImagesRequest())]
    assert [i.repo_tags for chunk in images for i in chunk.images]
    stats = await rt.runtime_stub.ListPodSandboxStats(pb.ListPodSandboxStatsRequest())
    assert [s.attributes.id for s in stats.stats] == [sb]
    await rt.runtime_stub.UpdateRuntimeConfig(pb.UpdateRuntimeConfigRequest())


async def test_version_reports_the_cri_version(rt: CRIRuntime) -> None:
    resp = await rt.runtime_stub.Version(pb.VersionRequest(version="0.1.0"))
    assert (resp.version, resp.runtime_name, resp.runtime_api_version) == ("0.1.0", "fake", "v1")


async def test_server_lifecycle(sock_dir: Path, fake: FakeRuntime) -> None:
    path = sock_dir / "life.sock"
    path.touch()  # not a socket: must not be silently deleted
    srv = CRIServer(fake, path)
    with pytest.raises(ConfigurationError, match=r"life\.sock"):
        await srv.start()
    path.unlink()
    await srv.start()
    await srv.start()  # idempotent
    assert path.is_socket()
    await srv.stop()
    await srv.stop()  # idempotent
    assert not path.exists()
    with pytest.raises(ConfigurationError, match="not absolute"):
        CRIServer(fake, "relative.sock")


async def test_run_returns_when_stopped(sock_dir: Path, fake: FakeRuntime) -> None:
    srv = CRIServer(fake, sock_dir / "run.sock")
    task = asyncio.create_task(srv.run())
    async with CRIRuntime(srv.endpoint) as client:
        while not (sock_dir / "run.sock").exists():
            await asyncio.sleep(0)
        assert (await client.version()).runtime_name == "fake"
    await srv.stop()
    await asyncio.wait_for(task, 10)


async def test_conformance_kit_through_the_cri(sock_dir: Path) -> None:
    # CRIRuntime -> CRIServer -> FakeRuntime must pass every check, events included.
    from kubelet_kit.testing.conformance import run_conformance
    from kubelet_kit.testing.fake_runtime import (
        CONFORMANCE_SAME_IMAGE_REFS,
        CONFORMANCE_USER_IMAGES,
    )

    runtime = FakeRuntime(events=True, images=["busybox"], host_ports="decline")
    runtime.add_conformance_images()
    async with (
        CRIServer(runtime, sock_dir / "conf.sock") as srv,
        CRIRuntime(srv.endpoint) as client,
    ):
        report = await run_conformance(
            client,
            log_root=sock_dir / "logs",
            wait=runtime.clock.run_for,  # type: ignore[attr-defined]
            same_image_refs=CONFORMANCE_SAME_IMAGE_REFS,
            user_images=CONFORMANCE_USER_IMAGES,
        )
    assert not report.failures, report.summary()
    # What the fake declines (with a part of its reason), and what this node lacks.
    skips = {
        "port_mappings": "the fake runtime publishes no ports on the host",
        "mount_propagation_bidirectional": "PROPAGATION_BIDIRECTIONAL is not offered",
        "apparmor": "AppArmor",
    }
    for r in report.results:
        if r.status == "skipped":
            assert skips.get(r.name, "\0") in r.message, report.summary()
    assert report.result("port_mappings").status == "skipped", report.summary()


# ------------------------------------------------------------------ streaming


@pytest.mark.parametrize("protocol", ["websocket", "spdy"])
async def test_exec_attach_and_port_forward_through_the_cri_streaming_urls(
    fake: FakeRuntime, sock_dir: Path, protocol: Any
) -> None:
    import aiohttp

    from kubelet_kit.streams.client import StreamError, exec_command

    async with (
        CRIServer(fake, sock_dir / "stream.sock") as srv,
        CRIRuntime(srv.endpoint, retries=0) as client,
        aiohttp.ClientSession() as http,
    ):
        sb = await client.run_pod_sandbox(pod())
        cid = await client.create_container(sb, container("app"), pod())
        await client.start_container(cid)
        url = await client.get_exec_url(
            cid, ["cat"], tty=False, stdin=True, stdout=True, stderr=True
        )
        assert url.startswith("http://127.0.0.1:") and "/exec/" in url
        # The URL's session is the stored request's (stdin and stdout on).
        out = await exec_command(
            http, url + "?input=1&output=1&error=1", input=b"via cri\n", protocol=protocol
        )
        assert out == type(out)(0, b"via cri\n", b"")
        # One use only.
        with pytest.raises(StreamError, match="404"):
            await exec_command(http, url + "?input=1&output=1", input=b"again", protocol=protocol)
        with pytest.raises(InvalidArgumentError, match="stdin, stdout, or stderr"):
            await client.get_exec_url(
                cid, ["ls"], tty=False, stdin=False, stdout=False, stderr=False
            )
        pf = await client.get_port_forward_url(sb, [8080])
        assert "/portforward/" in pf


async def test_streams_unimplemented_for_a_runtime_without_them(sock_dir: Path) -> None:
    class NoStreams:
        """Delegates everything but streams to a fake."""

        def __init__(self) -> None:
            self._fake = FakeRuntime()

        def __getattr__(self, name: str) -> Any:
            if name in ("exec_stream", "attach_stream", "port_forward_stream"):
                raise AttributeError(name)
            return getattr(self._fake, name)

    async with (
        CRIServer(NoStreams(), sock_dir / "nostream.sock") as srv,
        CRIRuntime(  # type: ignore[arg-type]
            srv.endpoint, retries=0
        ) as client,
    ):
        with pytest.raises(UnimplementedError, match="Exec"):
            await client.get_exec_url(
                "c", ["ls"], tty=False, stdin=False, stdout=True, stderr=False
            )
