"""What the PLEG kit's checks are built from: the kit's options, pods in the fake
runtime, a watcher that reads the PLEG as the agent does, and the PLEG's run task.

Private: the public face is :mod:`kubelet_kit.testing.pleg_kit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.pleg.cache import PodCacheEntry
from kubelet_kit.pleg.interfaces import PLEG, PodLifecycleEvent, PodLifecycleEventType
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime
from kubelet_kit.testing.kit import KitCheck, KitContext

STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED
REMOVED = PodLifecycleEventType.CONTAINER_REMOVED
CHANGED = PodLifecycleEventType.CONTAINER_CHANGED

#: The kit's settings and their defaults (the kubelet's generic PLEG).
DEFAULT_SETTINGS: Mapping[str, Any] = {
    "event_latency": 1.0,
    "relist_period": 1.0,
    "relist_threshold": 180.0,
    "quiet_period": 310.0,
    "channel_capacity": 1000,
    "resends_dropped_events": True,
    "time_limit": 60.0,
}

#: The name of the option that builds each check's runtime from its clock.
RUNTIME_FACTORY = "runtime_factory"


def default_runtime(clock: FakeClock) -> FakeRuntime:
    """The kit's runtime: a :class:`FakeRuntime` on ``clock`` with its event stream on."""
    return FakeRuntime(clock, events=True)


def options_with_env(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the defaults filled in, plus a fresh ``clock`` and ``runtime``.

    Raises:
        ValueError: an unknown setting, or a ``clock``/``runtime`` given as a value
            (each check needs its own: give ``runtime_factory``).
    """
    for name in ("clock", "runtime"):
        if name in settings:
            raise ValueError(
                f"{name}: the PLEG kit builds a fresh clock and runtime for every check; "
                f"give {RUNTIME_FACTORY}=callable(clock) -> FakeRuntime instead"
            )
    unknown = sorted(set(settings) - set(DEFAULT_SETTINGS) - {RUNTIME_FACTORY})
    if unknown:
        raise ValueError(
            f"unknown PLEG kit option(s) {unknown}; known: "
            f"{', '.join(sorted([*DEFAULT_SETTINGS, RUNTIME_FACTORY]))}"
        )
    options = {**DEFAULT_SETTINGS, **settings}
    make_runtime: Callable[[FakeClock], FakeRuntime] = options.get(RUNTIME_FACTORY, default_runtime)
    clock = FakeClock()
    options["clock"] = clock
    options["runtime"] = make_runtime(clock)
    return options


@attrs.frozen
class Env:
    """What one check runs on."""

    pleg: PLEG
    clock: FakeClock
    runtime: FakeRuntime
    latency: float


def setting(ctx: KitContext[PLEG], name: str) -> Any:
    """A setting of the kit (its default when the user gave none)."""
    return ctx.options.get(name, DEFAULT_SETTINGS[name])


def env(ctx: KitContext[PLEG]) -> Env:
    """The check's PLEG, clock and runtime; fails the check if the options lack them."""
    clock, runtime = ctx.options.get("clock"), ctx.options.get("runtime")
    if not isinstance(clock, FakeClock) or not isinstance(runtime, FakeRuntime):
        ctx.fail(
            "the kit's options have no FakeClock 'clock' and FakeRuntime 'runtime': "
            "build them with pleg_kit_options() (kit_options of PLEGConformance)"
        )
    latency = float(ctx.options.get("event_latency", DEFAULT_SETTINGS["event_latency"]))
    return Env(ctx.subject, clock, runtime, latency)


# ------------------------------------------------------------------------ pods


def sandbox_config(uid: str) -> PodSandboxConfig:
    """A sandbox of pod ``uid`` with the kubelet's labels."""
    name = f"pod-{uid}"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name, "default", uid, 0),
        labels={kl.POD_UID: uid, kl.POD_NAME: name, kl.POD_NAMESPACE: "default"},
    )


def container_config(uid: str, name: str, attempt: int) -> ContainerConfig:
    """A container of pod ``uid`` with the kubelet's labels (it runs until stopped)."""
    return ContainerConfig(
        metadata=ContainerMetadata(name, attempt),
        image=ImageSpec("busybox"),
        labels={
            kl.POD_UID: uid,
            kl.POD_NAME: f"pod-{uid}",
            kl.POD_NAMESPACE: "default",
            kl.CONTAINER_NAME: name,
        },
    )


async def add_container(
    runtime: FakeRuntime,
    sandbox_id: str,
    uid: str,
    name: str,
    attempt: int = 0,
    *,
    start: bool = True,
) -> str:
    """Create (and start) a container in the sandbox; its id."""
    cid = await runtime.create_container(
        sandbox_id, container_config(uid, name, attempt), sandbox_config(uid)
    )
    if start:
        await runtime.start_container(cid)
    return cid


