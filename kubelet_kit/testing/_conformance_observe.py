"""The conformance checks of the optional operations that observe a runtime.

Container and sandbox stats, and the container event stream (CREATED, STARTED
and STOPPED, in order); a runtime that does not offer them is skipped, not failed.
"""

from __future__ import annotations

import asyncio

from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerState,
)
from kubelet_kit.errors import UnimplementedError
from kubelet_kit.testing._conformance_context import _Ctx, _Skip, _wait_state


async def _check_stats(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    cid = await ctx.start_container(sid, sandbox, "stats", "sleep 3600")
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at("container_stats")
    cs = await rt.container_stats(cid)
    ctx.expect_eq("container_stats.container_id", cs.container_id, cid)
    ctx.at("list_container_stats (by id)")
    listed = await rt.list_container_stats(ContainerFilter(id=cid))
    ctx.expect_eq("ids in list_container_stats", [s.container_id for s in listed], [cid])
    ctx.at("pod_sandbox_stats")
    ps = await rt.pod_sandbox_stats(sid)
    ctx.expect_eq("pod_sandbox_stats.pod_sandbox_id", ps.pod_sandbox_id, sid)


async def _check_events(ctx: _Ctx) -> None:
    rt = ctx.runtime
    seen: list[ContainerEvent] = []
    stream = rt.get_container_events()
    first: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def collect() -> None:
        try:
            async for event in stream:
                seen.append(event)
        except Exception as exc:
            if not first.done():
                first.set_exception(exc)

    ctx.at("get_container_events")
    task = asyncio.ensure_future(collect())
    try:
        # Let the stream start; a runtime without events raises UnimplementedError now.
        for _ in range(5):
            await asyncio.sleep(0)
        if first.done():
            try:
                first.result()
            except UnimplementedError as exc:
                raise _Skip(f"no event stream: {exc}") from None
        sid, sandbox = await ctx.run_sandbox()
        cid = await ctx.start_container(sid, sandbox, "events", "exit 0")
        want = [ContainerEventType.CREATED, ContainerEventType.STARTED, ContainerEventType.STOPPED]

        async def all_seen() -> bool:
            if first.done():
                first.result()  # the stream failed: report it
            got = [e.type for e in seen if e.container_id == cid]
            return all(t in got for t in want)

        ctx.at("container events")
        await ctx.eventually(f"CREATED, STARTED and STOPPED events for {cid[:12]}", all_seen)
        got = [e.type for e in seen if e.container_id == cid]
        ctx.expect_eq("order of the container's events", [t for t in got if t in want], want)
        stopped = next(
            e for e in seen if e.container_id == cid and e.type == ContainerEventType.STOPPED
        )
        ctx.expect(
            stopped.pod_sandbox_status is None or stopped.pod_sandbox_status.id == sid,
            "the STOPPED event carries another sandbox's status",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
