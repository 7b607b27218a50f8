"""The pod status sink kit against the PLEG's PodCache, the fake, and sinks that
break the contract; and the fake's own writes, lookups and faults."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.pleg import PodCache
from kubelet_kit.testing import Call, ConformanceFailure
from kubelet_kit.testing.fake_status import FakeStatusSink, StatusWrite
from kubelet_kit.testing.kit import run_kit
from kubelet_kit.testing.status_kit import CHECKS, PodStatusSinkConformance, check_pod_status_sink


class TestPodCache(PodStatusSinkConformance):
    def make(self) -> PodCache:
        return PodCache()


class TestFakeStatusSink(PodStatusSinkConformance):
    def make(self) -> FakeStatusSink:
        return FakeStatusSink()


class LastWriteWins(PodCache):
    """Takes every write, however old: the bug the sink's rule exists against."""

    def set(self, uid: str, status: Any, error: Any, timestamp: float) -> bool:
        self._pods.pop(uid, None)
        return super().set(uid, status, error, timestamp)


class StrictlyNewer(FakeStatusSink):
    """Refuses a write stamped at the same time as the one held."""

    def set(self, uid: str, status: Any, error: Any, timestamp: float) -> bool:
        held = self.latest(uid)
        if held is not None and held.timestamp == timestamp:
            return False
        return super().set(uid, status, error, timestamp)


class Lying(FakeStatusSink):
    """Says it refused an older write, but keeps it."""

    def set(self, uid: str, status: Any, error: Any, timestamp: float) -> bool:
        taken = super().set(uid, status, error, timestamp)
        if not taken:
            self._latest[uid] = StatusWrite(uid, status, error, timestamp, True)
        return taken


@pytest.mark.parametrize(
    ("broken", "check", "message"),
    [
        (LastWriteWins, "older_is_refused", "a status observed before the one held was taken"),
        (StrictlyNewer, "same_time_replaces", "as new as the one held was refused"),
        (Lying, "older_is_refused", "status held for a"),
    ],
)
async def test_the_kit_catches_a_broken_sink(broken: type, check: str, message: str) -> None:
    with pytest.raises(ConformanceFailure):
        await check_pod_status_sink(broken)
    report = await run_kit(CHECKS, broken)
    failed = {r.name: r.message for r in report.results if r.status == "failed"}
    assert check in failed and message in failed[check], failed


async def test_a_sink_read_through_the_option() -> None:
    class Plain:
        def __init__(self) -> None:
            self.cache = PodCache()

        def set(self, uid: str, status: Any, error: Any, timestamp: float) -> bool:
            return self.cache.set(uid, status, error, timestamp)

    report = await check_pod_status_sink(Plain, read=lambda s, uid: s.cache.get(uid).status)
    assert report.ok
    assert (await check_pod_status_sink(Plain)).ok  # return values alone


def test_the_fake_keeps_every_write_and_the_newest() -> None:
    sink = FakeStatusSink()
    s1, s2, s3 = (PodRuntimeStatus(uid="u1", ips=(f"10.0.0.{i}",)) for i in (1, 2, 3))
    err = RuntimeError("inspect failed")
    assert sink.set("u1", s1, None, 10.0)
    assert sink.set("u1", s2, None, 12.0)
    assert not sink.set("u1", s3, None, 11.0)
    assert sink.set("u2", None, err, 1.0)
    held = sink.latest("u1")
    assert held is not None and held.status == s2 and held.timestamp == 12.0
    assert [(w.timestamp, w.accepted) for w in sink.writes_for("u1")] == [
        (10.0, True),
        (12.0, True),
        (11.0, False),
    ]
    held2 = sink.latest("u2")
    assert held2 is not None and held2.status is None and held2.error is err
    assert sink.uids() == ["u1", "u2"]
    assert sink.calls[0] == Call(
        "set", ("u1", s1, None, 10.0), {"uid": "u1", "status": s1, "error": None, "timestamp": 10.0}
    )
    sink.forget("u1")
    assert sink.latest("u1") is None and sink.set("u1", s1, None, 10.0)


def test_the_fake_fails_when_told() -> None:
    sink = FakeStatusSink()
    boom = RuntimeError("cache down")
    sink.inject_error("set", boom, times=2)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            sink.set("u1", None, None, 1.0)
    assert sink.writes == [] and len(sink.calls_to("set")) == 2
    assert sink.set("u1", None, None, 1.0)
    with pytest.raises(ValueError, match="times must be >= 1"):
        sink.inject_error("set", boom, times=0)
