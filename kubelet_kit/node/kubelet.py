"""KubeletCore: the agent's sync loop over parts it is given.

What to do for one pod lives in the pod syncer (``kubelet_kit.podsync``); when
to do it lives here: the loop reads pod updates from the sources, events from the
PLEG and results from the prober, admits new pods (``node.admission``), hands
every change to the pod workers, and runs housekeeping every two seconds.

KubeletCore builds no subsystem: the wiring root (:mod:`kubelet_kit.agent`) picks
them; its :class:`~kubelet_kit.agent.Kubelet`, what users construct, is this class
with the missing parts wired as the kubelet wires them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubelet_kit.api import Pod, PodCondition, PodStatus, Service
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.clock import Clock
from kubelet_kit.cm import ContainerManager
from kubelet_kit.config import PodConfig, PodOperation, PodSource, PodUpdate
from kubelet_kit.container import Runtime
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.eviction import EvictionManager
from kubelet_kit.node.admission import admit_pod
from kubelet_kit.node.defaults import default_node_name, default_pod_logs_dir, default_root_dir
from kubelet_kit.node.housekeeping import HOUSEKEEPING_PERIOD, Housekeeping
from kubelet_kit.node.metrics import KubeletMetrics, TimedPodSyncer, new_registry
from kubelet_kit.node.podworkers import PodWorkers, UpdateType, WorkerPhase
from kubelet_kit.node.transitions import log_transitions, pod_name
from kubelet_kit.pleg import PLEG, PodLifecycleEventType
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD
from kubelet_kit.podsync.imagegc import IMAGE_GC_PERIOD, ImageGCManager
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.podsync.syncer import EventLog, RuntimePodSyncer
from kubelet_kit.prober import ProbeKind, ProbeManager, ProbeResult
from kubelet_kit.status import StatusManager
from kubelet_kit.volume import VolumeManager
from kubelet_kit.volume.sources import ConfigSource

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["KubeletCore"]

log = logging.getLogger("kubelet_kit")


class KubeletCore:
    """A node agent over the parts it is given (none is built here).

    Args:
        runtime, pleg, container_manager, volume_manager, probe_manager,
            eviction_manager: The parts (see :mod:`kubelet_kit.agent` for the
            reference implementation of each).
        clock: Source of all time.
        sources: Pod sources (static-pod directory, URL, programmatic, ...).
        status_manager: Where pod statuses are kept; default a new StatusManager.
        node_name, root_dir, pod_logs_dir: This node's name, state directory and
            container log directory (defaults: :mod:`kubelet_kit.node.defaults`).
        sync_frequency: Seconds between periodic syncs of each pod (syncFrequency).
        housekeeping_period, container_gc_period, image_gc, image_gc_period,
            container_log_manager: What housekeeping runs, and how often
            (:class:`~kubelet_kit.node.housekeeping.Housekeeping`).
        on_pod_problem: Called with each rejected manifest (file and field path).
        registry: The Prometheus registry of the agent's metrics.
        config_source: Where ConfigMaps and Secrets referenced by env vars come from.
        services: Returns the cluster's Services now, for the service-link variables.
        host_ip: The node's IP (``status.hostIP``); default the address of the
            default route's interface.
        events: Where the kubelet's pod events go and are kept (:attr:`events`);
            default a new :class:`~kubelet_kit.podsync.syncer.EventLog` on ``clock``.
    """

    def __init__(
        self,
        *,
        runtime: Runtime,
        pleg: PLEG,
        clock: Clock,
        container_manager: ContainerManager,
        volume_manager: VolumeManager,
        probe_manager: ProbeManager,
        eviction_manager: EvictionManager,
        sources: Sequence[PodSource] = (),
        status_manager: StatusManager | None = None,
        node_name: str | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        pod_logs_dir: str | os.PathLike[str] | None = None,
        sync_frequency: float = 60.0,
        housekeeping_period: float = HOUSEKEEPING_PERIOD,
        container_gc_period: float = CONTAINER_GC_PERIOD,
        image_gc: ImageGCManager | None = None,
        image_gc_period: float = IMAGE_GC_PERIOD,
        container_log_manager: ContainerLogManager | None = None,
        on_pod_problem: Callable[[str], None] | None = None,
        registry: CollectorRegistry | None = None,
        config_source: ConfigSource | None = None,
        services: Callable[[], Iterable[Service]] | None = None,
        host_ip: str | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.clock: Clock = clock
        self.registry = registry if registry is not None else new_registry()
        self.node_name = node_name or default_node_name()
        self.root_dir = Path(root_dir) if root_dir is not None else default_root_dir()
        self.pod_logs_dir = (
            Path(pod_logs_dir) if pod_logs_dir is not None else default_pod_logs_dir(self.root_dir)
        )
        self.runtime: Runtime = runtime
        self.pleg: PLEG = pleg
        self.sources = list(sources)
        self.container_manager: ContainerManager = container_manager
        self.volume_manager: VolumeManager = volume_manager
        self.probe_manager: ProbeManager = probe_manager
        self.eviction_manager: EvictionManager = eviction_manager
        # A state holder, not a choice of implementation: made here when not given.
        self.status_manager = status_manager or StatusManager(self.clock)
        self.config_source = config_source
        self.services = services
        self.host_ip = host_ip
        self.sync_frequency = sync_frequency
        self.housekeeping_period = housekeeping_period
        self.pod_config = PodConfig(*self.sources, clock=self.clock, on_problem=on_pod_problem)
        self.housekeeper = Housekeeping(
            runtime=runtime,
            clock=self.clock,
            pod_config=self.pod_config,
            status_manager=self.status_manager,
            container_manager=container_manager,
            container_gc_period=container_gc_period,
            image_gc=image_gc,
            image_gc_period=image_gc_period,
            container_log_manager=container_log_manager,
        )
        self._pods: dict[str, Pod] = {}
        self._rejected: set[str] = set()
        self._workers: PodWorkers | None = None
        self._syncer: RuntimePodSyncer | None = None
        #: The kubelet's events about pods (Pulling, Started, BackOff, Killing, ...).
        self.events = events if events is not None else EventLog(self.clock)
        self._stop = asyncio.Event()
        self._started = asyncio.Event()
        self._running = False
        self._last_housekeeping: float | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def workers(self) -> PodWorkers:
        """The pod workers (built on first use)."""
        if self._workers is None:
            self._syncer = syncer = RuntimePodSyncer(
                self.runtime,
                self.clock,
                status_manager=self.status_manager,
                container_manager=self.container_manager,
                volume_manager=self.volume_manager,
                probe_manager=self.probe_manager,
                pod_logs_dir=str(self.pod_logs_dir),
                node_name=self.node_name,
                host_ip=self.host_ip or "",
                pod_cache=self.pleg.cache,
                events=self.events,
                config_source=self.config_source,
                services=self.services,
                keep_dead=self._wanted,
                root_dir=self.root_dir,
            )
            # kubelet_pod_worker_duration_seconds, in the agent's registry.
            metrics = KubeletMetrics.for_registry(self.registry, node_name=self.node_name)
            self._workers = PodWorkers(
                TimedPodSyncer(syncer, metrics, self.clock),
                self.clock,
                resync_interval=self.sync_frequency,
            )
        return self._workers

    # -- what an embedding agent reads -----------------------------------------------

    def pods(self) -> list[Pod]:
        """Every pod the sources want on this node."""
        return list(self._pods.values())

    def pod_status(self, uid: str) -> PodStatus | None:
        """The current status of pod ``uid``, or None if it has none yet."""
        return self.status_manager.get_pod_status(uid)

    def pod_statuses(self) -> dict[str, PodStatus]:
        """The current status of every pod, by uid."""
        statuses = ((uid, self.status_manager.get_pod_status(uid)) for uid in list(self._pods))
        return {uid: status for uid, status in statuses if status is not None}

    def subscribe(self) -> AsyncIterator[tuple[Pod, PodStatus]]:
        """Every status change as it happens, for reporting upstream. Each call is
        its own subscription; a slow reader skips intermediate states, never the
        latest."""
        return self.status_manager.subscribe()

    def _wanted(self, pod: Pod) -> bool:
        """Whether a source still wants ``pod`` (and it is not being deleted): then
        its dead containers stay in the runtime, as the record of how it ended."""
        return pod.metadata.uid in self._pods and pod.metadata.deletion_timestamp is None

    def active_pods(self) -> list[Pod]:
        """Admitted pods whose containers are not yet stopped for good."""
        workers = self._workers
        return [
            p
            for uid, p in self._pods.items()
            if uid not in self._rejected
            and (workers is None or workers.phase(uid) is not WorkerPhase.TERMINATED)
        ]

    def healthy(self) -> tuple[bool, str]:
        """Whether the sync loop and the PLEG are healthy, and why not."""
        if self._running and self._last_housekeeping is not None:
            quiet = self.clock.monotonic() - self._last_housekeeping
            limit = max(2 * self.sync_frequency, 300.0)
            if quiet > limit:
                return False, f"sync loop has not run for {quiet:.0f}s; threshold is {limit:.0f}s"
        return self.pleg.healthy()

    # -- lifecycle -------------------------------------------------------------------

    async def run(self) -> None:
        """Run the agent until :meth:`stop`. Pods keep running after it returns
        (call :meth:`drain` first to stop them). Raises if a component fails."""
        if self._running:
            raise RuntimeError("this Kubelet is already running")
        self._running = True
        self._stop.clear()
        if self.host_ip is None:
            from kubelet_kit.node.nodestatus import host_addresses

            self.host_ip = next(iter(await asyncio.to_thread(host_addresses)), "")
        await self.container_manager.start()
        workers = self.workers
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self.pleg.run(), name="pleg"),
                    tg.create_task(self.volume_manager.run(), name="volume-manager"),
                    tg.create_task(self.probe_manager.run(), name="probe-manager"),
                    tg.create_task(
                        self.eviction_manager.run(self.kill_pod, self.active_pods),
                        name="eviction-manager",
                    ),
                    tg.create_task(self._config_loop(), name="pod-config"),
                    tg.create_task(self._pleg_loop(), name="pleg-events"),
                    tg.create_task(self._probe_loop(), name="probe-results"),
                    tg.create_task(self._housekeeping_loop(), name="housekeeping"),
                    tg.create_task(
                        log_transitions(self.status_manager.subscribe()), name="status-log"
                    ),
                ]
                self._started.set()
                await self._stop.wait()
                self.pleg.stop()
                await self.volume_manager.stop()
                await self.probe_manager.stop()
                await self.eviction_manager.stop()
                for task in tasks:
                    task.cancel()
        finally:
            self._started.clear()
            await workers.shutdown()
            self._workers = None
            await self.container_manager.stop()
            self._running = False

    async def wait_started(self) -> None:
        """Block until :meth:`run` has started its loops (returns at once while it
        runs); a pod added before waits for them (the node address takes ~0.1 s)."""
        await self._started.wait()

    def stop(self) -> None:
        """Ask :meth:`run` to return. Idempotent; pods keep running."""
        self._stop.set()

    async def drain(self, grace_period: float | None = None) -> None:
        """Stop every pod (gracefully) and wait until their containers are stopped."""
        for pod in self.active_pods():
            self.workers.update_pod(pod, UpdateType.KILL, grace_period=grace_period)
        await asyncio.gather(*(self.workers.wait_terminated(p.metadata.uid) for p in self.pods()))

    async def __aenter__(self) -> KubeletCore:
        self._task = asyncio.create_task(self.run(), name="kubelet")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

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
        """Stop a pod for the node's sake (eviction): record a Warning event with
        ``reason`` and ``message``, mark the pod Failed with them (and
        ``condition``, such as ``DisruptionTarget``), stop its containers within
        ``grace_period`` seconds, and return once they are stopped."""
        self.events.event(pod, "Warning", reason, message)
        self.status_manager.terminate_pod(pod, reason, message, condition)
        self.workers.update_pod(pod, UpdateType.KILL, grace_period=grace_period)
        await self.workers.wait_terminated(pod.metadata.uid)

    # -- the sync loop ---------------------------------------------------------------

    async def _config_loop(self) -> None:
        async for update in self.pod_config.updates():
            self.handle_update(update)

    def handle_update(self, update: PodUpdate) -> None:
        """Apply one pod update from the sources (the kubelet's Handle* methods)."""
        pods = sorted(
            update.pods,
            key=lambda p: (
                p.metadata.creation_timestamp is None,
                p.metadata.creation_timestamp or 0,
            ),
        )
        if update.op is PodOperation.ADD:
            # Admission weighs each new pod against those admitted before it, this
            # batch included; the list is built once, not once per pod.
            active = self.active_pods()
            for pod in pods:
                if self._add_pod(pod, active):
                    active.append(pod)
        elif update.op in (PodOperation.UPDATE, PodOperation.DELETE):
            for pod in pods:
                uid = pod.metadata.uid
                if uid not in self._pods:
                    self._add_pod(pod, self.active_pods())
                    continue
                self._pods[uid] = pod
                if uid in self._rejected:
                    continue
                if (
                    pod.metadata.deletion_timestamp is None
                    and self.workers.phase(uid) is WorkerPhase.SYNCING
                ):
                    # A pod on its way out keeps what it has; nothing new is mounted.
                    self.volume_manager.add_pod(pod)
                self.workers.update_pod(pod, UpdateType.UPDATE)
        elif update.op is PodOperation.REMOVE:
            for pod in pods:
                uid = pod.metadata.uid
                self._pods.pop(uid, None)
                self.probe_manager.remove_pod(pod)
                if uid in self._rejected:
                    self._rejected.discard(uid)
                    continue
                self.workers.update_pod(pod, UpdateType.KILL)
                log.info("pod %s: removed from its source, stopping", pod_name(pod))
        elif update.op is PodOperation.RECONCILE:
            for pod in pods:
                if pod.metadata.uid in self._pods:
                    self._pods[pod.metadata.uid] = pod

    def _add_pod(self, pod: Pod, active: list[Pod]) -> bool:
        """Admit and start a new pod; returns whether it was admitted."""
        uid = pod.metadata.uid
        known, self._pods[uid] = uid in self._pods, pod
        if self.workers.is_finished(uid) or uid in self._rejected:
            return False  # a uid that ran to completion never starts again
        result = self.admit(pod, active, pod_is_new=not known)
        if not result.admit:
            # The kubelet's rejectPod: a Warning event; Failed is reported, so deletes end.
            self._rejected.add(uid)
            self.events.event(pod, "Warning", result.reason, result.message)
            self.status_manager.set_pod_status(
                pod,
                PodStatus(
                    phase="Failed",
                    reason=result.reason,
                    message=f"Pod was rejected: {result.message}",
                ),
            )
            log.warning("pod %s: rejected: %s: %s", pod_name(pod), result.reason, result.message)
            return False
        log.info("pod %s: admitted (uid %s)", pod_name(pod), uid)
        self.volume_manager.add_pod(pod)
        self.probe_manager.add_pod(pod)
        self.workers.update_pod(pod, UpdateType.CREATE)
        return True

    def admit(
        self, pod: Pod, active_pods: Sequence[Pod] | None = None, *, pod_is_new: bool = False
    ) -> AdmitResult:
        """Whether ``pod`` may run beside ``active_pods`` (default: the pods active
        now); see :func:`~kubelet_kit.node.admission.admit_pod`."""
        active = self.active_pods() if active_pods is None else active_pods
        em, cm = self.eviction_manager, self.container_manager
        return admit_pod(
            pod, active, eviction_manager=em, container_manager=cm, pod_is_new=pod_is_new
        )

    async def _pleg_loop(self) -> None:
        async for event in self.pleg.watch():
            if event.type is PodLifecycleEventType.CONTAINER_REMOVED:
                continue
            pod = self._pods.get(event.pod_uid)
            if pod is not None and event.pod_uid not in self._rejected:
                self.workers.update_pod(pod, UpdateType.SYNC)

    async def _probe_loop(self) -> None:
        async for update in self.probe_manager.updates():
            pod = self._pods.get(update.pod_uid)
            if pod is None:
                continue
            if self._syncer is not None:
                self._syncer.record_probe_result(update)
            if update.result is ProbeResult.FAILURE and update.kind is not ProbeKind.READINESS:
                # (Readiness starts as a failure until a probe succeeds: not news.)
                log.info(
                    "pod %s: container %s failed its %s probe",
                    pod_name(pod),
                    update.container_name,
                    update.kind.value.lower(),
                )
            self.workers.update_pod(pod, UpdateType.SYNC)

    async def _housekeeping_loop(self) -> None:
        while True:
            self._last_housekeeping = self.clock.monotonic()
            try:
                await self.housekeeping()
            except ContainerRuntimeError as exc:  # e.g. the runtime is restarting
                log.warning("housekeeping: %s", exc)
            except Exception:  # one bad round must not stop the agent
                log.exception("housekeeping failed")
            await self.clock.sleep(self.housekeeping_period)

    async def housekeeping(self) -> None:
        """One housekeeping round (:class:`~kubelet_kit.node.housekeeping.Housekeeping`)."""
        await self.housekeeper.run_once(self._pods, self.workers, self._syncer)