async def add_pod(runtime: FakeRuntime, uid: str, *names: str) -> tuple[str, list[str]]:
    """Run a sandbox and start one container per name: (sandbox id, container ids)."""
    sid = await runtime.run_pod_sandbox(sandbox_config(uid))
    return sid, [await add_container(runtime, sid, uid, name) for name in names]


def full_listings(runtime: FakeRuntime) -> int:
    """How many times every sandbox was listed (a relist; an inspection filters)."""
    return sum(
        1
        for call in runtime.calls_to("list_pod_sandboxes")
        if call.args[0] is None
        or (
            call.args[0].id is None
            and call.args[0].state is None
            and not call.args[0].label_selector
        )
    )


# ------------------------------------------------------------------- the PLEG


@attrs.frozen
class Seen:
    """One event as the watcher received it, with what the cache held for its pod then."""

    event: PodLifecycleEvent
    entry: PodCacheEntry
    in_cache: bool


class Watcher:
    """Reads ``pleg.watch()`` in a task, as the agent's sync loop does.

    Each event is checked as it arrives against what every PLEG guarantees: no
    ContainerChanged, and each container's events in the order of its life
    (started, died, removed; a container is started at most once).
    """

    def __init__(self, ctx: KitContext[PLEG], pleg: PLEG) -> None:
        self.pleg = pleg
        self.seen: list[Seen] = []
        self.problems: list[str] = []
        self.error: BaseException | None = None
        self.ended = False
        self._ranks: dict[tuple[str, str], PodLifecycleEventType] = {}
        self._taken = 0
        self.task = asyncio.create_task(self._read(), name="pleg-kit-watcher")
        ctx.defer(self.close)

    async def _read(self) -> None:
        try:
            async for event in self.pleg.watch():
                cache = self.pleg.cache
                self.seen.append(Seen(event, cache.get(event.pod_uid), event.pod_uid in cache))
                self._validate(event)
        except Exception as exc:  # reported by the check that reads it
            self.error = exc
        self.ended = True

    def _validate(self, event: PodLifecycleEvent) -> None:
        if event.type is CHANGED:
            self.problems.append(f"{event} was sent: ContainerChanged is never sent")
            return
        if event.type is PodLifecycleEventType.POD_SYNC:
            return
        key = (event.pod_uid, event.data)
        order = (STARTED, DIED, REMOVED)
        before = self._ranks.get(key)
        if before is not None:
            if event.type is STARTED and before is STARTED:
                self.problems.append(f"container {event.data[:12]} was reported started twice")
            elif order.index(event.type) < order.index(before):
                self.problems.append(
                    f"container {event.data[:12]}: {event.type.value} came after {before.value}"
                )
        if before is None or order.index(event.type) >= order.index(before):
            self._ranks[key] = event.type

    def take(self, ctx: KitContext[PLEG]) -> list[PodLifecycleEvent]:
        """The events received since the last take; fails the check on a bad one."""
        if self.problems:
            more = len(self.problems) - 3
            ctx.fail("; ".join(self.problems[:3]) + (f" (and {more} more)" if more > 0 else ""))
        if self.error is not None:
            ctx.fail(f"watch() raised {type(self.error).__name__}: {self.error}")
        events = [s.event for s in self.seen[self._taken :]]
        self._taken = len(self.seen)
        return events

    async def close(self) -> None:
        """Stop reading (cancels the task)."""
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


async def start(ctx: KitContext[PLEG], e: Env) -> asyncio.Task[None]:
    """Run the PLEG in a task (stopped and awaited after the check); its first
    relist, if any, happens before this returns, without the clock moving."""
    task = asyncio.create_task(e.pleg.run(), name="pleg-kit-run")

    async def cleanup() -> None:
        e.pleg.stop()
        await e.clock.settle()
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task

    ctx.defer(cleanup)
    await e.clock.settle()
    if task.done():
        error = task.exception()
        ctx.fail(
            "run() returned at once"
            if error is None
            else f"run() raised {type(error).__name__}: {error}"
        )
    return task


def guarded(check: KitCheck[PLEG]) -> KitCheck[PLEG]:
    """``check`` under the ``time_limit`` setting, in real seconds: a PLEG that keeps
    the event loop busy without ever waiting on the clock fails instead of hanging."""

    @functools.wraps(check)
    async def run(ctx: KitContext[PLEG]) -> None:
        limit = float(setting(ctx, "time_limit"))
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                await check(ctx)
        except TimeoutError:
            if not deadline.expired():
                raise
            ctx.fail(
                f"still running after {limit:g}s of real time: the implementation keeps "
                "the event loop busy without waiting on the clock"
            )

    return run


def only(events: list[PodLifecycleEvent], container_id: str) -> list[PodLifecycleEventType]:
    """The types of the events of one container (or sandbox), in order."""
    return [e.type for e in events if e.data == container_id]


def describe(events: list[PodLifecycleEvent]) -> str:
    """Events as ``Type(pod, id…)``, for messages."""
    return "[" + ", ".join(f"{e.type.value}({e.pod_uid}, {e.data[:12]})" for e in events) + "]"
