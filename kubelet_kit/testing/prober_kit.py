"""Conformance kit of the :class:`~kubelet_kit.prober.ProbeManager` interface.

The checks hold a probe manager to what the agent relies on, with the kubelet's
semantics: a container without probes is ready once it runs; readiness is false
until the first success after ``initialDelaySeconds``; ``successThreshold`` and
``failureThreshold`` count consecutive results; a liveness failure is published
once and the probe then waits for the restarted container; the startup probe
gates the others; a prober error counts for nothing; ``remove_pod`` and ``stop``
end probing. Everything runs on a FakeClock, so the kit takes milliseconds.

How a check makes a probe succeed or fail: every probe it writes is an exec probe
(``kit-probe <Kind>``), run in a container of a
:class:`~kubelet_kit.testing.FakeRuntime` whose exec handler the check scripts
(exit 0 succeeds, exit 1 fails, a runtime error is a prober error). The kit's
options hold that runtime and the FakeClock (``options["runtime"]``,
``options["clock"]``); the factory builds the manager on them::

    from kubelet_kit.testing.prober_kit import ProbeManagerConformance

    class TestMyProber(ProbeManagerConformance):
        def make(self, ctx):
            return MyProbeManager(ctx.options["runtime"], clock=ctx.options["clock"])

or ``await check_prober(lambda ctx: MyProbeManager(...))``. Each check gets a new
clock and runtime. The manager learns which containers run only from the pod
statuses passed to ``update_pod_status`` after ``add_pod``, as in the agent;
container ids in those statuses carry a ``fake://`` prefix, and the kit expects
:class:`~kubelet_kit.prober.ProbeUpdate` to carry the runtime's bare id (what the
agent matches against the runtime's containers).

Timing is checked as tightly as the kubelet allows: the first run of a probe may
fall anywhere in its first period (the kubelet spreads first runs after an
agent start), later runs are ``periodSeconds`` apart.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kubelet_kit.api import Container
from kubelet_kit.prober.interfaces import ProbeKind, ProbeManager, ProbeResult
from kubelet_kit.testing._prober_bench import (
    EXEC_ERROR,
    KIT_IMAGE,
    KIT_PROBE_COMMAND,
    STOP_TIMEOUT,
    Bench,
    kit_probe,
    prober_kit_options,
)
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = [
    "CHECKS",
    "KIT_IMAGE",
    "KIT_PROBE_COMMAND",
    "ProbeManagerConformance",
    "check_prober",
    "prober_kit_options",
    "run_prober_kit",
]

_S, _F = ProbeResult.SUCCESS, ProbeResult.FAILURE
_L, _R, _ST = ProbeKind.LIVENESS, ProbeKind.READINESS, ProbeKind.STARTUP

# ---------------------------------------------------------------- the checks


async def _no_probes_ready_once_running(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    pod = b.pod(Container(name="app"))
    ctx.at("fold a status whose container is still being created")
    waiting = b.add(pod, {"app": None})["app"]
    ctx.expect(
        (waiting.started, waiting.ready) == (False, False),
        "a container not yet running: started/ready must be False/False, "
        f"got {waiting.started}/{waiting.ready}",
    )
    cid = await b.container("app")
    ctx.at("fold a status whose container runs")
    running = b.fold(pod, b.status({"app": cid}))["app"]
    ctx.expect(
        (running.started, running.ready) == (True, True),
        "a running container without probes is started and ready, "
        f"got {running.started}/{running.ready}",
    )
    await b.advance(60)
    ctx.at("after a minute")
    ctx.expect_eq("exec probes run for a container without probes", len(b.execs), 0)
    ctx.expect_eq("updates published for a container without probes", [u for u, _ in b.updates], [])
    ctx.at("fold a status whose container exited")
    done = b.fold(pod, b.exited("app", cid))["app"]
    ctx.expect(not done.ready, "an exited container is not ready")


async def _readiness_waits_for_first_success(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(
        Container(
            name="app", readiness_probe=kit_probe(_R, initial_delay_seconds=20, period_seconds=10)
        )
    )
    ctx.at("add the pod")
    cs = b.add(pod, {"app": cid})["app"]
    ctx.expect(
        cs.started is True and cs.ready is False,
        f"before any readiness success: started True, ready False; got {cs.started}/{cs.ready}",
    )
    await b.advance(19)
    ctx.at("19 s in, before initialDelaySeconds (20)")
    ctx.expect_eq("readiness runs before initialDelaySeconds", b.times(cid, _R), [])
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].ready is False, "ready before the first success"
    )
    ctx.expect(
        b.first(cid, _R, _S) is None, "a readiness SUCCESS was published before any probe ran"
    )
    ctx.at("wait for the first readiness success (by initialDelaySeconds + periodSeconds)")
    ok = await b.until(lambda: b.first(cid, _R, _S) is not None, 12)
    ctx.expect(ok, f"no readiness SUCCESS update by {b.now():g} s; runs at {b.times(cid, _R)}")
    found = b.first(cid, _R, _S)
    assert found is not None
    b.expect_update(found[0], cid, "app", _R)
    ctx.expect(
        all(t >= 20 for t in b.times(cid, _R)), f"readiness ran before 20 s: {b.times(cid, _R)}"
    )
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].ready is True,
        "not ready after the readiness SUCCESS",
    )


async def _liveness_failure_threshold(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _L, 1, 1, 0, 1, 1, 1, 0)
    pod = b.pod(
        Container(name="app", liveness_probe=kit_probe(_L, period_seconds=10, failure_threshold=3))
    )
    ctx.at("add the pod; liveness fails, fails, succeeds, then fails three times")
    b.add(pod, {"app": cid})
    ok = await b.until(lambda: b.first(cid, _L, _F) is not None, 80)
    ctx.expect(ok, f"no liveness FAILURE update by {b.now():g} s; runs at {b.times(cid, _L)}")
    found = b.first(cid, _L, _F)
    assert found is not None
    update, runs = found
    ctx.expect_eq(
        "liveness runs when the FAILURE was published (F F S F F F, threshold 3)", runs, 6
    )
    b.expect_update(update, cid, "app", _L)
    ctx.expect(
        all(u.result is not _F for u, n in b.published(cid, _L) if n < 6),
        "a liveness FAILURE was published before three consecutive failures",
    )


async def _liveness_failure_holds_until_restart(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _L, 1)
    pod = b.pod(
        Container(name="app", liveness_probe=kit_probe(_L, period_seconds=10, failure_threshold=1))
    )
    ctx.at("add the pod; liveness fails")
    b.add(pod, {"app": cid})
    ctx.expect(
        await b.until(lambda: b.first(cid, _L, _F) is not None, 30),
        f"no liveness FAILURE update by {b.now():g} s",
    )
    runs = len(b.runs(cid, _L))
    await b.advance(50)
    ctx.at("50 s after the FAILURE, the container not yet restarted")
    ctx.expect_eq(
        "liveness runs against the failed container after its FAILURE", len(b.runs(cid, _L)), runs
    )
    ctx.expect_eq(
        "liveness FAILURE updates for the failed container",
        sum(1 for u, _ in b.published(cid, _L) if u.result is _F),
        1,
    )
    ctx.at("the agent restarts the container (a new id)")
    new = await b.container("app", attempt=1)
    b.script(new, _L, 0)
    b.fold(pod, b.status({"app": new}))
    ctx.expect(
        await b.until(lambda: b.runs(new, _L), 20),
        f"liveness did not probe the restarted container by {b.now():g} s",
    )
    await b.advance(30)
    ctx.expect_eq(
        "liveness runs against the old container after the restart", len(b.runs(cid, _L)), runs
    )
    ctx.expect(
        all(u.result is not _F for u, _ in b.published(new, _L)),
        "a liveness FAILURE was published for the healthy restarted container",
    )


async def _readiness_success_threshold(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _R, 0)
    pod = b.pod(
        Container(
            name="app",
            readiness_probe=kit_probe(
                _R, period_seconds=10, success_threshold=3, failure_threshold=1
            ),
        )
    )
    ctx.at("add the pod; readiness succeeds (successThreshold 3)")
    b.add(pod, {"app": cid})
    ctx.expect(
        await b.until(lambda: len(b.runs(cid, _R)) >= 2, 30), "readiness did not run twice in 30 s"
    )
    if len(b.runs(cid, _R)) == 2:
        ctx.expect(
            b.fold(pod, b.status({"app": cid}))["app"].ready is False,
            "ready after two successes of three",
        )
    ctx.expect(
        await b.until(lambda: b.first(cid, _R, _S) is not None, 30),
        f"no readiness SUCCESS update by {b.now():g} s",
    )
    found = b.first(cid, _R, _S)
    assert found is not None
    ctx.expect_eq("readiness runs when SUCCESS was published", found[1], 3)
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].ready is True, "not ready after the SUCCESS"
    )
    ctx.at("readiness now fails (failureThreshold 1)")
    b.script(cid, _R, 1)
    runs = len(b.runs(cid, _R))
    ctx.expect(
        await b.until(lambda: any(u.result is _F for u, n in b.published(cid, _R) if n > runs), 20),
        f"no readiness FAILURE update by {b.now():g} s",
    )
    failure = next(n for u, n in b.published(cid, _R) if u.result is _F and n > runs)
    ctx.expect_eq("readiness runs when FAILURE was published", failure, runs + 1)
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].ready is False, "still ready after the FAILURE"
    )


async def _startup_gates_the_others(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _ST, 1, 1, 0)
    pod = b.pod(
        Container(
            name="app",
            startup_probe=kit_probe(_ST, period_seconds=5, failure_threshold=10),
            readiness_probe=kit_probe(_R, period_seconds=10),
            liveness_probe=kit_probe(_L, period_seconds=10),
        )
    )
    ctx.at("add the pod; startup fails twice, then succeeds")
    cs = b.add(pod, {"app": cid})["app"]
    ctx.expect(
        (cs.started, cs.ready) == (False, False),
        "before the startup probe succeeds: started/ready False/False, "
        f"got {cs.started}/{cs.ready}",
    )
    ok = await b.until(lambda: b.first(cid, _ST, _S) is not None, 30)
    ctx.expect(ok, f"no startup SUCCESS update by {b.now():g} s; runs at {b.times(cid, _ST)}")
    found = b.first(cid, _ST, _S)
    assert found is not None
    ctx.expect_eq("startup runs when SUCCESS was published", found[1], 3)
    b.expect_update(found[0], cid, "app", _ST)
    started = b.times(cid, _ST)[2]
    early = [t for t in b.times(cid, _R) + b.times(cid, _L) if t < started]
    ctx.expect_eq("liveness/readiness runs before the startup probe succeeded", early, [])
    ctx.at("after the startup SUCCESS")
    cs = b.fold(pod, b.status({"app": cid}))["app"]
    ctx.expect(cs.started is True, "not started after the startup SUCCESS")
    ok = await b.until(lambda: b.first(cid, _R, _S) is not None and b.runs(cid, _L), 25)
    ctx.expect(
        ok,
        f"readiness and liveness did not both run within two periods of the start; "
        f"readiness {b.times(cid, _R)}, liveness {b.times(cid, _L)}",
    )
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].ready is True,
        "not ready after readiness succeeded",
    )
    runs = len(b.runs(cid, _ST))
    await b.advance(30)
    ctx.expect_eq("startup runs after it succeeded", len(b.runs(cid, _ST)), runs)


async def _startup_failure_requests_restart(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _ST, 1)
    pod = b.pod(
        Container(
            name="app",
            startup_probe=kit_probe(_ST, period_seconds=5, failure_threshold=2),
            liveness_probe=kit_probe(_L, period_seconds=5),
        )
    )
    ctx.at("add the pod; startup always fails (failureThreshold 2)")
    b.add(pod, {"app": cid})
    ok = await b.until(lambda: b.first(cid, _ST, _F) is not None, 20)
    ctx.expect(ok, f"no startup FAILURE update by {b.now():g} s; runs at {b.times(cid, _ST)}")
    found = b.first(cid, _ST, _F)
    assert found is not None
    ctx.expect_eq("startup runs when FAILURE was published", found[1], 2)
    runs = len(b.runs(cid, _ST))
    await b.advance(30)
    ctx.at("30 s after the startup FAILURE")
    ctx.expect_eq(
        "startup runs after its FAILURE (the container awaits its restart)",
        len(b.runs(cid, _ST)),
        runs,
    )
    ctx.expect_eq("liveness runs of a container that never started", b.times(cid, _L), [])
    ctx.expect(
        b.fold(pod, b.status({"app": cid}))["app"].started is False,
        "started after a startup FAILURE",
    )


async def _prober_errors_are_discarded(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    b.script(cid, _L, EXEC_ERROR, EXEC_ERROR, 1, EXEC_ERROR, 1, 0)
    pod = b.pod(
        Container(name="app", liveness_probe=kit_probe(_L, period_seconds=10, failure_threshold=2))
    )
    ctx.at("add the pod; liveness errs, errs, fails, errs, fails (failureThreshold 2)")
    b.add(pod, {"app": cid})
    ok = await b.until(lambda: b.first(cid, _L, _F) is not None, 70)
    ctx.expect(
        ok,
        f"no liveness FAILURE update by {b.now():g} s: an error broke the run of "
        f"failures; runs at {b.times(cid, _L)}",
    )
    found = b.first(cid, _L, _F)
    assert found is not None
    ctx.expect_eq(
        "liveness runs when FAILURE was published (errors count for nothing)", found[1], 5
    )


async def _remove_pod_stops_its_probes(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(
        Container(
            name="app",
            liveness_probe=kit_probe(_L, period_seconds=5),
            readiness_probe=kit_probe(_R, period_seconds=5),
        )
    )
    b.add(pod, {"app": cid})
    ctx.at("wait for both probes to run")
    ctx.expect(
        await b.until(lambda: b.runs(cid, _L) and b.runs(cid, _R), 10),
        "liveness and readiness did not both run within a period",
    )
    ctx.at("remove the pod (twice: idempotent)")
    ctx.subject.remove_pod(pod)
    ctx.subject.remove_pod(pod)
    await b.clock.settle()
    execs, updates = len(b.execs), len(b.updates)
    b.script(cid, _L, 1)
    b.script(cid, _R, 1)
    await b.advance(60)
    ctx.at("a minute after remove_pod")
    ctx.expect_eq("probe runs after remove_pod", len(b.execs), execs)
    ctx.expect_eq("updates after remove_pod", [u for u, _ in b.updates[updates:]], [])


async def _add_pod_is_idempotent(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(Container(name="app", liveness_probe=kit_probe(_L, period_seconds=10)))
    ctx.at("add the pod three times")
    b.add(pod, {"app": cid})
    ctx.subject.add_pod(pod)
    await b.advance(5)
    ctx.subject.add_pod(pod)
    await b.advance(45)
    times = b.times(cid, _L)
    gaps = [round(y - x, 6) for x, y in itertools.pairwise(times)]
    ctx.expect(len(times) in (4, 5, 6), f"liveness runs in 50 s with period 10: {times}")
    ctx.expect(all(g == 10 for g in gaps), f"liveness runs not one period apart: {times}")


async def _probes_run_every_period(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(Container(name="app", liveness_probe=kit_probe(_L, period_seconds=7)))
    ctx.at("add the pod; liveness every 7 s")
    b.add(pod, {"app": cid})
    ok = await b.until(lambda: len(b.runs(cid, _L)) >= 5, 40, step=0.5)
    times = b.times(cid, _L)
    ctx.expect(ok, f"fewer than 5 liveness runs by {b.now():g} s: {times}")
    ctx.expect(0 <= times[0] <= 7, f"the first run is not within the first period: {times}")
    gaps = [round(y - x, 6) for x, y in itertools.pairwise(times)]
    ctx.expect(all(g == 7 for g in gaps), f"liveness runs not periodSeconds (7) apart: {times}")


async def _stopped_container_is_not_probed(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(
        Container(
            name="app",
            readiness_probe=kit_probe(_R, period_seconds=5),
            liveness_probe=kit_probe(_L, period_seconds=5),
        )
    )
    ctx.at("add the pod; readiness and liveness succeed")
    b.add(pod, {"app": cid})
    ctx.expect(
        await b.until(lambda: b.first(cid, _R, _S) is not None, 10), "readiness never succeeded"
    )
    ctx.at("the container exits")
    cs = b.fold(pod, b.exited("app", cid))["app"]
    ctx.expect(
        not cs.ready and not cs.started,
        f"an exited container: ready/started {cs.ready}/{cs.started}",
    )
    execs = len(b.execs)
    await b.advance(30)
    ctx.at("30 s after the container exited")
    ctx.expect_eq("probe runs against an exited container", len(b.execs), execs)
    ctx.expect(
        b.fold(pod, b.exited("app", cid))["app"].ready is False, "an exited container is ready"
    )


async def _stop_ends_run_and_updates(ctx: KitContext[ProbeManager]) -> None:
    b = await Bench.open(ctx)
    cid = await b.container("app")
    pod = b.pod(Container(name="app", liveness_probe=kit_probe(_L, period_seconds=5)))
    ctx.at("add the pod; liveness succeeds")
    b.add(pod, {"app": cid})
    ctx.expect(await b.until(lambda: b.runs(cid, _L), 10), "liveness did not run")
    ctx.at("stop")
    await asyncio.wait_for(ctx.subject.stop(), STOP_TIMEOUT)
    await b.clock.settle()
    assert b.run_task is not None and b.consumer is not None
    ctx.expect(b.run_task.done(), "run() did not return after stop()")
    if b.run_task.done() and not b.run_task.cancelled() and b.run_task.exception() is not None:
        ctx.fail(f"run() raised after stop(): {b.run_task.exception()!r}")
    ctx.expect(b.consumer.done(), "the updates() iteration did not end after stop()")
    ctx.at("stop again (idempotent)")
    await asyncio.wait_for(ctx.subject.stop(), STOP_TIMEOUT)
    execs = len(b.execs)
    await b.advance(30)
    ctx.expect_eq("probe runs after stop()", len(b.execs), execs)


#: Every check of the kit, by name, in the order they run.
CHECKS: Final[Mapping[str, KitCheck[ProbeManager]]] = {
    "no_probes_ready_once_running": _no_probes_ready_once_running,
    "readiness_waits_for_first_success": _readiness_waits_for_first_success,
    "liveness_failure_threshold": _liveness_failure_threshold,
    "liveness_failure_holds_until_restart": _liveness_failure_holds_until_restart,
    "readiness_success_threshold": _readiness_success_threshold,
    "startup_gates_the_others": _startup_gates_the_others,
    "startup_failure_requests_restart": _startup_failure_requests_restart,
    "prober_errors_are_discarded": _prober_errors_are_discarded,
    "remove_pod_stops_its_probes": _remove_pod_stops_its_probes,
    "add_pod_is_idempotent": _add_pod_is_idempotent,
    "probes_run_every_period": _probes_run_every_period,
    "stopped_container_is_not_probed": _stopped_container_is_not_probed,
    "stop_ends_run_and_updates": _stop_ends_run_and_updates,
}


async def run_prober_kit(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the kit without raising: each check on fresh :func:`prober_kit_options`
    (overridden by ``options``).

    Args:
        factory: Builds the ProbeManager: called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` (read
            ``ctx.options["clock"]`` and ``ctx.options["runtime"]``) or with no
            argument; may be async.
        names: The checks to run (default: all).
        **options: Options given to every check.

    Returns:
        Every check's result.

    Raises:
        ValueError: an unknown check name.
    """
    return await run_kit(
        CHECKS, factory, names=names, options=lambda: {**prober_kit_options(), **options}
    )


async def check_prober(
    factory: Callable[..., Any], *, names: Sequence[str] | None = None, **options: Any
) -> ConformanceReport:
    """Run the kit against ProbeManagers made by ``factory``.

    Args:
        factory: As for :func:`run_prober_kit`.
        names: The checks to run (default: all).
        **options: Options given to every check.

    Returns:
        The report, when no check failed.

    Raises:
        ConformanceFailure: (an AssertionError) a check failed; the message lists
            every check with what failed.
    """
    report = await run_prober_kit(factory, names=names, **options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it and define ``make(self, ctx)``.
ProbeManagerConformance = kit_test_class(
    "ProbeManagerConformance",
    CHECKS,
    doc=(
        "The ProbeManager kit as pytest cases, one per check. Define ``make(self, ctx)`` "
        "returning the manager built on ``ctx.options['clock']`` (a FakeClock) and "
        "``ctx.options['runtime']`` (a FakeRuntime); override ``kit_options(self)`` to "
        "give other options (start from ``prober_kit_options()``)."
    ),
    options=lambda _self: prober_kit_options(),
)
