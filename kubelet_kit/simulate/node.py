"""One simulated node: the real agent core over the fake runtime, joined to an API
server.

What is real: the sync loop and pod workers, the generic PLEG, the status
manager, the prober (its workers, thresholds and back-off), the eviction
manager's thresholds and ranking, admission, restart back-off, and the cluster
side (Node registration and status, the Lease, pod statuses and final deletes,
events). What is simulated, and how:

* **Containers** run on :class:`~kubelet_kit.testing.FakeRuntime`: a command
  runs as the fake's small shell runs it, so ``sleep 30`` runs for 30 s,
  ``exit 3`` exits with 3, ``sh -c "sleep 5; exit 1"`` both, and a container
  with no command (the image's default) or one the shell does not know runs
  until it is stopped. Every image pulls at once (``pull_any``), but names
  under the reserved ``.invalid`` domain fail to pull (ErrImagePull).
* **Probes**: exec probes run in the fake's shell (``cat /tmp/healthy``
  fails until the container wrote the file). HTTP, TCP and gRPC probes
  succeed, unless the pod's annotation
  ``simulate.kubelet-kit.io/probe-failures`` names the container and probe
  (``"web/liveness,web/readiness"``): those fail.
* **Resources**: the node's capacity is its template's; a pod uses its
  containers' memory requests (their limits where no request is given), or
  what its annotation ``simulate.kubelet-kit.io/memory`` says
  (``"300Mi"``), which is what the eviction manager measures.
* **Volumes** are taken as mounted at once (nothing is written).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_kit.api import Container, Pod, Probe, Quantity
from kubelet_kit.clock import Clock
from kubelet_kit.container import PodSandboxState
from kubelet_kit.errors import ConfigurationError, QuantityError, ValidationError
from kubelet_kit.eviction.stats import FsStats, MemoryStats, NodeSummary, PodUsage
from kubelet_kit.prober import ProbeKind
from kubelet_kit.prober.probers import ProbeOutcome, Prober, ProbeStatus

if TYPE_CHECKING:
    from kubelet_kit.agent import Kubelet
    from kubelet_kit.cluster import EventSink, LeaseController, NodeController, PodStatusSync
    from kubelet_kit.config import PodSource
    from kubelet_kit.testing import FakeRuntime

__all__ = [
    "MEMORY_ANNOTATION",
    "PROBE_FAILURES_ANNOTATION",
    "NodeTemplate",
    "SimulatedNode",
    "SimulatedProber",
    "SimulatedStats",
]

log = logging.getLogger(__name__)

#: A pod annotation naming the network probes that fail: ``container/kind`` pairs,
#: comma-separated (kind: ``liveness``, ``readiness`` or ``startup``).
PROBE_FAILURES_ANNOTATION = "simulate.kubelet-kit.io/probe-failures"
#: A pod annotation setting the memory the pod uses (a quantity, ``"300Mi"``).
MEMORY_ANNOTATION = "simulate.kubelet-kit.io/memory"

_DEFAULT_CAPACITY = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi"}
# What a simulated node's file systems hold besides its pods: 10 % in use.
_FS_USED_FRACTION = 0.1
_PID_MAX = 4_194_304


def _quantity(value: object, field: str) -> Quantity:
    try:
        return Quantity.parse(str(value))
    except QuantityError as exc:
        raise ConfigurationError(f"{field}: {value!r}: {exc}") from None


@attrs.frozen
class NodeTemplate:
    """What every simulated node registers with: labels, taints and capacity.

    Attributes:
        labels: Node labels besides the kubelet's own (hostname, os, arch).
        taints: Taints to register with (v1 Taint objects).
        capacity: ``cpu``, ``memory``, ``ephemeral-storage``... (allocatable is
            the same: nothing is reserved).
        max_pods: The ``pods`` capacity (the kubelet's maxPods).
    """

    labels: Mapping[str, str] = attrs.field(factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    capacity: Mapping[str, Quantity] = attrs.field(
        factory=lambda: {k: Quantity.parse(v) for k, v in _DEFAULT_CAPACITY.items()}
    )
    max_pods: int = 110

    @classmethod
    def from_object(cls, node: Mapping[str, Any], *, where: str = "node template") -> NodeTemplate:
        """A template from a v1 Node object (as YAML or JSON would give it):
        ``metadata.labels``, ``spec.taints`` and ``status.capacity`` (its
        ``pods`` is maxPods); anything missing keeps the default.

        Raises:
            ConfigurationError: A field of the wrong type or an unreadable
                quantity, naming ``where`` and the field path.
        """
        if not isinstance(node, Mapping):
            raise ConfigurationError(f"{where}: want a Node object (a mapping)")
        md, spec, status = (
            {} if node.get(k) is None else node[k] for k in ("metadata", "spec", "status")
        )
        for field, value in (("metadata", md), ("spec", spec), ("status", status)):
            if not isinstance(value, Mapping):
                raise ConfigurationError(f"{where}: {field}: want a mapping")
        labels = md.get("labels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise ConfigurationError(f"{where}: metadata.labels: want a map of strings")
        taints = spec.get("taints") or []
        if not isinstance(taints, list) or not all(
            isinstance(t, Mapping) and isinstance(t.get("key"), str) and t.get("effect")
            for t in taints
        ):
            raise ConfigurationError(
                f"{where}: spec.taints: want a list of taints with key and effect"
            )
        raw = status.get("capacity") or {}
        if not isinstance(raw, Mapping):
            raise ConfigurationError(f"{where}: status.capacity: want a map of quantities")
        capacity = {k: Quantity.parse(v) for k, v in _DEFAULT_CAPACITY.items()}
        max_pods = 110
        for name, value in raw.items():
            q = _quantity(value, f"{where}: status.capacity.{name}")
            if name == "pods":
                max_pods = q.value()
            else:
                capacity[str(name)] = q
        return cls(labels=dict(labels), taints=tuple(taints), capacity=capacity, max_pods=max_pods)

    @classmethod
    def from_file(cls, path: str | Path) -> NodeTemplate:
        """A template from a file holding one Node object, YAML or JSON.

        Raises:
            ConfigurationError: Unreadable, not one Node object, or a bad field
                (naming the file and the field path).
        """
        from kubelet_kit.api.loading import parse_documents

        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            docs = [obj for _, obj in parse_documents(text, source=str(path))]
        except ValidationError as exc:
            raise ConfigurationError(str(exc)) from None
        if len(docs) != 1:
            raise ConfigurationError(f"{path}: want one Node object, found {len(docs)} documents")
        return cls.from_object(docs[0], where=str(path))

    def with_resources(
        self, *, cpu: str | None = None, memory: str | None = None, max_pods: int | None = None
    ) -> NodeTemplate:
        """This template with the CPU, memory or maxPods given replaced."""
        capacity = dict(self.capacity)
        if cpu is not None:
            capacity["cpu"] = _quantity(cpu, "cpu")
        if memory is not None:
            capacity["memory"] = _quantity(memory, "memory")
        if max_pods is not None and max_pods < 1:
            raise ConfigurationError(f"pods per node: {max_pods} must be at least 1")
        return attrs.evolve(
            self, capacity=capacity, max_pods=max_pods if max_pods is not None else self.max_pods
        )


def pod_memory(pod: Pod) -> int:
    """The memory a simulated pod uses: its annotation, else its containers'
    requests (limits where no request is given)."""
    annotated = pod.metadata.annotations.get(MEMORY_ANNOTATION)
    if annotated:
        with contextlib.suppress(QuantityError):
            return Quantity.parse(annotated).value()
    total = 0
    for c in pod.spec.containers:
        q = c.resources.requests.get("memory") or c.resources.limits.get("memory")
        if q is not None:
            total += q.value()
    return total


class SimulatedStats:
    """What a simulated node measures, for its eviction manager: its template's
    memory and disk, used by its pods as :func:`pod_memory` says.

    Args:
        template: The node's capacity.
        clock: Stamps each summary.
    """

    def __init__(self, template: NodeTemplate, clock: Clock) -> None:
        self.memory = template.capacity["memory"].value()
        storage = template.capacity.get("ephemeral-storage")
        self.storage = storage.value() if storage is not None else 100 * 2**30
        self.clock = clock

    async def summary(self, pods: Sequence[Pod]) -> NodeSummary:
        """The node and ``pods`` now."""
        usages = tuple(PodUsage(p.uid, memory_working_set_bytes=pod_memory(p)) for p in pods)
        working_set = sum(u.memory_working_set_bytes or 0 for u in usages)
        used_fs = int(self.storage * _FS_USED_FRACTION)
        fs = FsStats(
            available_bytes=self.storage - used_fs,
            capacity_bytes=self.storage,
            inodes_free=10_000_000,
            inodes=11_000_000,
        )
        return NodeSummary(
            time=self.clock.now(),
            memory=MemoryStats(max(0, self.memory - working_set), working_set),
            nodefs=fs,
            imagefs=fs,
            max_pid=_PID_MAX,
            process_count=100 + sum(len(p.spec.containers) for p in pods),
            pods=usages,
        )


def failing_probes(pod: Pod) -> frozenset[tuple[str, str]]:
    """The ``(container, kind)`` network probes the pod's annotation makes fail."""
    text = pod.metadata.annotations.get(PROBE_FAILURES_ANNOTATION, "")
    pairs = set()
    for item in text.split(","):
        name, sep, kind = item.strip().partition("/")
        if sep:
            pairs.add((name, kind.strip().lower()))
    return frozenset(pairs)


class SimulatedProber(Prober):
    """Exec probes through the fake runtime, network probes by rule: they
    succeed unless :data:`PROBE_FAILURES_ANNOTATION` names them."""

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        probe: Probe,
        *,
        pod_ip: str,
        container_id: str,
    ) -> ProbeOutcome:
        """Run ``probe`` (exec) or answer it by rule (HTTP, TCP, gRPC)."""
        if probe.exec is not None:
            return await super().probe(
                kind, pod, container, probe, pod_ip=pod_ip, container_id=container_id
            )
        if (container.name, kind.value.lower()) in failing_probes(pod):
            return ProbeOutcome(ProbeStatus.FAILURE, "simulated probe failure")
        return ProbeOutcome(ProbeStatus.SUCCESS, "")


