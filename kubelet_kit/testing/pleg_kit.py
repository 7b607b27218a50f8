"""The PLEG conformance kit: the contract the agent relies on, for any PLEG.

A third party checks their implementation of :class:`kubelet_kit.pleg.PLEG` with
either form::

    from kubelet_kit.testing.pleg_kit import PLEGConformance, check_pleg, pleg_kit_options

    await check_pleg(lambda ctx: MyPLEG(ctx.options["runtime"], ctx.options["clock"]))

    class TestMyPLEG(PLEGConformance):
        def make(self, ctx):
            return MyPLEG(ctx.options["runtime"], ctx.options["clock"])

        def kit_options(self):          # only to change a setting
            return pleg_kit_options(relist_threshold=600.0)

**What the factory gets.** Every check builds its PLEG afresh, from a
:class:`~kubelet_kit.testing.kit.KitContext` whose ``options`` hold a fresh
``clock`` (a :class:`~kubelet_kit.testing.FakeClock`) and ``runtime`` (a
:class:`~kubelet_kit.testing.FakeRuntime` on that clock, with its event stream
on). The PLEG must observe that runtime and take all its time from that clock:
the checks change the runtime (start, exit and remove containers, make it
unavailable, fail an inspection) and move the clock, never sleeping. Options
are made by :func:`pleg_kit_options` (the default ``kit_options`` of
:data:`PLEGConformance`); :func:`check_pleg` makes them for each check itself.

**Settings** (keyword arguments of :func:`check_pleg` and :func:`pleg_kit_options`):

=========================  ==========  ===============================================
setting                    default     meaning
=========================  ==========  ===============================================
``event_latency``          1.0         clock seconds within which a change of the
                                       runtime must be reported (one relist period)
``relist_period``          1.0         seconds between relists; None skips the relist
                                       timing check (a PLEG that does not relist)
``relist_threshold``       180.0       the health threshold that applies while the
                                       runtime cannot be listed; None skips the
                                       stall check
``quiet_period``           310.0       how long nothing may be reported when nothing
                                       changes (past an evented PLEG's 300 s relist)
``channel_capacity``       1000        the size of the event queue
``resends_dropped_events`` True        whether what a full queue dropped is sent
                                       again once the reader catches up (as the
                                       project's PLEGs do; the kubelet does not)
``time_limit``             60.0        real seconds a check may take before it fails
                                       (a PLEG that never waits on the clock)
``runtime_factory``        see above   ``callable(clock) -> FakeRuntime``
=========================  ==========  ===============================================

Checks that need a relisting PLEG skip with a reason when their setting is None.
An evented PLEG (with a stream, a slow relist, and a fallback to relisting every
second when the runtime is gone) passes with ``relist_period=300.0``.

Every event received in any check is also held to what the kubelet guarantees:
ContainerChanged is never sent, a container is reported started at most once,
and a container's events follow its life (started, died, removed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kubelet_kit.api.duration import format_duration
from kubelet_kit.container.interfaces import ContainerState, PodSandboxState
from kubelet_kit.errors import ContainerRuntimeError, RuntimeUnavailableError
from kubelet_kit.pleg.cache import PodCache
from kubelet_kit.pleg.interfaces import PLEG, PodLifecycleEvent, PodLifecycleEventType
from kubelet_kit.testing._pleg_kit_support import (
    DIED,
    REMOVED,
    STARTED,
    Env,
    Seen,
    Watcher,
    add_container,
    add_pod,
    describe,
    env,
    full_listings,
    guarded,
    only,
    options_with_env,
    setting,
    start,
)
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, _takes_argument, kit_test_class, run_kit

__all__ = ["CHECKS", "PLEGConformance", "check_pleg", "pleg_kit_options"]

Ctx = KitContext[PLEG]


# ------------------------------------------------------------------ the surface


async def _protocol_shape(ctx: Ctx) -> None:
    pleg = ctx.subject
    ctx.at("isinstance(pleg, kubelet_kit.pleg.PLEG)")
    missing = [
        n
        for n in ("run", "stop", "watch", "healthy", "update_cache", "cache")
        if not hasattr(pleg, n)
    ]
    ctx.expect(not missing, f"not a PLEG: no {', '.join(missing)}")
    ctx.expect(isinstance(pleg, PLEG), "not a PLEG")
    ctx.at("cache")
    cache = pleg.cache
    ctx.expect(isinstance(cache, PodCache), f"cache is a {type(cache).__name__}, not a PodCache")
    ctx.expect(pleg.cache is cache, "cache must be the same object every time: the agent keeps it")
    ctx.at("healthy()")
    health = pleg.healthy()
    ctx.expect(
        isinstance(health, tuple)
        and len(health) == 2
        and isinstance(health[0], bool)
        and isinstance(health[1], str),
        f"healthy() must return (bool, str), got {health!r}",
    )
    ctx.at("watch() before it is iterated")
    stream = pleg.watch()
    ctx.expect(hasattr(stream, "__anext__"), "watch() must return an async iterator")
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


# ---------------------------------------------------------------- what is reported


async def _reports_pods_present_at_start(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod before the PLEG runs")
    sid, (app,) = await add_pod(e.runtime, "early", "app")
    watcher = Watcher(ctx, e.pleg)
    ctx.at("run the PLEG: its first look at the runtime")
    await start(ctx, e)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    for cid, what in ((app, "container"), (sid, "sandbox")):
        ctx.expect_eq(f"events of the running {what}", only(got, cid), [STARTED])
    ctx.expect(all(ev.pod_uid == "early" for ev in got), f"events of another pod: {describe(got)}")


async def _reports_started_containers(ctx: Ctx) -> None:
    e = env(ctx)
    watcher = Watcher(ctx, e.pleg)
    await start(ctx, e)
    ctx.at("an empty runtime")
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events of an empty runtime", describe(watcher.take(ctx)), "[]")
    ctx.at("start a pod (a sandbox and a container)")
    sid, (app,) = await add_pod(e.runtime, "a", "app")
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    ctx.expect(
        PodLifecycleEvent("a", STARTED, app) in got,
        f"no ContainerStarted for the container (data = its id) within {e.latency:g}s: "
        f"{describe(got)}",
    )
    ctx.expect_eq("events of the container", only(got, app), [STARTED])
    ctx.expect_eq("events of the sandbox (it counts as a container)", only(got, sid), [STARTED])
    ctx.expect_eq("event count", len(got), 2)
    ctx.at("start a second container in the running pod")
    side = await add_container(e.runtime, sid, "a", "sidecar")
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    ctx.expect_eq("events", got, [PodLifecycleEvent("a", STARTED, side)])


async def _running_pod(
    ctx: Ctx, uid: str, *names: str
) -> tuple[Watcher, asyncio.Task[None], str, list[str]]:
    """Run the PLEG with a watcher, start a pod; once its starts are reported:
    (watcher, run task, sandbox id, container ids)."""
    e = env(ctx)
    watcher = Watcher(ctx, e.pleg)
    task = await start(ctx, e)
    sid, ids = await add_pod(e.runtime, uid, *names)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    for cid in (sid, *ids):
        ctx.expect(
            PodLifecycleEvent(uid, STARTED, cid) in got, f"no ContainerStarted: {describe(got)}"
        )
    return watcher, task, sid, ids


async def _reports_died_containers(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod")
    watcher, _, sid, (app,) = await _running_pod(ctx, "d", "app")
    ctx.at("the container exits (code 1)")
    e.runtime.exit_container(app, 1)
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events", watcher.take(ctx), [PodLifecycleEvent("d", DIED, app)])
    ctx.at("stop the sandbox (its container already exited)")
    await e.runtime.stop_pod_sandbox(sid)
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events", watcher.take(ctx), [PodLifecycleEvent("d", DIED, sid)])


async def _reports_removed_containers(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod; its container exits")
    watcher, _, _, (app, other) = await _running_pod(ctx, "r", "app", "other")
    e.runtime.exit_container(app, 0)
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events", watcher.take(ctx), [PodLifecycleEvent("r", DIED, app)])
    ctx.at("remove the exited container")
    await e.runtime.remove_container(app)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    types = only(got, app)
    # The generic PLEG reports only the removal; an evented one, as the kubelet's,
    # maps the runtime's DELETED to ContainerDied + ContainerRemoved.
    ctx.expect(
        types in ([REMOVED], [DIED, REMOVED]),
        f"expected ContainerRemoved (after at most one ContainerDied), got {describe(got)}",
    )
    ctx.expect_eq("events of the other container", only(got, other), [])


def _died_then_removed(types: list[PodLifecycleEventType]) -> bool:
    # An evented PLEG, as the kubelet's, may report the death twice: when the runtime
    # stops the container, and with its removal (DELETED is ContainerDied +
    # ContainerRemoved).
    return len(types) >= 2 and types[-1] is REMOVED and set(types[:-1]) == {DIED}


async def _reports_removal_of_running_containers(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod of two containers")
    watcher, _, sid, (app, side) = await _running_pod(ctx, "x", "app", "side")
    ctx.at("remove a running container (it is killed)")
    await e.runtime.remove_container(app)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    types = only(got, app)
    ctx.expect(
        _died_then_removed(types),
        f"expected ContainerDied then ContainerRemoved, got {describe(got)}",
    )
    ctx.at("remove the pod's sandbox with its running container")
    await e.runtime.remove_pod_sandbox(sid)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    for cid, what in ((side, "container"), (sid, "sandbox")):
        types = only(got, cid)
        ctx.expect(
            _died_then_removed(types),
            f"{what}: expected ContainerDied then ContainerRemoved, got {describe(got)}",
        )
    ctx.expect("x" not in e.pleg.cache, "the pod is gone from the runtime but not from the cache")


async def _unknown_state_is_not_reported(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod")
    watcher, _, _, (app,) = await _running_pod(ctx, "k", "app")
    ctx.at("the runtime loses track of the container (CONTAINER_UNKNOWN)")
    e.runtime.mark_unknown(app)
    await e.clock.run_for(e.latency)
    # The kubelet computes ContainerChanged for it and sends nothing.
    ctx.expect_eq("events", describe(watcher.take(ctx)), "[]")
    ctx.at("remove the unknown container")
    await e.runtime.remove_container(app)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    ctx.expect(
        _died_then_removed(only(got, app)),
        f"expected ContainerDied then ContainerRemoved, got {describe(got)}",
    )


async def _orders_events_of_a_pod(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod")
    watcher, _, sid, (first,) = await _running_pod(ctx, "o", "app")

    def index(events: list[PodLifecycleEvent], event: PodLifecycleEvent) -> int:
        if event not in events:
            ctx.fail(f"no {event.type.value} for {event.data[:12]}: {describe(events)}")
        return events.index(event)

    ctx.at("the container exits and its restart starts, at one instant")
    e.runtime.exit_container(first, 1)
    second = await add_container(e.runtime, sid, "o", "app", 1)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    ctx.expect(
        index(got, PodLifecycleEvent("o", DIED, first))
        < index(got, PodLifecycleEvent("o", STARTED, second)),
        f"the restart was reported before the death it follows: {describe(got)}",
    )
    ctx.at("it exits again, the first is removed, a third starts")
    e.runtime.exit_container(second, 1)
    await e.runtime.remove_container(first)
    third = await add_container(e.runtime, sid, "o", "app", 2)
    await e.clock.run_for(e.latency)
    got = watcher.take(ctx)
    index(got, PodLifecycleEvent("o", REMOVED, first))
    ctx.expect(
        index(got, PodLifecycleEvent("o", DIED, second))
        < index(got, PodLifecycleEvent("o", STARTED, third)),
        f"the restart was reported before the death it follows: {describe(got)}",
    )


async def _quiet_when_nothing_changes(ctx: Ctx) -> None:
    e = env(ctx)
    quiet = float(setting(ctx, "quiet_period"))
    watcher = Watcher(ctx, e.pleg)
    await start(ctx, e)
    ctx.at(f"an empty runtime for {quiet:g}s")
    await e.clock.run_for(quiet)
    ctx.expect_eq("events", describe(watcher.take(ctx)), "[]")
    ctx.at("start a pod")
    sid, _ = await add_pod(e.runtime, "q", "app")
    await e.clock.run_for(e.latency)
    ctx.expect_eq("event count", len(watcher.take(ctx)), 2)
    ctx.at(f"create a container without starting it, then nothing for {quiet:g}s")
    created = await add_container(e.runtime, sid, "q", "later", start=False)
    await e.clock.run_for(quiet)
    ctx.expect_eq("events (a created container is not reported)", describe(watcher.take(ctx)), "[]")
    ctx.at("start the created container")
    await e.runtime.start_container(created)
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events", watcher.take(ctx), [PodLifecycleEvent("q", STARTED, created)])


# ------------------------------------------------------------------------ the cache


def _seen(ctx: Ctx, watcher: Watcher, event: PodLifecycleEvent) -> Seen:
    for seen in watcher.seen:
        if seen.event == event:
            return seen
    ctx.fail(f"no {event.type.value} for {event.data[:12]}")


async def _cache_updated_before_events(ctx: Ctx) -> None:
    e = env(ctx)
    watcher = Watcher(ctx, e.pleg)
    await start(ctx, e)
    ctx.at("start a pod")
    changed_at = e.clock.now()
    sid, (app,) = await add_pod(e.runtime, "c", "app")
    await e.clock.run_for(e.latency)
    watcher.take(ctx)
    seen = _seen(ctx, watcher, PodLifecycleEvent("c", STARTED, app))
    status = seen.entry.status
    found = status.find_container_status_by_id(app) if status is not None else None
    ctx.expect(
        found is not None and found.state is ContainerState.RUNNING,
        f"when ContainerStarted arrived the cache held {found.state.value if found else 'no'} "
        "status of the container, not a running one",
    )
    ctx.expect(
        seen.entry.timestamp >= changed_at,
        f"the cache's entry is stamped {seen.entry.timestamp}, before the change ({changed_at})",
    )
    seen = _seen(ctx, watcher, PodLifecycleEvent("c", STARTED, sid))
    status = seen.entry.status
    ctx.expect(
        status is not None
        and any(s.id == sid and s.state is PodSandboxState.READY for s in status.sandbox_statuses),
        "when the sandbox's ContainerStarted arrived the cache did not hold it ready",
    )
    ctx.at("the container exits with code 3")
    e.clock.advance(1.0)
    e.runtime.exit_container(app, 3)
    await e.clock.run_for(e.latency)
    watcher.take(ctx)
    status = _seen(ctx, watcher, PodLifecycleEvent("c", DIED, app)).entry.status
    found = status.find_container_status_by_id(app) if status is not None else None
    ctx.expect(
        found is not None and found.state is ContainerState.EXITED and found.exit_code == 3,
        "when ContainerDied arrived the cache did not hold the container exited with code 3",
    )
    ctx.at("remove the pod")
    await e.runtime.remove_pod_sandbox(sid)
    await e.clock.run_for(e.latency)
    watcher.take(ctx)
    ctx.expect(
        not _seen(ctx, watcher, PodLifecycleEvent("c", REMOVED, sid)).in_cache,
        "when the sandbox's ContainerRemoved arrived the cache still held the pod",
    )


async def _update_cache_inspects_one_pod(ctx: Ctx) -> None:
    e = env(ctx)
    pleg = e.pleg
    ctx.at("update_cache of a running pod (the PLEG does not run)")
    sid, (app,) = await add_pod(e.runtime, "u", "app")
    ctx.expect(await pleg.update_cache("u"), "update_cache returned False for a new status")
    status = pleg.cache.get("u").status
    found = status.find_container_status_by_id(app) if status is not None else None
    ctx.expect(found is not None and found.state is ContainerState.RUNNING, "not cached running")
    ctx.at("update_cache after the container exited")
    e.clock.advance(1.0)
    e.runtime.exit_container(app, 4)
    await pleg.update_cache("u")
    await pleg.update_cache("u")  # idempotent
    status = pleg.cache.get("u").status
    found = status.find_container_status_by_id(app) if status is not None else None
    ctx.expect(
        found is not None and found.state is ContainerState.EXITED and found.exit_code == 4,
        "the cache does not hold the container exited with code 4",
    )
    ctx.at("update_cache of a pod removed from the runtime")
    e.clock.advance(1.0)
    await e.runtime.remove_pod_sandbox(sid)
    await pleg.update_cache("u")
    ctx.expect("u" not in pleg.cache, "a pod the runtime no longer has is still cached")
    ctx.at("update_cache when the runtime fails the inspection")
    await add_pod(e.runtime, "v", "app")
    e.runtime.inject_error("container_status", RuntimeUnavailableError("injected by the kit"))
    try:
        await pleg.update_cache("v")
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("update_cache did not raise the runtime's error")
    ctx.expect(
        isinstance(pleg.cache.get("v").error, ContainerRuntimeError),
        "the inspection's error is not in the cache",
    )


async def _retries_failed_inspections(ctx: Ctx) -> None:
    e = env(ctx)
    watcher = Watcher(ctx, e.pleg)
    await start(ctx, e)
    ctx.at("start a pod whose first inspection fails")
    e.runtime.inject_error("container_status", RuntimeUnavailableError("injected by the kit"))
    sid, (app,) = await add_pod(e.runtime, "f", "app")
    await e.clock.run_for(2 * e.latency)
    got = watcher.take(ctx)
    ctx.expect_eq("events of the container", only(got, app), [STARTED])
    ctx.expect_eq("events of the sandbox", only(got, sid), [STARTED])
    entry = e.pleg.cache.get("f")
    ctx.expect(entry.error is None and entry.status is not None, "the cache still holds the error")


async def _survives_runtime_outage(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("start a pod")
    watcher, task, _, (app,) = await _running_pod(ctx, "s", "app")
    ctx.at("the runtime is unavailable for 30s; the container exits meanwhile")
    e.runtime.set_unavailable()
    await e.clock.run_for(15.0)
    e.runtime.exit_container(app, 2)
    await e.clock.run_for(15.0)
    ctx.expect_eq("events while the runtime is unavailable", describe(watcher.take(ctx)), "[]")
    ctx.expect(not task.done(), "run() ended while the runtime was unavailable")
    ctx.at("the runtime is back")
    e.runtime.set_unavailable(False)
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events after the outage", watcher.take(ctx), [PodLifecycleEvent("s", DIED, app)])


# ------------------------------------------------------------------- the lifecycle


async def _stop_ends_watch(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("run, with a watcher")
    watcher, task, _, _ = await _running_pod(ctx, "t", "app")
    ctx.at("stop()")
    await _stop_returns_run(ctx, e, task)
    await e.clock.settle()
    ctx.expect(watcher.ended, "the watcher's iteration did not end after stop()")
    ctx.expect(watcher.error is None, f"watch() raised {watcher.error!r} when stopped")
    ctx.at("stop() again (idempotent)")
    e.pleg.stop()
    e.pleg.stop()
    ctx.at("a watch() begun after stop()")
    late = Watcher(ctx, e.pleg)
    await e.clock.settle()
    ctx.expect(late.ended and late.error is None, "a watch() of a stopped PLEG did not end")


async def _stop_returns_run(ctx: Ctx, e: Env, task: asyncio.Task[None]) -> None:
    e.pleg.stop()
    await e.clock.settle()
    if not task.done():
        await e.clock.run_for(e.latency)
    ctx.expect(task.done(), "run() did not return after stop()")
    error = task.exception()
    ctx.expect(error is None, f"run() raised {error!r} when stopped")


async def _stop_delivers_queued_events(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("run without a watcher; a pod starts")
    task = await start(ctx, e)
    sid, (app,) = await add_pod(e.runtime, "p", "app")
    await e.clock.run_for(e.latency)
    ctx.at("stop()")
    await _stop_returns_run(ctx, e, task)
    ctx.at("read the events queued before stop()")
    watcher = Watcher(ctx, e.pleg)
    await e.clock.settle()
    got = watcher.take(ctx)
    ctx.expect(watcher.ended, "watch() did not end once the queued events were read")
    ctx.expect_eq("events of the container", only(got, app), [STARTED])
    ctx.expect_eq("events of the sandbox", only(got, sid), [STARTED])


async def _single_watcher(ctx: Ctx) -> None:
    e = env(ctx)
    await start(ctx, e)
    first = Watcher(ctx, e.pleg)
    await e.clock.settle()
    ctx.at("a second concurrent watch()")
    second = e.pleg.watch()
    attempt = asyncio.ensure_future(anext(second))
    await e.clock.settle()
    if not attempt.done():
        attempt.cancel()
        ctx.fail("a second concurrent watcher was not refused (it waits for events)")
    error = attempt.exception()
    ctx.expect(
        isinstance(error, RuntimeError),
        f"a second concurrent watcher must get RuntimeError, got {error!r}",
    )
    ctx.at("the first watcher goes away; a new one reads")
    await first.close()
    third = Watcher(ctx, e.pleg)
    await e.clock.settle()
    _, (app,) = await add_pod(e.runtime, "w", "app")
    await e.clock.run_for(e.latency)
    ctx.expect_eq("events of the container", only(third.take(ctx), app), [STARTED])


async def _run_twice_refused(ctx: Ctx) -> None:
    e = env(ctx)
    first = await start(ctx, e)
    ctx.at("a second run() while running")
    second = asyncio.ensure_future(e.pleg.run())
    await e.clock.settle()
    if not second.done():
        second.cancel()
        ctx.fail("a second run() did not raise RuntimeError (it runs)")
    error = second.exception()
    ctx.expect(isinstance(error, RuntimeError), f"expected RuntimeError, got {error!r}")
    ctx.expect(not first.done(), "the refused run() stopped the running one")
    ctx.at("stop()")
    await _stop_returns_run(ctx, e, first)


# ----------------------------------------------------------------- health, timing


async def _healthy_while_relisting(ctx: Ctx) -> None:
    e = env(ctx)
    ctx.at("healthy() before the first relist")
    ctx.expect_eq("healthy()", e.pleg.healthy(), (False, "pleg has yet to be successful"))
    await start(ctx, e)
    await add_pod(e.runtime, "h", "app")
    # Twice the longest of the threshold and the period: several relists.
    span = 2 * max(
        float(setting(ctx, "relist_threshold") or 180.0),
        float(setting(ctx, "relist_period") or 1.0),
    )
    waited = 0.0
    while True:
        ctx.at(f"healthy() {waited:g}s after the start")
        ok, message = e.pleg.healthy()
        ctx.expect(ok, f"unhealthy while the runtime answers: {message!r}")
        if waited >= span:
            break
        await e.clock.run_for(30.0)
        waited += 30.0


async def _unhealthy_when_relisting_stalls(ctx: Ctx) -> None:
    threshold = setting(ctx, "relist_threshold")
    if threshold is None:
        ctx.skip("relist_threshold is None: the implementation has no relist health")
    threshold = float(threshold)
    e = env(ctx)
    await start(ctx, e)
    ctx.at("healthy after the first relist")
    ok, message = e.pleg.healthy()
    ctx.expect(ok, f"unhealthy after the first relist: {message!r}")
    ctx.at(f"the runtime cannot be listed for {threshold - 1:g}s")
    e.runtime.set_unavailable()
    await e.clock.run_for(threshold - 1.0)
    ok, message = e.pleg.healthy()
    ctx.expect(ok, f"unhealthy before the {threshold:g}s threshold: {message!r}")
    ctx.at(f"the runtime cannot be listed for {threshold + 1:g}s")
    await e.clock.run_for(2.0)
    ok, message = e.pleg.healthy()
    ctx.expect(not ok, f"still healthy {threshold + 1:g}s after the last relist")
    suffix = f" ago; threshold is {format_duration(threshold)}"
    ctx.expect(
        message.startswith("pleg was last seen active ") and message.endswith(suffix),
        f"message {message!r}: expected 'pleg was last seen active <d>{suffix}'",
    )
    ctx.at("the runtime answers again")
    e.runtime.set_unavailable(False)
    await e.clock.run_for(e.latency)
    ok, message = e.pleg.healthy()
    ctx.expect(ok, f"still unhealthy after a relist succeeded again: {message!r}")


async def _relists_every_period(ctx: Ctx) -> None:
    period = setting(ctx, "relist_period")
    if period is None:
        ctx.skip("relist_period is None: the implementation does not relist periodically")
    period = float(period)
    e = env(ctx)
    await add_pod(e.runtime, "l", "app")
    await start(ctx, e)
    ctx.at("the first relist, at once")
    ctx.expect(full_listings(e.runtime) >= 1, "run() did not list the runtime at once")
    ctx.at(f"ten periods of {period:g}s")
    before = full_listings(e.runtime)
    await e.clock.run_for(10 * period)
    count = full_listings(e.runtime) - before
    ctx.expect(9 <= count <= 11, f"{count} relists in ten periods of {period:g}s")


# ------------------------------------------------------------------- the queue


async def _overflow(ctx: Ctx) -> tuple[Env, asyncio.Task[None], int, set[tuple[str, str]]]:
    e = env(ctx)
    capacity = int(setting(ctx, "channel_capacity"))
    ctx.at(f"start {capacity // 2 + 25} pods ({capacity + 50} containers and sandboxes)")
    expected: set[tuple[str, str]] = set()
    for i in range(capacity // 2 + 25):
        uid = f"n{i}"
        sid, (cid,) = await add_pod(e.runtime, uid, "app")
        expected |= {(uid, sid), (uid, cid)}
    ctx.at("run with nobody reading")
    task = await start(ctx, e)
    await e.clock.run_for(3 * e.latency)
    return e, task, capacity, expected


async def _full_queue_drops_instead_of_blocking(ctx: Ctx) -> None:
    e, task, capacity, _ = await _overflow(ctx)
    ctx.at("stop() with the queue full (a PLEG must never wait for its reader)")
    await _stop_returns_run(ctx, e, task)
    ctx.at("read what was queued")
    watcher = Watcher(ctx, e.pleg)
    await e.clock.settle()
    got = watcher.take(ctx)
    ctx.expect(watcher.ended, "watch() did not end once the queued events were read")
    ctx.expect(
        0 < len(got) <= capacity, f"{len(got)} events were queued; the capacity is {capacity}"
    )


async def _dropped_events_are_sent_again(ctx: Ctx) -> None:
    if not setting(ctx, "resends_dropped_events"):
        ctx.skip("resends_dropped_events is False: dropped events are left to the pod resync")
    e, _, _, expected = await _overflow(ctx)
    ctx.at("a reader catches up")
    watcher = Watcher(ctx, e.pleg)
    await e.clock.run_for(5 * e.latency)
    got = {(ev.pod_uid, ev.data) for ev in watcher.take(ctx) if ev.type is STARTED}
    missing = expected - got
    ctx.expect(
        not missing,
        f"{len(missing)} of {len(expected)} starts were never reported, e.g. {sorted(missing)[:3]}",
    )


#: Every check, by name, in the order they run (each under the ``time_limit``).
CHECKS: dict[str, KitCheck[PLEG]] = {
    "protocol_shape": guarded(_protocol_shape),
    "reports_pods_present_at_start": guarded(_reports_pods_present_at_start),
    "reports_started_containers": guarded(_reports_started_containers),
    "reports_died_containers": guarded(_reports_died_containers),
    "reports_removed_containers": guarded(_reports_removed_containers),
    "reports_removal_of_running_containers": guarded(_reports_removal_of_running_containers),
    "unknown_state_is_not_reported": guarded(_unknown_state_is_not_reported),
    "orders_events_of_a_pod": guarded(_orders_events_of_a_pod),
    "quiet_when_nothing_changes": guarded(_quiet_when_nothing_changes),
    "cache_updated_before_events": guarded(_cache_updated_before_events),
    "update_cache_inspects_one_pod": guarded(_update_cache_inspects_one_pod),
    "retries_failed_inspections": guarded(_retries_failed_inspections),
    "survives_runtime_outage": guarded(_survives_runtime_outage),
    "stop_ends_watch": guarded(_stop_ends_watch),
    "stop_delivers_queued_events": guarded(_stop_delivers_queued_events),
    "single_watcher": guarded(_single_watcher),
    "run_twice_refused": guarded(_run_twice_refused),
    "healthy_while_relisting": guarded(_healthy_while_relisting),
    "unhealthy_when_relisting_stalls": guarded(_unhealthy_when_relisting_stalls),
    "relists_every_period": guarded(_relists_every_period),
    "full_queue_drops_instead_of_blocking": guarded(_full_queue_drops_instead_of_blocking),
    "dropped_events_are_sent_again": guarded(_dropped_events_are_sent_again),
}


def pleg_kit_options(**settings: Any) -> dict[str, Any]:
    """Options for one check of the kit: a fresh ``clock`` and ``runtime``, and the settings.

    Call it once per check (``kit_options`` of :data:`PLEGConformance` is called
    once per test): the clock and runtime must not be shared between checks.

    Args:
        **settings: The settings of the module docstring's table.

    Raises:
        ValueError: an unknown setting, or ``clock``/``runtime`` given (use
            ``runtime_factory``).
    """
    return options_with_env(settings)


async def check_pleg(
    factory: Callable[..., PLEG | Awaitable[PLEG]],
    *,
    names: Sequence[str] | None = None,
    **settings: Any,
) -> ConformanceReport:
    """Run the PLEG kit against ``factory``'s implementation.

    Args:
        factory: Builds the PLEG under test; called once per check with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` (if it takes an argument),
            whose ``options["runtime"]`` and ``options["clock"]`` it must use. May be
            async.
        names: The checks to run (default: all of :data:`CHECKS`).
        **settings: The settings of the module docstring's table.

    Returns:
        Every check's result.

    Raises:
        ConformanceFailure: a check failed (the report is on the exception).
        ValueError: an unknown check name or setting.
    """
    options_with_env(settings)  # refuse bad settings before running anything

    def build(ctx: KitContext[PLEG]) -> PLEG | Awaitable[PLEG]:
        # A fresh clock and runtime for every check.
        ctx.options = options_with_env(settings)
        return factory(ctx) if _takes_argument(factory) else factory()

    report = await run_kit(CHECKS, build, names=names, options=settings)
    report.raise_for_failures()
    return report


PLEGConformance = kit_test_class(
    "PLEGConformance",
    CHECKS,
    doc="""Base class of pytest tests running the PLEG kit, one test per check.

    Define ``make(self, ctx)`` returning the PLEG under test, built on
    ``ctx.options["runtime"]`` and ``ctx.options["clock"]``; override
    ``kit_options(self)`` only to change settings, returning
    ``pleg_kit_options(...)`` (which builds the fresh clock and runtime).
    """,
    options=lambda self: pleg_kit_options(),
)
