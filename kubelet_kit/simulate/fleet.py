"""Many simulated nodes in one process: :class:`Simulator`.

Every node is a :class:`~kubelet_kit.simulate.node.SimulatedNode` (the real agent
core over the fake runtime); what they share is what makes a thousand of them fit
in one process: one event loop and clock, one API client (one pool of
connections and, optionally, one request budget), and one pod watch
(:class:`~kubelet_kit.simulate.informer.SharedPodInformer`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import os
import random
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.simulate.informer import SharedPodInformer
from kubelet_kit.simulate.node import NodeTemplate, SimulatedNode

__all__ = ["FIRST_NODE_ADDRESS", "Heartbeats", "RequestLanes", "SimulationReport", "Simulator"]

log = logging.getLogger(__name__)

#: The InternalIP of the first simulated node; the others follow it.
FIRST_NODE_ADDRESS = ipaddress.IPv4Address("10.64.0.1")


class RequestLanes:
    """Shares one API client's connections among a fleet's kinds of requests, and
    counts the requests by verb.

    A thousand nodes' heartbeats must not wait behind a burst of pod statuses and
    events (the kubelet gives its heartbeats a client of their own for the same
    reason). Each request takes a slot of its lane before it is sent: Lease and
    Node requests the heartbeat lane, Events theirs, the rest (pod statuses,
    deletes) the bulk lane; watches take none (they hold their connection for
    minutes). The lanes together stay below the client's connection pool, so a
    request that holds a slot always finds a connection; waiting for a slot does
    not count against the request's own timeout (waiting for a pooled
    connection would).

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient; its REST client's
            ``request`` is wrapped from now on.

    Attributes:
        counts: Requests sent, by verb (``get``, ``list``, ``watch``, ``create``,
            ``update``, ``patch``, ``delete``).
        sizes: Slots of each lane (``heartbeat``, ``events``, ``bulk``).
    """

    def __init__(self, api_client: Any) -> None:
        pool = int(getattr(api_client.configuration, "connection_pool_maxsize", 0) or 100)
        heartbeat = max(1, pool // 4)
        events = max(1, pool // 8)
        bulk = max(1, pool - heartbeat - events - 2)  # two spare for watches
        self.sizes = {"heartbeat": heartbeat, "events": events, "bulk": bulk}
        self._lanes = {k: asyncio.Semaphore(v) for k, v in self.sizes.items()}
        self.counts: collections.Counter[str] = collections.Counter()
        rest = api_client.rest_client
        send = rest.request

        async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            verb = _verb(method, url, kwargs.get("query_params") or ())
            self.counts[verb] += 1
            if verb == "watch":
                return await send(method, url, *args, **kwargs)
            async with self._lanes[_lane(url)]:
                return await send(method, url, *args, **kwargs)

        rest.request = request


def _lane(url: str) -> str:
    path = url.split("?", 1)[0]
    if "/leases" in path or "/nodes" in path:
        return "heartbeat"
    if "/events" in path:
        return "events"
    return "bulk"


_COLLECTIONS = frozenset({"pods", "nodes", "leases", "events", "services", "configmaps", "secrets"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _verb(method: str, url: str, query: Any) -> str:
    """The API server's verb of a request: a GET of a collection is a list, one
    with ``watch=true`` a watch (a collection's path ends in its plural name)."""
    if method != "GET":
        return _VERBS.get(method, method.lower())
    if any(k == "watch" and str(v).lower() == "true" for k, v in query):
        return "watch"
    last = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return "list" if last in _COLLECTIONS else "get"


class Heartbeats:
    """Renews every simulated node's Lease from a thread of its own, on a client
    of its own.

    A node is judged alive by its Lease. With a thousand nodes on one event loop,
    a burst of pod work can keep that loop busy for many seconds, and renewals
    queued behind it would come late. The kubelet keeps its heartbeats apart (a
    client of their own) for the same reason; here they also get a thread, so
    the interpreter shares its time with them however busy the nodes' loop is.
    The Leases hold no agent state: only the Node's uid is read across.

    Args:
        nodes: The nodes whose Leases to renew.
        api_client: The fleet's client; the thread makes one like it (same
            server, credentials and request budget) on its own loop.
        start_spread: Seconds over which the first renewals are spread.
    """

    def __init__(
        self, nodes: Sequence[SimulatedNode], api_client: Any, *, start_spread: float
    ) -> None:
        self.nodes = list(nodes)
        self.api_client = api_client
        self.start_spread = start_spread
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        #: Requests the heartbeat client sent, by verb (once started).
        self.counts: collections.Counter[str] = collections.Counter()

    def start(self) -> None:
        """Start the thread and wait until every node has its LeaseController.

        Raises:
            RuntimeError: The thread could not make its client.
        """
        self._thread = threading.Thread(target=self._main, name="simulated-heartbeats", daemon=True)
        self._thread.start()
        self._ready.wait(60)
        if self._failure is not None:
            raise RuntimeError(f"heartbeat thread: {self._failure}") from self._failure

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # reported to start() or logged
            self._failure = exc
            self._ready.set()
            log.exception("heartbeat thread failed")

    async def _run(self) -> None:
        from kubelet_kit.cluster.client import client_like

        client = await client_like(self.api_client)
        self.counts = RequestLanes(client).counts
        try:
            for node in self.nodes:
                node.lease_on(client)
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            step = self.start_spread / max(1, len(self.nodes))
            tasks = [
                asyncio.create_task(self._renew(node, i * step))
                for i, node in enumerate(self.nodes)
            ]
            await self._stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await client.close()

    @staticmethod
    async def _renew(node: SimulatedNode, delay: float) -> None:
        lease = node.lease
        assert lease is not None
        await asyncio.sleep(delay)
        while True:
            if not node.heartbeats_held():
                try:
                    await lease.renew()
                except Exception:
                    log.exception("node lease %s: renewal failed", node.name)
            await asyncio.sleep(lease.renew_interval)

    def stop(self) -> None:
        """Stop renewing and end the thread. Idempotent."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(60)


@attrs.frozen
class SimulationReport:
    """The simulation at one moment.

    Attributes:
        nodes: Simulated nodes.
        registered: Nodes whose Node object the API server holds.
        pods: Pods the nodes hold (admitted and not yet removed).
        running: Pods whose last status is Running.
        lease_renewals: Lease renewals the server accepted, all nodes.
        late_renewals: Renewals more than half an interval late (held back by a
            flap excepted: those are the fault mode's, not the simulator's).
        longest_lease_gap: The longest time between two renewals of one node
            that was not flapping (seconds).
        requests: API requests by verb since the start.
        watch_events: Pod watch events the shared informer has applied.
        flaps: Heartbeat hold-backs started by the fault mode.
        sandboxes_lost: Pod sandboxes the fault mode killed.
        cpu_seconds: This process's user + system CPU time since the start.
        rss_bytes: This process's resident memory now.
        elapsed: Seconds since the start.
    """

    nodes: int
    registered: int
    pods: int
    running: int
    lease_renewals: int
    late_renewals: int
    longest_lease_gap: float
    requests: dict[str, int]
    watch_events: int
    flaps: int
    sandboxes_lost: int
    cpu_seconds: float
    rss_bytes: int
    elapsed: float

    def line(self) -> str:
        """One line for a person watching."""
        reqs = " ".join(f"{k}={v}" for k, v in sorted(self.requests.items()))
        return (
            f"{self.elapsed:7.1f}s nodes {self.registered}/{self.nodes} pods "
            f"{self.running}/{self.pods} running, lease renewals {self.lease_renewals} "
            f"(late {self.late_renewals}, longest gap {self.longest_lease_gap:.1f}s), "
            f"flaps {self.flaps}, sandboxes lost {self.sandboxes_lost}, "
            f"cpu {self.cpu_seconds:.1f}s, rss {self.rss_bytes / 2**20:.0f} MiB, requests {reqs}"
        )


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Simulator:
    """``nodes`` simulated nodes joined to one API server, in this process.

    Use it as an async context manager (the nodes run inside the block and
    leave when it ends), or call :meth:`run` and :meth:`stop`::

        async with Simulator(api_client, nodes=10) as sim:
            await sim.wait_registered()
            ...  # create pods bound to sim.node_names, watch them run
            print(sim.report().line())

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient (see
            :func:`kubelet_kit.cluster.connect`), shared by every node; not
            closed here.
        nodes: How many nodes.
        prefix: Node names are ``prefix`` and a zero-based index (``sim-node-7``).
        template: Labels, taints and capacity of every node.
        clock: The clock every node runs on (default the machine's).
        root_dir: Where the nodes keep their state (one directory each);
            default a temporary directory (under ``/dev/shm`` when there is
            one), removed at the end.
        keep: Leave the Nodes and Leases registered when stopping (default:
            delete them, as nodes that leave the cluster).
        flap_percent: Percent of the nodes that, every ``fault_period``, hold
            back their heartbeats for ``flap_seconds`` (they go NotReady when
            their Lease expires, then Ready again).
        kill_percent: Percent of the nodes that, every ``fault_period``, lose
            all their pod sandboxes (containers die; the agent recreates them).
        fault_period: Seconds between fault rounds.
        flap_seconds: How long a flapping node stays silent.
        lease_duration: nodeLeaseDurationSeconds (renewed every quarter of it).
        start_spread: Seconds over which the nodes start (default one renewal
            interval), so their heartbeats do not all fall at once.
        seed: Seeds the fault mode's choice of nodes.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        nodes: int,
        prefix: str = "sim-node-",
        template: NodeTemplate | None = None,
        clock: Clock | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        keep: bool = False,
        flap_percent: float = 0.0,
        kill_percent: float = 0.0,
        fault_period: float = 60.0,
        flap_seconds: float = 60.0,
        lease_duration: int = 40,
        start_spread: float | None = None,
        seed: int | None = None,
    ) -> None:
        if nodes < 1:
            raise ConfigurationError(f"nodes: {nodes} must be at least 1")
        for name, pct in (("flap-percent", flap_percent), ("kill-percent", kill_percent)):
            if not 0 <= pct <= 100:
                raise ConfigurationError(f"{name}: {pct} must be between 0 and 100")
        if fault_period <= 0:
            raise ConfigurationError(f"fault-period: {fault_period} must be positive")
        self.api_client = api_client
        self.clock: Clock = clock or RealClock()
        self.template = template or NodeTemplate()
        self.keep = keep
        self.flap_percent = flap_percent
        self.kill_percent = kill_percent
        self.fault_period = fault_period
        self.flap_seconds = flap_seconds
        self.start_spread = lease_duration / 4 if start_spread is None else start_spread
        self._rng = random.Random(seed)
        self._own_root = root_dir is None
        if root_dir is None:
            shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
            root_dir = tempfile.mkdtemp(prefix="kubelet-kit-simulate-", dir=shm)
        self.root_dir = Path(root_dir)
        self.lanes = RequestLanes(api_client)
        self.requests = self.lanes.counts
        self.node_names = [f"{prefix}{i}" for i in range(nodes)]
        wanted = set(self.node_names)
        self.informer = SharedPodInformer(api_client, clock=self.clock, wanted=wanted.__contains__)
        self.nodes = [
            SimulatedNode(
                name,
                api_client,
                self.informer.source(name),
                self.template,
                self.clock,
                self.root_dir / name,
                address=str(FIRST_NODE_ADDRESS + i),
                lease_duration=lease_duration,
            )
            for i, name in enumerate(self.node_names)
        ]
        self.flaps = 0
        self.sandboxes_lost = 0
        self._started = time.monotonic()
        self._cpu_at_start = _cpu_seconds()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._heartbeats = Heartbeats(self.nodes, api_client, start_spread=self.start_spread)

    # ------------------------------------------------------------------ figures

    def report(self) -> SimulationReport:
        """The figures now."""
        pods = running = renewals = late = 0
        gap = 0.0
        registered = 0
        for node in self.nodes:
            statuses = node.kubelet.pod_statuses()
            pods += len(statuses)
            running += sum(1 for s in statuses.values() if s.phase == "Running")
            registered += node.node.registered
            lease = node.lease
            if lease is None:
                continue
            renewals += lease.renewals
            if node.flapped_seconds == 0:
                late += lease.late_renewals
                gap = max(gap, lease.longest_gap)
        return SimulationReport(
            nodes=len(self.nodes),
            registered=registered,
            pods=pods,
            running=running,
            lease_renewals=renewals,
            late_renewals=late,
            longest_lease_gap=gap,
            requests=dict(self.requests + self._heartbeats.counts),
            watch_events=self.informer.events,
            flaps=self.flaps,
            sandboxes_lost=self.sandboxes_lost,
            cpu_seconds=_cpu_seconds() - self._cpu_at_start,
            rss_bytes=_rss_bytes(),
            elapsed=time.monotonic() - self._started,
        )

    async def wait_registered(self, timeout: float = 120.0) -> None:
        """Wait until every node is registered.

        Raises:
            TimeoutError: Some were not after ``timeout`` seconds (naming how many).
        """
        deadline = time.monotonic() + timeout
        while not all(n.node.registered for n in self.nodes):
            if time.monotonic() > deadline:
                missing = sum(1 for n in self.nodes if not n.node.registered)
                raise TimeoutError(f"{missing} of {len(self.nodes)} nodes not registered")
            await asyncio.sleep(0.2)

    # ------------------------------------------------------------------ running

    async def _faults(self) -> None:
        flapping: set[asyncio.Task[None]] = set()
        while True:
            await self.clock.sleep(self.fault_period)
            for node in self._pick(self.flap_percent):
                self.flaps += 1
                task = asyncio.create_task(node.flap(self.flap_seconds))
                flapping.add(task)
                task.add_done_callback(flapping.discard)
            for node in self._pick(self.kill_percent):
                try:
                    self.sandboxes_lost += await node.lose_pods()
                except Exception:
                    log.exception("node %s: losing its pods failed", node.name)

    def _pick(self, percent: float) -> list[SimulatedNode]:
        count = round(len(self.nodes) * percent / 100)
        return self._rng.sample(self.nodes, count) if count else []

    async def run(
        self,
        *,
        on_report: Callable[[SimulationReport], None] | None = None,
        report_every: float = 10.0,
    ) -> None:
        """Run every node until :meth:`stop`, then leave (unless ``keep``).

        Args:
            on_report: Called with a :class:`SimulationReport` every
                ``report_every`` seconds.
            report_every: Seconds between reports.
        """
        self._stop.clear()
        informer = asyncio.create_task(self.informer.run(), name="shared-pod-informer")
        extra: list[asyncio.Task[None]] = []
        heartbeats = self._heartbeats = Heartbeats(
            self.nodes, self.api_client, start_spread=self.start_spread
        )
        try:
            await asyncio.to_thread(heartbeats.start)
            step = self.start_spread / len(self.nodes)
            starts = [
                asyncio.create_task(node.start(i * step)) for i, node in enumerate(self.nodes)
            ]
            if self.flap_percent or self.kill_percent:
                extra.append(asyncio.create_task(self._faults(), name="simulated-faults"))
            if on_report is not None:
                extra.append(asyncio.create_task(self._reports(on_report, report_every)))
            await self._stop.wait()
            for task in starts:
                task.cancel()
        finally:
            for task in extra:
                task.cancel()
            await asyncio.gather(*(n.stop() for n in self.nodes), return_exceptions=True)
            await asyncio.to_thread(heartbeats.stop)
            informer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await informer
            if not self.keep:
                await self.leave()
            if self._own_root:
                shutil.rmtree(self.root_dir, ignore_errors=True)

    async def _reports(self, on_report: Callable[[SimulationReport], None], every: float) -> None:
        while True:
            await self.clock.sleep(every)
            on_report(self.report())

    async def leave(self) -> None:
        """Delete every node's Node and Lease from the API server (already gone
        is fine)."""
        from kubernetes_asyncio import client as k8s
        from kubernetes_asyncio.client.exceptions import ApiException

        from kubelet_kit.cluster.lease import LEASE_NAMESPACE
        from kubelet_kit.config.apiserver import RAW_REQUEST, api_json

        core = k8s.CoreV1Api(self.api_client)
        coordination = k8s.CoordinationV1Api(self.api_client)

        async def delete(name: str) -> None:
            calls: tuple[Callable[[], Any], ...] = (
                lambda: coordination.delete_namespaced_lease(name, LEASE_NAMESPACE, **RAW_REQUEST),
                lambda: core.delete_node(name, **RAW_REQUEST),
            )
            for call in calls:
                try:
                    await api_json(call())
                except ApiException as exc:
                    if exc.status != 404:
                        log.warning("node %s: leaving: %s %s", name, exc.status, exc.reason)
                except Exception as exc:
                    log.warning("node %s: leaving: %s", name, exc)

        semaphore = asyncio.Semaphore(32)

        async def limited(name: str) -> None:
            async with semaphore:
                await delete(name)

        await asyncio.gather(*(limited(n) for n in self.node_names))

    def stop(self) -> None:
        """Ask :meth:`run` to stop the nodes and return. Idempotent."""
        self._stop.set()

    async def __aenter__(self) -> Simulator:
        self._task = asyncio.create_task(self.run(), name="simulator")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._task is not None:
            await self._task
