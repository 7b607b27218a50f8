"""The agent's pod events to the API server as v1 Events, rate-limited as
client-go's event recorder does.

Reasons are the kubelet's own, recorded by the agent (Pulling, Pulled, Created,
Started, Killing, BackOff, Unhealthy, Evicted, FailedMount, ...); Scheduled is
the scheduler's and never comes from a node. Two rules from client-go's event
correlator apply:

* the spam filter: a token bucket per object (burst 25, one more token every
  5 minutes); an event without a token is dropped;
* the logger: an event equal to one already sent (same object, reason, message,
  type) updates that Event's ``count`` and ``lastTimestamp`` instead of creating
  a new one.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import aiohttp
import attrs
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.clock import Clock
from kubelet_kit.config.apiserver import RAW_REQUEST, api_json

__all__ = ["EventSink", "SpamFilter", "event_object"]

log = logging.getLogger(__name__)

#: client-go's defaultSpamBurst and defaultSpamQPS (1 per 300 s).
SPAM_BURST: Final = 25
SPAM_QPS: Final = 1.0 / 300.0

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


class _Event(Protocol):
    """What the sink reads of a recorded event (read-only)."""

    @property
    def time(self) -> float: ...
    @property
    def namespace(self) -> str: ...
    @property
    def pod_name(self) -> str: ...
    @property
    def pod_uid(self) -> str: ...
    @property
    def container(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...


def _time(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_object(event: _Event, *, node_name: str, name: str) -> dict[str, Any]:
    """The v1 Event the kubelet writes for a pod event.

    Args:
        event: The recorded event (a :class:`~kubelet_kit.podsync.syncer.RecordedEvent`).
        node_name: This node (``source.host``, ``reportingInstance``).
        name: The Event's name (``<pod>.<hex nanoseconds>`` as client-go makes it).
    """
    involved: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": event.namespace,
        "name": event.pod_name,
        "uid": event.pod_uid,
    }
    if event.container:
        involved["fieldPath"] = f"spec.containers{{{event.container}}}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": event.namespace},
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "type": event.type,
        "source": {"component": "kubelet", "host": node_name},
        "firstTimestamp": _time(event.time),
        "lastTimestamp": _time(event.time),
        "count": 1,
        "reportingComponent": "kubelet",
        "reportingInstance": node_name,
    }


@attrs.define
class _Bucket:
    tokens: float
    last: float


class SpamFilter:
    """client-go's EventSourceObjectSpamFilter: a token bucket per object.

    Args:
        clock: Refill time.
        burst: Tokens a new object starts with.
        qps: Tokens added per second.
    """

    def __init__(self, clock: Clock, *, burst: int = SPAM_BURST, qps: float = SPAM_QPS) -> None:
        self.clock = clock
        self.burst = burst
        self.qps = qps
        self._buckets: dict[str, _Bucket] = {}

    def allow(self, key: str) -> bool:
        """Take a token for ``key``; False (drop the event) when there is none."""
        now = self.clock.monotonic()
        bucket = self._buckets.setdefault(key, _Bucket(float(self.burst), now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.last) * self.qps)
        bucket.last = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


class EventSink:
    """Reads the agent's event log and writes each new event to the API server.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        events: Returns the recorded events, oldest first (``kubelet.events.events``).
        node_name: This node's name.
        clock: Poll schedule and the spam filter's time.
        period: Seconds between reads of the log.

    Attributes:
        written: Events the server accepted (created or counted again).
        dropped: Events the spam filter dropped.
    """

    def __init__(
        self,
        api_client: Any,
        events: Callable[[], Sequence[_Event]],
        node_name: str,
        *,
        clock: Clock,
        period: float = 1.0,
    ) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self._events = events
        self.node_name = node_name
        self.clock = clock
        self.period = period
        self.spam = SpamFilter(clock)
        self._last: _Event | None = None
        self._queue: list[_Event] = []
        self._sent: dict[tuple[str, str, str, str, str], tuple[str, int]] = {}
        self._stamp = 0
        self.written = 0
        self.dropped = 0

    def _collect(self) -> None:
        events = list(self._events())
        start = 0
        if self._last is not None:
            for i in range(len(events) - 1, -1, -1):
                if events[i] is self._last:
                    start = i + 1
                    break
        new = events[start:]
        if new:
            self._last = new[-1]
        for event in new:
            if self.spam.allow(f"{event.namespace}/{event.pod_name}/{event.pod_uid}"):
                self._queue.append(event)
            else:
                self.dropped += 1

    async def _write(self, event: _Event) -> None:
        key = (event.pod_uid, event.container, event.reason, event.message, event.type)
        seen = self._sent.get(key)
        if seen is not None:
            name, count = seen
            patch = {"count": count + 1, "lastTimestamp": _time(event.time)}
            try:
                await api_json(
                    self.core.patch_namespaced_event(name, event.namespace, patch, **RAW_REQUEST)
                )
                self._sent[key] = (name, count + 1)
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise
        # client-go names an Event <object>.<hex nanoseconds>; events recorded at the
        # same instant (a fake clock, a coarse one) still need names of their own.
        self._stamp = max(int(event.time * 1e9), self._stamp + 1)
        name = f"{event.pod_name}.{self._stamp:x}"
        body = event_object(event, node_name=self.node_name, name=name)
        try:
            await api_json(self.core.create_namespaced_event(event.namespace, body, **RAW_REQUEST))
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._sent[key] = (name, 1)

    async def flush(self) -> None:
        """Write the queued events; on a transport error keep the rest for later."""
        self._collect()
        while self._queue:
            event = self._queue[0]
            try:
                await self._write(event)
            except ApiException as exc:
                log.warning(
                    "event %s for %s/%s not written: %s %s",
                    event.reason,
                    event.namespace,
                    event.pod_name,
                    exc.status,
                    exc.reason,
                )
            except _TRANSPORT_ERRORS:
                return
            else:
                self.written += 1
            self._queue.pop(0)
            if len(self._sent) > 4096:
                self._sent.clear()  # bounded memory, as client-go's LRU cache

    async def run(self) -> None:
        """Write new events every period until cancelled."""
        while True:
            try:
                await self.flush()
            except Exception:
                log.exception("events: writing failed")
            await self.clock.sleep(self.period)
