"""Conformance kit of the :class:`~kubelet_kit.eviction.EvictionManager` interface.

The checks hold an eviction manager to what the agent relies on, with the
kubelet's semantics: below a hard ``memory.available`` threshold the pod the
kubelet ranks first is evicted (usage above requests first, the larger excess
first), one pod per monitoring round, with reason ``Evicted``, the kubelet's
message and a ``DisruptionTarget`` condition; ``MemoryPressure`` is reported
while under pressure and for the transition period after; a soft threshold acts
only after its grace period, with the pod's grace period capped; admission
refuses BestEffort pods under memory pressure; critical pods are spared; a
failed measurement or kill does not stop monitoring; ``stop`` is idempotent.

What the node measures is a :class:`~kubelet_kit.testing.FakeStatsProvider` the
checks script, time is a :class:`~kubelet_kit.testing.FakeClock`, and the
configuration the checks are written for is a KubeletConfiguration; all three
come in the kit's options (``options["stats"]``, ``options["clock"]``,
``options["config"]``), fresh for each check (:func:`eviction_kit_options`), and
the factory builds the manager on them::

    from kubelet_kit.testing.eviction_kit import EvictionManagerConformance

    class TestMyEviction(EvictionManagerConformance):
        def make(self, ctx):
            return MyEvictionManager(ctx.options["stats"], ctx.options["clock"],
                                     ctx.options["config"])

The configuration: ``evictionHard: memory.available<100Mi``, ``evictionSoft:
memory.available<1Gi`` with a 30 s grace period, ``evictionMaxPodGracePeriod:
20``, ``evictionPressureTransitionPeriod: 5m``; rounds every 10 s (the
kubelet's monitoring interval), the first as ``run`` starts (it may come up to
one interval later).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from kubelet_kit.api import (
    Container,
    ObjectMeta,
    Pod,
    PodCondition,
    PodSpec,
    Quantity,
    ResourceRequirements,
)
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.eviction.interfaces import EvictionManager
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.fake_stats import FakeStatsProvider
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = [
    "CHECKS",
    "MAX_POD_GRACE_PERIOD",
    "MONITORING_INTERVAL",
    "SOFT_GRACE_PERIOD",
    "TRANSITION_PERIOD",
    "EvictionManagerConformance",
    "check_eviction",
    "eviction_kit_config",
    "eviction_kit_options",
    "run_eviction_kit",
]

#: Seconds between the rounds of the manager under test (the kubelet's).
MONITORING_INTERVAL: Final = 10.0
TRANSITION_PERIOD: Final = 300.0
SOFT_GRACE_PERIOD: Final = 30.0
MAX_POD_GRACE_PERIOD: Final = 20
_STOP_TIMEOUT: Final = 10.0
_MEMORY_PRESSURE: Final = "MemoryPressure"


def eviction_kit_config() -> KubeletConfiguration:
    """The configuration the kit's checks are written for."""
    return KubeletConfiguration(
        eviction_hard={"memory.available": "100Mi"},
        eviction_soft={"memory.available": "1Gi"},
        eviction_soft_grace_period={"memory.available": "30s"},
        eviction_max_pod_grace_period=MAX_POD_GRACE_PERIOD,
        eviction_pressure_transition_period="5m0s",
    )


def eviction_kit_options() -> dict[str, Any]:
    """Fresh options for one check: a FakeClock, a FakeStatsProvider on it (a
    roomy node: 4Gi of 8Gi memory available) and :func:`eviction_kit_config`."""
    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    stats.set_memory(available="4Gi", capacity="8Gi")
    return {"clock": clock, "stats": stats, "config": eviction_kit_config()}


def _pod(
    name: str,
    *,
    requests: str | None = None,
    limits: str | None = None,
    grace: int = 30,
    annotations: Mapping[str, str] | None = None,
    tolerations: tuple[Mapping[str, str], ...] = (),
) -> Pod:
    res = ResourceRequirements(
        requests={"memory": Quantity.parse(requests)} if requests else {},
        limits={"memory": Quantity.parse(limits), "cpu": Quantity.parse("1")} if limits else {},
    )
    if limits:
        res = attrs.evolve(res, requests={**res.requests, "cpu": Quantity.parse("1")})
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace="kit", uid=f"kit-{name}", annotations=dict(annotations or {})
        ),
        spec=PodSpec(
            termination_grace_period_seconds=grace,
            tolerations=tolerations,
            containers=(Container(name=f"{name}-c", image="busybox", resources=res),),
        ),
    )


