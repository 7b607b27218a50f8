"""EventSink against the API server stand-in: new events created, repeats counted,
spam dropped, nothing lost while the server is away."""

from __future__ import annotations

from typing import Any

from kubelet_kit.api.loading import load_pod
from kubelet_kit.cluster import EventSink
from kubelet_kit.podsync.syncer import EventLog
from kubelet_kit.testing import FakeClock

from .apiserver_standin import StandInAPIServer


def events(standin: StandInAPIServer) -> list[dict[str, Any]]:
    return [e for (r, _, _), e in sorted(standin.objects.items()) if r == "events"]


POD = load_pod(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
)


async def test_events_are_created_counted_and_rate_limited(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    log = EventLog(clock)
    sink = EventSink(api_client, log.events, "node-1", clock=clock)
    log.event(
        POD,
        "Normal",
        "Pulled",
        'Container image "busybox" already present on machine',
        container="main",
    )
    log.event(POD, "Normal", "Started", "Started container main", container="main")
    await sink.flush()
    assert [e["reason"] for e in events(standin)] == ["Pulled", "Started"]
    assert len({e["metadata"]["name"] for e in events(standin)}) == 2

    # The same event again: the existing Event's count goes up.
    clock.advance(30)
    log.event(
        POD, "Warning", "BackOff", "Back-off restarting failed container main", container="main"
    )
    clock.advance(30)
    log.event(
        POD, "Warning", "BackOff", "Back-off restarting failed container main", container="main"
    )
    await sink.flush()
    backoff = [e for e in events(standin) if e["reason"] == "BackOff"]
    assert len(backoff) == 1
    assert backoff[0]["count"] == 2
    assert backoff[0]["lastTimestamp"] > backoff[0]["firstTimestamp"]

    # Spam: the object's bucket (25) is spent after 21 more distinct events.
    for i in range(30):
        log.event(POD, "Warning", "Unhealthy", f"Liveness probe failed: {i}", container="main")
    await sink.flush()
    assert sink.dropped == 9
    assert sink.written == 25


async def test_events_wait_for_the_server_to_return(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    log = EventLog(clock)
    sink = EventSink(api_client, log.events, "node-1", clock=clock)
    await standin.stop()
    log.event(POD, "Normal", "Killing", "Stopping container main", container="main")
    await sink.flush()
    assert sink.written == 0
    await standin.start()
    await sink.flush()
    assert [e["reason"] for e in events(standin)] == ["Killing"]
