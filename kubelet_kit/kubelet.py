"""The Kubelet composer: pod sources, PLEG, pod workers and the four managers,
wired into one node agent.

It is deliberately thin. What to do for one pod lives in the pod syncer
(``kubelet_kit.podsync``); when to do it lives here: the sync loop reads pod
updates from the sources, lifecycle events from the PLEG and results from the
probe manager, admits new pods, and hands every change to the pod workers.
Housekeeping (every 2 s) stops runtime pods that no source wants any more and
forgets finished workers.

Every component can be passed in; whatever is missing is built from its default
on first use, so ``Kubelet()`` alone runs an agent on the embedded host-process
runtime::

    kubelet = Kubelet(sources=[FileSource("/etc/kubelet-kit/pods")])
    await kubelet.run()          # until kubelet.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from prometheus_client import CollectorRegistry

from kubelet_kit.api import ObjectMeta, Pod, PodSpec, PodStatus, Service
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm import ContainerManager, StubContainerManager
from kubelet_kit.config import FileSource, HTTPSource, PodConfig, PodOperation, PodSource, PodUpdate
from kubelet_kit.container import Runtime, labels
from kubelet_kit.container.pods import get_pods
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.eviction import EvictionManager, StubEvictionManager
from kubelet_kit.pleg import PLEG, PodLifecycleEventType
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD, collect_dead_containers
from kubelet_kit.podsync.imagegc import IMAGE_GC_PERIOD, ImageGCError, ImageGCManager
from kubelet_kit.podsync.logrotate import LOG_MONITOR_PERIOD, ContainerLogManager
from kubelet_kit.podsync.syncer import EventLog, RuntimePodSyncer
from kubelet_kit.podworkers import PodWorkers, UpdateType, WorkerPhase
from kubelet_kit.prober import ProbeKind, ProbeManager, ProbeResult, ReferenceProbeManager
from kubelet_kit.status import StatusManager
from kubelet_kit.volume import StubVolumeManager, VolumeManager
from kubelet_kit.volume.sources import ConfigSource

if TYPE_CHECKING:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration

__all__ = ["Kubelet", "default_node_name", "default_root_dir"]

log = logging.getLogger("kubelet_kit")

#: The kubelet's housekeeping period.
HOUSEKEEPING_PERIOD = 2.0


def default_node_name() -> str:
    """The node name the kubelet would pick: the host name, lower-cased."""
    return socket.gethostname().lower()


def default_root_dir() -> Path:
    """Where the agent keeps its state: ``/var/lib/kubelet-kit`` as root, else
    ``$XDG_STATE_HOME/kubelet-kit`` (``~/.local/state/kubelet-kit``)."""
    if os.geteuid() == 0:
        return Path("/var/lib/kubelet-kit")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "kubelet-kit"


async def _image_fs_usage(runtime: Runtime, root_dir: Path) -> tuple[int, int]:
    """``(capacity, available)`` bytes of the filesystem the runtime keeps images on."""
    from kubelet_kit.eviction.host_stats import fs_stats, image_fs_dir

    stats = fs_stats(await image_fs_dir(runtime, root_dir))
    return stats.capacity_bytes or 0, stats.available_bytes or 0


def _pod_cgroup_stats(cm: ContainerManager) -> dict[str, Any]:
    """HostStatsProvider's cgroup arguments for a container manager that makes pod
    cgroups on this machine (none otherwise)."""
    from kubelet_kit.cm.manager import CgroupContainerManager, memory_hierarchy

    if not isinstance(cm, CgroupContainerManager) or not cm.config.cgroups_per_qos:
        return {}
    memory = memory_hierarchy()
    if memory is None:
        return {}
    return {
        "memory_cgroup_root": memory,
        "pods_cgroup": memory + cm.kubepods_path(),
        "pod_cgroup": lambda pod: memory + cm.pod_cgroup_path(pod),
    }


class Kubelet:
    """A node agent assembled from kubelet-kit's parts.

    Args:
        runtime: The container runtime; default a HostProcessRuntime under
            ``root_dir/runtime``.
        pleg: The pod lifecycle event generator; default a GenericPLEG on the runtime.
        clock: Source of all time; default the real clock.
        sources: Pod sources (static-pod directory, URL, programmatic, ...).
        container_manager: Node resources, cgroups and admission; default a stub.
        volume_manager: Volumes; default a stub that mounts nothing (``from_config``
            builds the reconciling VolumeManager).
        probe_manager: Probes; default the reference ProbeManager (exec, HTTP, TCP
            and gRPC probes on the runtime and the clock).
        eviction_manager: Pressure and eviction; default a stub that never evicts.
        status_manager: Where pod statuses are kept; default a new StatusManager.
        node_name: This node's name; default the host name.
        root_dir: State directory; default :func:`default_root_dir`.
        pod_logs_dir: Where container logs go; default ``/var/log/pods`` as root,
            else ``root_dir/logs``.
        sync_frequency: Seconds between periodic syncs of each pod (syncFrequency).
        on_pod_problem: Called with each rejected manifest (file and field path).
        registry: The Prometheus registry for the agent's metrics; components the
            Kubelet builds itself register there (default: a new registry).
        config_source: Where ConfigMaps and Secrets referenced by env vars come from
            (the same object the VolumeManager reads volumes from).
        container_gc_period: Seconds between collections of the dead containers
            and sandboxes beyond the newest per pod and container name
            (:mod:`kubelet_kit.podsync.gc`; the kubelet's one minute).
        image_gc: Removes unused images when the image filesystem fills
            (:mod:`kubelet_kit.podsync.imagegc`); ``from_config`` makes one from
            the imageGC fields. None: images are never removed.
        image_gc_period: Seconds between image collections (the kubelet's five
            minutes); images are first noted at the first housekeeping.
        container_log_manager: Rotates containers' logs every 10 seconds
            (:mod:`kubelet_kit.podsync.logrotate`); ``from_config`` makes one from
            containerLogMaxSize and containerLogMaxFiles. None: no rotation.
        services: Returns the cluster's Services now, from which containers get
            the service-link variables (``KUBERNETES_SERVICE_HOST``, ...); cluster
            mode passes its API server's. None: no such variables.
        host_ip: The node's IP (``status.hostIP``, and the pod IP of host-network
            pods); default the address of the default route's interface.
    """

    def __init__(
        self,
        *,
        runtime: Runtime | None = None,
        pleg: PLEG | None = None,
        clock: Clock | None = None,
        sources: Sequence[PodSource] = (),
        container_manager: ContainerManager | None = None,
        volume_manager: VolumeManager | None = None,
        probe_manager: ProbeManager | None = None,
        eviction_manager: EvictionManager | None = None,
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
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.node_name = node_name or default_node_name()
        self.root_dir = Path(root_dir) if root_dir is not None else default_root_dir()
        if pod_logs_dir is None:
            pod_logs_dir = "/var/log/pods" if os.geteuid() == 0 else self.root_dir / "logs"
        self.pod_logs_dir = Path(pod_logs_dir)
        self._runtime = runtime
        self._pleg = pleg
        self.sources = list(sources)
        self.container_manager: ContainerManager = container_manager or StubContainerManager()
        self.volume_manager: VolumeManager = volume_manager or StubVolumeManager()
        self._probe_manager = probe_manager
        self.eviction_manager: EvictionManager = eviction_manager or StubEvictionManager()
        self.status_manager = status_manager or StatusManager(self.clock)
        self.config_source = config_source
        self.services = services
        self.host_ip = host_ip
        self.sync_frequency = sync_frequency
        self.housekeeping_period = housekeeping_period
        self.container_gc_period = container_gc_period
        self.image_gc = image_gc
        self.image_gc_period = image_gc_period
        self.container_log_manager = container_log_manager
        # When each periodic housekeeping task last ran, by name.
        self._last_run: dict[str, float] = {}
        self.pod_config = PodConfig(*self.sources, clock=self.clock, on_problem=on_pod_problem)
        self._pods: dict[str, Pod] = {}
        self._rejected: set[str] = set()
        self._workers: PodWorkers | None = None
        self._syncer: RuntimePodSyncer | None = None
        #: The kubelet's events about pods (Pulling, Started, BackOff, Killing, ...).
        self.events = EventLog(self.clock)
        self._stop = asyncio.Event()
        self._running = False
        self._last_housekeeping: float | None = None

    # -- construction from a KubeletConfiguration ------------------------------------

    @classmethod
    def from_config(
        cls, config: KubeletConfiguration, *, runtime: Runtime | None = None, **overrides: Any
    ) -> Kubelet:
        """Build an agent from a KubeletConfiguration.

        Uses staticPodPath (with fileCheckFrequency), staticPodURL (with
        httpCheckFrequency and staticPodURLHeader), syncFrequency, podLogsDir, the
        container manager's fields (cgroupsPerQOS, cgroupRoot, cgroupDriver,
        enforceNodeAllocatable, the reservations, maxPods, podPidsLimit,
        cpuManagerPolicy: a :class:`~kubelet_kit.cm.CgroupContainerManager`, with
        device plugins registering under ``<root_dir>/device-plugins``; when this
        process cannot make cgroups it warns and runs the pods without them), and
        the eviction fields (evictionHard, evictionSoft, ...: a
        ThresholdEvictionManager watching this machine's memory, filesystems and
        pids, and measuring each pod by its cgroup, containers and disk volumes),
        containerLogMaxSize and containerLogMaxFiles (log rotation), the image GC
        fields (imageGCHigh/LowThresholdPercent, imageMinimumGCAge:
        an :class:`~kubelet_kit.podsync.imagegc.ImageGCManager` on the filesystem
        the runtime keeps its images on); volumes are mounted by the reconciling
        VolumeManager under the state directory. Keyword ``overrides`` go to the
        constructor (e.g. ``clock``, ``node_name``, ``root_dir``, extra
        ``sources``, any manager).
        """
        clock = overrides.get("clock") or RealClock()
        overrides["clock"] = clock
        node_name = overrides.get("node_name") or default_node_name()
        overrides["node_name"] = node_name
        sources: list[PodSource] = list(overrides.pop("sources", ()))
        if config.static_pod_path:
            sources.append(
                FileSource(config.static_pod_path, node_name=node_name, clock=clock,
                           check_frequency=config.seconds("file_check_frequency"))
            )
        if config.static_pod_url:
            headers = {k: ",".join(v) for k, v in config.static_pod_url_header.items()}
            sources.append(
                HTTPSource(config.static_pod_url, node_name=node_name, clock=clock,
                           headers=headers,
                           check_frequency=config.seconds("http_check_frequency"))
            )
        overrides.setdefault("sync_frequency", config.seconds("sync_frequency"))
        overrides.setdefault("pod_logs_dir", config.pod_logs_dir)
        kubelet = cls(runtime=runtime, sources=sources, **overrides)
        if "container_manager" not in overrides:
            from kubelet_kit.cm.devicemanager import DeviceManager
            from kubelet_kit.cm.manager import CgroupContainerManager, cgroups_unavailable

            cm_config = config
            problem = cgroups_unavailable() if config.cgroups_per_qos else None
            if problem is not None:
                # The kubelet would refuse to start; an agent on a small box or in
                # a container still runs its pods, and says what it cannot do.
                log.warning("cgroupsPerQOS: %s: pods run without pod cgroups, so their "
                            "resource limits are not enforced", problem)
                cm_config = attrs.evolve(config, cgroups_per_qos=False)
            # Device plugins register at <root-dir>/device-plugins/kubelet.sock, as
            # with the kubelet (whose root dir is /var/lib/kubelet).
            kubelet.container_manager = CgroupContainerManager(
                cm_config,
                state_dir=kubelet.root_dir,
                clock=clock,
                device_manager=DeviceManager(
                    plugins_dir=kubelet.root_dir / "device-plugins", clock=clock
                ),
            )
        if "volume_manager" not in overrides:
            from kubelet_kit.volume.reconciler import ReconcilingVolumeManager

            kubelet.volume_manager = ReconcilingVolumeManager(
                kubelet.root_dir,
                config_source=kubelet.config_source,
                clock=clock,
                registry=kubelet.registry,
                node_allocatable=kubelet.container_manager.node_allocatable(),
            )
        if "container_log_manager" not in overrides:
            from kubelet_kit.api import Quantity
            from kubelet_kit.errors import ConfigurationError, QuantityError

            try:
                max_size = Quantity.parse(config.container_log_max_size).value()
            except QuantityError as exc:
                raise ConfigurationError(
                    f"containerLogMaxSize: {config.container_log_max_size!r}: {exc}") from None
            kubelet.container_log_manager = ContainerLogManager(
                kubelet.runtime, max_size=max_size,
                max_files=config.container_log_max_files, clock=clock)
        if "image_gc" not in overrides:
            kubelet.image_gc = ImageGCManager(
                kubelet.runtime,
                functools.partial(_image_fs_usage, kubelet.runtime, kubelet.root_dir),
                clock=clock,
                high_threshold_percent=config.image_gc_high_threshold_percent,
                low_threshold_percent=config.image_gc_low_threshold_percent,
                minimum_age=config.seconds("image_minimum_gc_age"),
            )
        if "eviction_manager" not in overrides:
            from kubelet_kit.eviction.host_stats import HostStatsProvider
            from kubelet_kit.eviction.manager import ThresholdEvictionManager
            from kubelet_kit.volume.plugins import ephemeral_volume_dirs

            kubelet.eviction_manager = ThresholdEvictionManager(
                stats=HostStatsProvider(
                    root_dir=kubelet.root_dir,
                    clock=clock,
                    # Pods are measured (and ranked for eviction) by their cgroups
                    # when the agent makes them, their containers and their volumes.
                    runtime=kubelet.runtime,
                    pod_volume_dirs=functools.partial(ephemeral_volume_dirs, kubelet.root_dir),
                    **_pod_cgroup_stats(kubelet.container_manager),
                ),
                runtime=kubelet.runtime,
                clock=clock,
                config=config,
                registry=kubelet.registry,
            )
        return kubelet

    # -- components built lazily -----------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The container runtime (built on first use if none was given)."""
        if self._runtime is None:
            from kubelet_kit.runtimes.host import HostProcessRuntime

            self._runtime = HostProcessRuntime(self.root_dir / "runtime", clock=self.clock)
        return self._runtime

    @property
    def probe_manager(self) -> ProbeManager:
        """The probe manager (built on first use if none was given)."""
        if self._probe_manager is None:
            self._probe_manager = ReferenceProbeManager(
                self.runtime, self.clock, registry=self.registry
            )
        return self._probe_manager

    @property
    def pleg(self) -> PLEG:
        """The PLEG (built on first use if none was given)."""
        if self._pleg is None:
            from kubelet_kit.pleg import GenericPLEG

            self._pleg = GenericPLEG(self.runtime, self.clock, registry=self.registry)
        return self._pleg

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
            )
            # kubelet_pod_worker_duration_seconds, in the agent's registry.
            from kubelet_kit.metrics import KubeletMetrics, TimedPodSyncer

            metrics = KubeletMetrics.for_registry(self.registry, node_name=self.node_name)
            self._workers = PodWorkers(TimedPodSyncer(syncer, metrics, self.clock), self.clock,
                                       resync_interval=self.sync_frequency)
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
        out = {}
        for uid in list(self._pods):
            status = self.status_manager.get_pod_status(uid)
            if status is not None:
                out[uid] = status
        return out

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
            from kubelet_kit.nodestatus import host_addresses

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
                    tg.create_task(self._log_transitions(), name="status-log"),
                ]
                await self._stop.wait()
                self.pleg.stop()
                await self.volume_manager.stop()
                await self.probe_manager.stop()
                await self.eviction_manager.stop()
                for task in tasks:
                    task.cancel()
        finally:
            await workers.shutdown()
            self._workers = None
            await self.container_manager.stop()
            self._running = False

    def stop(self) -> None:
        """Ask :meth:`run` to return. Idempotent; pods keep running."""
        self._stop.set()

    async def drain(self, grace_period: float | None = None) -> None:
        """Stop every pod (gracefully) and wait until their containers are stopped."""
        for pod in self.active_pods():
            self.workers.update_pod(pod, UpdateType.KILL, grace_period=grace_period)
        await asyncio.gather(*(self.workers.wait_terminated(p.metadata.uid) for p in self.pods()))

    async def __aenter__(self) -> Kubelet:
        self._task = asyncio.create_task(self.run(), name="kubelet")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def kill_pod(self, pod: Pod, grace_period: float, reason: str, message: str) -> None:
        """Stop a pod for the node's sake (eviction): mark it Failed with ``reason``
        and ``message``, stop its containers within ``grace_period`` seconds, and
        return once they are stopped."""
        self.status_manager.terminate_pod(pod, reason, message)
        self.workers.update_pod(pod, UpdateType.KILL, grace_period=grace_period)
        await self.workers.wait_terminated(pod.metadata.uid)

    # -- the sync loop ---------------------------------------------------------------

    async def _config_loop(self) -> None:
        async for update in self.pod_config.updates():
            self.handle_update(update)

    def handle_update(self, update: PodUpdate) -> None:
        """Apply one pod update from the sources (the kubelet's Handle* methods)."""
        pods = sorted(update.pods, key=lambda p: (p.metadata.creation_timestamp is None,
                                                  p.metadata.creation_timestamp or 0))
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
                if (pod.metadata.deletion_timestamp is None
                        and self.workers.phase(uid) is WorkerPhase.SYNCING):
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
                log.info("pod %s: removed from its source, stopping", _name(pod))
        elif update.op is PodOperation.RECONCILE:
            for pod in pods:
                if pod.metadata.uid in self._pods:
                    self._pods[pod.metadata.uid] = pod

    def _add_pod(self, pod: Pod, active: list[Pod]) -> bool:
        """Admit and start a new pod; returns whether it was admitted."""
        uid = pod.metadata.uid
        self._pods[uid] = pod
        if self.workers.is_finished(uid) or uid in self._rejected:
            return False  # a uid that ran to completion never starts again
        result = self.admit(pod, active)
        if not result.admit:
            self._rejected.add(uid)
            self.status_manager.set_pod_status(
                pod,
                PodStatus(phase="Failed", reason=result.reason,
                          message=f"Pod was rejected: {result.message}"),
            )
            log.warning("pod %s: rejected: %s: %s", _name(pod), result.reason, result.message)
            return False
        log.info("pod %s: admitted (uid %s)", _name(pod), uid)
        self.volume_manager.add_pod(pod)
        self.probe_manager.add_pod(pod)
        self.workers.update_pod(pod, UpdateType.CREATE)
        return True

    def admit(self, pod: Pod, active_pods: Sequence[Pod] | None = None) -> AdmitResult:
        """Ask the eviction manager, then the container manager, whether ``pod`` may
        run beside ``active_pods`` (default: the pods active now), as the kubelet's
        canAdmitPod."""
        result = self.eviction_manager.admit(pod)
        if not result.admit:
            return result
        active = self.active_pods() if active_pods is None else active_pods
        uid = pod.metadata.uid
        others = [p for p in active if p.metadata.uid != uid]
        return self.container_manager.admit_pod(pod, others)

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
                log.info("pod %s: container %s failed its %s probe", _name(pod),
                         update.container_name, update.kind.value.lower())
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
        """One round: stop runtime pods no source wants (once every source has
        spoken), forget finished workers of pods that are gone, and run what is
        due: container GC, log rotation, image GC (images are first noted in the
        first round, and collected from the next period on)."""
        workers = self.workers
        if self.pod_config.sources_ready():
            for runtime_pod in await get_pods(self.runtime):
                uid = runtime_pod.uid
                if uid in self._pods or workers.phase(uid) is not None:
                    continue
                orphan = _orphan_pod(runtime_pod)
                log.info("pod %s: found in the runtime but wanted by no source, stopping",
                         _name(orphan))
                workers.update_pod(orphan, UpdateType.KILL)
        for uid in workers.sync_known_pods(self._pods):
            self.status_manager.remove(uid)
        if self.pod_config.sources_ready():
            known = set(self._pods) | set(workers.known_pods())
            await self.container_manager.remove_orphaned_pod_cgroups(known)
        if self._syncer is not None:
            self._syncer.gc()
        if self._due("container_gc", self.container_gc_period):
            await collect_dead_containers(self.runtime)
        if self.container_log_manager is not None and self._due(
                "log_rotation", LOG_MONITOR_PERIOD):
            await self.container_log_manager.rotate_logs()
        if self.image_gc is not None:
            first = "image_gc" not in self._last_run
            if self._due("image_gc", self.image_gc_period):
                if first:
                    await self.image_gc.detect_images()  # first-seen times start now
                else:
                    try:
                        await self.image_gc.garbage_collect()
                    except ImageGCError as exc:
                        log.warning("image garbage collection failed: %s", exc)

    def _due(self, task: str, period: float) -> bool:
        """Whether ``task`` is due (never run, or ``period`` seconds since); if so,
        it counts as run now."""
        now = self.clock.monotonic()
        last = self._last_run.get(task)
        if last is not None and now - last < period:
            return False
        self._last_run[task] = now
        return True

    async def _log_transitions(self) -> None:
        last: dict[str, str] = {}
        async for pod, status in self.status_manager.subscribe():
            line = _describe(status)
            uid = pod.metadata.uid
            if last.get(uid) != line:
                last[uid] = line
                log.info("pod %s: %s", _name(pod), line)