@attrs.frozen
class _Kill:
    pod: Pod
    grace: float
    reason: str
    message: str
    condition: PodCondition | None
    time: float


@attrs.define(eq=False)
class _Node:
    """One check's node: its pods, its stats, and a kill_pod that records."""

    ctx: KitContext[EvictionManager]
    clock: FakeClock
    stats: FakeStatsProvider
    start: float
    pods: list[Pod] = attrs.field(factory=list)
    kills: list[_Kill] = attrs.field(factory=list)
    kill_errors: int = 0
    run_task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, ctx: KitContext[EvictionManager], *pods: tuple[Pod, str]) -> _Node:
        clock, stats = ctx.options.get("clock"), ctx.options.get("stats")
        if not isinstance(clock, FakeClock) or not isinstance(stats, FakeStatsProvider):
            ctx.fail(
                "options: the kit needs a FakeClock as 'clock' and a FakeStatsProvider as 'stats'"
            )
        node = cls(ctx, clock, stats, clock.monotonic())
        for pod, memory in pods:
            node.pods.append(pod)
            stats.set_pod(pod, memory=memory)
        ctx.defer(node.close)
        return node

    async def run(self) -> None:
        self.ctx.at("run the manager")
        self.run_task = asyncio.ensure_future(self.ctx.subject.run(self.kill_pod, self.active))
        await self.clock.settle()

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.ctx.subject.stop(), _STOP_TIMEOUT)
        finally:
            if self.run_task is not None and not self.run_task.done():
                self.run_task.cancel()

    def active(self) -> list[Pod]:
        return list(self.pods)

    async def kill_pod(
        self,
        pod: Pod,
        grace_period: float,
        reason: str,
        message: str,
        /,
        *,
        condition: PodCondition | None = None,
    ) -> None:
        self.kills.append(
            _Kill(
                pod, grace_period, reason, message, condition, self.clock.monotonic() - self.start
            )
        )
        if self.kill_errors:
            self.kill_errors -= 1
            raise RuntimeUnavailableError("kit: the runtime failed to stop the pod")
        if pod in self.pods:
            self.pods.remove(pod)
        self.stats.remove_pod(pod)

    @property
    def evicted(self) -> list[str]:
        return [k.pod.name for k in self.kills]

    def now(self) -> float:
        return self.clock.monotonic() - self.start

    async def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` seconds after the check started."""
        await self.clock.run_for(max(0.0, t - self.now()))

    def conditions(self) -> frozenset[str]:
        return frozenset(self.ctx.subject.node_conditions())

    def expect_running(self) -> None:
        task = self.run_task
        if task is not None and task.done():
            error = None if task.cancelled() else task.exception()
            self.ctx.fail(f"run() ended while monitoring should go on: {error!r}")


def _expect_memory_eviction(ctx: KitContext[EvictionManager], kill: _Kill, hard: bool) -> None:
    ctx.expect_eq("kill reason", kill.reason, "Evicted")
    prefix = "The node was low on resource: memory. "
    ctx.expect(
        kill.message.startswith(prefix),
        f"kill message {kill.message!r} does not start with {prefix!r}",
    )
    named = f"Container {kill.pod.spec.containers[0].name} was using "
    ctx.expect(named in kill.message, f"kill message {kill.message!r} does not say {named!r}...")
    if hard:
        ctx.expect(
            0 <= kill.grace <= 1, f"grace period of a hard eviction: {kill.grace} (want 0, or 1 s)"
        )
    c = kill.condition
    ctx.expect(
        c is not None
        and (c.type, c.status, c.reason) == ("DisruptionTarget", "True", "TerminationByKubelet"),
        f"kill condition: want DisruptionTarget True TerminationByKubelet, got {c!r}",
    )


# ---------------------------------------------------------------- the checks


async def _no_pressure_no_eviction(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx, (_pod("a"), "1Gi"), (_pod("b", requests="100Mi"), "2Gi"))
    await node.run()
    await node.advance_to(60)
    ctx.at("a minute on a roomy node")
    ctx.expect_eq("pods evicted", node.evicted, [])
    ctx.expect_eq("node conditions", node.conditions(), frozenset())
    result = ctx.subject.admit(_pod("newcomer"))
    ctx.expect(result.admit, f"a BestEffort pod refused without pressure: {result}")
    node.expect_running()


async def _hard_threshold_evicts_the_top_ranked_pod(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(
        ctx,
        (_pod("guaranteed", requests="1Gi", limits="1Gi"), "500Mi"),
        (_pod("burstable", requests="200Mi"), "400Mi"),
        (_pod("besteffort"), "300Mi"),
    )
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    await node.run()
    await node.advance_to(MONITORING_INTERVAL - 1)
    ctx.at("within the first round below memory.available<100Mi")
    ctx.expect_eq("pods evicted in the first round", node.evicted, ["besteffort"])
    _expect_memory_eviction(ctx, node.kills[0], hard=True)
    ctx.expect(
        _MEMORY_PRESSURE in node.conditions(),
        f"node conditions {set(node.conditions())} lack MemoryPressure",
    )


async def _one_pod_per_round_in_rank_order(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(
        ctx,
        (_pod("under", requests="1Gi"), "100Mi"),
        (_pod("guaranteed", requests="1Gi", limits="1Gi"), "900Mi"),
        (_pod("small-excess", requests="100Mi"), "150Mi"),
        (_pod("besteffort"), "300Mi"),
        (_pod("big-excess", requests="200Mi"), "600Mi"),
    )
    node.stats.set_memory(available="50Mi", capacity="8Gi")  # evictions free nothing
    await node.run()
    want = ["big-excess", "besteffort", "small-excess", "guaranteed", "under"]
    for n in range(1, 6):
        await node.advance_to(n * MONITORING_INTERVAL - 1)
        ctx.at(f"round {n}")
        ctx.expect_eq(f"pods evicted after {n} round(s)", node.evicted, want[:n])
    times = [k.time for k in node.kills]
    ctx.expect(
        all(b - a >= MONITORING_INTERVAL - 1e-6 for a, b in itertools.pairwise(times)),
        f"evictions less than a monitoring interval apart: {times}",
    )
    for kill in node.kills:
        ctx.expect_eq(f"kill reason of {kill.pod.name}", kill.reason, "Evicted")


async def _pressure_condition_holds_for_transition(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx)
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    await node.run()
    await node.advance_to(MONITORING_INTERVAL - 1)
    ctx.at("under memory pressure")
    ctx.expect_eq("node conditions", node.conditions(), frozenset({_MEMORY_PRESSURE}))
    relieved = node.now()
    node.stats.set_memory(available="4Gi", capacity="8Gi")
    await node.advance_to(relieved + TRANSITION_PERIOD - MONITORING_INTERVAL - 2)
    ctx.at("pressure gone, within the transition period (5m)")
    ctx.expect_eq("node conditions", node.conditions(), frozenset({_MEMORY_PRESSURE}))
    refused = ctx.subject.admit(_pod("besteffort"))
    ctx.expect(not refused.admit, "a BestEffort pod admitted while MemoryPressure is reported")
    await node.advance_to(relieved + TRANSITION_PERIOD + MONITORING_INTERVAL + 1)
    ctx.at("after the transition period")
    ctx.expect_eq("node conditions", node.conditions(), frozenset())
    admitted = ctx.subject.admit(_pod("besteffort"))
    ctx.expect(admitted.admit, f"a BestEffort pod refused once the pressure cleared: {admitted}")


async def _soft_threshold_waits_for_its_grace_period(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(
        ctx,
        (_pod("slow", requests="100Mi", grace=60), "2Gi"),
        (_pod("quick", requests="100Mi", grace=5), "1Gi"),
    )
    node.stats.set_memory(available="500Mi", capacity="8Gi")  # below 1Gi soft, above 100Mi hard
    await node.run()
    await node.advance_to(MONITORING_INTERVAL - 1)
    ctx.at("soft threshold met, grace period (30 s) running")
    ctx.expect_eq("node conditions", node.conditions(), frozenset({_MEMORY_PRESSURE}))
    await node.advance_to(SOFT_GRACE_PERIOD - 1)
    ctx.expect_eq("pods evicted before the soft grace period passed", node.evicted, [])
    await node.advance_to(SOFT_GRACE_PERIOD + 2 * MONITORING_INTERVAL - 1)
    ctx.at("after the soft grace period")
    ctx.expect(node.evicted[:1] == ["slow"], f"pods evicted: {node.evicted} (want slow first)")
    _expect_memory_eviction(ctx, node.kills[0], hard=False)
    ctx.expect_eq(
        "grace period of a soft eviction (min(evictionMaxPodGracePeriod 20, pod's 60))",
        node.kills[0].grace,
        float(MAX_POD_GRACE_PERIOD),
    )
    await node.advance_to(SOFT_GRACE_PERIOD + 3 * MONITORING_INTERVAL - 1)
    ctx.expect_eq(
        "pods evicted after two rounds past the grace period", node.evicted, ["slow", "quick"]
    )
    ctx.expect_eq("grace period of a soft eviction (the pod's own 5 s)", node.kills[1].grace, 5.0)


async def _admission_under_memory_pressure(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx)
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    await node.run()
    await node.advance_to(MONITORING_INTERVAL - 1)
    ctx.at("admit under MemoryPressure")
    refused = ctx.subject.admit(_pod("besteffort"))
    ctx.expect_eq(
        "admit a BestEffort pod",
        (refused.admit, refused.reason, refused.message),
        (False, "Evicted", "The node had condition: [MemoryPressure]. "),
    )
    for pod, why in (
        (_pod("burstable", requests="100Mi"), "a Burstable pod"),
        (_pod("guaranteed", requests="1Gi", limits="1Gi"), "a Guaranteed pod"),
        (
            _pod("static", annotations={"kubernetes.io/config.source": "file"}),
            "a static (critical) pod",
        ),
        (
            _pod(
                "tolerant",
                tolerations=(
                    {
                        "key": "node.kubernetes.io/memory-pressure",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                    },
                ),
            ),
            "a BestEffort pod tolerating node.kubernetes.io/memory-pressure",
        ),
    ):
        result = ctx.subject.admit(pod)
        ctx.expect(result.admit, f"{why} refused under memory pressure alone: {result}")


async def _critical_pods_are_spared(ctx: KitContext[EvictionManager]) -> None:
    static = _pod("static", annotations={"kubernetes.io/config.source": "file"})
    node = await _Node.open(ctx, (static, "3Gi"), (_pod("other", requests="100Mi"), "200Mi"))
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    await node.run()
    await node.advance_to(4 * MONITORING_INTERVAL - 1)
    ctx.at("four rounds under hard pressure")
    ctx.expect_eq("pods evicted (the static pod never)", node.evicted, ["other"])
    node.expect_running()


async def _stats_failure_skips_a_round(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx, (_pod("besteffort"), "300Mi"))
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    node.stats.inject_error("summary", RuntimeUnavailableError("kit: stats unavailable"))
    await node.run()
    await node.advance_to(MONITORING_INTERVAL - 1)
    ctx.at("the first measurement failed")
    node.expect_running()
    ctx.expect_eq("pods evicted on a failed measurement", node.evicted, [])
    await node.advance_to(2 * MONITORING_INTERVAL - 1)
    ctx.at("the next round")
    ctx.expect_eq("pods evicted in the round after the failure", node.evicted, ["besteffort"])


async def _failed_kill_does_not_stop_monitoring(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx, (_pod("a"), "300Mi"), (_pod("b"), "200Mi"))
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    node.kill_errors = 1
    await node.run()
    await node.advance_to(3 * MONITORING_INTERVAL - 1)
    ctx.at("three rounds, the first kill failing")
    node.expect_running()
    ctx.expect(len(node.kills) >= 2, f"kills after a failed one: {node.evicted}")
    ctx.expect_eq("the pod of the failed kill", node.evicted[0], "a")


async def _stop_is_idempotent(ctx: KitContext[EvictionManager]) -> None:
    node = await _Node.open(ctx, (_pod("besteffort"), "300Mi"))
    await node.run()
    await node.advance_to(MONITORING_INTERVAL + 1)
    ctx.at("stop")
    await asyncio.wait_for(ctx.subject.stop(), _STOP_TIMEOUT)
    await node.clock.settle()
    task = node.run_task
    assert task is not None
    ctx.expect(task.done(), "run() did not return after stop()")
    if task.done() and not task.cancelled() and task.exception() is not None:
        ctx.fail(f"run() raised after stop(): {task.exception()!r}")
    ctx.at("stop again")
    await asyncio.wait_for(ctx.subject.stop(), _STOP_TIMEOUT)
    measured = len(node.stats.calls)
    node.stats.set_memory(available="50Mi", capacity="8Gi")
    await node.advance_to(node.now() + 3 * MONITORING_INTERVAL)
    ctx.expect_eq("measurements after stop()", len(node.stats.calls), measured)
    ctx.expect_eq("pods evicted after stop()", node.evicted, [])


#: Every check of the kit, by name, in the order they run.
CHECKS: Final[Mapping[str, KitCheck[EvictionManager]]] = {
    "no_pressure_no_eviction": _no_pressure_no_eviction,
    "hard_threshold_evicts_the_top_ranked_pod": _hard_threshold_evicts_the_top_ranked_pod,
    "one_pod_per_round_in_rank_order": _one_pod_per_round_in_rank_order,
    "pressure_condition_holds_for_transition_period": _pressure_condition_holds_for_transition,
    "soft_threshold_waits_for_its_grace_period": _soft_threshold_waits_for_its_grace_period,
    "admission_under_memory_pressure": _admission_under_memory_pressure,
    "critical_pods_are_spared": _critical_pods_are_spared,
    "stats_failure_skips_a_round": _stats_failure_skips_a_round,
    "failed_kill_does_not_stop_monitoring": _failed_kill_does_not_stop_monitoring,
    "stop_is_idempotent": _stop_is_idempotent,
}


async def run_eviction_kit(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the kit without raising: each check on fresh :func:`eviction_kit_options`
    (overridden by ``options``).

    Args:
        factory: Builds the EvictionManager: called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` (read
            ``ctx.options["stats"]``, ``["clock"]`` and ``["config"]``) or with
            no argument; may be async.
        names: The checks to run (default: all).
        **options: Options given to every check.

    Returns:
        Every check's result.

    Raises:
        ValueError: an unknown check name.
    """
    return await run_kit(
        CHECKS, factory, names=names, options=lambda: {**eviction_kit_options(), **options}
    )


async def check_eviction(
    factory: Callable[..., Any], *, names: Sequence[str] | None = None, **options: Any
) -> ConformanceReport:
    """Run the kit against EvictionManagers made by ``factory``.

    Args:
        factory: As for :func:`run_eviction_kit`.
        names: The checks to run (default: all).
        **options: Options given to every check.

    Returns:
        The report, when no check failed.

    Raises:
        ConformanceFailure: (an AssertionError) a check failed; the message lists
            every check with what failed.
    """
    report = await run_eviction_kit(factory, names=names, **options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it and define ``make(self, ctx)``.
EvictionManagerConformance = kit_test_class(
    "EvictionManagerConformance",
    CHECKS,
    doc=(
        "The EvictionManager kit as pytest cases, one per check. Define ``make(self, ctx)`` "
        "returning the manager built on ``ctx.options['stats']`` (a FakeStatsProvider), "
        "``ctx.options['clock']`` (a FakeClock) and ``ctx.options['config']`` (the "
        "KubeletConfiguration the checks are written for)."
    ),
    options=lambda _self: eviction_kit_options(),
)
