"""The probe handlers against real servers on loopback and real runtimes.

HTTP cases are ported from upstream ``pkg/probe/http/http_test.go``
(TestHTTPProbeChecker, TestHTTPProbeChecker_NonLocalRedirects, ..._HostHeader...,
..._PayloadTruncated). Timeouts are driven by a FakeClock: the test waits until the
server has the request, then advances the clock past the probe's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest
from aiohttp import web

from kubelet_kit.api import (
    Container,
    ContainerPort,
    EnvVar,
    ExecAction,
    GRPCAction,
    HTTPGetAction,
    HTTPHeader,
    Pod,
    Probe,
    TCPSocketAction,
)
from kubelet_kit.clock import RealClock
from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ExecResult,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.prober import ProbeKind, ProbeOutcome, Prober, ProbeStatus
from kubelet_kit.prober.probers import MAX_READ_LENGTH, exec_probe, grpc_probe, tcp_probe
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.testing import FakeClock, FakeRuntime

pytestmark = pytest.mark.timeout(60)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WAIT = 10.0  # real seconds: upper bound on waiting for a real server or process

SUCCESS, WARNING, FAILURE, UNKNOWN = (
    ProbeStatus.SUCCESS,
    ProbeStatus.WARNING,
    ProbeStatus.FAILURE,
    ProbeStatus.UNKNOWN,
)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[int]]]:
    """``await serve(handler, ssl_context=None)`` -> port of a loopback HTTP server."""
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        runners.append(runner)
        return int(runner.addresses[0][1])

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def prober() -> AsyncIterator[Prober]:
    p = Prober(FakeRuntime(), RealClock())
    yield p
    await p.aclose()


async def http(
    prober: Prober,
    port: int | str,
    path: str = "/",
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    *,
    scheme: str = "HTTP",
    container: Container | None = None,
    timeout: int = 5,
) -> ProbeOutcome:
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    probe = Probe(
        http_get=HTTPGetAction(
            path=path,
            port=port,
            scheme=scheme,
            http_headers=tuple(HTTPHeader(name=n, value=v) for n, v in pairs),
        ),
        timeout_seconds=timeout,
    )
    return await prober.run_once(
        probe, container or Container(name="c"), pod_ip="127.0.0.1", container_id="c1"
    )


def status_handler(status: int, body: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=body)

    return handle


async def header_echo(request: web.Request) -> web.StreamResponse:
    lines = [f"{k}: {v}" for k, v in request.headers.items()]
    return web.Response(text="\n".join(lines) + "\n")


def redirect_handler(status: int, bad: bool) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/":
            return web.Response(status=status, headers={"Location": "/new"})
        if bad and request.path == "/new":
            return web.Response(status=500)
        return web.Response(status=200)

    return handle


async def hang_up(request: web.Request) -> web.StreamResponse:
    # What Go's WriteHeader(-1) does to the client: the connection just ends.
    assert request.transport is not None
    request.transport.close()
    raise ConnectionResetError


# ---------------------------------------------------------------- HTTP: TestHTTPProbeChecker


@pytest.mark.parametrize(
    ("handler", "headers", "status", "contains", "absent"),
    [
        (status_handler(200, "ok body"), None, SUCCESS, "ok body", None),
        (
            header_echo,
            {"X-Muffins-Or-Cupcakes": "muffins"},
            SUCCESS,
            "X-Muffins-Or-Cupcakes: muffins",
            None,
        ),
        (header_echo, {"User-Agent": "foo/1.0"}, SUCCESS, "User-Agent: foo/1.0", None),
        (header_echo, {"User-Agent": ""}, SUCCESS, None, "User-Agent"),
        (header_echo, {}, SUCCESS, "User-Agent: kube-probe/", None),
        (header_echo, {}, SUCCESS, "Accept: */*", None),
        (header_echo, {"Accept": "application/json"}, SUCCESS, "Accept: application/json", None),
        (header_echo, {"Accept": ""}, SUCCESS, None, "Accept:"),
        (hang_up, None, FAILURE, None, None),
        (status_handler(500, "fail body"), None, FAILURE, None, None),
        (redirect_handler(301, False), None, SUCCESS, None, None),
        (redirect_handler(301, True), None, FAILURE, None, None),
        (redirect_handler(302, False), None, SUCCESS, None, None),
        (redirect_handler(302, True), None, FAILURE, None, None),
        (redirect_handler(307, False), None, SUCCESS, None, None),
        (redirect_handler(307, True), None, FAILURE, None, None),
        (redirect_handler(308, False), None, SUCCESS, None, None),
        (redirect_handler(308, True), None, FAILURE, None, None),
    ],
)
async def test_http_probe_checker(
    serve: Callable[..., Awaitable[int]],
    prober: Prober,
    handler: Handler,
    headers: dict[str, str] | None,
    status: ProbeStatus,
    contains: str | None,
    absent: str | None,
) -> None:
    port = await serve(handler)
    outcome = await http(prober, port, headers=headers)
    assert outcome.status is status, outcome
    if contains is not None:
        assert contains in outcome.output
    if absent is not None:
        assert absent not in outcome.output


async def test_http_failure_message_is_the_kubelets(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    port = await serve(status_handler(503, "down"))
    outcome = await http(prober, port)
    assert outcome == ProbeOutcome(FAILURE, "HTTP probe failed with statuscode: 503")


async def test_http_host_header_is_sent(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    async def echo_host(request: web.Request) -> web.StreamResponse:
        return web.Response(text=request.host)

    port = await serve(echo_host)
    outcome = await http(prober, port, headers={"Host": "muffins.cupcakes.org"})
    assert outcome == ProbeOutcome(SUCCESS, "muffins.cupcakes.org")


async def test_http_repeated_headers_are_all_sent(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    async def echo_all(request: web.Request) -> web.StreamResponse:
        return web.Response(text=",".join(request.headers.getall("X-Tag")))

    port = await serve(echo_all)
    outcome = await http(prober, port, headers=[("X-Tag", "a"), ("X-Tag", "b")])
    assert outcome.output == "a,b"


async def test_http_user_agent_is_kube_probe_major_minor(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    async def echo_ua(request: web.Request) -> web.StreamResponse:
        return web.Response(text=request.headers.get("User-Agent", "<none>"))

    port = await serve(echo_ua)
    outcome = await http(prober, port)
    name, _, version = outcome.output.partition("/")
    major, minor = version.split(".")
    assert name == "kube-probe" and major.isdigit() and minor.isdigit()


# ---------------------------------------------------------------- HTTP: redirects


def redirect_app() -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/redirect":
            loc = request.query["loc"]
            return web.Response(status=302, headers={"Location": loc})
        if request.path == "/loop":
            return web.Response(status=302, headers={"Location": "/loop"})
        if request.path == "/success":
            return web.Response(status=200)
        return web.Response(status=500)

    return handle


@pytest.mark.parametrize(
    ("redirect", "expected"),
    [
        ("/success", SUCCESS),
        ("/fail", FAILURE),
        ("{newport}/success", SUCCESS),
        ("{newport}/fail", FAILURE),
        ("http://0.0.0.0/fail", WARNING),
        ("/loop", FAILURE),
    ],
    ids=[
        "local success",
        "local fail",
        "newport success",
        "newport fail",
        "bogus nonlocal",
        "redirect loop",
    ],
)
async def test_http_redirects_only_to_the_same_host(
    serve: Callable[..., Awaitable[int]], prober: Prober, redirect: str, expected: ProbeStatus
) -> None:
    port = await serve(redirect_app())
    newport = await serve(redirect_app())
    loc = redirect.format(newport=f"http://127.0.0.1:{newport}")
    outcome = await http(prober, port, "/redirect?loc=" + urllib.parse.quote(loc, safe=""))
    assert outcome.status is expected, outcome


async def test_http_redirect_messages(serve: Callable[..., Awaitable[int]], prober: Prober) -> None:
    port = await serve(redirect_app())
    loop = await http(prober, port, "/loop")
    assert loop == ProbeOutcome(
        FAILURE, f'Get "http://127.0.0.1:{port}/loop": stopped after 10 redirects'
    )
    elsewhere = await http(prober, port, "/redirect?loc=" + urllib.parse.quote("http://0.0.0.0/"))
    assert elsewhere.status is WARNING
    assert elsewhere.output.startswith("Probe terminated redirects, Response body: ")
    assert elsewhere.succeeded


async def test_http_follows_at_most_ten_requests(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    hits: list[int] = []

    async def chain(request: web.Request) -> web.StreamResponse:
        n = int(request.path.strip("/") or 0)
        hits.append(n)
        if n < 20:
            return web.Response(status=302, headers={"Location": f"/{n + 1}"})
        return web.Response(status=200)

    port = await serve(chain)
    nine = await http(prober, port, "/11")  # 9 redirects, 10 requests: followed to the end
    assert nine.status is SUCCESS
    hits.clear()
    ten = await http(prober, port, "/10")  # a 10th redirect is refused
    assert ten.status is FAILURE
    assert hits == list(range(10, 20))


async def test_http_host_header_preserved_after_redirect(
    serve: Callable[..., Awaitable[int]], prober: Prober
) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/redirect":
            return web.Response(status=302, headers={"Location": "/success"})
        if request.path == "/success":
            return web.Response(status=200 if request.host == "www.success.com" else 400)
        return web.Response(status=500)

    port = await serve(handle)
    ok = await http(prober, port, "/redirect", {"Host": "www.success.com"})
    bad = await http(prober, port, "/redirect", {"Host": "www.fail.com"})
    assert (ok.status, bad.status) == (SUCCESS, FAILURE)


@pytest.mark.parametrize(
    ("size", "kept"), [(MAX_READ_LENGTH + 1, MAX_READ_LENGTH), (MAX_READ_LENGTH - 1, None)]
)
async def test_http_body_is_read_up_to_10_kib(
    serve: Callable[..., Awaitable[int]], prober: Prober, size: int, kept: int | None
) -> None:
    payload = "a" * size

    async def big(request: web.Request) -> web.StreamResponse:
        return web.Response(text=payload)

    port = await serve(big)
    outcome = await http(prober, port)
    assert outcome == ProbeOutcome(SUCCESS, payload[: kept or size])


async def test_http_named_port(serve: Callable[..., Awaitable[int]], prober: Prober) -> None:
    port = await serve(status_handler(200, "named"))
    container = Container(name="c", ports=(ContainerPort(name="web", container_port=port),))
    assert (await http(prober, "web", container=container)).output == "named"
    missing = await http(prober, "nope", container=container)
    assert missing == ProbeOutcome(UNKNOWN, 'strconv.Atoi: parsing "nope": invalid syntax')


async def test_http_connection_refused(prober: Prober) -> None:
    port = free_port()
    outcome = await http(prober, port, "/healthz")
    assert outcome == ProbeOutcome(
        FAILURE,
        f'Get "http://127.0.0.1:{port}/healthz": dial tcp 127.0.0.1:{port}: '
        "connect: connection refused",
    )


async def test_http_slow_response_times_out_on_the_clock(
    serve: Callable[..., Awaitable[int]],
) -> None:
    arrived = asyncio.Event()
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        arrived.set()
        await release.wait()
        return web.Response(text="too late")

    port = await serve(slow)
    clock = FakeClock()
    p = Prober(FakeRuntime(clock), clock)
    try:
        task = asyncio.create_task(http(p, port, timeout=1))
        await asyncio.wait_for(arrived.wait(), WAIT)
        clock.advance(0.9)
        await clock.settle()
        assert not task.done()
        clock.advance(0.1)
        outcome = await asyncio.wait_for(task, WAIT)
    finally:
        release.set()
        await p.aclose()
    assert outcome == ProbeOutcome(
        FAILURE,
        f'Get "http://127.0.0.1:{port}/": context deadline exceeded '
        "(Client.Timeout exceeded while awaiting headers)",
    )


async def test_http_slow_response_times_out_in_real_time_too(
    serve: Callable[..., Awaitable[int]],
) -> None:
    # A FakeClock that never moves must not let a hung server hang the worker.
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response()

    port = await serve(slow)
    clock = FakeClock()
    p = Prober(FakeRuntime(clock), clock)
    began = time.monotonic()
    try:
        outcome = await http(p, port, timeout=1)
    finally:
        release.set()
        await p.aclose()
    assert outcome.status is FAILURE
    assert 0.9 <= time.monotonic() - began < WAIT


async def test_https_without_certificate_verification(
    serve: Callable[..., Awaitable[int]], prober: Prober, tmp_path: Path
) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=probe-test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if made.returncode != 0:
        pytest.skip("openssl cannot make a certificate here")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    port = await serve(status_handler(200, "secure"), ssl_context=ctx)
    assert await http(prober, port, scheme="HTTPS") == ProbeOutcome(SUCCESS, "secure")


# ---------------------------------------------------------------- TCP


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_tcp_accepted_and_refused() -> None:
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = RealClock()
    try:
        assert await tcp_probe("127.0.0.1", port, 1, clock=clock) == ProbeOutcome(SUCCESS, "")
        await asyncio.wait_for(accepted.wait(), WAIT)  # the server saw the connection
    finally:
        server.close()
        await server.wait_closed()
    closed = free_port()
    assert await tcp_probe("127.0.0.1", closed, 1, clock=clock) == ProbeOutcome(
        FAILURE, f"dial tcp 127.0.0.1:{closed}: connect: connection refused"
    )


async def test_tcp_probe_through_the_prober_uses_the_pod_ip_and_named_port() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    p = Prober(FakeRuntime(), RealClock())
    container = Container(name="c", ports=(ContainerPort(name="svc", container_port=port),))
    probe = Probe(tcp_socket=TCPSocketAction(port="svc"))
    try:
        outcome = await p.run_once(probe, container, pod_ip="127.0.0.1", container_id="")
    finally:
        server.close()
        await server.wait_closed()
    assert outcome.status is SUCCESS


# ---------------------------------------------------------------- gRPC


@pytest.fixture
async def grpc_server() -> AsyncIterator[Callable[..., Awaitable[tuple[grpc.aio.Server, int]]]]:
    servers: list[grpc.aio.Server] = []

    async def start(
        *handlers: grpc.GenericRpcHandler,
        setup: Callable[[grpc.aio.Server], object] | None = None,
    ) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        if setup is not None:
            setup(server)
        for h in handlers:
            server.add_generic_rpc_handlers((h,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        return server, port

    yield start
    for server in servers:
        await server.stop(None)


async def test_grpc_health_against_the_reference_servicer(
    grpc_server: Callable[..., Awaitable[tuple[grpc.aio.Server, int]]],
) -> None:
    health = pytest.importorskip("grpc_health.v1.health")
    health_pb2 = pytest.importorskip("grpc_health.v1.health_pb2")
    health_pb2_grpc = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    servicer = health.aio.HealthServicer()
    _, port = await grpc_server(
        setup=lambda server: health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    )
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await servicer.set("db", health_pb2.HealthCheckResponse.NOT_SERVING)
    clock = RealClock()
    assert await grpc_probe("127.0.0.1", port, "", 2, clock=clock) == ProbeOutcome(
        SUCCESS, "service healthy"
    )
    assert await grpc_probe("127.0.0.1", port, "db", 2, clock=clock) == ProbeOutcome(
        FAILURE, 'service unhealthy (responded with "NOT_SERVING")'
    )
    unknown = await grpc_probe("127.0.0.1", port, "nope", 2, clock=clock)
    assert unknown.status is FAILURE
    # The Python servicer sends no description (Go's says "unknown service").
    assert unknown.output.startswith(
        "error: health rpc probe failed: rpc error: code = NotFound desc = "
    )


async def test_grpc_server_without_health_service(
    grpc_server: Callable[..., Awaitable[tuple[grpc.aio.Server, int]]],
) -> None:
    _, port = await grpc_server()
    outcome = await grpc_probe("127.0.0.1", port, "", 2, clock=RealClock())
    assert outcome.status is FAILURE
    assert outcome.output.startswith(
        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): "
    )


async def test_grpc_wire_format_user_agent_and_unknown_status(
    grpc_server: Callable[..., Awaitable[tuple[grpc.aio.Server, int]]],
) -> None:
    seen: list[tuple[bytes, str]] = []
    answer = {"bytes": b"\x08\x01"}

    async def check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        meta = dict(context.invocation_metadata() or ())
        seen.append((request, str(meta.get("user-agent", ""))))
        return answer["bytes"]

    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}
    )
    _, port = await grpc_server(handler)
    clock = RealClock()
    assert (await grpc_probe("127.0.0.1", port, "api", 2, clock=clock)).status is SUCCESS
    # HealthCheckRequest{service: "api"}: field 1, length-delimited.
    assert seen[0][0] == b"\x0a\x03api"
    assert seen[0][1].startswith("kube-probe/")
    answer["bytes"] = b"\x08\x07"  # a status this client does not know
    assert await grpc_probe("127.0.0.1", port, "", 2, clock=clock) == ProbeOutcome(
        FAILURE, 'service unhealthy (responded with "7")'
    )
    answer["bytes"] = b""  # status UNKNOWN (0) is the default value
    assert await grpc_probe("127.0.0.1", port, "", 2, clock=clock) == ProbeOutcome(
        FAILURE, 'service unhealthy (responded with "UNKNOWN")'
    )


async def test_grpc_connect_timeout_on_the_clock() -> None:
    port = free_port()
    clock = FakeClock()
    task = asyncio.create_task(grpc_probe("127.0.0.1", port, "", 1, clock=clock))
    await clock.settle()
    clock.advance(1)
    outcome = await asyncio.wait_for(task, WAIT)
    assert outcome == ProbeOutcome(
        FAILURE,
        f'timeout: failed to connect service "127.0.0.1:{port}" within 1s: '
        "context deadline exceeded",
    )


async def test_grpc_probe_through_the_prober(
    grpc_server: Callable[..., Awaitable[tuple[grpc.aio.Server, int]]],
) -> None:
    async def check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"\x08\x01"

    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}
    )
    _, port = await grpc_server(handler)
    p = Prober(FakeRuntime(), RealClock())
    probe = Probe(grpc=GRPCAction(port=port))
    outcome = await p.run_once(probe, Container(name="c"), pod_ip="127.0.0.1", container_id="")
    assert outcome == ProbeOutcome(SUCCESS, "service healthy")


# ---------------------------------------------------------------- exec through FakeRuntime


async def fake_container(runtime: FakeRuntime) -> str:
    sb = PodSandboxConfig(metadata=PodSandboxMetadata(name="p", namespace="ns", uid="u"))
    sid = await runtime.run_pod_sandbox(sb)
    cid = await runtime.create_container(
        sid,
        ContainerConfig(metadata=ContainerMetadata(name="c"), image=ImageSpec("busybox")),
        sb,
    )
    await runtime.start_container(cid)
    return cid


async def test_exec_exit_status_and_output_through_fake_runtime() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    cid = await fake_container(runtime)
    ok = await exec_probe(runtime, cid, ["sh", "-c", "echo fine"], 1)
    assert ok == ProbeOutcome(SUCCESS, "fine\n")
    bad = await exec_probe(runtime, cid, ["sh", "-c", "echo out; echo err >&2; exit 3"], 1)
    assert bad == ProbeOutcome(FAILURE, "out\nerr\n")


async def test_exec_output_is_capped_at_10_kib() -> None:
    runtime = FakeRuntime(images=["busybox"])
    cid = await fake_container(runtime)
    runtime.set_exec_handler(lambda _cid, _cmd: ExecResult(1, b"o" * 8000, b"e" * 8000))
    outcome = await exec_probe(runtime, cid, ["check"], 1)
    assert outcome.status is FAILURE
    assert outcome.output == "o" * 8000 + "e" * (MAX_READ_LENGTH - 8000)


async def test_exec_timeout_is_a_failure_on_the_clock() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    cid = await fake_container(runtime)
    task = asyncio.create_task(exec_probe(runtime, cid, ["sh", "-c", "sleep 10"], 2))
    await clock.run_for(1.9)
    assert not task.done()
    await clock.run_for(0.1)
    assert task.result() == ProbeOutcome(FAILURE, 'command "sh -c sleep 10" timed out')


async def test_exec_in_a_stopped_container_is_a_prober_error_retried_three_times() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    cid = await fake_container(runtime)
    await runtime.stop_container(cid, 0)
    p = Prober(runtime, clock)
    container = Container(name="c", env=(EnvVar(name="X", value="1"),))
    probe = Probe(exec=ExecAction(command=("test", "$(X)")))
    outcome = await p.probe(
        ProbeKind.LIVENESS, Pod(), container, probe, pod_ip="", container_id=f"containerd://{cid}"
    )
    assert outcome.status is UNKNOWN
    calls = runtime.calls_to("exec_sync")
    assert [c.args[:2] for c in calls] == [(cid, ("test", "1"))] * 3


# ---------------------------------------------------------------- exec through HostProcessRuntime


@pytest.fixture
async def host_container(
    tmp_path: Path,
) -> AsyncIterator[tuple[HostProcessRuntime, str, FakeClock]]:
    clock = FakeClock()
    runtime = HostProcessRuntime(tmp_path / "host", clock=clock)
    sb = PodSandboxConfig(
        metadata=PodSandboxMetadata(name="p", namespace="ns", uid="u"),
        log_directory=str(tmp_path / "logs"),
    )
    sid = await runtime.run_pod_sandbox(sb)
    cid = await runtime.create_container(
        sid,
        ContainerConfig(
            metadata=ContainerMetadata(name="c"),
            image=ImageSpec("busybox"),
            command=("sleep",),
            args=("60",),
            log_path="c/0.log",
        ),
        sb,
    )
    await runtime.start_container(cid)
    try:
        yield runtime, cid, clock
    finally:
        with contextlib.suppress(Exception):
            await runtime.remove_pod_sandbox(sid)


async def test_exec_probe_through_host_process_runtime(
    host_container: tuple[HostProcessRuntime, str, FakeClock],
) -> None:
    runtime, cid, _ = host_container
    assert await exec_probe(runtime, cid, ["sh", "-c", "echo hi"], 1) == ProbeOutcome(
        SUCCESS, "hi\n"
    )
    assert await exec_probe(runtime, cid, ["sh", "-c", "echo no >&2; exit 4"], 1) == ProbeOutcome(
        FAILURE, "no\n"
    )
    missing = await exec_probe(runtime, cid, ["no-such-binary-for-probes"], 1)
    assert missing.status is FAILURE  # exit 127, as a shell reports it


async def test_exec_probe_timeout_kills_the_command_on_host(
    host_container: tuple[HostProcessRuntime, str, FakeClock], tmp_path: Path
) -> None:
    runtime, cid, clock = host_container
    marker = tmp_path / "started"
    task = asyncio.create_task(
        exec_probe(runtime, cid, ["sh", "-c", f"echo x > {marker}; exec sleep 30"], 1)
    )
    deadline = time.monotonic() + WAIT
    while not marker.exists():
        assert time.monotonic() < deadline, "the exec did not start"
        await asyncio.sleep(0.02)
    clock.advance(1)
    outcome = await asyncio.wait_for(task, WAIT)
    assert outcome == ProbeOutcome(
        FAILURE, f'command "sh -c echo x > {marker}; exec sleep 30" timed out'
    )
