"""The conformance kit of an event recorder (the pod syncer's ``events=``).

What the agent relies on when it sends events to an
:class:`~kubelet_kit.podsync.syncer.EventRecorder`: ``event()`` is synchronous
and never raises (the syncer calls it in the middle of a sync, unguarded), the
events are kept in the order recorded and attributed to their pod and
container, and, as client-go's recorder, only ``Normal`` and ``Warning`` events
are taken: one of another type is dropped, without an error to the caller.

The kit reads back what was recorded with ``subject.events()`` (as
:class:`~kubelet_kit.podsync.syncer.EventLog` offers it), each event having
``pod_uid``, ``type``, ``reason``, ``message`` and ``container``; a recorder
without it gives the kit a ``read`` option (``read(recorder)`` returning those
events, oldest first). Without either, the checks that read back are skipped.
For example::

    from kubelet_kit.testing.events_kit import EventRecorderConformance

    class TestMyRecorder(EventRecorderConformance):
        def make(self):
            return MyRecorder()

        def kit_options(self):
            return {"read": lambda r: r.sent}
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "EventRecorderConformance", "check_event_recorder"]

_Fields = tuple[str, str, str, str, str]


def _pod(name: str) -> Any:
    from kubelet_kit.api.loading import load_pod

    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "kit", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
    )


def _read(ctx: KitContext[Any]) -> list[_Fields]:
    read: Callable[[Any], Sequence[Any]] | None = ctx.options.get("read")
    if read is None:
        events = getattr(ctx.subject, "events", None)
        if not callable(events):
            ctx.skip("the recorder has no events() and no read option was given")
        found: Sequence[Any] = events()
    else:
        found = read(ctx.subject)
    return [(e.pod_uid, e.type, e.reason, e.message, e.container) for e in found]


def _record(ctx: KitContext[Any], pod: Any, *event: str, container: str = "") -> None:
    type_, reason, message = event
    try:
        outcome = ctx.subject.event(pod, type_, reason, message, container=container)
    except Exception as exc:
        ctx.fail(f"event({type_!r}, {reason!r}) raised {type(exc).__name__}: {exc}")
    ctx.expect(
        not inspect.isawaitable(outcome),
        "event() returned an awaitable: it must be a plain call that never blocks",
    )


async def _check_keeps_events_in_order(ctx: KitContext[Any]) -> None:
    pod = _pod("web")
    ctx.at("record three events of one pod")
    _record(ctx, pod, "Normal", "Pulling", 'Pulling image "busybox"', container="app")
    _record(ctx, pod, "Normal", "Started", "Started container app", container="app")
    _record(ctx, pod, "Warning", "FailedMount", "Unable to attach or mount volumes")
    ctx.at("read them back")
    ctx.expect_eq(
        "events (pod uid, type, reason, message, container)",
        _read(ctx),
        [
            ("uid-web", "Normal", "Pulling", 'Pulling image "busybox"', "app"),
            ("uid-web", "Normal", "Started", "Started container app", "app"),
            ("uid-web", "Warning", "FailedMount", "Unable to attach or mount volumes", ""),
        ],
    )


async def _check_keeps_pods_apart(ctx: KitContext[Any]) -> None:
    a, b = _pod("a"), _pod("b")
    ctx.at("record events of two pods, interleaved")
    _record(ctx, a, "Normal", "Killing", "Stopping container app", container="app")
    _record(ctx, b, "Warning", "BackOff", "Back-off restarting failed container", container="app")
    _record(ctx, a, "Warning", "Evicted", "The node was low on resource: memory.")
    ctx.at("read them back")
    got = _read(ctx)
    ctx.expect_eq(
        "reasons of pod a", [e[2] for e in got if e[0] == "uid-a"], ["Killing", "Evicted"]
    )
    ctx.expect_eq("reasons of pod b", [e[2] for e in got if e[0] == "uid-b"], ["BackOff"])


async def _check_takes_normal_and_warning_only(ctx: KitContext[Any]) -> None:
    pod = _pod("web")
    ctx.at("record events of unsupported types")
    _record(ctx, pod, "Error", "Failed", "not a type the API knows")
    _record(ctx, pod, "normal", "Started", "types are case-sensitive")
    _record(ctx, pod, "", "Started", "no type at all")
    ctx.at("record a Normal event after them")
    _record(ctx, pod, "Normal", "Started", "Started container app", container="app")
    ctx.at("read them back")
    ctx.expect_eq(
        "events kept (the unsupported ones dropped)",
        _read(ctx),
        [("uid-web", "Normal", "Started", "Started container app", "app")],
    )


async def _check_never_raises(ctx: KitContext[Any]) -> None:
    pod = _pod("web")
    ctx.at("record events with empty, long and non-ASCII text")
    _record(ctx, pod, "Normal", "", "")
    _record(ctx, pod, "Warning", "Failed", "x" * 100_000, container="app")
    _record(ctx, pod, "Normal", "Pulled", "image « bûsybox » 🐳", container="app")
    ctx.at("record the same event many times")
    for _ in range(500):
        _record(ctx, pod, "Warning", "BackOff", "Back-off restarting failed container")


async def _check_is_synchronous(ctx: KitContext[Any]) -> None:
    ctx.at("look at event()")
    method = getattr(ctx.subject, "event", None)
    ctx.expect(callable(method), "the recorder has no event() method")
    ctx.expect(
        not inspect.iscoroutinefunction(method),
        "event() is a coroutine function: the agent calls it without awaiting",
    )
    ctx.at("call it")
    _record(ctx, _pod("web"), "Normal", "Created", "Created container app", container="app")


#: The kit's checks by name, in the order they run.
CHECKS: dict[str, KitCheck[Any]] = {
    "is_synchronous": _check_is_synchronous,
    "keeps_events_in_order": _check_keeps_events_in_order,
    "keeps_pods_apart": _check_keeps_pods_apart,
    "takes_normal_and_warning_only": _check_takes_normal_and_warning_only,
    "never_raises": _check_never_raises,
}


async def check_event_recorder(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the event recorder kit against recorders made by ``factory``.

    Args:
        factory: Builds a fresh recorder per check (called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` if it takes an argument;
            may be async).
        names: The checks to run (default: all of :data:`CHECKS`).
        **options: ``read``: ``read(recorder)`` returning the events recorded,
            oldest first, each with ``pod_uid``, ``type``, ``reason``,
            ``message`` and ``container`` (default: ``recorder.events()``).

    Returns:
        The report of every check.

    Raises:
        ConformanceFailure: A check failed.
    """
    report = await run_kit(CHECKS, factory, names=names, options=options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it, define ``make(self)`` returning a recorder
#: (and ``kit_options(self)`` for ``read``), and pytest runs one case per check.
EventRecorderConformance = kit_test_class(
    "EventRecorderConformance",
    CHECKS,
    doc="""Conformance of an event recorder: one test case per check of
    :mod:`kubelet_kit.testing.events_kit`. Define ``make(self)`` (or
    ``make(self, ctx)``) returning a fresh recorder.""",
)
