"""The conformance checks of a pod as a whole: several containers in one sandbox,
the user and group its processes run as, and reopening a container's log.

What the CRI's contract says, checked through the Runtime interface:

* Containers of one sandbox are listed under it, stop one by one, and stop
  together with the sandbox (``StopPodSandbox`` stops every container of it).
* ``run_as_user`` and ``run_as_group`` of a container's security context are the
  uid and gid of its process and of the commands exec'd into it.
* A sandbox's DNS config (servers, searches, options) is its containers'
  ``/etc/resolv.conf``, in the order containerd writes it.
* ``ReopenContainerLog`` makes a running container write to a new file at its log
  path (what the kubelet's log rotation does after renaming the old one), and is
  refused for a container that is not running.
"""

from __future__ import annotations

import attrs

from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerState,
    DNSConfig,
    LinuxContainerSecurityContext,
    LogReopener,
    PodSandboxState,
)
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.testing._conformance_context import _Ctx, _Skip, _wait_state, log_file
from kubelet_kit.testing._conformance_io import _find_log_line

#: The uid and gid the ``run_as`` check asks for: no user of a usual image.
RUN_AS_USER = 1234
RUN_AS_GROUP = 5678


async def _check_multi_container(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    first = await ctx.start_container(sid, sandbox, "first", "sleep 3600")
    second = await ctx.start_container(sid, sandbox, "second", "sleep 3600")
    await _wait_state(ctx, first, ContainerState.RUNNING)
    await _wait_state(ctx, second, ContainerState.RUNNING)
    ctx.at("list_containers (the sandbox's)")
    listed = await rt.list_containers(ContainerFilter(pod_sandbox_id=sid))
    ctx.expect_eq(
        "ids listed in the sandbox", sorted(c.id for c in listed), sorted([first, second])
    )
    for c in listed:
        ctx.expect_eq(f"pod_sandbox_id of {c.metadata.name}", c.pod_sandbox_id, sid)

    ctx.at("stop_container(first)")
    await ctx.run_while_waiting(
        "stop_container", rt.stop_container(first, ctx.stop_timeout), ctx.timeout
    )
    ctx.at("container_status after stopping the other container")
    ctx.expect_eq(
        "state of the first container",
        (await rt.container_status(first)).state,
        ContainerState.EXITED,
    )
    ctx.expect_eq(
        "state of the container left alone",
        (await rt.container_status(second)).state,
        ContainerState.RUNNING,
    )

    ctx.at("stop_pod_sandbox")
    await ctx.run_while_waiting("stop_pod_sandbox", rt.stop_pod_sandbox(sid), ctx.timeout)
    await _wait_state(ctx, second, ContainerState.EXITED)
    ctx.at("pod_sandbox_status after stop_pod_sandbox")
    ctx.expect_eq(
        "sandbox state", (await rt.pod_sandbox_status(sid)).state, PodSandboxState.NOTREADY
    )


async def _check_run_as(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    base = ctx.container_config(sandbox, "user", "id -u; id -g; sleep 3600")
    config = attrs.evolve(
        base,
        security_context=LinuxContainerSecurityContext(
            run_as_user=RUN_AS_USER, run_as_group=RUN_AS_GROUP
        ),
    )
    ctx.at("create_container(run_as_user, run_as_group)")
    cid = await rt.create_container(sid, config, sandbox)
    ctx.at("start_container")
    await rt.start_container(cid)
    await _wait_state(ctx, cid, ContainerState.RUNNING)

    log = log_file(sandbox, "user")
    for value in (RUN_AS_USER, RUN_AS_GROUP):
        ctx.at(f"log of `id -u; id -g` holding {value}")

        async def logged(value: int = value) -> bool:
            return _find_log_line(log, "stdout", str(value))

        await ctx.eventually(f"the container's process reporting {value}", logged)
    for flag, want in (("-u", RUN_AS_USER), ("-g", RUN_AS_GROUP)):
        ctx.at(f"exec_sync(['id', '{flag}'])")
        result, _ = await ctx.run_while_waiting(
            "exec_sync", rt.exec_sync(cid, ["id", flag], ctx.timeout), ctx.timeout
        )
        ctx.expect_eq(f"stdout of an exec'd `id {flag}`", result.stdout, f"{want}\n".encode())


async def _check_log_reopen(ctx: _Ctx) -> None:
    rt = ctx.runtime
    if not isinstance(rt, LogReopener):
        raise _Skip("the runtime offers no reopen_container_log (LogReopener)")
    sid, sandbox = await ctx.run_sandbox()
    # The pause leaves time to rename the file and reopen it before the second line.
    cid = await ctx.start_container(
        sid, sandbox, "logger", "echo before; sleep 5; echo after; sleep 3600"
    )
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    path = log_file(sandbox, "logger")
    rotated = path.with_name(f"{path.name}.rotated")
    ctx.at("log file holding the first line")

    async def first_line() -> bool:
        return _find_log_line(path, "stdout", "before")

    await ctx.eventually("the first line in the log", first_line)
    ctx.at("rename the log file, then reopen_container_log")
    path.rename(rotated)
    await rt.reopen_container_log(cid)
    ctx.at("new log file holding the second line")

    async def second_line() -> bool:
        return _find_log_line(path, "stdout", "after")

    await ctx.eventually("the second line in a new file at the log path", second_line)
    ctx.expect(
        not _find_log_line(rotated, "stdout", "after"),
        "the line written after the reopen went to the renamed file",
    )

    ctx.at("stop_container, then reopen_container_log")
    await ctx.run_while_waiting("stop_container", rt.stop_container(cid, 0), ctx.timeout)
    try:
        await rt.reopen_container_log(cid)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("reopening the log of an exited container did not raise ContainerRuntimeError")


#: The resolver configuration the ``dns_config`` check gives its sandbox.
DNS_CONFIG = DNSConfig(
    servers=("192.0.2.53", "192.0.2.54"),
    searches=("kk-conformance.svc.cluster.local", "cluster.local"),
    options=("ndots:5", "timeout:2"),
)


async def _check_dns_config(ctx: _Ctx) -> None:
    rt = ctx.runtime
    config = attrs.evolve(ctx.sandbox_config(), dns_config=DNS_CONFIG)
    ctx.at("run_pod_sandbox(dns_config)")
    sid = await rt.run_pod_sandbox(config)
    ctx.sandboxes.append(sid)
    cid = await ctx.start_container(sid, config, "resolver", "sleep 3600")
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at("exec_sync(['cat', '/etc/resolv.conf'])")
    result, _ = await ctx.run_while_waiting(
        "exec_sync", rt.exec_sync(cid, ["cat", "/etc/resolv.conf"], ctx.timeout), ctx.timeout
    )
    ctx.expect_eq(
        "/etc/resolv.conf in the container",
        result.stdout.decode(),
        (
            "search kk-conformance.svc.cluster.local cluster.local\n"
            "nameserver 192.0.2.53\n"
            "nameserver 192.0.2.54\n"
            "options ndots:5 timeout:2\n"
        ),
    )
