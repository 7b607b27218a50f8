"""HostProcessRuntime stopping, removing and adopting real processes.

Stops send SIGTERM then SIGKILL to the container's process group, stopping or
removing a sandbox does so to its containers, and a new runtime over the same
root adopts what is still running. Every process a test starts is killed in
teardown, and teardown checks that none is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import _host_runtime_helpers as helpers
import pytest

from kubelet_kit.container import (
    ContainerState,
    KeyValue,
    PodSandboxConfig,
    PodSandboxState,
)
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.errors import (
    ContainerStartError,
    NotFoundError,
)
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.testing import FakeClock

pytestmark = pytest.mark.timeout(30)

# The fixtures and helpers every test of the runtime uses (their teardown kills
# and checks every process a test left).
WAIT = helpers.WAIT
_start_ticks, _alive, _poll = helpers._start_ticks, helpers._alive, helpers._poll
container, log_of, run = helpers.container, helpers.log_of, helpers.run
wait_exited, wait_log = helpers.wait_exited, helpers.wait_log
roots, make_runtime, runtime = helpers.roots, helpers.make_runtime, helpers.runtime
sandbox, sandbox_config = helpers.sandbox, helpers.sandbox_config


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
