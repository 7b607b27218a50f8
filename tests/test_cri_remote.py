"""CRIRuntime: endpoints, deadlines, retries, readiness, errors (against CRIServer(FakeRuntime))."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
    PodSandboxState,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime, CRIServer, grpc_target
from kubelet_kit.cri.errors import error_from_status, to_status
from kubelet_kit.errors import (
    AlreadyExistsError,
    ConfigurationError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    InvalidArgumentError,
    NotFoundError,
    RuntimeUnavailableError,
    UnimplementedError,
)
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

C = grpc.StatusCode


class SignallingClock(FakeClock):
    """A FakeClock that wakes the test whenever a timer or sleeper is registered,
    so a test can wait for the client to start backing off without polling."""

    def __init__(self) -> None:
        super().__init__()
        self.registered = asyncio.Event()

    def call_later(self, delay: float, callback: Callable[[], object]) -> Any:
        handle = super().call_later(delay, callback)
        self.registered.set()
        return handle

    def has_timer(self, delay: float) -> bool:
        now = self.monotonic()
        return any(
            not h.cancelled and abs(h.deadline - now - delay) < 1e-9 for _, _, h in self._timers
        )

    async def wait_timer(self, delay: float, task: asyncio.Task[Any] | None = None) -> None:
        """Wait until a timer of ``delay`` seconds is pending (the client is backing off)."""
        while not self.has_timer(delay):
            if task is not None and task.done():
                task.result()
                raise AssertionError(f"finished without a {delay}s timer")
            self.registered.clear()
            waiter = asyncio.ensure_future(self.registered.wait())
            pending = [waiter] if task is None else [waiter, task]
            done, _ = await asyncio.wait(pending, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if not done:
                raise AssertionError(f"no {delay}s timer registered within 10s")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Short path: a unix socket path must stay under 108 bytes.
    d = Path(tempfile.mkdtemp(prefix="kkcri-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fake() -> FakeRuntime:
    return FakeRuntime(images=["busybox"])


@pytest.fixture
async def server(fake: FakeRuntime, sock_dir: Path) -> AsyncIterator[CRIServer]:
    async with CRIServer(fake, sock_dir / "cri.sock") as srv:
        yield srv


@pytest.fixture
def clock() -> SignallingClock:
    return SignallingClock()


@pytest.fixture
async def rt(server: CRIServer, clock: SignallingClock) -> AsyncIterator[CRIRuntime]:
    async with CRIRuntime(server.endpoint, clock=clock, timeout=30, retries=2) as client:
        yield client


def sandbox_config(uid: str = "uid-1", attempt: int = 0) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", uid, attempt),
        labels={kl.POD_UID: uid, kl.POD_NAME: "web", kl.POD_NAMESPACE: "default"},
    )


# ------------------------------------------------------------------ endpoints


@pytest.mark.parametrize(
    ("endpoint", "target"),
    [
        ("unix:///run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock"),
        ("/run/crio/crio.sock", "unix:///run/crio/crio.sock"),
        ("tcp://127.0.0.1:10010", "127.0.0.1:10010"),
        ("tcp://localhost:1234/", "localhost:1234"),
    ],
)
def test_endpoint_forms(endpoint: str, target: str) -> None:
    assert grpc_target(endpoint) == target


@pytest.mark.parametrize(
    "endpoint",
    ["unix://relative.sock", "relative.sock", "tcp://host", "http://x:1", "npipe:////./pipe/x"],
)
def test_bad_endpoint_is_a_configuration_error_naming_it(endpoint: str) -> None:
    with pytest.raises(ConfigurationError, match="runtime endpoint"):
        CRIRuntime(endpoint)


def test_nothing_connects_in_init() -> None:
    client = CRIRuntime("/nonexistent/socket")
    assert not client.ready


# -------------------------------------------------------------- error mapping

CLIENT_TABLE = [
    # (code, method, expected class)
    (C.NOT_FOUND, "ContainerStatus", NotFoundError),
    (C.ALREADY_EXISTS, "RunPodSandbox", AlreadyExistsError),
    (C.INVALID_ARGUMENT, "CreateContainer", InvalidArgumentError),
    (C.UNAVAILABLE, "ListContainers", RuntimeUnavailableError),
    (C.DEADLINE_EXCEEDED, "ExecSync", DeadlineExceededError),
    (C.UNIMPLEMENTED, "GetContainerEvents", UnimplementedError),
    (C.NOT_FOUND, "PullImage", ImageNotFoundError),
    (C.UNKNOWN, "PullImage", ImagePullError),
    (C.INVALID_ARGUMENT, "PullImage", ImagePullError),
    (C.UNAVAILABLE, "PullImage", RuntimeUnavailableError),
    (C.UNKNOWN, "CreateContainer", ContainerStartError),
    (C.UNKNOWN, "StartContainer", ContainerStartError),
    (C.INTERNAL, "ListPodSandbox", ContainerRuntimeError),
]


@pytest.mark.parametrize(("code", "method", "cls"), CLIENT_TABLE)
def test_status_code_table(code: grpc.StatusCode, method: str, cls: type[Exception]) -> None:
    err = error_from_status(code, "boom", method, "abc123")
    assert type(err) is cls
    assert str(err) == f"{method} abc123: {code.name}: boom"


@pytest.mark.parametrize(
    ("exc", "method"),
    [
        (NotFoundError("x"), "ContainerStatus"),
        (AlreadyExistsError("x"), "RunPodSandbox"),
        (InvalidArgumentError("x"), "CreateContainer"),
        (RuntimeUnavailableError("x"), "Status"),
        (DeadlineExceededError("x"), "ExecSync"),
        (UnimplementedError("x"), "GetContainerEvents"),
        (ImageNotFoundError("x"), "PullImage"),
        (ImagePullError("x"), "PullImage"),
        (ContainerStartError("x"), "StartContainer"),
    ],
)
def test_server_codes_map_back_to_the_same_class(exc: Exception, method: str) -> None:
    code, details = to_status(exc)
    assert type(error_from_status(code, details, method)) is type(exc)


def test_unexpected_exception_is_internal() -> None:
    assert to_status(KeyError("k"))[0] is C.INTERNAL


# ---------------------------------------------------------------- over the wire


async def test_errors_cross_the_wire_typed(rt: CRIRuntime, fake: FakeRuntime) -> None:
    with pytest.raises(NotFoundError, match="ContainerStatus nope: NOT_FOUND"):
        await rt.container_status("nope")
    with pytest.raises(ImageNotFoundError, match="PullImage nothere"):
        await rt.pull_image(ImageSpec("nothere"))
    fake.fail_pull("flaky", ImagePullError("registry said 500"))
    with pytest.raises(ImagePullError, match="registry said 500") as info:
        await rt.pull_image(ImageSpec("flaky"))
    assert type(info.value) is ImagePullError
    # Removing what is gone succeeds (the CRI's idempotence).
    await rt.remove_container("nope")
    await rt.remove_pod_sandbox("nope")
    await rt.remove_image(ImageSpec("nothere"))


async def test_version_of_a_runtime_without_v1_says_so(sock_dir: Path) -> None:
    # A server with no runtime.v1 services at all (like a v1alpha2-only runtime).
    server = grpc.aio.server()
    path = sock_dir / "old.sock"
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    try:
        async with CRIRuntime(str(path)) as client:
            with pytest.raises(UnimplementedError, match=r"does not serve the CRI v1 API"):
                await client.version()
    finally:
        await server.stop(None)


async def test_version_and_ready(rt: CRIRuntime) -> None:
    assert not rt.ready
    v = await rt.version()
    assert (v.runtime_name, v.runtime_api_version) == ("fake", "v1")
    assert rt.ready


async def test_idempotent_call_is_retried_with_backoff_on_the_clock(
    rt: CRIRuntime, fake: FakeRuntime, clock: SignallingClock
) -> None:
    await rt.version()
    fake.set_unavailable(True)
    task = asyncio.create_task(rt.list_containers())
    await clock.wait_timer(0.1, task)
    assert not rt.ready
    fake.set_unavailable(False)
    clock.advance(0.1)
    assert await task == []
    assert rt.ready
    assert len(fake.calls_to("list_containers")) == 2


async def test_retries_are_bounded(
    rt: CRIRuntime, fake: FakeRuntime, clock: SignallingClock
) -> None:
    fake.set_unavailable(True)
    task = asyncio.create_task(rt.pod_sandbox_status("sb"))
    await clock.wait_timer(0.1, task)
    clock.advance(0.1)
    await clock.wait_timer(0.2, task)  # doubled
    clock.advance(0.2)
    with pytest.raises(RuntimeUnavailableError, match="PodSandboxStatus sb: UNAVAILABLE"):
        await task
    assert len(fake.calls_to("pod_sandbox_status")) == 3  # first try + retries=2


async def test_non_idempotent_calls_are_not_retried(rt: CRIRuntime, fake: FakeRuntime) -> None:
    sb = await rt.run_pod_sandbox(sandbox_config())
    fake.set_unavailable(True)
    config = ContainerConfig(ContainerMetadata("c"), ImageSpec("busybox"))
    with pytest.raises(RuntimeUnavailableError):
        await rt.create_container(sb, config, sandbox_config())
    with pytest.raises(RuntimeUnavailableError):
        await rt.exec_sync("c1", ["true"], timeout=1)
    assert len(fake.calls_to("create_container")) == 1
    assert len(fake.calls_to("exec_sync")) == 1


class CreatesThenFails:
    """Delegates to a FakeRuntime, but the first run_pod_sandbox creates the sandbox
    and then reports the runtime unavailable (the connection broke mid-call); with
    ``broken``, the sandbox it made is left not ready (the runtime died making it)."""

    def __init__(self, inner: FakeRuntime, *, broken: bool = False) -> None:
        self.inner = inner
        self.broken = broken
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        sid = await self.inner.run_pod_sandbox(config)
        if not self.failed:
            self.failed = True
            if self.broken:
                await self.inner.stop_pod_sandbox(sid)
            raise RuntimeUnavailableError("connection reset after the sandbox was made")
        return sid


async def run_retried(
    runtime: CreatesThenFails, sock: Path, clock: SignallingClock, uid: str
) -> str:
    """RunPodSandbox through a CRIRuntime on ``runtime``, past its one failure."""
    async with (
        CRIServer(runtime, sock) as srv,  # type: ignore[arg-type]
        CRIRuntime(srv.endpoint, clock=clock, retries=2) as client,
    ):
        task = asyncio.create_task(client.run_pod_sandbox(sandbox_config(uid, attempt=1)))
        await clock.wait_timer(0.1, task)
        clock.advance(0.1)
        return await task


async def test_run_pod_sandbox_retry_reuses_the_sandbox_it_made(
    fake: FakeRuntime, sock_dir: Path, clock: SignallingClock
) -> None:
    sandbox_id = await run_retried(CreatesThenFails(fake), sock_dir / "flaky.sock", clock, "u-9")
    sandboxes = await fake.list_pod_sandboxes()
    assert [s.id for s in sandboxes] == [sandbox_id]
    assert len(fake.calls_to("run_pod_sandbox")) == 1


async def test_run_pod_sandbox_retry_replaces_a_sandbox_left_not_ready(
    fake: FakeRuntime, sock_dir: Path, clock: SignallingClock
) -> None:
    sandbox_id = await run_retried(
        CreatesThenFails(fake, broken=True), sock_dir / "broken.sock", clock, "u-8"
    )
    [sandbox] = await fake.list_pod_sandboxes()  # the broken one is gone
    assert sandbox.id == sandbox_id
    assert sandbox.state is PodSandboxState.READY
    assert len(fake.calls_to("run_pod_sandbox")) == 2
    assert len(fake.calls_to("remove_pod_sandbox")) == 1


async def test_run_pod_sandbox_retry_creates_when_nothing_was_made(
    rt: CRIRuntime, fake: FakeRuntime, clock: SignallingClock
) -> None:
    # An older attempt of the same pod exists; it must not be mistaken for this one.
    old = await rt.run_pod_sandbox(sandbox_config("u-7", attempt=0))
    fake.inject_error("run_pod_sandbox", RuntimeUnavailableError("down"))
    task = asyncio.create_task(rt.run_pod_sandbox(sandbox_config("u-7", attempt=1)))
    await clock.wait_timer(0.1, task)
    clock.advance(0.1)
    new = await task
    assert new != old
    assert sorted(s.metadata.attempt for s in await fake.list_pod_sandboxes()) == [0, 1]


async def test_deadline_is_measured_on_the_clock(
    rt: CRIRuntime, fake: FakeRuntime, clock: SignallingClock
) -> None:
    fake.set_latency("container_status", 1e9)  # the runtime never answers
    task = asyncio.create_task(rt.container_status("c1"))
    await clock.wait_timer(30.0, task)
    clock.advance(30.0)
    with pytest.raises(DeadlineExceededError, match=r"ContainerStatus c1: no answer .* 30s"):
        await task


async def test_exec_sync_sends_whole_seconds_and_maps_the_timeout(
    rt: CRIRuntime, fake: FakeRuntime
) -> None:
    from kubelet_kit.container import ExecResult

    fake.set_exec_handler(lambda cid, cmd: ExecResult(0, b"out", b""))
    sb = await rt.run_pod_sandbox(sandbox_config())
    cid = await rt.create_container(
        sb, ContainerConfig(ContainerMetadata("c"), ImageSpec("busybox")), sandbox_config()
    )
    await rt.start_container(cid)
    assert (await rt.exec_sync(cid, ["x"], timeout=1.5)).stdout == b"out"
    assert fake.calls_to("exec_sync")[-1].args[2] == 2.0  # rounded up to whole seconds
    fake.inject_error("exec_sync", DeadlineExceededError("took too long"))
    with pytest.raises(DeadlineExceededError, match=r"command 'sleep 9' timed out after 1s"):
        await rt.exec_sync(cid, ["sleep", "9"], timeout=1)


async def test_closed_client_reopens_lazily(rt: CRIRuntime) -> None:
    await rt.version()
    await rt.close()
    await rt.close()  # idempotent
    assert not rt.ready
    assert (await rt.version()).runtime_name == "fake"


async def test_unreachable_socket_is_unavailable(sock_dir: Path, clock: SignallingClock) -> None:
    async with CRIRuntime(str(sock_dir / "nobody.sock"), clock=clock, retries=0) as client:
        with pytest.raises(RuntimeUnavailableError, match="Version"):
            await client.version()
        assert not client.ready
