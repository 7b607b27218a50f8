"""The conformance checks of runtime information and pod sandboxes.

The runtime's version and status conditions, a sandbox's whole lifecycle (run,
status, list filters, stop, remove, each idempotent where the kubelet relies on
it), the typed errors for unknown ids, and the refusal of a second sandbox or
container with the same metadata.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from kubelet_kit.container import labels as klabels
from kubelet_kit.container.interfaces import (
    ContainerMetadata,
    PodSandboxFilter,
    PodSandboxState,
)
from kubelet_kit.errors import ContainerRuntimeError, NotFoundError
from kubelet_kit.testing._conformance_context import RUN_LABEL, _Ctx, _missing_id


async def _check_version_and_status(ctx: _Ctx) -> None:
    ctx.at("version")
    v = await ctx.runtime.version()
    ctx.expect(bool(v.runtime_name), f"version: empty runtime_name in {v!r}")
    ctx.expect(bool(v.runtime_version), f"version: empty runtime_version in {v!r}")
    ctx.expect(bool(v.runtime_api_version), f"version: empty runtime_api_version in {v!r}")
    ctx.at("status")
    st = await ctx.runtime.status()
    for cond in ("RuntimeReady", "NetworkReady"):
        c = st.condition(cond)
        ctx.expect(c is not None, f"status: condition {cond} missing in {st!r}")
        assert c is not None
        ctx.expect(c.status, f"status: {cond} is false ({c.reason}: {c.message})")


async def _check_sandbox_lifecycle(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, config = await ctx.run_sandbox()
    ctx.expect(bool(sid), "run_pod_sandbox returned an empty id")
    ctx.at("pod_sandbox_status (ready)")
    st = await rt.pod_sandbox_status(sid)
    ctx.expect_eq("status.id", st.id, sid)
    ctx.expect_eq("status.state", st.state, PodSandboxState.READY)
    ctx.expect_eq("status.metadata", st.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"status.labels[{k!r}]", st.labels.get(k), v)
    ctx.expect(st.created_at > 0, f"status.created_at not set: {st.created_at!r}")

    mine = {RUN_LABEL: ctx.run_id, klabels.POD_UID: config.metadata.uid}
    ctx.at("list_pod_sandboxes (label selector)")
    listed = await rt.list_pod_sandboxes(PodSandboxFilter(label_selector=mine))
    ctx.expect_eq("ids listed by label selector", [s.id for s in listed], [sid])
    ctx.expect_eq("listed metadata", listed[0].metadata, config.metadata)
    ctx.at("list_pod_sandboxes (non-matching selector)")
    none = await rt.list_pod_sandboxes(
        PodSandboxFilter(label_selector={**mine, klabels.POD_UID: "no-such-uid"})
    )
    ctx.expect_eq("ids listed by a non-matching selector", [s.id for s in none], [])
    ctx.at("list_pod_sandboxes (by id)")
    by_id = await rt.list_pod_sandboxes(PodSandboxFilter(id=sid))
    ctx.expect_eq("ids listed by id", [s.id for s in by_id], [sid])
    ctx.at("list_pod_sandboxes (state READY)")
    ready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.READY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as READY", [s.id for s in ready], [sid])
    ctx.at("list_pod_sandboxes (state NOTREADY, before stop)")
    notready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.NOTREADY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as NOTREADY while ready", [s.id for s in notready], [])

    ctx.at("stop_pod_sandbox")
    await rt.stop_pod_sandbox(sid)
    ctx.at("stop_pod_sandbox (again: idempotent)")
    await rt.stop_pod_sandbox(sid)
    ctx.at("pod_sandbox_status (stopped)")
    ctx.expect_eq(
        "state after stop", (await rt.pod_sandbox_status(sid)).state, PodSandboxState.NOTREADY
    )
    ctx.at("list_pod_sandboxes (state NOTREADY)")
    notready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.NOTREADY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as NOTREADY after stop", [s.id for s in notready], [sid])

    ctx.at("remove_pod_sandbox")
    await rt.remove_pod_sandbox(sid)
    ctx.at("remove_pod_sandbox (again: idempotent)")
    await rt.remove_pod_sandbox(sid)
    ctx.at("pod_sandbox_status (removed)")
    try:
        await rt.pod_sandbox_status(sid)
    except NotFoundError:
        pass
    else:
        ctx.fail("pod_sandbox_status of a removed sandbox did not raise NotFoundError")
    ctx.at("list_pod_sandboxes (after remove)")
    gone = await rt.list_pod_sandboxes(PodSandboxFilter(label_selector=mine))
    ctx.expect_eq("ids listed after remove", [s.id for s in gone], [])


async def _check_unknown_ids(ctx: _Ctx) -> None:
    rt = ctx.runtime
    missing = _missing_id()
    calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("pod_sandbox_status", lambda: rt.pod_sandbox_status(missing)),
        ("container_status", lambda: rt.container_status(missing)),
        ("start_container", lambda: rt.start_container(missing)),
    ]
    for name, call in calls:
        ctx.at(f"{name}(unknown id)")
        try:
            await call()
        except NotFoundError:
            continue
        except Exception as exc:
            ctx.fail(f"expected NotFoundError, got {type(exc).__name__}: {exc}")
        ctx.fail("expected NotFoundError, the call succeeded")
    ctx.at("remove_container(unknown id)")
    await rt.remove_container(missing)
    ctx.at("remove_pod_sandbox(unknown id)")
    await rt.remove_pod_sandbox(missing)


async def _check_duplicate_names(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    ctx.at("run_pod_sandbox (same name, namespace, uid and attempt)")
    try:
        dup = await rt.run_pod_sandbox(sandbox)
    except ContainerRuntimeError:
        pass  # AlreadyExistsError, or an untyped refusal from older runtimes
    else:
        ctx.sandboxes.append(dup)
        ctx.fail("a second sandbox with the same metadata was created")
    config = ctx.container_config(sandbox, "twin", "sleep 3600")
    ctx.at("create_container")
    await rt.create_container(sid, config, sandbox)
    ctx.at("create_container (same name and attempt in the sandbox)")
    try:
        await rt.create_container(sid, config, sandbox)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("a second container with the same name and attempt was created")
    ctx.at("create_container (next attempt)")
    next_attempt = attrs.evolve(config, metadata=ContainerMetadata("twin", 1))
    await rt.create_container(sid, next_attempt, sandbox)
