"""HostProcessRuntime with real processes and real files: sandboxes, running,
start errors, events, stats and conformance.

Process exits happen in real time, so these tests wait for them by polling with
short bounded waits; every deadline of the runtime itself (stop grace periods,
exec timeouts) is driven by a FakeClock where the test is about that deadline.
Every process a test starts is killed in teardown, and teardown checks that none
is left.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path

import _host_runtime_helpers as helpers
import pytest

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
    Mount,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container.logs import LogStream, join_output, read_log
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    NotFoundError,
)
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import DEFAULT_PATH
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.conformance import CHECKS, run_conformance

pytestmark = pytest.mark.timeout(30)

# The fixtures and helpers every test of the runtime uses (their teardown kills
# and checks every process a test left).
WAIT = helpers.WAIT
_poll = helpers._poll
container, log_of, run = helpers.container, helpers.log_of, helpers.run
wait_exited, wait_log = helpers.wait_exited, helpers.wait_log
roots, make_runtime, runtime = helpers.roots, helpers.make_runtime, helpers.runtime
sandbox, sandbox_config = helpers.sandbox, helpers.sandbox_config


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
    cfg = container(
        "talker", "sh", "-c", "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.02; done"
    )
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


#: Checks a host process honours only with root: another user's uid and gid, and a
#: mount namespace for the sandbox's /etc/resolv.conf and for volumes (the kit
#: itself mounts on the host for the propagation checks); capabilities,
#: supplemental groups and a read-only root.
ROOT_CHECKS = frozenset(
    {
        "run_as",
        "dns_config",
        "volumes",
        "mount_propagation_private",
        "mount_propagation_host_to_container",
        "mount_propagation_bidirectional",
        "readonly_rootfs",
        "privileged",
        "default_capabilities",
        "capabilities",
        "supplemental_groups",
    }
)
#: Checks of what a host process cannot have, which the runtime declines (or, for
#: namespaces, reports in the sandbox's status): PID and IPC namespaces of its own
#: (and a network one without CNI), sandbox sysctls, seccomp and AppArmor profiles.
DECLINED_CHECKS = frozenset({"pod_namespaces", "sysctls", "seccomp", "apparmor", "port_mappings"})
#: Checks of what image configs say: a host image is a record of its reference
#: (no config, so no user; one image per reference), so these are given no
#: images and skip.
IMAGE_CONFIG_CHECKS = frozenset({"image_tags", "image_user"})


@pytest.mark.parametrize("check", list(CHECKS))
async def test_conformance_kit(
    check: str, tmp_path: Path, roots: list[Path], require_real: Callable[[bool, str], None]
) -> None:
    if check in ROOT_CHECKS:
        require_real(os.geteuid() == 0, f"root (the {check} check)")
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
    want = "skipped" if check in IMAGE_CONFIG_CHECKS | DECLINED_CHECKS else "passed"
    assert report.result(check).status == want, report.summary()


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