def _orphan_pod(runtime_pod: Any) -> Pod:
    """A minimal Pod for a runtime pod no source knows, enough to stop it."""
    grace = 30
    for container in runtime_pod.containers:
        value = container.annotations.get(labels.POD_TERMINATION_GRACE_PERIOD)
        if value and value.isdigit():
            grace = int(value)
            break
    meta = ObjectMeta(name=runtime_pod.name, namespace=runtime_pod.namespace, uid=runtime_pod.uid)
    return Pod(metadata=meta, spec=PodSpec(termination_grace_period_seconds=grace))


def _describe(status: PodStatus) -> str:
    """One readable line: phase, then each container that is not simply running."""
    parts = [status.phase or "Pending"]
    if status.reason:
        parts.append(f"({status.reason})")
    regular = {cs.name for cs in status.container_statuses}
    for cs in (*status.init_container_statuses, *status.container_statuses):
        if cs.state.waiting is not None and cs.state.waiting.reason:
            parts.append(f"{cs.name}={cs.state.waiting.reason}")
        elif cs.state.terminated is not None:
            parts.append(f"{cs.name}={cs.state.terminated.reason or 'Terminated'}"
                         f"({cs.state.terminated.exit_code})")
        elif cs.state.running is not None:
            # Readiness is news for app containers; an init container is never "ready".
            unready = cs.name in regular and not cs.ready
            parts.append(f"{cs.name}=Running{'(not ready)' if unready else ''}")
        if cs.restart_count:
            parts.append(f"restarts={cs.restart_count}")
    return " ".join(parts)


def _name(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"

