"""The conformance checks of a container's lifecycle and of stopping it.

A container created, started, listed by state, sandbox and labels, stopped within
its grace period and removed (each idempotent where the kubelet relies on it),
and a container that ignores SIGTERM being killed once its stop timeout ran out.
"""

from __future__ import annotations

from kubelet_kit.container import labels as klabels
from kubelet_kit.container.interfaces import ContainerFilter, ContainerState
from kubelet_kit.errors import ContainerRuntimeError, NotFoundError
from kubelet_kit.testing._conformance_context import RUN_LABEL, _Ctx, _wait_state


async def _check_container_lifecycle(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    config = ctx.container_config(sandbox, "lifecycle", "sleep 3600")
    ctx.at("create_container")
    cid = await rt.create_container(sid, config, sandbox)
    ctx.expect(bool(cid), "create_container returned an empty id")
    ctx.at("container_status (created)")
    st = await rt.container_status(cid)
    ctx.expect_eq("state after create", st.state, ContainerState.CREATED)
    ctx.expect_eq("status.id", st.id, cid)
    ctx.expect_eq("status.metadata", st.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"status.labels[{k!r}]", st.labels.get(k), v)
    for k, v in config.annotations.items():
        ctx.expect_eq(f"status.annotations[{k!r}]", st.annotations.get(k), v)
    image_name = ctx.image.rsplit("/", 1)[-1].split(":")[0].split("@")[0]
    ctx.expect(
        image_name in st.image or st.image.startswith("sha256:"),
        f"status.image {st.image!r} does not name the image {ctx.image!r}",
    )
    ctx.expect(st.created_at > 0, f"status.created_at not set: {st.created_at!r}")

    mine = {RUN_LABEL: ctx.run_id, klabels.CONTAINER_NAME: "lifecycle"}
    ctx.at("list_containers (state CREATED)")
    created = await rt.list_containers(
        ContainerFilter(state=ContainerState.CREATED, label_selector=mine)
    )
    ctx.expect_eq("ids listed as CREATED", [c.id for c in created], [cid])

    ctx.at("start_container")
    await rt.start_container(cid)
    running = await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.expect(running.started_at > 0, "status.started_at not set for a running container")
    ctx.at("start_container (again, while running)")
    try:
        await rt.start_container(cid)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("starting a running container did not raise a ContainerRuntimeError")
    ctx.at("list_containers (state RUNNING, by sandbox)")
    listed = await rt.list_containers(
        ContainerFilter(state=ContainerState.RUNNING, pod_sandbox_id=sid)
    )
    ctx.expect_eq("ids listed as RUNNING in the sandbox", [c.id for c in listed], [cid])
    info = listed[0]
    ctx.expect_eq("listed pod_sandbox_id", info.pod_sandbox_id, sid)
    ctx.expect_eq("listed metadata", info.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"listed labels[{k!r}]", info.labels.get(k), v)
    ctx.at("list_containers (label selector)")
    by_label = await rt.list_containers(ContainerFilter(label_selector=mine))
    ctx.expect_eq("ids listed by label selector", [c.id for c in by_label], [cid])
    ctx.at("list_containers (state EXITED, while running)")
    exited = await rt.list_containers(
        ContainerFilter(state=ContainerState.EXITED, label_selector=mine)
    )
    ctx.expect_eq("ids listed as EXITED while running", [c.id for c in exited], [])

    ctx.at(f"stop_container(timeout={ctx.stop_timeout:g})")
    await ctx.run_while_waiting(
        "stop_container", rt.stop_container(cid, ctx.stop_timeout), ctx.stop_timeout + ctx.timeout
    )
    ctx.at("container_status (stopped)")
    st = await rt.container_status(cid)
    ctx.expect_eq("state after stop", st.state, ContainerState.EXITED)
    ctx.expect(
        st.exit_code in (137, 143),
        f"exit_code after stop: expected 143 (SIGTERM) or 137 (SIGKILL), got {st.exit_code} "
        f"(reason {st.reason!r}; the container's log: {ctx.said(sandbox, 'lifecycle')})",
    )
    ctx.expect(
        st.finished_at >= st.started_at > 0,
        f"finished_at {st.finished_at!r} before started_at {st.started_at!r}",
    )
    ctx.at("stop_container (again: idempotent)")
    await rt.stop_container(cid, ctx.stop_timeout)

    ctx.at("remove_container")
    await rt.remove_container(cid)
    ctx.at("remove_container (again: idempotent)")
    await rt.remove_container(cid)
    ctx.at("container_status (removed)")
    try:
        await rt.container_status(cid)
    except NotFoundError:
        pass
    else:
        ctx.fail("container_status of a removed container did not raise NotFoundError")
    ctx.at("list_containers (after remove)")
    gone = await rt.list_containers(ContainerFilter(label_selector=mine))
    ctx.expect_eq("ids listed after remove", [c.id for c in gone], [])


async def _check_sigterm_ignored(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    cid = await ctx.start_container(sid, sandbox, "stubborn", "trap '' TERM; sleep 3600")
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at(f"stop_container(timeout={ctx.stop_timeout:g}) of a container ignoring SIGTERM")
    await ctx.run_while_waiting(
        "stop_container", rt.stop_container(cid, ctx.stop_timeout), ctx.stop_timeout + ctx.timeout
    )
    st = await rt.container_status(cid)
    ctx.expect_eq("state after stop", st.state, ContainerState.EXITED)
    ctx.expect(
        st.exit_code == 137,
        f"exit_code of a container killed after its stop timeout: expected 137, got "
        f"{st.exit_code} (reason {st.reason!r}; the container's log: "
        f"{ctx.said(sandbox, 'stubborn')})",
    )
    # The stop must have waited the grace period (measured on the runtime's clock).
    ctx.expect(
        st.finished_at - st.started_at >= ctx.stop_timeout * 0.9,
        f"container killed {st.finished_at - st.started_at:.3f}s after start, before its "
        f"{ctx.stop_timeout:g}s stop timeout",
    )
