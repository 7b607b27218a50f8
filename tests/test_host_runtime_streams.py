"""HostProcessRuntime's exec, attach and port-forward streams, with real processes.

Every wait is bounded in real time (a session, a process's exit, a server coming
up); the containers a test starts are killed in teardown by the fixtures of
test_host_runtime, which also check that none is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import test_host_runtime as host_tests

from kubelet_kit.container import (
    ContainerState,
    Mount,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container.streams import StreamingRuntime, StreamIO, TerminalSize, stream_mode
from kubelet_kit.errors import ContainerRuntimeError, InvalidArgumentError, NotFoundError
from kubelet_kit.network import CNINetwork
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import _has_cap_sys_admin

# The fixtures and helpers of the runtime's own tests (its teardown kills and checks
# every process a test left).
WAIT = host_tests.WAIT
container, log_of, run = host_tests.container, host_tests.log_of, host_tests.run
wait_exited, wait_log = host_tests.wait_exited, host_tests.wait_log
roots, make_runtime, runtime = host_tests.roots, host_tests.make_runtime, host_tests.runtime
sandbox, sandbox_config = host_tests.sandbox, host_tests.sandbox_config

pytestmark = pytest.mark.timeout(60)

RequireReal = Callable[[bool, str], None]
T = TypeVar("T")


class Sink:
    """A client's receiving side: collects bytes, can wait for some."""

    def __init__(self) -> None:
        self.data = b""
        self.closed = False
        self._changed = asyncio.Event()

    async def write(self, data: bytes) -> None:
        self.data += data
        self._changed.set()

    async def close(self) -> None:
        self.closed = True
        self._changed.set()

    async def wait_for(self, text: bytes, limit: float = WAIT) -> None:
        deadline = time.monotonic() + limit
        while text not in self.data:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in {self.data!r} within {limit:g}s"
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


class Source:
    """A client's sending side: what the test feeds, then its end."""

    def __init__(self, *chunks: bytes) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        for chunk in chunks:
            self.send(chunk)

    def send(self, data: bytes) -> None:
        self._queue.put_nowait(data)

    def end(self) -> None:
        self._queue.put_nowait(b"")

    async def read(self, n: int = 65536) -> bytes:
        return await self._queue.get()


class Sizes:
    """A client's resize stream."""

    def __init__(self, *sizes: TerminalSize) -> None:
        self._queue: asyncio.Queue[TerminalSize] = asyncio.Queue()
        for size in sizes:
            self.send(size)

    def send(self, size: TerminalSize) -> None:
        self._queue.put_nowait(size)

    def __aiter__(self) -> AsyncIterator[TerminalSize]:
        return self

    async def __anext__(self) -> TerminalSize:
        return await self._queue.get()


async def bounded(aw: asyncio.Future[T], what: str) -> T:
    try:
        return await asyncio.wait_for(aw, WAIT)
    except TimeoutError:
        raise AssertionError(f"{what} did not end within {WAIT:g}s") from None


async def sleeper(rt: HostProcessRuntime, sid: str, sb: PodSandboxConfig, **kwargs: object) -> str:
    return await run(rt, sid, sb, container("app", "sleep", "60", **kwargs))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ----------------------------------------------------------------------- exec


async def test_the_runtime_offers_streams_directly(runtime: HostProcessRuntime) -> None:
    assert isinstance(runtime, StreamingRuntime)
    assert stream_mode(runtime) == "direct"


