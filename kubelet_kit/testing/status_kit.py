"""The conformance kit of a pod status sink (the pod syncer's ``pod_cache=``).

What the agent relies on when the syncer writes the runtime statuses it reads to
a :class:`~kubelet_kit.podsync.syncer.PodStatusSink` (the PLEG's pod cache): a
write is a plain call that never blocks; a status is never replaced by one
observed earlier (an evented PLEG and the syncer write from two sides, out of
order, and an older status read back would make the agent start a container a
second time); a write at the same time or later replaces what is held, a
failed inspection (``status`` None with its error) included; pods are
independent. ``set`` says whether it took the write.

The return values are the contract the kit checks; when it can also read back
what is held (``latest(uid).status`` as
:class:`~kubelet_kit.testing.FakeStatusSink` offers, ``get(uid).status`` as
:class:`~kubelet_kit.pleg.PodCache` offers, or a ``read(sink, uid)`` option) it
checks that too. For example::

    from kubelet_kit.testing.status_kit import PodStatusSinkConformance

    class TestMyCache(PodStatusSinkConformance):
        def make(self):
            return MyCache()
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "PodStatusSinkConformance", "check_pod_status_sink"]

T0 = 1_767_225_600.0


def _status(uid: str, ip: str) -> PodRuntimeStatus:
    # The address tells the statuses apart when read back.
    return PodRuntimeStatus(uid=uid, name=f"pod-{uid}", namespace="kit", ips=(ip,))


def _set(
    ctx: KitContext[Any],
    uid: str,
    status: PodRuntimeStatus | None,
    timestamp: float,
    error: Exception | None = None,
) -> bool:
    try:
        taken = ctx.subject.set(uid, status, error, timestamp)
    except Exception as exc:
        ctx.fail(f"set({uid!r}, ..., {timestamp}) raised {type(exc).__name__}: {exc}")
    ctx.expect(
        isinstance(taken, bool),
        f"set() returned {taken!r}: it must say whether it took the status (a bool)",
    )
    return bool(taken)


def _held(ctx: KitContext[Any], uid: str) -> tuple[bool, PodRuntimeStatus | None]:
    """(whether the sink can be read, the status held for ``uid``)."""
    read: Callable[[Any, str], PodRuntimeStatus | None] | None = ctx.options.get("read")
    if read is not None:
        return True, read(ctx.subject, uid)
    for name in ("latest", "get"):
        method = getattr(ctx.subject, name, None)
        if callable(method):
            entry = method(uid)
            return True, None if entry is None else entry.status
    return False, None


def _expect_held(ctx: KitContext[Any], uid: str, want: PodRuntimeStatus | None) -> None:
    readable, held = _held(ctx, uid)
    if readable:
        ctx.expect_eq(f"status held for {uid}", held, want)


async def _check_is_synchronous(ctx: KitContext[Any]) -> None:
    ctx.at("look at set()")
    method = getattr(ctx.subject, "set", None)
    ctx.expect(callable(method), "the sink has no set() method")
    ctx.expect(
        not inspect.iscoroutinefunction(method),
        "set() is a coroutine function: the syncer calls it without awaiting",
    )


async def _check_first_status_is_taken(ctx: KitContext[Any]) -> None:
    ctx.at("write a pod's first status")
    first = _status("a", "10.0.0.1")
    ctx.expect(_set(ctx, "a", first, T0), "the first status of a pod was refused")
    _expect_held(ctx, "a", first)


async def _check_newer_replaces(ctx: KitContext[Any]) -> None:
    old, new = _status("a", "10.0.0.1"), _status("a", "10.0.0.2")
    ctx.at("write a status, then one observed later")
    _set(ctx, "a", old, T0)
    ctx.expect(_set(ctx, "a", new, T0 + 1), "a newer status was refused")
    _expect_held(ctx, "a", new)


async def _check_older_is_refused(ctx: KitContext[Any]) -> None:
    new, old = _status("a", "10.0.0.2"), _status("a", "10.0.0.1")
    ctx.at("write a status, then one observed earlier")
    _set(ctx, "a", new, T0 + 5)
    ctx.expect(
        not _set(ctx, "a", old, T0 + 4.999),
        "a status observed before the one held was taken",
    )
    _expect_held(ctx, "a", new)
    ctx.at("an older failed inspection")
    ctx.expect(
        not _set(ctx, "a", None, T0 + 1, RuntimeError("inspect failed")),
        "a failed inspection older than the status held was taken",
    )
    _expect_held(ctx, "a", new)


async def _check_same_time_replaces(ctx: KitContext[Any]) -> None:
    first, second = _status("a", "10.0.0.1"), _status("a", "10.0.0.2")
    ctx.at("write two statuses stamped at the same time")
    _set(ctx, "a", first, T0)
    ctx.expect(_set(ctx, "a", second, T0), "a status as new as the one held was refused")
    _expect_held(ctx, "a", second)


async def _check_failed_inspection_is_a_status(ctx: KitContext[Any]) -> None:
    ctx.at("write a status, then a later failed inspection")
    _set(ctx, "a", _status("a", "10.0.0.1"), T0)
    ctx.expect(
        _set(ctx, "a", None, T0 + 1, RuntimeError("inspect failed")),
        "a newer failed inspection was refused",
    )
    _expect_held(ctx, "a", None)
    ctx.at("then a later good status")
    good = _status("a", "10.0.0.3")
    ctx.expect(_set(ctx, "a", good, T0 + 2), "a good status after an error was refused")
    _expect_held(ctx, "a", good)


async def _check_pods_are_independent(ctx: KitContext[Any]) -> None:
    a, b = _status("a", "10.0.0.1"), _status("b", "10.0.0.9")
    ctx.at("write pod a late, then pod b early")
    _set(ctx, "a", a, T0 + 100)
    ctx.expect(_set(ctx, "b", b, T0), "pod b's status was refused for pod a's newer one")
    _expect_held(ctx, "a", a)
    _expect_held(ctx, "b", b)


#: The kit's checks by name, in the order they run.
CHECKS: dict[str, KitCheck[Any]] = {
    "is_synchronous": _check_is_synchronous,
    "first_status_is_taken": _check_first_status_is_taken,
    "newer_replaces": _check_newer_replaces,
    "older_is_refused": _check_older_is_refused,
    "same_time_replaces": _check_same_time_replaces,
    "failed_inspection_is_a_status": _check_failed_inspection_is_a_status,
    "pods_are_independent": _check_pods_are_independent,
}


async def check_pod_status_sink(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the pod status sink kit against sinks made by ``factory``.

    Args:
        factory: Builds a fresh sink per check (called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` if it takes an argument;
            may be async).
        names: The checks to run (default: all of :data:`CHECKS`).
        **options: ``read``: ``read(sink, uid)`` returning the status held for
            ``uid`` (default: ``sink.latest(uid).status`` or
            ``sink.get(uid).status`` when the sink has one of them).

    Returns:
        The report of every check.

    Raises:
        ConformanceFailure: A check failed.
    """
    report = await run_kit(CHECKS, factory, names=names, options=options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it and define ``make(self)`` returning a sink.
PodStatusSinkConformance = kit_test_class(
    "PodStatusSinkConformance",
    CHECKS,
    doc="""Conformance of a pod status sink: one test case per check of
    :mod:`kubelet_kit.testing.status_kit`. Define ``make(self)`` (or
    ``make(self, ctx)``) returning a fresh sink.""",
)
