"""HostProcessRuntime with real processes and real files.

Process exits happen in real time, so these tests wait for them by polling with
short bounded waits; every deadline of the runtime itself (stop grace periods,
exec timeouts) is driven by a FakeClock where the test is about that deadline.
Every process a test starts is killed in teardown, and teardown checks that none
is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubelet_kit.clock import Clock
from kubelet_kit.container import (
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container.logs import LogStream, join_output, read_log
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    InvalidArgumentError,
    NotFoundError,
)
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import DEFAULT_PATH, normalize_image_ref
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.conformance import CHECKS, run_conformance

pytestmark = pytest.mark.timeout(30)

WAIT = 10.0  # upper bound, in real seconds, on any wait for a real process


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def _recorded_processes(root: Path) -> list[tuple[int, int | None, bool]]:
    """(pid, start ticks, is a group leader) of every shim and process under root."""
    found = []
    for start in root.glob("containers/*/start.json"):
        data = json.loads(start.read_text())
        found.append((data["pid"], data["pid_start"], True))
        found.append((data["shim_pid"], data["shim_start"], False))
    return found


def _alive(pid: int, ticks: int | None) -> bool:
    return ticks is not None and _start_ticks(pid) == ticks


async def _poll(predicate: Callable[[], bool], what: str, limit: float = WAIT) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def roots() -> Iterator[list[Path]]:
    """State roots used by a test; teardown kills and then checks their processes."""
    made: list[Path] = []
    yield made
    leftovers = []
    for root in made:
        for pid, ticks, leader in _recorded_processes(root):
            if _alive(pid, ticks):
                leftovers.append(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL) if leader else os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + WAIT
    for root in made:
        for pid, ticks, _ in _recorded_processes(root):
            while _alive(pid, ticks) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not _alive(pid, ticks), f"process {pid} survived teardown"


@pytest.fixture
def make_runtime(tmp_path: Path, roots: list[Path]) -> Callable[..., HostProcessRuntime]:
    def make(
        clock: Clock | None = None, name: str = "root", **kwargs: object
    ) -> HostProcessRuntime:
        root = tmp_path / name
        if root not in roots:
            roots.append(root)
        return HostProcessRuntime(root, clock=clock, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def runtime(make_runtime: Callable[..., HostProcessRuntime]) -> HostProcessRuntime:
    return make_runtime()


@pytest.fixture
def sandbox_config(tmp_path: Path) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name="web", namespace="default", uid="uid-1"),
        hostname="web-pod",
        log_directory=str(tmp_path / "logs"),
        labels={"app": "web"},
    )


@pytest.fixture
async def sandbox(runtime: HostProcessRuntime, sandbox_config: PodSandboxConfig) -> str:
    return await runtime.run_pod_sandbox(sandbox_config)


def container(name: str, *argv: str, attempt: int = 0, **kwargs: object) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name=name, attempt=attempt),
        image=ImageSpec("busybox"),
        command=argv[:1],
        args=argv[1:],
        log_path=f"{name}/{attempt}.log",
        **kwargs,  # type: ignore[arg-type]
    )


async def run(rt: HostProcessRuntime, sid: str, sb: PodSandboxConfig, cfg: ContainerConfig) -> str:
    cid = await rt.create_container(sid, cfg, sb)
    await rt.start_container(cid)
    return cid


async def wait_exited(rt: HostProcessRuntime, cid: str) -> None:
    async def exited() -> bool:
        return (await rt.container_status(cid)).state is ContainerState.EXITED

    deadline = time.monotonic() + WAIT
    while not await exited():
        assert time.monotonic() < deadline, f"container {cid} did not exit"
        await asyncio.sleep(0.02)


def log_of(sb: PodSandboxConfig, cfg: ContainerConfig) -> Path:
    return Path(sb.log_directory) / cfg.log_path


async def wait_log(path: Path, text: bytes) -> None:
    def has() -> bool:
        return path.exists() and text in join_output(read_log(path))

    await _poll(has, f"{text!r} in {path}")


# ---------------------------------------------------------------- basics


async def test_is_a_runtime(runtime: HostProcessRuntime) -> None:
    assert isinstance(runtime, Runtime)
    version = await runtime.version()
    assert version.runtime_name == "kubelet-kit-host"
    assert version.runtime_api_version == "v1"
    status = await runtime.status()
    assert status.condition("RuntimeReady") is not None
    assert status.condition("RuntimeReady").status is True  # type: ignore[union-attr]
    assert status.condition("NetworkReady").status is True  # type: ignore[union-attr]


async def test_events_report_changes_and_exits(
    runtime: HostProcessRuntime, sandbox_config: PodSandboxConfig
) -> None:
    events: list[ContainerEvent] = []
    stream = runtime.get_container_events()

    async def collect() -> None:
        async for event in stream:
            events.append(event)

    task = asyncio.create_task(collect())
    await asyncio.sleep(0)

    def seen(object_id: str) -> list[ContainerEventType]:
        return [e.type for e in events if e.container_id == object_id]

    try:
        sid = await runtime.run_pod_sandbox(sandbox_config)
        quick = await run(runtime, sid, sandbox_config, container("quick", "true"))
        await _poll(lambda: ContainerEventType.STOPPED in seen(quick), "STOPPED of quick")
        assert seen(quick) == [
            ContainerEventType.CREATED,
            ContainerEventType.STARTED,
            ContainerEventType.STOPPED,
        ]
        stopped = next(e for e in events if e.type is ContainerEventType.STOPPED)
        assert stopped.pod_sandbox_status is not None and stopped.pod_sandbox_status.id == sid
        [quick_status] = [c for c in stopped.containers_statuses if c.id == quick]
        assert (quick_status.state, quick_status.exit_code) == (ContainerState.EXITED, 0)

        slow = await run(runtime, sid, sandbox_config, container("slow", "sleep", "30"))
        await runtime.stop_container(slow, 5)
        await runtime.stop_container(slow, 5)
        await asyncio.sleep(0.1)  # the shim's end is noticed too: still one STOPPED
        assert seen(slow) == [
            ContainerEventType.CREATED,
            ContainerEventType.STARTED,
            ContainerEventType.STOPPED,
        ]
        await runtime.remove_container(slow)
        await _poll(lambda: seen(slow)[-1] is ContainerEventType.DELETED, "DELETED of slow")
        await runtime.stop_pod_sandbox(sid)
        await runtime.remove_pod_sandbox(sid)
        await _poll(lambda: ContainerEventType.DELETED in seen(sid), "DELETED of the sandbox")
        assert seen(sid) == [
            ContainerEventType.CREATED,
            ContainerEventType.STARTED,
            ContainerEventType.STOPPED,
            ContainerEventType.DELETED,
        ]
        assert seen(quick)[-1] is ContainerEventType.DELETED
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_new_subscription_reports_no_old_exits(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    old = await run(runtime, sandbox, sandbox_config, container("old", "true"))
    await wait_exited(runtime, old)
    stream = runtime.get_container_events()
    nxt = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.1)
    assert not nxt.done()
    fresh = await runtime.create_container(sandbox, container("fresh", "true"), sandbox_config)
    event = await asyncio.wait_for(nxt, WAIT)
    assert (event.container_id, event.type) == (fresh, ContainerEventType.CREATED)
    await stream.aclose()  # type: ignore[attr-defined]


async def test_sandbox_record_and_host_network(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    clock = FakeClock()
    rt = make_runtime(clock=clock, host_ip="192.0.2.7")
    sid = await rt.run_pod_sandbox(sandbox_config)
    status = await rt.pod_sandbox_status(sid)
    assert status.state is PodSandboxState.READY
    assert status.ip == "192.0.2.7"
    assert status.created_at == clock.now()
    assert status.namespace_options.host_network and status.namespace_options.host_pid
    assert status.labels == {"app": "web"}
    assert [
        s.id for s in await rt.list_pod_sandboxes(PodSandboxFilter(label_selector={"app": "web"}))
    ] == [sid]
    assert await rt.list_pod_sandboxes(PodSandboxFilter(label_selector={"app": "db"})) == []
    with pytest.raises(AlreadyExistsError, match="web"):
        await rt.run_pod_sandbox(sandbox_config)
    with pytest.raises(NotFoundError):
        await rt.pod_sandbox_status("nope")
    with pytest.raises(NotFoundError):
        await rt.pod_sandbox_status("../etc")


async def test_default_sandbox_ip_is_an_ipv4_address(
    runtime: HostProcessRuntime, sandbox: str
) -> None:
    ip = (await runtime.pod_sandbox_status(sandbox)).ip
    socket.inet_aton(ip)


# ------------------------------------------------------------ running


async def test_output_goes_to_the_cri_log_and_exit_code_is_recorded(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("app", "sh", "-c", "echo out; echo err >&2; printf tail; exit 3")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    status = await runtime.container_status(cid)
    assert (status.exit_code, status.reason) == (3, "Error")
    assert 0 < status.started_at <= status.finished_at
    assert status.log_path == str(log_of(sandbox_config, cfg))
    records = list(read_log(status.log_path))
    assert [(r.stream, r.partial, r.text) for r in records if r.stream is LogStream.STDERR] == [
        (LogStream.STDERR, False, b"err")
    ]
    assert join_output(read_log(status.log_path, stream=LogStream.STDOUT)) == b"out\ntail"
    assert records[-1].partial


async def test_reopening_the_log_starts_a_new_file_and_loses_nothing(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("talker", "sh", "-c",
                    "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.02; done")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    path = log_of(sandbox_config, cfg)
    await wait_log(path, b"line-3\n")
    rotated = path.with_name(path.name + ".20261202-000000")
    path.rename(rotated)  # as the log manager renames it
    await runtime.reopen_container_log(cid)
    assert path.exists()
    await wait_log(path, b"\n")  # the new file fills
    await runtime.stop_container(cid, 0)
    before = join_output(read_log(rotated)).decode().split()
    after = join_output(read_log(path)).decode().split()
    numbers = [int(line.removeprefix("line-")) for line in before + after]
    # Every line is in one file or the other, in order, none twice.
    assert numbers == list(range(1, len(numbers) + 1))
    assert before and after


async def test_reopening_the_log_of_a_container_not_running_fails(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("done", "true"))
    await wait_exited(runtime, cid)
    with pytest.raises(ContainerRuntimeError, match="not running"):
        await runtime.reopen_container_log(cid)
    with pytest.raises(NotFoundError):
        await runtime.reopen_container_log("no-such-container")


async def test_exit_zero_is_completed(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("ok", "true"))
    await wait_exited(runtime, cid)
    status = await runtime.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        0,
        "Completed",
    )


async def test_args_alone_are_the_command(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = ContainerConfig(
        metadata=ContainerMetadata("argsonly"),
        image=ImageSpec("busybox"),
        args=("echo", "from args"),
        log_path="argsonly/0.log",
    )
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    assert join_output(read_log(log_of(sandbox_config, cfg))) == b"from args\n"


async def test_long_lines_are_split_into_partial_records(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    rt = make_runtime(max_log_line_size=1000)
    sid = await rt.run_pod_sandbox(sandbox_config)
    cfg = container("long", "sh", "-c", "head -c 2500 /dev/zero | tr '\\0' a; echo")
    cid = await run(rt, sid, sandbox_config, cfg)
    await wait_exited(rt, cid)
    records = list(read_log(log_of(sandbox_config, cfg)))
    assert [(r.partial, len(r.text)) for r in records] == [(True, 1000), (True, 1000), (False, 500)]


async def test_env_is_exactly_the_configured_one_plus_defaults(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container(
        "env",
        "/usr/bin/env",
        envs=(KeyValue("A", "1"), KeyValue("B", "two words"), KeyValue("A", "3")),
    )
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    lines = join_output(read_log(log_of(sandbox_config, cfg))).decode().splitlines()
    env = dict(line.split("=", 1) for line in lines)
    assert env == {
        "PATH": DEFAULT_PATH,
        "HOSTNAME": "web-pod",
        "A": "3",
        "B": "two words",
        "HOME": env["HOME"],
    }
    assert os.path.isabs(env["HOME"])


async def test_env_can_override_path_and_home(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("envo", "/usr/bin/env", envs=(KeyValue("PATH", "/bin"), KeyValue("HOME", "/h")))
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    lines = join_output(read_log(log_of(sandbox_config, cfg))).decode().splitlines()
    assert "PATH=/bin" in lines and "HOME=/h" in lines


async def test_working_dir_is_created_and_used(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig, tmp_path: Path
) -> None:
    work = tmp_path / "work" / "nested"
    cfg = container("wd", "sh", "-c", "pwd; echo made > here", working_dir=str(work))
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    assert join_output(read_log(log_of(sandbox_config, cfg))) == f"{work}\n".encode()
    assert (work / "here").read_text() == "made\n"


async def test_default_working_dir_is_root(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("wd0", "pwd")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    assert join_output(read_log(log_of(sandbox_config, cfg))) == b"/\n"


async def test_status_reports_the_config(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    clock = FakeClock()
    rt = make_runtime(clock=clock)
    sid = await rt.run_pod_sandbox(sandbox_config)
    mount = Mount(container_path="/data", host_path="/tmp", readonly=True)
    res = LinuxContainerResources(cpu_shares=512, memory_limit_in_bytes=1 << 20)
    cfg = container(
        "cfg",
        "sleep",
        "30",
        labels={"io.kubernetes.container.name": "cfg"},
        annotations={"io.kubernetes.container.hash": "abc"},
        mounts=(mount,),
        resources=res,
    )
    cid = await rt.create_container(sid, cfg, sandbox_config)
    status = await rt.container_status(cid)
    assert status.state is ContainerState.CREATED
    assert status.created_at == clock.now()
    assert status.started_at == 0.0
    assert status.mounts == (mount,)
    assert status.resources == res
    assert status.annotations == {"io.kubernetes.container.hash": "abc"}
    assert status.image == "busybox"
    assert status.image_ref == await rt.pull_image(ImageSpec("busybox"))
    new = LinuxContainerResources(cpu_shares=1024)
    await rt.update_container_resources(cid, new)
    assert (await rt.container_status(cid)).resources == new
    [info] = await rt.list_containers(
        ContainerFilter(label_selector={"io.kubernetes.container.name": "cfg"})
    )
    assert (info.id, info.pod_sandbox_id, info.state) == (cid, sid, ContainerState.CREATED)
    with pytest.raises(AlreadyExistsError, match="cfg"):
        await rt.create_container(sid, cfg, sandbox_config)
    await rt.create_container(sid, container("cfg", "true", attempt=1), sandbox_config)


# ------------------------------------------------------------ start errors


async def test_no_command_fails_at_create_naming_the_container(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = ContainerConfig(metadata=ContainerMetadata("nocmd"), image=ImageSpec("busybox"))
    with pytest.raises(ContainerStartError, match=r'"nocmd".*no command specified'):
        await runtime.create_container(sandbox, cfg, sandbox_config)
    with pytest.raises(ContainerStartError, match="absolute"):
        await runtime.create_container(
            sandbox, container("rel", "true", working_dir="relative/dir"), sandbox_config
        )
    assert await runtime.list_containers() == []


async def test_missing_executable_is_a_start_error_recorded_as_exit_128(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await runtime.create_container(
        sandbox, container("ghost", "no-such-binary-here", "x"), sandbox_config
    )
    with pytest.raises(
        ContainerStartError, match='"no-such-binary-here": executable file not found'
    ):
        await runtime.start_container(cid)
    status = await runtime.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        128,
        "StartError",
    )
    assert "no-such-binary-here" in status.message
    with pytest.raises(ContainerStartError, match="CONTAINER_EXITED"):
        await runtime.start_container(cid)


async def test_bad_working_dir_is_a_start_error(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig, tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    cid = await runtime.create_container(
        sandbox, container("badwd", "true", working_dir=str(afile / "sub")), sandbox_config
    )
    with pytest.raises(ContainerStartError, match="afile"):
        await runtime.start_container(cid)
    status = await runtime.container_status(cid)
    assert (status.exit_code, status.reason) == (128, "StartError")


async def test_unknown_ids(runtime: HostProcessRuntime, sandbox_config: PodSandboxConfig) -> None:
    with pytest.raises(NotFoundError):
        await runtime.create_container("nope", container("x", "true"), sandbox_config)
    for call in (
        runtime.start_container("nope"),
        runtime.stop_container("nope", 1),
        runtime.container_status("nope"),
        runtime.exec_sync("nope", ["true"]),
        runtime.container_stats("nope"),
        runtime.stop_pod_sandbox("nope"),
        runtime.pod_sandbox_stats("nope"),
    ):
        with pytest.raises(NotFoundError):
            await call
    await runtime.remove_container("nope")
    await runtime.remove_pod_sandbox("nope")


# ------------------------------------------------------------ stopping


async def test_stop_sends_sigterm_and_returns_after_exit(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("sleeper", "sleep", "30"))
    assert (await runtime.container_status(cid)).state is ContainerState.RUNNING
    began = time.monotonic()
    await runtime.stop_container(cid, 10)
    assert time.monotonic() - began < 5
    status = await runtime.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        128 + signal.SIGTERM,
        "Error",
    )
    await runtime.stop_container(cid, 10)  # idempotent
    assert (await runtime.container_status(cid)).exit_code == 143


async def test_term_ignoring_process_is_killed_after_the_timeout(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    clock = FakeClock()
    rt = make_runtime(clock=clock)
    sid = await rt.run_pod_sandbox(sandbox_config)
    cfg = container(
        "stubborn", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"
    )
    cid = await run(rt, sid, sandbox_config, cfg)
    await wait_log(log_of(sandbox_config, cfg), b"ready\n")
    stop = asyncio.create_task(rt.stop_container(cid, 30))
    await asyncio.sleep(0.3)  # real time for SIGTERM to be delivered (and ignored)
    assert not stop.done()
    assert (await rt.container_status(cid)).state is ContainerState.RUNNING
    clock.advance(29)
    await asyncio.sleep(0.1)
    assert not stop.done()
    clock.advance(1)
    await asyncio.wait_for(stop, WAIT)
    status = await rt.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, 137, "Error")


async def test_stop_with_zero_timeout_kills_at_once(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("k", "sh", "-c", "trap '' TERM; echo ready; sleep 30")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_log(log_of(sandbox_config, cfg), b"ready\n")
    await runtime.stop_container(cid, 0)
    assert (await runtime.container_status(cid)).exit_code == 137


async def test_children_die_with_the_main_process(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    cfg = container("parent", "sh", "-c", f"sleep 30 & echo $! > {pidfile}; exit 0")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    child = int(pidfile.read_text())
    await _poll(lambda: _start_ticks(child) is None, "the background child to die")


async def test_stop_and_remove_are_idempotent_and_keep_the_log(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("rm", "sh", "-c", "echo bye; sleep 30")
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_log(log_of(sandbox_config, cfg), b"bye\n")
    pid = json.loads((runtime.root_dir / "containers" / cid / "start.json").read_text())["pid"]
    await runtime.remove_container(cid)  # running: killed first
    assert _start_ticks(pid) is None
    await runtime.remove_container(cid)
    with pytest.raises(NotFoundError):
        await runtime.container_status(cid)
    assert await runtime.list_containers() == []
    assert b"bye\n" in join_output(read_log(log_of(sandbox_config, cfg)))

    created = await runtime.create_container(sandbox, container("never", "true"), sandbox_config)
    await runtime.stop_container(created, 1)  # a created container stays created
    assert (await runtime.container_status(created)).state is ContainerState.CREATED
    await runtime.remove_container(created)
    await runtime.remove_container(created)


async def test_stopping_the_sandbox_stops_its_containers(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    a = await run(runtime, sandbox, sandbox_config, container("a", "sleep", "30"))
    b = await run(runtime, sandbox, sandbox_config, container("b", "sleep", "30"))
    await runtime.stop_pod_sandbox(sandbox)
    for cid in (a, b):
        status = await runtime.container_status(cid)
        assert (status.state, status.exit_code) == (ContainerState.EXITED, 137)
    assert (await runtime.pod_sandbox_status(sandbox)).state is PodSandboxState.NOTREADY
    await runtime.stop_pod_sandbox(sandbox)  # idempotent
    with pytest.raises(ContainerStartError, match="not ready"):
        await runtime.create_container(sandbox, container("c", "true"), sandbox_config)
    await runtime.remove_pod_sandbox(sandbox)
    assert await runtime.list_containers() == []
    assert await runtime.list_pod_sandboxes() == []
    await runtime.remove_pod_sandbox(sandbox)


async def test_removing_a_running_sandbox_kills_its_processes(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("a", "sleep", "30"))
    start = json.loads((runtime.root_dir / "containers" / cid / "start.json").read_text())
    await runtime.remove_pod_sandbox(sandbox)
    assert not _alive(start["pid"], start["pid_start"])
    await _poll(lambda: not _alive(start["shim_pid"], start["shim_start"]), "the shim to end")


# ------------------------------------------------------------------ exec


async def test_exec_uses_the_container_env_and_working_dir(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig, tmp_path: Path
) -> None:
    cfg = container(
        "ex", "sleep", "30", envs=(KeyValue("FOO", "bar"),), working_dir=str(tmp_path / "exwd")
    )
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    result = await runtime.exec_sync(cid, ["sh", "-c", "echo $FOO; pwd; echo oops >&2; exit 7"])
    assert result.exit_code == 7
    assert result.stdout == f"bar\n{tmp_path / 'exwd'}\n".encode()
    assert result.stderr == b"oops\n"
    missing = await runtime.exec_sync(cid, ["no-such-binary-here"])
    assert missing.exit_code == 127
    assert b"no-such-binary-here" in missing.stderr
    with pytest.raises(InvalidArgumentError):
        await runtime.exec_sync(cid, [])


async def test_exec_timeout_kills_the_command(
    make_runtime: Callable[..., HostProcessRuntime],
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    rt = make_runtime(clock=clock)
    sid = await rt.run_pod_sandbox(sandbox_config)
    cid = await run(rt, sid, sandbox_config, container("ex", "sleep", "30"))
    pidfile = tmp_path / "exec.pid"
    task = asyncio.create_task(
        rt.exec_sync(cid, ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], timeout=5)
    )
    await _poll(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"), "exec to run")
    pid = int(pidfile.read_text())
    clock.advance(4)
    await asyncio.sleep(0.05)
    assert not task.done()
    clock.advance(1)
    with pytest.raises(DeadlineExceededError, match="timed out"):
        await asyncio.wait_for(task, WAIT)
    assert _start_ticks(pid) is None


async def test_exec_in_a_container_that_is_not_running(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("done", "true"))
    await wait_exited(runtime, cid)
    with pytest.raises(ContainerRuntimeError, match="CONTAINER_EXITED"):
        await runtime.exec_sync(cid, ["true"])
    created = await runtime.create_container(sandbox, container("new", "true"), sandbox_config)
    with pytest.raises(ContainerRuntimeError, match="CONTAINER_CREATED"):
        await runtime.exec_sync(created, ["true"])
    with pytest.raises(ContainerRuntimeError, match="CONTAINER_EXITED"):
        await runtime.update_container_resources(cid, LinuxContainerResources())


async def test_run_as_own_user_is_applied(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    sc = LinuxContainerSecurityContext(run_as_user=os.getuid(), run_as_group=os.getgid())
    cfg = container("me", "id", "-u", security_context=sc)
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    assert join_output(read_log(log_of(sandbox_config, cfg))) == f"{os.getuid()}\n".encode()


# -------------------------------------------------------------- adoption


async def test_a_new_runtime_adopts_running_containers(
    make_runtime: Callable[..., HostProcessRuntime],
    sandbox_config: PodSandboxConfig,
    tmp_path: Path,
) -> None:
    first = make_runtime()
    sid = await first.run_pod_sandbox(sandbox_config)
    gate = tmp_path / "go"
    waiter = container(
        "waiter",
        "sh",
        "-c",
        f"echo first; while [ ! -e {gate} ]; do sleep 0.02; done; echo second; exit 4",
        envs=(KeyValue("WHO", "waiter"),),
    )
    sleeper = container("sleeper", "sleep", "30")
    w = await run(first, sid, sandbox_config, waiter)
    s = await run(first, sid, sandbox_config, sleeper)
    await wait_log(log_of(sandbox_config, waiter), b"first\n")
    started_at = (await first.container_status(w)).started_at
    # The shims are nobody's children here: they outlive the agent that started them.
    for cid in (w, s):
        shim = json.loads((first.root_dir / "containers" / cid / "start.json").read_text())
        ppid = int(
            Path(f"/proc/{shim['shim_pid']}/stat").read_bytes().rsplit(b")", 1)[1].split()[1]
        )
        assert ppid != os.getpid()
    del first

    second = make_runtime()
    assert [sb.id for sb in await second.list_pod_sandboxes()] == [sid]
    states = {c.metadata.name: c.state for c in await second.list_containers()}
    assert states == {"waiter": ContainerState.RUNNING, "sleeper": ContainerState.RUNNING}
    assert (await second.container_status(w)).started_at == started_at
    with pytest.raises(ContainerStartError):
        await second.start_container(w)  # nothing is started twice
    assert (await second.exec_sync(w, ["sh", "-c", "echo $WHO"])).stdout == b"waiter\n"

    gate.touch()
    await wait_exited(second, w)
    status = await second.container_status(w)
    assert (status.exit_code, status.reason) == (4, "Error")
    assert join_output(read_log(log_of(sandbox_config, waiter))) == b"first\nsecond\n"

    await second.stop_container(s, 5)
    assert (await second.container_status(s)).exit_code == 143


async def test_container_whose_shim_vanished_is_reported_unknown(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("orphan", "sleep", "30"))
    start = json.loads((runtime.root_dir / "containers" / cid / "start.json").read_text())
    os.kill(start["shim_pid"], signal.SIGKILL)
    await _poll(lambda: not _alive(start["shim_pid"], start["shim_start"]), "the shim to die")
    assert (await runtime.container_status(cid)).state is ContainerState.RUNNING  # process lives
    await runtime.stop_container(cid, 5)  # still stoppable without its shim
    status = await runtime.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        255,
        "Unknown",
    )
    assert not _alive(start["pid"], start["pid_start"])


# ----------------------------------------------------------------- stats


async def test_stats_come_from_proc(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cid = await run(runtime, sandbox, sandbox_config, container("st", "sleep", "30"))
    stats = await runtime.container_stats(cid)
    assert stats.memory_working_set_bytes is not None and stats.memory_working_set_bytes > 0
    assert stats.cpu_usage_core_nanoseconds is not None and stats.cpu_usage_core_nanoseconds >= 0
    pod = await runtime.pod_sandbox_stats(sandbox)
    assert pod.process_count == 1
    assert [c.container_id for c in pod.containers] == [cid]
    assert [s.container_id for s in await runtime.list_container_stats()] == [cid]
    await runtime.stop_container(cid, 0)
    assert (await runtime.container_stats(cid)).memory_working_set_bytes is None


# ---------------------------------------------------------------- images


@pytest.mark.parametrize(
    ("ref", "normalized"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("user/app", "docker.io/user/app:latest"),
        ("quay.io/org/app", "quay.io/org/app:latest"),
        ("localhost/app:dev", "localhost/app:dev"),
        ("registry:5000/app", "registry:5000/app:latest"),
        # An upper-case first component can only be a host name.
        ("UPPER/case", "UPPER/case:latest"),
        ("busybox@sha256:" + "a" * 64, "docker.io/library/busybox@sha256:" + "a" * 64),
    ],
)
def test_image_refs_normalise_like_docker(ref: str, normalized: str) -> None:
    assert normalize_image_ref(ref) == normalized


@pytest.mark.parametrize(
    "ref", ["", "Upper", "docker.io/Upper", "a b", "busybox:", ":tag", "x@sha256:12"]
)
def test_invalid_image_refs_are_pull_errors(ref: str) -> None:
    with pytest.raises(ImagePullError, match="invalid reference format"):
        normalize_image_ref(ref)


async def test_images_are_recorded(
    runtime: HostProcessRuntime, make_runtime: Callable[..., HostProcessRuntime]
) -> None:
    assert await runtime.image_status(ImageSpec("busybox")) is None
    image_id = await runtime.pull_image(ImageSpec("busybox"))
    assert image_id.startswith("sha256:") and len(image_id) == 71
    assert await runtime.pull_image(ImageSpec("docker.io/library/busybox:latest")) == image_id
    image = await runtime.image_status(ImageSpec("busybox:latest"))
    assert image is not None
    assert image.id == image_id
    assert image.repo_tags == ("docker.io/library/busybox:latest",)
    assert await runtime.image_status(ImageSpec(image_id)) == image
    # Stable across runtimes and roots: the id is derived from the reference.
    assert await make_runtime(name="other").pull_image(ImageSpec("busybox")) == image_id
    await runtime.pull_image(ImageSpec("quay.io/org/app:1"))
    assert len(await runtime.list_images()) == 2
    with pytest.raises(ImagePullError):
        await runtime.pull_image(ImageSpec("Not A Ref"))
    with pytest.raises(ImageNotFoundError):
        await runtime.pull_image(ImageSpec("registry.invalid/no/such:0"))
    assert await runtime.image_status(ImageSpec("registry.invalid/no/such:0")) is None
    await runtime.remove_image(ImageSpec("busybox"))
    await runtime.remove_image(ImageSpec("busybox"))
    assert [i.repo_tags for i in await runtime.list_images()] == [("quay.io/org/app:1",)]


async def test_a_shim_that_cannot_run_is_a_start_error(
    make_runtime: Callable[..., HostProcessRuntime], sandbox_config: PodSandboxConfig
) -> None:
    rt = make_runtime(python="/bin/false")
    sid = await rt.run_pod_sandbox(sandbox_config)
    cid = await rt.create_container(sid, container("noshim", "true"), sandbox_config)
    with pytest.raises(ContainerStartError, match="without reporting"):
        await rt.start_container(cid)
    status = await rt.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (
        ContainerState.EXITED,
        128,
        "StartError",
    )


def test_all_is_honest() -> None:
    import kubelet_kit.runtimes
    import kubelet_kit.runtimes.host

    for module in (kubelet_kit.runtimes, kubelet_kit.runtimes.host):
        for name in module.__all__:
            assert getattr(module, name) is not None, name
    assert kubelet_kit.runtimes.HostProcessRuntime is HostProcessRuntime


@pytest.mark.parametrize("check", list(CHECKS))
async def test_conformance_kit(check: str, tmp_path: Path, roots: list[Path]) -> None:
    roots.append(tmp_path / "conformance-root")
    rt = HostProcessRuntime(tmp_path / "conformance-root")
    report = await run_conformance(
        rt,
        log_root=tmp_path / "logs",
        checks=[check],
        stop_timeout=0.5,
        poll_interval=0.02,
        timeout=WAIT,
    )
    report.raise_for_failures()
    assert report.result(check).status == "passed", report.summary()


async def test_both_streams_interleave_as_whole_records(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    script = "i=0; while [ $i -lt 500 ]; do echo out-$i; echo err-$i >&2; i=$((i+1)); done"
    cfg = container("burst", "sh", "-c", script)
    cid = await run(runtime, sandbox, sandbox_config, cfg)
    await wait_exited(runtime, cid)
    bad: list[bytes] = []
    records = list(read_log(log_of(sandbox_config, cfg), on_error=lambda raw, exc: bad.append(raw)))
    assert bad == []
    for stream, prefix in ((LogStream.STDOUT, "out"), (LogStream.STDERR, "err")):
        texts = [r.text for r in records if r.stream is stream]
        assert texts == [f"{prefix}-{i}".encode() for i in range(500)]


async def test_an_unwritable_log_path_is_a_start_error(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    cfg = container("nolog", "true")
    blocker = Path(sandbox_config.log_directory) / "nolog"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the container's log directory should be")
    cid = await runtime.create_container(sandbox, cfg, sandbox_config)
    with pytest.raises(ContainerStartError, match="open log file"):
        await runtime.start_container(cid)
    assert (await runtime.container_status(cid)).reason == "StartError"
