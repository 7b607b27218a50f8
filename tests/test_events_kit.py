"""The event recorder kit against the project's EventLog, the fake, and recorders
that break the contract; and the fake's own call log, lookups and faults."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet_kit.api.loading import load_pod
from kubelet_kit.podsync.syncer import EventLog, RecordedEvent
from kubelet_kit.testing import Call, ConformanceFailure, FakeClock
from kubelet_kit.testing.events_kit import CHECKS, EventRecorderConformance, check_event_recorder
from kubelet_kit.testing.fake_events import FakeEventRecorder
from kubelet_kit.testing.kit import run_kit


class TestEventLog(EventRecorderConformance):
    def make(self) -> EventLog:
        return EventLog(FakeClock())


class TestFakeEventRecorder(EventRecorderConformance):
    def make(self) -> FakeEventRecorder:
        return FakeEventRecorder()


class TypeBlind(EventLog):
    """Keeps events of any type (what EventLog did before the kit)."""

    def event(
        self, pod: Any, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        super().event(pod, "Normal", reason, message, container=container)


class Newest(EventLog):
    """Answers newest first."""

    def events(self, pod_uid: str | None = None) -> list[RecordedEvent]:
        return list(reversed(super().events(pod_uid)))


class Raising(EventLog):
    def event(
        self, pod: Any, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        if len(message) > 1000:
            raise ValueError("message too long")
        super().event(pod, event_type, reason, message, container=container)


class Sent:
    """A recorder without events(): the kit reads it with the read option."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self._log = EventLog(FakeClock())

    def event(
        self, pod: Any, event_type: str, reason: str, message: str, *, container: str = ""
    ) -> None:
        self._log.event(pod, event_type, reason, message, container=container)
        self.sent = self._log.events()


@pytest.mark.parametrize(
    ("broken", "check", "message"),
    [
        (TypeBlind, "takes_normal_and_warning_only", "the unsupported ones dropped"),
        (Newest, "keeps_events_in_order", "expected [('uid-web', 'Normal', 'Pulling'"),
        (Raising, "never_raises", "raised ValueError: message too long"),
    ],
)
async def test_the_kit_catches_a_broken_recorder(broken: type, check: str, message: str) -> None:
    with pytest.raises(ConformanceFailure):
        await check_event_recorder(lambda: broken(FakeClock()))
    report = await run_kit(CHECKS, lambda: broken(FakeClock()))
    failed = {r.name: r.message for r in report.results if r.status == "failed"}
    assert check in failed and message in failed[check], failed


async def test_an_async_recorder_is_caught() -> None:
    class Async:
        async def event(self, *args: Any, **kwargs: Any) -> None:
            pass

    report = await run_kit(CHECKS, Async, names=["is_synchronous"])
    assert "coroutine function" in report.result("is_synchronous").message


async def test_a_recorder_read_through_the_option() -> None:
    report = await check_event_recorder(Sent, read=lambda r: r.sent)
    assert report.ok
    # Without a way to read back, the checks that need it are skipped.
    report = await check_event_recorder(Sent)
    assert report.result("keeps_events_in_order").status == "skipped"
    assert report.result("never_raises").status == "passed"


def pod(name: str) -> Any:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
    )


def test_the_fake_records_calls_and_offers_lookups() -> None:
    clock = FakeClock()
    rec = FakeEventRecorder(clock)
    web, db = pod("web"), pod("db")
    rec.event(web, "Normal", "Pulling", 'Pulling image "busybox"', container="app")
    clock.advance(1)
    rec.event(db, "Warning", "BackOff", "Back-off restarting failed container", container="app")
    rec.event(web, "Warning", "Failed", "Error: ErrImagePull", container="app")
    rec.event(web, "Bogus", "Odd", "dropped")
    assert rec.reasons() == ["Pulling", "BackOff", "Failed"]
    assert rec.reasons(web) == ["Pulling", "Failed"] == rec.reasons("uid-web")
    assert [e.reason for e in rec.events_for(web, type="Warning")] == ["Failed"]
    assert rec.events_for(db, reason="BackOff")[0].time == clock.now()
    assert rec.messages(web, reason="Pulling") == ['Pulling image "busybox"']
    assert [e.reason for e in rec.warnings()] == ["BackOff", "Failed"]
    # Every call is logged, the dropped one too, with the pod object itself.
    assert [c.args[2] for c in rec.calls_to("event")] == ["Pulling", "BackOff", "Failed", "Odd"]
    assert rec.calls[0] == Call(
        "event",
        (web, "Normal", "Pulling", 'Pulling image "busybox"', "app"),
        {
            "pod": web,
            "event_type": "Normal",
            "reason": "Pulling",
            "message": 'Pulling image "busybox"',
            "container": "app",
        },
    )
    rec.clear()
    assert rec.reasons() == [] and len(rec.calls) == 4


def test_the_fake_fails_when_told() -> None:
    rec = FakeEventRecorder(capacity=2)
    boom = RuntimeError("recorder down")
    rec.inject_error("event", boom, when=lambda p, t, r, m, c: r == "Killing")
    rec.event(pod("a"), "Normal", "Started", "one")
    with pytest.raises(RuntimeError) as info:
        rec.event(pod("a"), "Normal", "Killing", "two")
    assert info.value is boom and rec.pending_errors() == []
    rec.event(pod("a"), "Normal", "Killing", "three")
    rec.event(pod("a"), "Normal", "Killing", "four")
    assert rec.messages() == ["three", "four"]  # capacity 2, the failed one not kept
    with pytest.raises(ValueError, match="no method 'emit'"):
        rec.inject_error("emit", boom)


def test_event_log_drops_unsupported_types(caplog: pytest.LogCaptureFixture) -> None:
    log = EventLog(FakeClock())
    log.event(pod("a"), "Error", "Failed", "x")
    assert log.events() == []
    assert "unsupported event type 'Error'" in caplog.text


def test_event_log_keeps_frozen_values() -> None:
    clock = FakeClock(start=1000.0)
    log = EventLog(clock, capacity=2)
    for reason in ("Pulled", "Created", "Started"):
        log.event(pod("a"), "Normal", reason, f"{reason} it", container="app")
    first, second = log.events()
    assert (first.reason, second.reason) == ("Created", "Started")
    assert first == RecordedEvent(
        1000.0, "default", "a", "uid-a", "app", "Normal", "Created", "Created it"
    )
    assert hash(first) == hash(attrs.evolve(first))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        first.reason = "Other"  # type: ignore[misc]
