"""HostProcessRuntime's exec_sync with real processes.

A command runs with the container's environment, working directory and user;
its timeout is driven by a FakeClock. Every process a test starts is killed in
teardown, and teardown checks that none is left.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import _host_runtime_helpers as helpers
import pytest

from kubelet_kit.container import (
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    PodSandboxConfig,
)
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.errors import (
    ContainerRuntimeError,
    DeadlineExceededError,
    InvalidArgumentError,
)
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.testing import FakeClock

pytestmark = pytest.mark.timeout(30)

# The fixtures and helpers every test of the runtime uses (their teardown kills
# and checks every process a test left).
WAIT = helpers.WAIT
_start_ticks, _poll = helpers._start_ticks, helpers._poll
container, log_of, run = helpers.container, helpers.log_of, helpers.run
wait_exited = helpers.wait_exited
roots, make_runtime, runtime = helpers.roots, helpers.make_runtime, helpers.runtime
sandbox, sandbox_config = helpers.sandbox, helpers.sandbox_config


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