async def test_exec_splits_stdout_and_stderr_and_returns_the_exit_code(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    out, err = Sink(), Sink()
    code = await bounded(
        asyncio.ensure_future(
            runtime.exec_stream(
                cid,
                ["sh", "-c", "echo out; echo err >&2; pwd; exit 3"],
                StreamIO(stdout=out, stderr=err),
            )
        ),
        "exec",
    )
    assert code == 3
    assert out.data == b"out\n/\n"
    assert err.data == b"err\n"
    assert out.closed and err.closed


async def test_exec_runs_with_the_container_env(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    from kubelet_kit.container import KeyValue

    cid = await run(
        runtime,
        sandbox,
        sandbox_config,
        container("app", "sleep", "60", envs=(KeyValue("GREETING", "hello"),), working_dir="/tmp"),
    )
    out = Sink()
    code = await runtime.exec_stream(
        cid, ["sh", "-c", 'echo "$GREETING $(pwd)"'], StreamIO(stdout=out)
    )
    assert (code, out.data) == (0, b"hello /tmp\n")


async def test_exec_with_stdin_reads_it_to_its_end(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    src, out = Source(b"one\n", b"two\n"), Sink()
    session = asyncio.ensure_future(
        runtime.exec_stream(cid, ["sh", "-c", "cat; echo end"], StreamIO(stdin=src, stdout=out))
    )
    await out.wait_for(b"two\n")
    assert not session.done()  # cat is still reading
    src.end()
    assert await bounded(session, "exec") == 0
    assert out.data == b"one\ntwo\nend\n"


async def test_exec_on_a_tty_has_the_clients_size_from_the_start_and_after(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    out = Sink()
    code = await bounded(
        asyncio.ensure_future(
            runtime.exec_stream(
                cid,
                ["stty", "size"],
                StreamIO(stdout=out, tty=True, resize=Sizes(TerminalSize(width=100, height=40))),
            )
        ),
        "exec",
    )
    assert code == 0
    assert out.data.strip() == b"40 100"

    # A size sent while the command runs is applied too; stdin and stdout are the
    # terminal (one stream, no stderr).
    src, out, sizes = Source(), Sink(), Sizes(TerminalSize(80, 24))
    session = asyncio.ensure_future(
        runtime.exec_stream(
            cid,
            ["sh", "-c", "stty size; read line; stty size; echo oops >&2; tty"],
            StreamIO(stdin=src, stdout=out, stderr=Sink(), tty=True, resize=sizes),
        )
    )
    await out.wait_for(b"24 80")
    sizes.send(TerminalSize(132, 50))
    await asyncio.sleep(0.2)
    src.send(b"go\n")
    assert await bounded(session, "exec") == 0
    lines = out.data.decode().splitlines()
    assert "50 132" in lines and "oops" in lines
    assert any(line.startswith("/dev/pts/") for line in lines)


# Where the fork handler below notes each fork of this process that ran Python in
# the child (empty: not noting). Fork handlers cannot be unregistered, so one is
# registered once and switched on only by the test that uses it.
_forks_noted_in: list[str] = []


def _note_fork() -> None:
    if _forks_noted_in:
        fd = os.open(_forks_noted_in[0], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, b"%d\n" % os.getpid())
        os.close(fd)


os.register_at_fork(after_in_child=_note_fork)


async def test_an_exec_on_a_tty_runs_no_python_in_a_fork_of_the_agent(
    runtime: HostProcessRuntime,
    sandbox: str,
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
) -> None:
    """Python run between fork and exec in the agent runs the fork handlers of
    every library it has loaded; gRPC's restarts its threads in the child, and
    their logging lands on the child's stderr: on a terminal, the user's screen."""
    cid = await sleeper(runtime, sandbox, sandbox_config)
    notes = tmp_path / "forks"
    _forks_noted_in.append(str(notes))
    try:
        out = Sink()
        code = await bounded(
            asyncio.ensure_future(
                runtime.exec_stream(
                    cid,
                    ["sh", "-c", "stty size; tty"],
                    StreamIO(stdout=out, tty=True, resize=Sizes(TerminalSize(width=90, height=30))),
                )
            ),
            "exec",
        )
    finally:
        _forks_noted_in.clear()
    assert code == 0
    assert out.data.splitlines()[0] == b"30 90"
    assert out.data.splitlines()[1].startswith(b"/dev/pts/")
    assert not notes.exists(), "a fork of the agent ran Python before exec"


async def test_the_end_of_stdin_on_a_tty_is_end_of_file(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    out = Sink()
    code = await bounded(
        asyncio.ensure_future(
            runtime.exec_stream(
                cid,
                ["sh", "-c", "cat; echo done"],
                StreamIO(stdin=Source(b"partial line", b""), stdout=out, tty=True),
            )
        ),
        "exec",
    )
    assert code == 0
    assert b"partial line" in out.data and out.data.endswith(b"done\r\n")


async def test_exec_of_a_missing_command_exits_127_with_a_message(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    out, err = Sink(), Sink()
    code = await runtime.exec_stream(cid, ["no-such-command"], StreamIO(stdout=out, stderr=err))
    assert code == 127
    assert b"no-such-command" in err.data and out.data == b""
    assert out.closed and err.closed


async def test_exec_errors_name_the_container(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        await runtime.exec_stream("nope", ["true"], StreamIO())
    cid = await run(runtime, sandbox, sandbox_config, container("quick", "true"))
    with pytest.raises(InvalidArgumentError, match="cmd is empty"):
        await runtime.exec_stream(cid, [], StreamIO())
    await wait_exited(runtime, cid)
    with pytest.raises(ContainerRuntimeError, match=f"{cid}.*running"):
        await runtime.exec_stream(cid, ["true"], StreamIO())


async def test_cancelling_an_exec_kills_the_command(
    runtime: HostProcessRuntime,
    sandbox: str,
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
) -> None:
    cid = await sleeper(runtime, sandbox, sandbox_config)
    pidfile = tmp_path / "exec.pid"
    out = Sink()
    session = asyncio.ensure_future(
        runtime.exec_stream(
            cid,
            ["sh", "-c", f"echo $$ > {pidfile}; echo started; exec sleep 60"],
            StreamIO(stdout=out),
        )
    )
    await out.wait_for(b"started")
    pid = int(pidfile.read_text())
    session.cancel()
    with pytest.raises(asyncio.CancelledError):
        await session
    deadline = time.monotonic() + WAIT
    while Path(f"/proc/{pid}").exists() and b"Z" not in _state(pid):
        assert time.monotonic() < deadline, "the exec'd command survived its session"
        await asyncio.sleep(0.02)
    assert out.closed


def _state(pid: int) -> bytes:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return b"Z"
    return stat[stat.rfind(b")") + 2 :].split()[0]


async def test_exec_sees_the_files_of_a_container_with_its_own_mount_namespace(
    runtime: HostProcessRuntime,
    sandbox: str,
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
    require_real: RequireReal,
) -> None:
    require_real(_has_cap_sys_admin(), "root (CAP_SYS_ADMIN) to make mount namespaces")
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "key").write_text("from the volume\n")
    target = tmp_path / "target"
    target.mkdir()
    cid = await run(
        runtime,
        sandbox,
        sandbox_config,
        container(
            "app", "sleep", "60", mounts=(Mount(container_path=str(target), host_path=str(volume)),)
        ),
    )
    out = Sink()
    code = await runtime.exec_stream(cid, ["cat", str(target / "key")], StreamIO(stdout=out))
    assert (code, out.data) == (0, b"from the volume\n")
    out = Sink()
    code = await runtime.exec_stream(
        cid, ["sh", "-c", f"cat {target}/key; tty"], StreamIO(stdout=out, tty=True)
    )
    assert code == 0 and b"from the volume" in out.data and b"/dev/pts/" in out.data
    assert not (target / "key").exists()  # the host's own directory is untouched


# --------------------------------------------------------------- port-forward


async def _http_server(rt: HostProcessRuntime, sid: str, sb: PodSandboxConfig, port: int) -> str:
    cid = await run(
        rt,
        sid,
        sb,
        container(
            "web",
            "python3",
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            working_dir=str(Path(sb.log_directory).parent / "www"),
        ),
    )
    return cid


async def _until_served(rt: HostProcessRuntime, sid: str, port: int) -> None:
    """Port-forward until the server answers (it takes a moment to listen)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            await rt.port_forward_stream(sid, port, Source(b""), Sink())
            return
        except ContainerRuntimeError:
            assert time.monotonic() < deadline, f"nothing listened on port {port}"
            await asyncio.sleep(0.1)


async def test_port_forward_carries_bytes_both_ways(
    runtime: HostProcessRuntime,
    sandbox: str,
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
) -> None:
    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("hello through the tunnel\n")
    port = free_port()
    await _http_server(runtime, sandbox, sandbox_config, port)
    await _until_served(runtime, sandbox, port)
    src, sink = Source(b"GET /hello.txt HTTP/1.0\r\n", b"Host: x\r\n\r\n", b""), Sink()
    await bounded(
        asyncio.ensure_future(runtime.port_forward_stream(sandbox, port, src, sink)), "port-forward"
    )
    assert sink.data.startswith(b"HTTP/1.0 200")
    assert sink.data.endswith(b"hello through the tunnel\n")
    assert sink.closed


async def test_port_forward_errors(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    port = free_port()
    sink = Sink()
    with pytest.raises(ContainerRuntimeError, match=f"localhost:{port}"):
        await runtime.port_forward_stream(sandbox, port, Source(), sink)
    assert sink.closed
    with pytest.raises(NotFoundError):
        await runtime.port_forward_stream("nope", port, Source(), Sink())
    with pytest.raises(InvalidArgumentError, match="70000"):
        await runtime.port_forward_stream(sandbox, 70000, Source(), Sink())
    await runtime.stop_pod_sandbox(sandbox)
    with pytest.raises(ContainerRuntimeError, match="not ready"):
        await runtime.port_forward_stream(sandbox, port, Source(), Sink())


CNI_BIN = Path("/usr/lib/cni")


@pytest.fixture
def loopback_network(tmp_path: Path, require_real: RequireReal) -> Iterator[CNINetwork]:
    """CNI networking with only the loopback plugin: each pod gets a network
    namespace of its own holding just ``lo``."""
    require_real(os.geteuid() == 0, "root (network namespaces)")
    require_real((CNI_BIN / "loopback").exists(), "containernetworking-plugins in /usr/lib/cni")
    conf = tmp_path / "cni"
    conf.mkdir()
    (conf / "10-lo.conflist").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "kk-lo", "plugins": [{"type": "loopback"}]})
    )
    netns_dir = tmp_path / "netns"
    yield CNINetwork(conf, [CNI_BIN], cache_dir=tmp_path / "cni-cache", netns_dir=netns_dir)
    # Whatever a failed test left behind.
    if netns_dir.is_dir():
        for name in os.listdir(netns_dir):
            subprocess.run(
                ["umount", "-l", str(netns_dir / name)], check=False, capture_output=True
            )
            with contextlib.suppress(OSError):
                (netns_dir / name).unlink()
        subprocess.run(["umount", "-l", str(netns_dir)], check=False, capture_output=True)


async def test_port_forward_reaches_into_the_sandboxs_own_network(
    make_runtime: Callable[..., HostProcessRuntime],
    loopback_network: CNINetwork,
    tmp_path: Path,
) -> None:
    rt = make_runtime(network=loopback_network, name="cni")
    sb = PodSandboxConfig(
        metadata=PodSandboxMetadata(name="net", namespace="default", uid="uid-net"),
        log_directory=str(tmp_path / "logs"),
        namespace_options=NamespaceOptions(host_network=False),
    )
    sid = await rt.run_pod_sandbox(sb)
    try:
        (tmp_path / "www").mkdir()
        (tmp_path / "www" / "index.html").write_text("inside the pod\n")
        port = free_port()
        await _http_server(rt, sid, sb, port)
        await _until_served(rt, sid, port)
        # The server listens on the pod's loopback, not the host's.
        with socket.socket() as s, pytest.raises(ConnectionRefusedError):
            s.connect(("127.0.0.1", port))
        sink = Sink()
        await bounded(
            asyncio.ensure_future(
                rt.port_forward_stream(
                    sid, port, Source(b"GET /index.html HTTP/1.0\r\n\r\n", b""), sink
                )
            ),
            "port-forward",
        )
        assert sink.data.startswith(b"HTTP/1.0 200") and sink.data.endswith(b"inside the pod\n")
    finally:
        await rt.remove_pod_sandbox(sid)


# --------------------------------------------------------------------- attach


async def test_a_stdin_container_waits_for_input_instead_of_exiting(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("reader", "sh", "-c", "read line; echo got $line", stdin=True)
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await asyncio.sleep(1.0)
    assert (await runtime.container_status(cid)).state is ContainerState.RUNNING
    out = Sink()
    session = asyncio.ensure_future(
        runtime.attach_stream(cid, StreamIO(stdin=Source(b"hello\n"), stdout=out))
    )
    await out.wait_for(b"got hello\n")
    await bounded(session, "attach")  # ends with the container
    await wait_exited(runtime, cid)
    status = await runtime.container_status(cid)
    assert (status.exit_code, status.reason) == (0, "Completed")
    await wait_log(log_of(sandbox_config, cfg), b"got hello")


async def test_attach_to_a_shell_on_a_terminal(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("shell", "sh", stdin=True, tty=True)
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    src, out, sizes = Source(), Sink(), Sizes()
    session = asyncio.ensure_future(
        runtime.attach_stream(
            cid, StreamIO(stdin=src, stdout=out, stderr=Sink(), tty=True, resize=sizes)
        )
    )
    src.send(b"echo hi\n")
    await out.wait_for(b"hi\r\n")
    sizes.send(TerminalSize(width=120, height=33))
    await asyncio.sleep(0.2)
    src.send(b"stty size; echo oops >&2\n")
    await out.wait_for(b"33 120")
    await out.wait_for(b"oops")  # a terminal has one stream
    src.send(b"exit 4\n")
    await bounded(session, "attach")
    assert out.closed
    await wait_exited(runtime, cid)
    assert (await runtime.container_status(cid)).exit_code == 4
    # Everything also went to the log, as stdout.
    await wait_log(log_of(sandbox_config, cfg), b"echo hi\nhi\n")


async def test_stdin_once_closes_stdin_after_the_first_attach(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container(
        "once", "sh", "-c", "cat; echo stdin closed; sleep 60", stdin=True, stdin_once=True
    )
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    out = Sink()
    session = asyncio.ensure_future(
        runtime.attach_stream(cid, StreamIO(stdin=Source(b"first\n", b""), stdout=out))
    )
    await out.wait_for(b"first\nstdin closed\n")
    # With stdinOnce the attach outlives its stdin: it lasts as the container does.
    await asyncio.sleep(0.2)
    assert not session.done()
    session.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await session
    assert (await runtime.container_status(cid)).state is ContainerState.RUNNING


async def test_without_stdin_once_stdin_stays_open_for_the_next_attach(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("many", "cat", stdin=True)
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    out = Sink()
    await bounded(
        asyncio.ensure_future(
            runtime.attach_stream(cid, StreamIO(stdin=Source(b"first\n", b""), stdout=out))
        ),
        "attach",
    )
    # The attach ended with its stdin, after the answer to it; the container
    # still waits for more.
    assert out.data == b"first\n"
    assert (await runtime.container_status(cid)).state is ContainerState.RUNNING
    out = Sink()
    session = asyncio.ensure_future(
        runtime.attach_stream(cid, StreamIO(stdin=Source(b"second\n"), stdout=out))
    )
    await out.wait_for(b"second\n")
    session.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await session
    await wait_log(log_of(sandbox_config, cfg), b"first\nsecond")


async def test_attach_to_a_container_without_stdin_streams_its_output(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container(
        "ticker", "sh", "-c", "while true; do echo tick; echo tock >&2; sleep 0.1; done"
    )
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    out, err = Sink(), Sink()
    session = asyncio.ensure_future(
        runtime.attach_stream(cid, StreamIO(stdin=Source(b"ignored\n"), stdout=out, stderr=err))
    )
    await out.wait_for(b"tick\n")
    await err.wait_for(b"tock\n")
    assert b"tock" not in out.data and b"ignored" not in out.data
    await runtime.stop_container(cid, 0)
    await bounded(session, "attach")  # the container's exit ends it
    assert out.closed and err.closed


async def test_attach_errors_name_the_container(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        await runtime.attach_stream("nope", StreamIO())
    cid = await run(runtime, sandbox, sandbox_config, container("quick", "true"))
    await wait_exited(runtime, cid)
    with pytest.raises(ContainerRuntimeError, match=f"{cid}.*running"):
        await runtime.attach_stream(cid, StreamIO())


async def test_a_new_runtime_attaches_to_a_container_started_by_the_old_one(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    first = make_runtime()
    sid = await first.run_pod_sandbox(sandbox_config)
    cid = await run(first, sid, sandbox_config, container("cat", "cat", stdin=True))
    second = make_runtime()  # the agent restarted; the shim stayed
    out = Sink()
    session = asyncio.ensure_future(
        second.attach_stream(cid, StreamIO(stdin=Source(b"still here\n"), stdout=out))
    )
    await out.wait_for(b"still here\n")
    session.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await session
    await second.remove_pod_sandbox(sid)
