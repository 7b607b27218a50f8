"""RuntimePodSyncer: the kubelet's per-pod sync over any Runtime.

It implements :class:`kubelet_kit.node.podworkers.PodSyncer`, so
:class:`~kubelet_kit.node.podworkers.PodWorkers` drive it:

``sync_pod``
    take the pod's runtime status from the PLEG's pod cache when the cache knows
    it as it was after the syncer last acted on the pod (see
    :class:`PodStatusSource`), else read it afresh (and store the read in the
    cache, stamped with the time it began); a pod past its
    ``activeDeadlineSeconds`` becomes ``Failed``/``DeadlineExceeded`` and a pod
    whose phase is terminal stops here; otherwise ensure the pod cgroup, wait for
    its volumes, compute the actions (:func:`~kubelet_kit.podsync.actions.compute_pod_actions`),
    kill what must die (preStop first, then a graceful stop), create the sandbox
    if needed, and start init containers (one regular one at a time, sidecars
    alongside) and regular containers, each after the crash-loop back-off check,
    the image (policy and pull back-off), the environment, create, start and the
    postStart hook. Every step that fails leaves the kubelet's waiting reason for
    that container (``CrashLoopBackOff``, ``ErrImagePull``, ...). Finally the API
    status is built from a second fresh read and handed to the status manager; the
    result asks to be synced again when the earliest back-off (or the active
    deadline) expires.
``sync_terminating_pod``
    run preStop hooks and stop every running container within the grace period:
    regular containers in parallel, sidecars after them in reverse order, then
    stop the sandboxes.
``sync_terminated_pod``
    unmount volumes, remove the containers and sandboxes (and the files the
    syncer put in the pod's directory for them), remove the pod cgroup, forget
    the pod's back-off entries and probe results, and mark the status
    terminated.

With a ``root_dir``, each container is also given the kubelet's own files as
mounts (:mod:`kubelet_kit.podsync.podfiles`): the managed ``/etc/hosts`` and a
termination-message file.

All time comes from the injected clock; runtime failures are the typed errors of
:mod:`kubelet_kit.errors`.

Stopping containers is in :mod:`~kubelet_kit.podsync._kill`, starting one in
:mod:`~kubelet_kit.podsync._start`, and the event recorders in
:mod:`~kubelet_kit.podsync._events`; their public names are re-exported here.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from kubelet_kit.clock import Clock
from kubelet_kit.cm.stub import StubContainerManager
from kubelet_kit.container.interfaces import DNSConfig, Runtime
from kubelet_kit.container.pods import PodRuntimeStatus, get_pod_status
from kubelet_kit.errors import ContainerRuntimeError, KubeletKitError, PodSyncError
from kubelet_kit.node.podworkers import SyncResult, UpdateType
from kubelet_kit.podsync import configs, podfiles
from kubelet_kit.podsync._events import EventLog, EventRecorder, RecordedEvent
from kubelet_kit.podsync._kill import MINIMUM_GRACE_PERIOD, _Killer
from kubelet_kit.podsync._start import (
    CRASH_LOOP_BACK_OFF,
    CREATE_CONTAINER_ERROR,
    POST_START_HOOK_ERROR,
    RUN_CONTAINER_ERROR,
    _Starter,
    _uninterrupted,
    restart_count_from_log_dir,
)
from kubelet_kit.podsync.actions import PodActions, compute_pod_actions
from kubelet_kit.podsync.backoff import Backoff, format_pod, go_quote
from kubelet_kit.podsync.hooks import HandlerRunner
from kubelet_kit.podsync.images import ImagePuller
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult, ProbeUpdate
from kubelet_kit.prober.stub import StubProbeManager
from kubelet_kit.status import FAILED, TERMINAL_PHASES, StatusManager, generate_pod_status
from kubelet_kit.volume.sources import ConfigSource
from kubelet_kit.volume.stub import StubVolumeManager

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod, PodStatus, Service
    from kubelet_kit.cm.interfaces import ContainerManager
    from kubelet_kit.prober.interfaces import ProbeManager
    from kubelet_kit.volume.interfaces import VolumeManager

__all__ = [
    "CRASH_LOOP_BACK_OFF",
    "CREATE_CONTAINER_ERROR",
    "DEADLINE_EXCEEDED",
    "DEADLINE_EXCEEDED_MESSAGE",
    "FAILED_CREATE_POD_SANDBOX",
    "FAILED_MOUNT",
    "MINIMUM_GRACE_PERIOD",
    "POST_START_HOOK_ERROR",
    "RUN_CONTAINER_ERROR",
    "EventLog",
    "EventRecorder",
    "PodStatusSink",
    "PodStatusSource",
    "RecordedEvent",
    "RuntimePodSyncer",
    "restart_count_from_log_dir",
]

log = logging.getLogger(__name__)

FAILED_MOUNT = "FailedMount"
FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"

#: How long a sync waits for the pod's volumes (the kubelet's 2 min 3 s).
VOLUME_MOUNT_TIMEOUT = 123.0


class PodStatusSink(Protocol):
    """Where fresh runtime statuses are recorded (the PLEG's ``PodCache``)."""

    def set(
        self,
        uid: str,
        status: PodRuntimeStatus | None,
        error: Exception | None,
        timestamp: float,
    ) -> bool:
        """Store the status observed at ``timestamp`` unless a newer one is held.
        Never blocks."""


@runtime_checkable
class PodStatusSource(Protocol):
    """A pod status sink that also answers reads (the PLEG's ``PodCache``).

    Given one as ``pod_cache``, the syncer starts a sync from what it holds
    instead of asking the runtime, as the kubelet's pod workers start from the
    pod cache: a status the PLEG read after the containers it reports changed
    is as good as a fresh read, and a sync of a pod nothing happened to costs
    no runtime call.
    """

    def newer_than(self, uid: str, t: float) -> PodRuntimeStatus | None:
        """The pod's status as known after wall-clock time ``t`` (None: nothing
        that new is known, or the last inspection failed). Never blocks."""


@attrs.define
class _SyncState:
    """Per-sync bookkeeping: back-off expiries found (wall-clock times)."""

    expiries: list[float] = attrs.Factory(list)


_NO_IDS: frozenset[str] = frozenset()


def _datetime(seconds: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC)


class RuntimePodSyncer(_Killer):
    """The kubelet's pod sync logic over any Runtime (a :class:`PodSyncer`).

    Args:
        runtime: The container runtime.
        clock: Source of all time.
        status_manager: Receives every status the syncer builds.
        container_manager: Pod cgroups and container resources (default: none).
        volume_manager: Volumes and mounts (default: none).
        probe_manager: Probe workers and readiness (default: none, containers are
            ready while running).
        pod_logs_dir: The kubelet's podLogsDir.
        node_name: The node's name (``spec.nodeName`` fallback in env vars).
        host_ip: The node's IP (``status.hostIP`` and host-network pods' IP).
        runtime_name: Prefix of container ids in the status (``<name>://<id>``);
            asked of the runtime (``version().runtime_name``) when empty.
        pod_cache: The PLEG's pod cache: every fresh read is written there. If it
            is also a :class:`PodStatusSource`, a sync starts from its status of
            the pod when that status was observed after the syncer's last
            actions on the pod (whatever the PLEG has not seen yet, the PLEG
            reports later, and that report brings another sync), else from a
            fresh read.
        crash_backoff: The crash-loop back-off (default 10 s doubling to 300 s,
            reset after 600 s of running).
        image_puller: Pulls images (default: one on ``runtime`` with the kubelet's
            pull back-off, reading pull secrets from ``config_source``).
        hook_runner: Runs lifecycle hooks (default: on ``runtime`` and ``clock``).
        events: Receives the kubelet's events (e.g. an :class:`EventLog`).
        keep_dead: Whether a terminated pod's exited containers and stopped sandbox
            stay in the runtime (default: never). The composer keeps them for pods
            a source still wants, as the kubelet's container GC keeps a pod's
            newest dead containers: an agent that restarts then sees that a
            completed job completed, instead of running it again.
        config_source: ConfigMap/Secret lookup for env vars (see
            :func:`kubelet_kit.podsync.configs.resolve_env`) and image pull secrets.
        services: The cluster's Services now, for the service-link variables
            (:func:`kubelet_kit.podsync.configs.service_env`); None: none.
        resolv_conf: The node's resolver config for sandbox DNS; read from
            ``/etc/resolv.conf`` when needed if None.
        cluster_dns: Cluster DNS server IPs.
        cluster_domain: The cluster domain.
        volume_mount_timeout: Seconds a sync waits for the pod's volumes.
        root_dir: The agent's state directory, holding the pod directories
            (``<root_dir>/pods/<uid>``) where the managed ``/etc/hosts`` and the
            termination-message files are made. None: containers get neither.
        node_hosts_path: The node's hosts file, which host-network pods' managed
            ``/etc/hosts`` repeats.
        wait_for_startup_probes: Whether a sidecar with a startup probe counts as
            started only after a startup success was recorded
            (:meth:`record_probe_result`). Default: unless the probe manager is
            the stub, which never reports one.
    """

    def __init__(
        self,
        runtime: Runtime,
        clock: Clock,
        *,
        status_manager: StatusManager,
        container_manager: ContainerManager | None = None,
        volume_manager: VolumeManager | None = None,
        probe_manager: ProbeManager | None = None,
        pod_logs_dir: str = "/var/log/pods",
        node_name: str = "",
        host_ip: str = "",
        runtime_name: str = "",
        pod_cache: PodStatusSink | None = None,
        crash_backoff: Backoff | None = None,
        image_puller: ImagePuller | None = None,
        hook_runner: HandlerRunner | None = None,
        events: EventRecorder | None = None,
        keep_dead: Callable[[Pod], bool] | None = None,
        config_source: ConfigSource | None = None,
        services: Callable[[], Iterable[Service]] | None = None,
        resolv_conf: DNSConfig | None = None,
        cluster_dns: Sequence[str] = (),
        cluster_domain: str = "",
        volume_mount_timeout: float = VOLUME_MOUNT_TIMEOUT,
        wait_for_startup_probes: bool | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        node_hosts_path: str = podfiles.ETC_HOSTS_PATH,
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.status_manager = status_manager
        self.container_manager: ContainerManager = (
            container_manager if container_manager is not None else StubContainerManager()
        )
        self.volume_manager: VolumeManager = (
            volume_manager if volume_manager is not None else StubVolumeManager()
        )
        self.probe_manager: ProbeManager = (
            probe_manager if probe_manager is not None else StubProbeManager()
        )
        self.pod_logs_dir = pod_logs_dir
        self.node_name = node_name
        self.host_ip = host_ip
        self.runtime_name = runtime_name
        self.pod_cache = pod_cache
        self._status_source = pod_cache if isinstance(pod_cache, PodStatusSource) else None
        # Per pod, when the syncer last changed it in the runtime (wall clock):
        # a status observed before then may predate those changes (a container
        # started twice, a killed one still running), so a sync reads afresh.
        self._acted_at: dict[str, float] = {}
        self.crash_backoff = crash_backoff if crash_backoff is not None else Backoff(clock)
        self.events = events
        if image_puller is None:
            image_puller = ImagePuller(
                runtime, clock, on_event=self._image_event, config_source=config_source
            )
        self.images = image_puller
        self.hooks = hook_runner if hook_runner is not None else HandlerRunner(runtime, clock)
        self.config_source = config_source
        self.services = services
        self.keep_dead = keep_dead
        self.resolv_conf = resolv_conf
        self.cluster_dns = tuple(cluster_dns)
        self.cluster_domain = cluster_domain
        self.volume_mount_timeout = volume_mount_timeout
        self.root_dir = root_dir
        self.node_hosts_path = node_hosts_path
        if wait_for_startup_probes is None:
            wait_for_startup_probes = not isinstance(self.probe_manager, StubProbeManager)
        self.wait_for_startup_probes = wait_for_startup_probes
        # Last failure of each container, by pod uid then container name (the
        # kubelet's reasonCache): shown as the waiting reason until it starts.
        self._reasons: dict[str, dict[str, tuple[str, str]]] = {}
        # Latest liveness/startup result per (pod uid, container id, kind).
        # (By pod: a sync looks at its own pod's only.)
        self._probes: dict[str, dict[tuple[str, ProbeKind], ProbeResult]] = {}
        # The read that ended each pod's completed termination, used once by the
        # cleanup that the pod worker runs straight after it.
        self._stopped_reads: dict[str, PodRuntimeStatus] = {}

    # -- inputs from the composer ------------------------------------------------

    def record_probe_result(self, update: ProbeUpdate) -> None:
        """Remember a published probe result; liveness and startup failures make the
        next sync kill and restart the container. Never blocks."""
        if update.kind is ProbeKind.READINESS:
            return
        results = self._probes.setdefault(update.pod_uid, {})
        results[(update.container_id, update.kind)] = update.result

    def _event(
        self, pod: Pod, event_type: str, reason: str, message: str, container: str = ""
    ) -> None:
        if self.events is not None:
            self.events.event(pod, event_type, reason, message, container=container)

    def _image_event(
        self, pod: Pod, container: Container, event_type: str, reason: str, message: str
    ) -> None:
        self._event(pod, event_type, reason, message, container.name)

    def waiting_reasons(self, uid: str) -> dict[str, tuple[str, str]]:
        """The waiting reason and message each container of pod ``uid`` has now."""
        return dict(self._reasons.get(uid, {}))

    # -- PodSyncer -----------------------------------------------------------------

    async def sync_pod(self, update_type: UpdateType, pod: Pod) -> SyncResult:
        """Make the runtime match ``pod`` (see the module docstring).

        Blocks while the runtime works. Idempotent in effect: a second call with
        nothing changed does nothing but read statuses (from the pod cache, when
        it holds one observed after the syncer last acted on the pod).

        Raises:
            PodSyncError: volumes did not mount (``FailedMount``) or the sandbox
                could not be created (``FailedCreatePodSandBox``); the pod worker
                retries after its back-off.
            ContainerRuntimeError: the runtime failed to list or inspect the pod,
                or to stop a container.
        """
        uid = pod.uid
        previous = self.status_manager.get_pod_status(uid)
        runtime_status = self._cached(uid) or await self._inspect(pod)
        state = _SyncState()

        old = previous if previous is not None else pod.status
        status: PodStatus | None = None
        if (
            runtime_status.container_statuses
            or old.phase in TERMINAL_PHASES
            or pod.status.phase in TERMINAL_PHASES
        ):
            status = await self._generate(pod, runtime_status, previous)
            start_time = status.start_time
        else:
            # No container of the pod has run and no phase is terminal: it is
            # Pending, and its status is made once, after the sync has acted (its
            # start time, if it has none yet, is then a moment later than this).
            start_time = old.start_time or pod.status.start_time or _datetime(self.clock.now())
        deadline = self._active_deadline(pod, start_time)
        if deadline is not None and self.clock.now() >= deadline:
            if status is None:
                status = await self._generate(pod, runtime_status, previous)
            status = attrs.evolve(
                status, phase=FAILED, reason=DEADLINE_EXCEEDED, message=DEADLINE_EXCEEDED_MESSAGE
            )
            self.status_manager.set_pod_status(pod, status)
            return SyncResult(terminal=True)
        if status is not None and status.phase in TERMINAL_PHASES:
            self.status_manager.set_pod_status(pod, status)
            return SyncResult(terminal=True)
        if deadline is not None:
            state.expiries.append(deadline)

        error: KubeletKitError | None = None
        acted = True
        try:
            cgroup_parent = await self.container_manager.ensure_pod_cgroup(pod)
            self.volume_manager.add_pod(pod)
            try:
                await self.volume_manager.wait_for_mounts(pod, self.volume_mount_timeout)
            except TimeoutError as exc:
                message = f"Unable to attach or mount volumes: {exc}"
                self._event(pod, "Warning", FAILED_MOUNT, message)
                raise PodSyncError(FAILED_MOUNT, message) from exc
            self.probe_manager.add_pod(pod)
            actions = compute_pod_actions(
                pod,
                runtime_status,
                container_hash=configs.container_hash,
                **self._probe_sets(pod, runtime_status),
            )
            acted = _has_work(actions)
            if acted:
                try:
                    await self._apply(pod, runtime_status, actions, cgroup_parent, state)
                finally:
                    self._acted_at[uid] = self.clock.now()
        except (PodSyncError, ContainerRuntimeError) as exc:
            error = exc

        if acted:
            # Read again what the actions changed. A sync with nothing to do (most
            # of them: the periodic resync, the PLEG's event for a container this
            # very agent just started) reports the read it began with, as the
            # kubelet reports the pod status its sync started from: the status made
            # from it above stands.
            runtime_status = await self._inspect(pod)
            status = await self._generate(pod, runtime_status, previous)
        elif status is None:
            status = await self._generate(pod, runtime_status, previous)
        self.status_manager.set_pod_status(pod, status)
        if error is not None:
            raise error
        requeue = None
        if state.expiries:
            requeue = max(0.0, min(state.expiries) - self.clock.now())
        return SyncResult(terminal=status.phase in TERMINAL_PHASES, requeue_after=requeue)

    async def sync_terminating_pod(self, pod: Pod, grace_period: float) -> None:
        """Stop every running container of the pod, then its sandboxes.

        preStop hooks run first, bounded by the grace period; regular containers
        stop in parallel, sidecars after all of them in reverse order; each stop
        gets what remains of the grace period (at least 2 s). Blocks until all
        have stopped. Idempotent.

        Raises:
            ContainerRuntimeError: a stop failed (the pod worker retries).
        """
        runtime_status = await self._inspect(pod)
        try:
            await self._kill_running(pod, runtime_status, grace_override=grace_period)
            await self._stop_sandboxes(runtime_status)
        finally:
            self._acted_at[pod.uid] = self.clock.now()
        self.probe_manager.remove_pod(pod)
        previous = self.status_manager.get_pod_status(pod.uid)
        runtime_status = await self._inspect(pod)
        status = await self._generate(pod, runtime_status, previous, terminal=True)
        self.status_manager.set_pod_status(pod, status)
        self._stopped_reads[pod.uid] = runtime_status

    async def sync_terminated_pod(self, pod: Pod) -> None:
        """Release what the stopped pod holds: volumes, containers and sandboxes
        (unless ``keep_dead`` keeps them), the pod cgroup, back-off entries and
        probe results; mark its status terminated.

        Blocks until volumes are unmounted. Idempotent.

        Raises:
            TimeoutError: volumes were not unmounted in time (retried).
            ContainerRuntimeError: removing a container or sandbox failed.
        """
        # Everything was stopped and read back by the termination just before;
        # nothing starts a terminated pod's containers again, so that read says
        # what to remove. Taken once: a retry after an error reads afresh.
        stopped = self._stopped_reads.pop(pod.uid, None)
        self.volume_manager.remove_pod(pod)
        await self.volume_manager.wait_for_unmount(pod, self.volume_mount_timeout)
        runtime_status = stopped if stopped is not None else await self._inspect(pod)
        keep = self.keep_dead is not None and self.keep_dead(pod)
        if not keep:
            for container in runtime_status.container_statuses:
                await self.runtime.remove_container(container.id)
        await self._stop_sandboxes(runtime_status)
        if not keep:
            for sandbox in runtime_status.sandbox_statuses:
                await self.runtime.remove_pod_sandbox(sandbox.id)
            if self.pod_cache is not None:
                # Nothing of the pod is left: the cache says so at once, so a pod
                # of the same uid added again (a static pod's manifest put back)
                # does not start from the removed containers before the PLEG
                # sees them gone.
                self.pod_cache.set(
                    pod.uid,
                    PodRuntimeStatus(uid=pod.uid, name=pod.name, namespace=pod.namespace),
                    None,
                    self.clock.now(),
                )
            # Kept containers keep their files: their termination messages are
            # read again from them (after an agent restart, say).
            self.remove_pod_files(pod.uid)
        await self.container_manager.remove_pod_cgroup(pod)
        self.forget_pod(pod)
        self.probe_manager.remove_pod(pod)
        self.status_manager.terminate_pod(pod)

    def gc(self) -> None:
        """Housekeeping: drop back-off entries not updated for twice their cap (the
        kubelet does this on each pod cleanup pass). Never blocks."""
        self.crash_backoff.gc()
        self.images.backoff.gc()

    def remove_pod_files(self, uid: str) -> None:
        """Remove the files this syncer made in pod ``uid``'s directory (hosts
        file, termination-message files), and the directory once empty. Call it
        once the pod's containers are gone. Never raises (a failure is logged);
        idempotent; small local file work, done inline."""
        if self.root_dir is None:
            return
        try:
            podfiles.remove_pod_files(self.root_dir, uid)
        except OSError as exc:
            log.warning("pod %s: cannot remove its files: %s", uid, exc)

    def forget_pod(self, pod: Pod) -> None:
        """Drop the pod's back-off entries, waiting reasons and probe results.
        Never blocks; idempotent."""
        md = pod.metadata
        self.crash_backoff.forget_prefix(f"{md.name}_{md.namespace}_{md.uid}_")
        self.images.forget_pod(pod)
        self._reasons.pop(md.uid, None)
        self._stopped_reads.pop(md.uid, None)
        self._acted_at.pop(md.uid, None)
        self._probes.pop(md.uid, None)

    # -- reading -------------------------------------------------------------------

    def _cached(self, uid: str) -> PodRuntimeStatus | None:
        """The pod's status from the pod cache, if observed after the syncer last
        acted on the pod (strictly: with a coarse clock, a read stamped at the
        same instant may have begun before the last action ended)."""
        if self._status_source is None:
            return None
        return self._status_source.newer_than(uid, self._acted_at.get(uid, 0.0))

    async def _inspect(self, pod: Pod) -> PodRuntimeStatus:
        # Stamp with the time the read starts: everything that happened before
        # it is in the status, so the cache's newer-than waits stay truthful.
        started = self.clock.now()
        status = await get_pod_status(
            self.runtime, pod.uid, pod.name, pod.namespace, timestamp=started
        )
        if self.pod_cache is not None:
            self.pod_cache.set(pod.uid, status, None, started)
        return status

    async def _runtime_name(self) -> str:
        if not self.runtime_name:
            try:
                self.runtime_name = (await self.runtime.version()).runtime_name
            except ContainerRuntimeError:
                return ""
        return self.runtime_name

    async def _generate(
        self,
        pod: Pod,
        runtime_status: PodRuntimeStatus,
        previous: PodStatus | None,
        *,
        terminal: bool = False,
    ) -> PodStatus:
        return generate_pod_status(
            pod,
            runtime_status,
            waiting=self._reasons.get(pod.uid, {}),
            previous=previous,
            now=_datetime(self.clock.now()),
            host_ip=self.host_ip,
            pod_is_terminal=terminal,
            runtime_name=await self._runtime_name(),
            fold_probes=self.probe_manager.update_pod_status,
        )

    def _active_deadline(self, pod: Pod, start_time: _dt.datetime | None) -> float | None:
        """Wall-clock time the pod's activeDeadlineSeconds runs out, if it has one
        (the kubelet measures from ``status.startTime``, set at the first sync)."""
        seconds = pod.spec.active_deadline_seconds
        if seconds is None or start_time is None:
            return None
        return start_time.timestamp() + seconds

    def _probe_sets(self, pod: Pod, status: PodRuntimeStatus) -> dict[str, frozenset[str]]:
        uid = pod.uid
        results = self._probes.get(uid, {})
        if results:
            # Results of containers the runtime no longer holds can never matter again.
            known = {c.id for c in status.container_statuses}
            for key in [k for k in results if k[0] not in known]:
                del results[key]

        def with_result(kind: ProbeKind, result: ProbeResult) -> frozenset[str]:
            if not results:
                return _NO_IDS  # a pod without probes: most of them
            return frozenset(cid for (cid, k), r in results.items() if k is kind and r is result)

        pending: frozenset[str] = frozenset()
        if self.wait_for_startup_probes:
            probed = {c.name for c in pod.spec.init_containers if c.startup_probe is not None}
            succeeded = with_result(ProbeKind.STARTUP, ProbeResult.SUCCESS)
            pending = frozenset(
                s.id
                for s in status.running_container_statuses()
                if s.metadata.name in probed and s.id not in succeeded
            )
        return {
            "liveness_failed": with_result(ProbeKind.LIVENESS, ProbeResult.FAILURE),
            "startup_failed": with_result(ProbeKind.STARTUP, ProbeResult.FAILURE),
            "startup_pending": pending,
        }

    # -- acting --------------------------------------------------------------------

    async def _apply(
        self,
        pod: Pod,
        runtime_status: PodRuntimeStatus,
        actions: PodActions,
        cgroup_parent: str,
        state: _SyncState,
    ) -> None:
        if actions.kill_pod:
            await self._kill_running(pod, runtime_status, grace_override=None)
            await self._stop_sandboxes(runtime_status)
            if not actions.create_sandbox:
                return
            await self._purge_init_containers(pod, runtime_status)
        else:
            for kill in actions.containers_to_kill:
                await self._kill_container(
                    pod,
                    kill.container_id,
                    kill.name,
                    kill.container,
                    reason=kill.reason,
                    message=kill.message,
                )
        if not (
            actions.create_sandbox
            or actions.init_containers_to_start
            or actions.containers_to_start
        ):
            return

        sandbox_config = configs.sandbox_config(
            pod,
            attempt=actions.attempt,
            pod_logs_dir=self.pod_logs_dir,
            cgroup_parent=cgroup_parent,
            resolv_conf=self.resolv_conf,
            cluster_dns=self.cluster_dns,
            cluster_domain=self.cluster_domain,
        )
        sandbox_id = actions.sandbox_id
        pod_ips: tuple[str, ...] = runtime_status.ips
        if actions.create_sandbox:
            if actions.sandbox_id:
                self._event(
                    pod,
                    "Normal",
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.",
                )
            try:
                # The kubelet makes the pod's log directory itself; a quick local
                # mkdir, done inline so fake-clock timelines stay exact.
                if sandbox_config.log_directory:
                    podfiles.make_dir(sandbox_config.log_directory, 0o755)
            except OSError as exc:
                where = go_quote(format_pod(pod))
                message = f"Failed to create log directory for pod {where}: {exc}"
                self._event(pod, "Warning", FAILED_CREATE_POD_SANDBOX, message)
                raise PodSyncError(FAILED_CREATE_POD_SANDBOX, message) from exc
            try:
                sandbox_id = await _uninterrupted(self.runtime.run_pod_sandbox(sandbox_config))
                sandbox = await self.runtime.pod_sandbox_status(sandbox_id)
            except ContainerRuntimeError as exc:
                message = f"Failed to create pod sandbox: {exc}"
                self._event(pod, "Warning", FAILED_CREATE_POD_SANDBOX, message)
                raise PodSyncError(FAILED_CREATE_POD_SANDBOX, message) from exc
            pod_ips = tuple(ip for ip in (sandbox.ip, *sandbox.additional_ips) if ip)
        if not pod_ips and pod.spec.host_network and self.host_ip:
            # A host-network pod's IP is the node's (the kubelet takes the pod IPs
            # of the API status, where generateAPIPodStatus puts the host IP).
            pod_ips = (self.host_ip,)

        start = _Starter(self, pod, runtime_status, sandbox_id, sandbox_config, pod_ips, state)
        for idx in actions.init_containers_to_start:
            container = pod.spec.init_containers[idx]
            if not await start(container) and not container.is_sidecar:
                # A regular init container that failed to start holds the pod back.
                return
        for idx in actions.containers_to_start:
            await start(pod.spec.containers[idx])

    async def _purge_init_containers(self, pod: Pod, runtime_status: PodRuntimeStatus) -> None:
        """Remove every init container of the pod before a new sandbox is made, so
        initialisation runs again in it (the kubelet's ``purgeInitContainers``):
        the old ones' exits would otherwise count as done."""
        names = {c.name for c in pod.spec.init_containers}
        for status in runtime_status.container_statuses:
            if status.metadata.name not in names:
                continue
            try:
                await self.runtime.remove_container(status.id)
            except ContainerRuntimeError as exc:
                log.warning(
                    "failed to remove pod init container %r: %s; skipping pod %s",
                    status.metadata.name,
                    exc,
                    format_pod(pod),
                )


def _has_work(actions: PodActions) -> bool:
    """Whether applying ``actions`` would ask anything of the runtime."""
    return bool(
        actions.kill_pod
        or actions.create_sandbox
        or actions.init_containers_to_start
        or actions.containers_to_start
        or actions.containers_to_kill
    )