class SimulatedNode:
    """One node of a simulation: a :class:`~kubelet_kit.agent.Kubelet` over a
    :class:`~kubelet_kit.testing.FakeRuntime`, and its cluster side.

    Made by :class:`~kubelet_kit.simulate.Simulator`; its parts are reachable
    for inspection: :attr:`kubelet`, :attr:`runtime`, :attr:`node`,
    :attr:`lease`, :attr:`pod_status`, :attr:`events`.

    Args:
        name: The Node's name.
        api_client: The shared ``kubernetes_asyncio`` ApiClient.
        source: Its pods (from the shared informer).
        template: Labels, taints and capacity.
        clock: Shared by every node.
        root_dir: The node's own state directory.
        address: Its InternalIP.
        lease_duration: nodeLeaseDurationSeconds (renewed every quarter of it).
        node_status_update_frequency: Seconds between node status checks.
        pod_status_period: Seconds between retries of pod statuses not yet sent.
        event_period: Seconds between event flushes.
    """

    def __init__(
        self,
        name: str,
        api_client: Any,
        source: PodSource,
        template: NodeTemplate,
        clock: Clock,
        root_dir: Path,
        *,
        address: str,
        lease_duration: int = 40,
        node_status_update_frequency: float = 10.0,
        pod_status_period: float = 10.0,
        event_period: float = 1.0,
    ) -> None:
        from kubelet_kit.agent import Kubelet
        from kubelet_kit.cluster import EventSink, NodeController, PodStatusSync
        from kubelet_kit.cm import StubContainerManager
        from kubelet_kit.eviction.manager import ThresholdEvictionManager
        from kubelet_kit.node.metrics import new_registry
        from kubelet_kit.node.nodestatus import NodeStatusProvider
        from kubelet_kit.pleg import EventedPLEG
        from kubelet_kit.prober import ReferenceProbeManager
        from kubelet_kit.testing import FakeRuntime
        from kubelet_kit.volume import StubVolumeManager

        self.name = name
        self.address = address
        self.clock = clock
        # The runtime streams container events, and the PLEG follows them (the
        # kubelet's EventedPLEG, relisting every 5 min): a thousand generic PLEGs
        # relisting every second would cost a core on their own.
        self.runtime: FakeRuntime = FakeRuntime(clock, pull_any=True, call_history=32, events=True)
        registry = new_registry(auto_describe=True)
        self.probes = ReferenceProbeManager(
            self.runtime, clock, prober=SimulatedProber(self.runtime, clock)
        )
        self.stats = SimulatedStats(template, clock)
        self.kubelet: Kubelet = Kubelet(
            runtime=self.runtime,
            pleg=EventedPLEG(self.runtime, clock, registry=registry),
            registry=registry,
            clock=clock,
            sources=[source],
            node_name=name,
            root_dir=root_dir,
            pod_logs_dir=root_dir / "logs",
            container_manager=StubContainerManager(
                max_pods=template.max_pods, capacity=template.capacity
            ),
            volume_manager=StubVolumeManager(),
            probe_manager=self.probes,
            eviction_manager=ThresholdEvictionManager(stats=self.stats, clock=clock),
            image_gc=None,
            container_log_manager=None,
            host_ip=address,
        )
        self.probes.recorder = self.kubelet.events
        provider = NodeStatusProvider(self.kubelet, addresses=lambda: [address], hostname=name)

        async def node_status() -> Mapping[str, Any]:
            return (await provider.status()).to_dict()

        self.node: NodeController = NodeController(
            api_client,
            name,
            node_status,
            clock=clock,
            labels=template.labels,
            taints=template.taints,
            node_status_update_frequency=node_status_update_frequency,
        )
        self.lease_duration = lease_duration
        #: The node's Lease, made by :meth:`lease_on` (on the heartbeat thread).
        self.lease: LeaseController | None = None
        #: Until when (monotonic seconds) the heartbeats are held back.
        self.silent_until = 0.0
        self.pod_status: PodStatusSync = PodStatusSync(
            api_client, self.kubelet, clock=clock, resync_period=pod_status_period
        )
        self.events: EventSink = EventSink(
            api_client,
            lambda: self.kubelet.events.events(),
            name,
            clock=clock,
            period=event_period,
        )
        self._heartbeats: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        #: Seconds the heartbeats (Lease and node status) are held back in all.
        self.flapped_seconds = 0.0

    def lease_on(self, api_client: Any) -> LeaseController:
        """Make the node's LeaseController on ``api_client`` (the heartbeat
        thread's client; see :class:`~kubelet_kit.simulate.fleet.Heartbeats`)."""
        from kubelet_kit.cluster import LeaseController

        self.lease = LeaseController(
            api_client,
            self.name,
            lease_duration=self.lease_duration,
            node_uid=lambda: self.node.node_uid,
        )
        return self.lease

    def heartbeats_held(self) -> bool:
        """Whether a flap holds the heartbeats back now."""
        return time.monotonic() < self.silent_until

    def _start_heartbeats(self) -> None:
        self._heartbeats = [
            asyncio.create_task(self.node.run(), name=f"{self.name}-node-status"),
        ]

    async def start(self, delay: float = 0.0) -> None:
        """Start the agent and its cluster side (after ``delay`` seconds, so a
        fleet's heartbeats spread over the renewal interval)."""
        await self.clock.sleep(delay)
        self._tasks = [
            asyncio.create_task(self.kubelet.run(), name=f"{self.name}-kubelet"),
            asyncio.create_task(self.pod_status.run(), name=f"{self.name}-pod-status"),
            asyncio.create_task(self.events.run(), name=f"{self.name}-events"),
        ]
        self._start_heartbeats()

    async def flap(self, seconds: float) -> None:
        """Hold back the Lease renewals and node status for ``seconds`` (the node
        goes NotReady once its lease expires), then resume them."""
        await self._cancel(self._heartbeats)
        self.silent_until = time.monotonic() + seconds
        log.info("node %s: heartbeats held back for %gs", self.name, seconds)
        try:
            await self.clock.sleep(seconds)
        finally:
            self.flapped_seconds += seconds
            self._start_heartbeats()

    async def lose_pods(self) -> int:
        """Lose every pod sandbox on the node, as a crash of its runtime would:
        their containers die (exit 137) and the agent makes them again as its
        restart policies say. Returns the number of sandboxes lost."""
        lost = 0
        for sandbox in await self.runtime.list_pod_sandboxes():
            if sandbox.state is PodSandboxState.READY:
                await self.runtime.stop_pod_sandbox(sandbox.id)
                lost += 1
        return lost

    @staticmethod
    async def _cancel(tasks: Sequence[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def stop(self) -> None:
        """Stop the node's tasks (its pods' containers stop with the agent)."""
        self.kubelet.stop()
        await self._cancel(self._heartbeats)
        await self._cancel(self._tasks)

    def __repr__(self) -> str:
        return f"SimulatedNode({self.name!r})"
