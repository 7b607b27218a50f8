"""ReferenceProbeManager: the kubelet's probe manager and workers on an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import random
from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

import attrs

from kubelet_kit.api import Container, ContainerStatus, Pod, PodStatus, Probe
from kubelet_kit.clock import Clock
from kubelet_kit.container import RuntimeCore
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult, ProbeUpdate
from kubelet_kit.prober.metrics import RESULT_FAILED, RESULT_SUCCESSFUL, ProberMetrics
from kubelet_kit.prober.probers import ProbeOutcome, Prober, ProbeStatus
from kubelet_kit.prober.results import (
    INITIAL_RESULTS,
    ResultsCache,
    ThresholdCounter,
    fold_pod_status,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.podsync._events import EventRecorder

__all__ = [
    "DEFAULT_UPDATES_CAPACITY",
    "REASON_PROBE_WARNING",
    "REASON_UNHEALTHY",
    "ContainerView",
    "ReferenceProbeManager",
    "probe_event",
    "runtime_id",
]

log = logging.getLogger(__name__)

#: Capacity of the updates queue; a full queue makes workers wait (back-pressure,
#: as the kubelet's results channel does).
DEFAULT_UPDATES_CAPACITY: Final = 1000

_TERMINAL_PHASES: Final = frozenset({"Failed", "Succeeded"})

#: The kubelet's event reasons for probe outcomes (``events.ContainerUnhealthy``
#: and ``events.ContainerProbeWarning``).
REASON_UNHEALTHY: Final = "Unhealthy"
REASON_PROBE_WARNING: Final = "ProbeWarning"

_Key = tuple[str, str, ProbeKind]


@attrs.frozen
class ContainerView:
    """What the manager knows of one container from the agent's last sync.

    Attributes:
        container_id: The container's id as the agent reports it (``<type>://<id>``
            or a bare runtime id); a new id means a new container (a restart).
        running: Whether it runs now. Only running containers are probed.
        started_at: Wall time (seconds since the epoch, on the manager's clock) it
            started; ``initialDelaySeconds`` counts from here.
        terminated: Whether it has exited (as opposed to not having started).
    """

    container_id: str
    running: bool
    started_at: float | None = None
    terminated: bool = False


@attrs.define
class _PodView:
    """What the workers of one pod read. A worker reads only its own container's
    view: those of containers without a probe (most pods have none) are not kept
    up to date on every sync, their latest report waits in ``behind``."""

    pod_ip: str = ""
    phase: str = ""
    containers: dict[str, ContainerView] = attrs.field(factory=dict)
    #: Names of the containers that have (or had) a probe in a spec given to
    #: add_pod; None until the pod is added: every container is recorded.
    probed: frozenset[str] | None = None
    #: The latest report of each container without a probe, newer than its view.
    behind: dict[str, ContainerStatus] = attrs.field(factory=dict)
    #: What update_pod_status last returned: its container statuses serve again
    #: where the next fold would make equal copies of them.
    folded: PodStatus | None = None


@attrs.frozen
class _Seed:
    container_id: str
    ready: bool
    started: bool


def runtime_id(container_id: str) -> str:
    """A container id without its ``<runtime>://`` prefix (the API status's form)."""
    return container_id.partition("://")[2] if "://" in container_id else container_id


def _timestamp(value: _dt.datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _no_result(kind: ProbeKind, container_id: str) -> ProbeResult | None:
    return None


def _no_worker(container_name: str, kind: ProbeKind) -> bool:
    return False


def probe_event(kind: ProbeKind, outcome: ProbeOutcome) -> tuple[str, str] | None:
    """The kubelet's event for one probe run: ``(reason, message)``, or None.

    Every such event is a Warning: a failure and a prober error are ``Unhealthy``
    (``<Kind> probe failed: <output>``, ``<Kind> probe errored: <error>``), a
    success with a warning is ``ProbeWarning`` (``<Kind> probe warning:
    <output>``); a plain success records nothing.
    """
    verb = {
        ProbeStatus.FAILURE: (REASON_UNHEALTHY, "failed"),
        ProbeStatus.UNKNOWN: (REASON_UNHEALTHY, "errored"),
        ProbeStatus.WARNING: (REASON_PROBE_WARNING, "warning"),
    }.get(outcome.status)
    if verb is None:
        return None
    reason, what = verb
    return reason, f"{kind.value} probe {what}: {outcome.output}"


class _Worker:
    """Probes one container with one probe kind, every period, until stopped."""

    def __init__(
        self,
        manager: ReferenceProbeManager,
        pod: Pod,
        container: Container,
        kind: ProbeKind,
        probe: Probe,
    ) -> None:
        self.manager = manager
        self.pod = pod
        self.container = container
        self.kind = kind
        self.probe = probe
        self.key: _Key = (pod.uid, container.name, kind)
        self.counter = ThresholdCounter(probe.success_threshold, probe.failure_threshold)
        self.container_id = ""
        self.on_hold = False
        self.task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._manual = False

    # -- control (sync, from the manager)

    def start(self, tg: asyncio.TaskGroup) -> None:
        self.task = tg.create_task(
            self.run(), name=f"probe-{self.kind.value}-{self.pod.uid}-{self.container.name}"
        )
        # A done callback rather than a finally: a task cancelled before it first
        # ran never enters its coroutine.
        self.task.add_done_callback(lambda _task: self.manager._worker_done(self))

    def trigger(self) -> None:
        """Probe now instead of at the next tick (the next ticks count from now)."""
        self._manual = True
        self._wake.set()

    def stop(self) -> None:
        # Unregister at once, so that the pod can be added again (with a new
        # worker) before this one has ended.
        if self.manager._workers.get(self.key) is self:
            del self.manager._workers[self.key]
        if self.task is not None:
            self.task.cancel()
        else:
            self.manager._worker_done(self)

    # -- the loop

    async def run(self) -> None:
        m = self.manager
        clock = m.clock
        period = float(self.probe.period_seconds)
        # Right after an agent (re)start every worker would probe at once:
        # spread the first runs over one period, as the kubelet does.
        if period > clock.now() - m.agent_start_time:
            await clock.sleep(m.rng.random() * period)
        next_tick = clock.monotonic() + period
        while await self._probe_guarded():
            now = clock.monotonic()
            if next_tick <= now:
                # The probe outlasted a tick: like a Go ticker (one buffered
                # tick), run again now and stay on the same grid.
                next_tick += (int((now - next_tick) // period) + 1) * period
                continue
            if await self._wait(next_tick - now):
                next_tick = clock.monotonic() + period
            else:
                next_tick += period

    async def _wait(self, delay: float) -> bool:
        """Wait for the next tick or a manual trigger; True if triggered."""
        if not self._wake.is_set():
            handle = self.manager.clock.call_later(delay, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                handle.cancel()
        self._wake.clear()
        manual, self._manual = self._manual, False
        return manual

    async def _probe_guarded(self) -> bool:
        try:
            return await self.do_probe()
        except asyncio.CancelledError:
            raise
        except Exception:
            # One broken probe must not stop the others (the kubelet recovers too).
            log.exception(
                "%s probe worker for %s container %s failed; continuing",
                self.kind.value,
                self.pod.uid,
                self.container.name,
            )
            return True

    async def do_probe(self) -> bool:
        """One period of the kubelet's ``doProbe``; False when the worker should end."""
        m = self.manager
        view = m._pods.get(self.pod.uid)
        if view is None:
            return True  # no status yet
        if view.phase in _TERMINAL_PHASES:
            return False
        c = view.containers.get(self.container.name)
        if c is None or not c.container_id:
            return True  # not created yet
        if c.container_id != self.container_id:
            # A new container (first sight or a restart): results start over.
            if self.container_id:
                m._caches[self.kind].remove(self.container_id)
            self.container_id = c.container_id
            self.on_hold = False
            self.counter.reset()
            if m._caches[self.kind].get(self.container_id) is None:
                await m._publish(self, INITIAL_RESULTS[self.kind], "")
        if self.on_hold:
            return True
        if not c.running:
            if self.kind is ProbeKind.READINESS:
                await m._publish(self, ProbeResult.FAILURE, "container is not running")
            # A container that exited and will not be restarted needs no worker.
            return not (c.terminated and self.pod.spec.restart_policy == "Never")
        if self.pod.metadata.deletion_timestamp is not None and self.kind in (
            ProbeKind.LIVENESS,
            ProbeKind.STARTUP,
        ):
            # The pod is going away: end quietly with a success.
            await m._publish(self, ProbeResult.SUCCESS, "")
            return False
        if (
            c.started_at is not None
            and int(m.clock.now() - c.started_at) < self.probe.initial_delay_seconds
        ):
            return True
        started = m._is_started(self.pod.uid, self.container.name, self.container_id)
        if started == (self.kind is ProbeKind.STARTUP):
            # Startup probes stop once started; the others wait for it.
            return True

        began = m.clock.monotonic()
        outcome = await m.prober.probe(
            self.kind,
            self.pod,
            self.container,
            self.probe,
            pod_ip=view.pod_ip,
            container_id=self.container_id,
        )
        # Every run is reported, before thresholds are applied: a user reading the
        # pod's events sees each failure leading up to a restart, as with the kubelet.
        m._record(self, outcome)
        if outcome.status is ProbeStatus.UNKNOWN:
            return True  # a prober error says nothing about the container
        result = ProbeResult.SUCCESS if outcome.succeeded else ProbeResult.FAILURE
        m.metrics.observe(
            self.kind,
            RESULT_SUCCESSFUL if result is ProbeResult.SUCCESS else RESULT_FAILED,
            container=self.container.name,
            pod=self.pod.name,
            namespace=self.pod.namespace,
            pod_uid=self.pod.uid,
            duration=m.clock.monotonic() - began,
        )
        if not self.counter.observe(result):
            return True
        await m._publish(self, result, outcome.output)
        if (self.kind is ProbeKind.LIVENESS and result is ProbeResult.FAILURE) or (
            self.kind is ProbeKind.STARTUP
        ):
            # The container will be restarted (or has started): nothing to probe
            # until a new container id shows up.
            self.on_hold = True
            self.counter.reset()
        return True


class ReferenceProbeManager:
    """The kubelet's probe manager: one worker per (pod, container, probe kind).

    **Lifecycle.** :meth:`add_pod` registers a worker for every liveness, readiness
    and startup probe of the pod's containers and sidecars; workers run while
    :meth:`run` runs (``async with manager:`` runs it in the background).
    :meth:`remove_pod` stops them and forgets their results.

    **What the agent tells the manager.** Workers probe only what the agent has
    reported: the pod's API status (pod IP, phase, each container's id and state)
    as passed to :meth:`update_pod_status` after each sync (or to
    :meth:`set_pod_status`), or the finer :meth:`update_container` and
    :meth:`set_pod_ip`. A worker sees the change at its next tick. A new container
    id for a container name is a new container: its results start from the
    initial values and a worker on hold resumes. Container ids are compared
    without their ``<runtime>://`` prefix, and :class:`ProbeUpdate` carries the
    runtime's bare id.

    **What the manager tells the agent.** :meth:`updates` yields a
    :class:`ProbeUpdate` whenever a cached result changes: a liveness or startup
    FAILURE means "restart this container" (it carries the probe's
    ``terminationGracePeriodSeconds``), readiness and startup changes mean
    "recompute the pod's status", with :meth:`update_pod_status` folding
    ``started``/``ready`` in.

    **The kubelet's rules.** Probes run every ``periodSeconds`` on the clock, the
    first one at a random point of the first period while the agent started less
    than a period ago; none runs before ``initialDelaySeconds`` since the container
    started, nor against a container that is not running. Until the startup probe
    succeeds only it runs. Results count only after ``successThreshold`` or
    ``failureThreshold`` equal results in a row; a prober error (UNKNOWN) is
    discarded. A published liveness failure, and any startup verdict, holds the
    worker until the container id changes.

    Deliberate differences from the kubelet: a container that is not running gets
    a readiness FAILURE, but its liveness and startup results are left alone (so a
    published liveness/startup FAILURE always means a running container failed);
    the consecutive-result count starts over with a new container.

    **Events.** With a ``recorder``, every probe run that fails, errs or succeeds
    with a warning is recorded as the kubelet records it, for the pod and the
    container (see :func:`probe_event`): a Warning ``Unhealthy`` event ``Liveness
    probe failed: <output>`` (``Readiness``, ``Startup``) or ``... probe errored:
    <error>``, or a Warning ``ProbeWarning`` event ``... probe warning: <output>``.
    The ``Killing`` event of the restart that follows a liveness or startup
    failure is the pod syncer's, not the manager's.

    **After an agent restart.** Seed the manager with the statuses the previous
    agent reported (``previous_statuses`` or :meth:`seed_pod_status`): a container
    with the same id that was ready stays ready, and one that was started stays
    started, until its probes say otherwise (``failureThreshold`` failures).

    Args:
        runtime: Runs exec probes.
        clock: All periods, delays and timeouts.
        registry: Where the prober metrics go; a fresh registry if None
            (reachable as ``manager.metrics.registry``).
        agent_start_time: Wall time the agent started (default: now on ``clock``).
        rng: Source of the random first delay (default: a new ``random.Random``).
        prober: Runs probes; default a :class:`Prober` over ``runtime``.
        previous_statuses: Last reported status by pod uid, to seed from.
        updates_capacity: Capacity of the updates queue.
        recorder: Receives the probe events; None records none. The attribute of
            the same name may be set later (before or while the manager runs).
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        clock: Clock,
        *,
        registry: CollectorRegistry | None = None,
        agent_start_time: float | None = None,
        rng: random.Random | None = None,
        prober: Prober | None = None,
        previous_statuses: Mapping[str, PodStatus] | None = None,
        updates_capacity: int = DEFAULT_UPDATES_CAPACITY,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.runtime = runtime
        #: Where probe events go (None: nowhere).
        self.recorder: EventRecorder | None = recorder
        self.clock = clock
        self.metrics = ProberMetrics(registry)
        self.agent_start_time = clock.now() if agent_start_time is None else agent_start_time
        self.rng = rng if rng is not None else random.Random()
        self._own_prober = prober is None
        self.prober = prober if prober is not None else Prober(runtime, clock)
        self._workers: dict[_Key, _Worker] = {}
        self._caches: dict[ProbeKind, ResultsCache] = {k: ResultsCache() for k in ProbeKind}
        self._pods: dict[str, _PodView] = {}
        self._seeds: dict[tuple[str, str], _Seed] = {}
        self._added: set[str] = set()
        self._queue: asyncio.Queue[ProbeUpdate] = asyncio.Queue(maxsize=updates_capacity)
        self._tg: asyncio.TaskGroup | None = None
        self._stopped = asyncio.Event()
        self._done = asyncio.Event()
        self._bg: asyncio.Task[None] | None = None
        for uid, status in (previous_statuses or {}).items():
            self.seed_pod_status(uid, status)

    # ------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """Run the workers until :meth:`stop`. Raises only on a fatal error.

        Call once; a stopped manager does not run again.
        """
        if self._stopped.is_set():
            self._done.set()
            return
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for worker in list(self._workers.values()):
                    if worker.task is None:
                        worker.start(tg)
                await self._stopped.wait()
                for worker in list(self._workers.values()):
                    worker.stop()
        finally:
            self._tg = None
            if self._own_prober:
                await self.prober.aclose()
            self._done.set()

    async def stop(self) -> None:
        """Stop every worker and end :meth:`updates`; waits for :meth:`run` to return.
        Idempotent."""
        self._stopped.set()
        if self._bg is not None or self._tg is not None:
            await self._done.wait()

    async def __aenter__(self) -> Self:
        self._bg = asyncio.create_task(self.run(), name="probe-manager")
        await asyncio.sleep(0)  # let run() start the workers registered so far
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
        if self._bg is not None:
            await self._bg

    # ------------------------------------------------------------- pods

    def add_pod(self, pod: Pod) -> None:
        """Register a worker for every probe of the pod's containers and sidecars.

        Never blocks; idempotent (an existing worker keeps running, with the new
        pod object for its metadata; probe settings are not updated, as in the
        kubelet).
        """
        uid = pod.uid
        self._added.add(uid)
        spec = pod.spec
        containers: Iterable[Container] = spec.containers
        if spec.init_containers:
            containers = [*(c for c in spec.init_containers if c.is_sidecar), *containers]
        probed: list[str] = []
        for container in containers:
            if (
                container.startup_probe is None
                and container.readiness_probe is None
                and container.liveness_probe is None
            ):
                continue  # (most containers: nothing to register, nothing to look up)
            probed.append(container.name)
            for kind, probe in (
                (ProbeKind.STARTUP, container.startup_probe),
                (ProbeKind.READINESS, container.readiness_probe),
                (ProbeKind.LIVENESS, container.liveness_probe),
            ):
                if probe is None:
                    continue
                key = (uid, container.name, kind)
                existing = self._workers.get(key)
                if existing is not None:
                    existing.pod = pod
                    continue
                worker = _Worker(self, pod, container, kind, probe)
                self._workers[key] = worker
                if self._tg is not None:
                    worker.start(self._tg)
        self._note_probed(uid, probed)

    def _note_probed(self, uid: str, names: list[str]) -> None:
        """Remember which containers of the pod have a probe; a container that
        has one now and had none before gets its view from the latest report."""
        view = self._pods.get(uid)
        if view is None:
            view = self._pods[uid] = _PodView()
        known = view.probed
        if known is None:
            # (Until now every container was recorded: none is behind.)
            view.probed = frozenset(names)
            return
        if not names:
            return  # (a pod without probes, added again on each sync)
        fresh = [name for name in names if name not in known]
        if not fresh:
            return
        view.probed = known.union(fresh)
        for name in fresh:
            cs = view.behind.get(name)
            if cs is not None:
                self._record_container(uid, view, cs)

    def remove_pod(self, pod: Pod) -> None:
        """Stop the pod's workers and forget its results and reported state.
        Never blocks; idempotent."""
        for key, worker in list(self._workers.items()):
            if key[0] == pod.uid:
                worker.stop()
        self._pods.pop(pod.uid, None)
        self._added.discard(pod.uid)
        for seed_key in [k for k in self._seeds if k[0] == pod.uid]:
            seed = self._seeds.pop(seed_key)
            for cache in self._caches.values():
                cache.remove(seed.container_id)

    def stop_liveness_and_startup(self, pod: Pod) -> None:
        """Stop the pod's liveness and startup workers (the pod is terminating).
        Never blocks; idempotent."""
        for key, worker in list(self._workers.items()):
            if key[0] == pod.uid and key[2] in (ProbeKind.LIVENESS, ProbeKind.STARTUP):
                worker.stop()

    def cleanup_pods(self, desired: Iterable[str]) -> None:
        """Stop the workers of every pod whose uid is not in ``desired``."""
        keep = set(desired)
        for key, worker in list(self._workers.items()):
            if key[0] not in keep:
                worker.stop()

    # ------------------------------------------------------------- reported state

    def update_container(
        self,
        pod_uid: str,
        container_name: str,
        container_id: str,
        *,
        running: bool,
        started_at: float | None = None,
        terminated: bool = False,
    ) -> None:
        """Record one container's id and state after a sync. Never blocks.

        Args:
            pod_uid: The pod.
            container_name: The container's name in the pod spec.
            container_id: Its current id; ``""`` when it has none yet.
            running: Whether it runs.
            started_at: Wall time it started (on this manager's clock); if None, the
                first time it was reported running with this id.
            terminated: Whether it has exited.
        """
        view = self._pods.get(pod_uid)
        if view is None:
            view = self._pods[pod_uid] = _PodView()
        view.behind.pop(container_name, None)
        old = view.containers.get(container_name)
        container_id = runtime_id(container_id)
        if started_at is None and running:
            same = old is not None and old.container_id == container_id
            started_at = old.started_at if same and old is not None else self.clock.now()
        view.containers[container_name] = ContainerView(
            container_id, running, started_at, terminated
        )

    def set_pod_ip(self, pod_uid: str, pod_ip: str) -> None:
        """Record the pod's IP, the default host of network probes. Never blocks."""
        self._pods.setdefault(pod_uid, _PodView()).pod_ip = pod_ip

    def set_pod_status(self, pod_uid: str, status: PodStatus) -> None:
        """Record everything probes need from the pod's API status: pod IP, phase,
        and each container's id and state. Never blocks; call after every sync."""
        view = self._pods.get(pod_uid)
        if view is None:
            view = self._pods[pod_uid] = _PodView()
        view.pod_ip = status.pod_ip
        view.phase = status.phase
        probed = view.probed
        for cs in (*status.init_container_statuses, *status.container_statuses):
            if probed is not None and cs.name not in probed:
                running = cs.state.running
                if running is None or running.started_at is not None:
                    # No worker reads its view, and recording it later from this
                    # status gives the same view (no clock reading goes in it).
                    view.behind[cs.name] = cs
                    continue
            self._record_container(pod_uid, view, cs)

    def _record_container(self, pod_uid: str, view: _PodView, cs: ContainerStatus) -> None:
        """Record one container's id and state from its API status."""
        state = cs.state
        running = state.running is not None
        started_at = _timestamp(state.running.started_at) if state.running else None
        terminated = state.terminated is not None
        old = view.containers.get(cs.name)
        if (
            old is not None
            and old.running is running
            and old.terminated is terminated
            and (old.started_at == started_at or (started_at is None and running))
            and old.container_id == runtime_id(cs.container_id)
        ):
            # What update_container would record is what is recorded (the same
            # id keeps its start time): most syncs change nothing.
            view.behind.pop(cs.name, None)
            return
        self.update_container(
            pod_uid,
            cs.name,
            cs.container_id,
            running=running,
            started_at=started_at,
            terminated=terminated,
        )

    def seed_pod_status(self, pod_uid: str, status: PodStatus) -> None:
        """Carry over what a previous agent reported for the pod's containers.

        A running container that was reported ready (or started) is taken as ready
        (started) until its probes say otherwise; the seed applies only to the very
        container id that was reported. Never blocks.
        """
        for cs in (*status.init_container_statuses, *status.container_statuses):
            if not cs.container_id or cs.state.running is None:
                continue
            cid = runtime_id(cs.container_id)
            seed = _Seed(cid, ready=cs.ready, started=bool(cs.started))
            self._seeds[(pod_uid, cs.name)] = seed
            if seed.ready:
                self._caches[ProbeKind.READINESS].set(cid, ProbeResult.SUCCESS)
            if seed.started:
                self._caches[ProbeKind.STARTUP].set(cid, ProbeResult.SUCCESS)

    # ------------------------------------------------------------- results

    def result(self, kind: ProbeKind, container_id: str) -> ProbeResult | None:
        """The cached result of ``kind`` for a container id (with or without its
        ``<runtime>://`` prefix), or None. Never blocks."""
        return self._caches[kind].get(runtime_id(container_id))

    def has_probe(self, pod_uid: str, container_name: str, kind: ProbeKind) -> bool:
        """Whether a worker exists for that probe. Never blocks."""
        return (pod_uid, container_name, kind) in self._workers

    def update_pod_status(self, pod: Pod, status: PodStatus) -> PodStatus:
        """Fold the latest results into ``status``: each container's ``started`` and
        ``ready`` (see :func:`~kubelet_kit.prober.results.fold_pod_status`). A
        container that is started but not yet ready gets its readiness probe run
        at once. Never blocks.

        For a pod that was added (and not removed since), ``status`` is also taken
        as the pod's reported state (as :meth:`set_pod_status`), so an agent that
        builds each sync's status with this fold needs no other call to keep the
        workers informed; and a container status equal to the one this returned
        last time for the pod is that one (an unchanged pod is told by identity).
        """
        uid = pod.uid
        view: _PodView | None = None
        if uid in self._added:
            # (A removed pod's final status must not bring its state back.)
            self.set_pod_status(uid, status)
            view = self._pods[uid]
        previous = view.folded if view is not None else None
        caches = self._caches
        workers = self._workers
        if not workers and not any(caches.values()):
            # Nothing probed and nothing cached: every lookup would say "none".
            folded = fold_pod_status(pod, status, _no_result, _no_worker, previous)[0]
        else:

            def result_of(kind: ProbeKind, cid: str) -> ProbeResult | None:
                return caches[kind].get(runtime_id(cid)) if cid else None

            def has_worker(name: str, kind: ProbeKind) -> bool:
                return (uid, name, kind) in workers

            folded, trigger = fold_pod_status(pod, status, result_of, has_worker, previous)
            for name in trigger:
                worker = workers.get((uid, name, ProbeKind.READINESS))
                if worker is not None:
                    worker.trigger()
        if view is not None:
            view.folded = folded
        return folded

    async def updates(self) -> AsyncIterator[ProbeUpdate]:
        """Result changes as they happen. Single consumer (the composer). Ends once
        the manager is stopped and the queued updates are drained."""
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            while True:
                if not self._queue.empty():
                    yield self._queue.get_nowait()
                    continue
                if self._stopped.is_set():
                    return
                get = asyncio.ensure_future(self._queue.get())
                try:
                    await asyncio.wait({get, stopped}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # Also when the consumer is cancelled: leave no pending read behind.
                    if not get.done():
                        get.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await get
                if not get.cancelled():
                    yield get.result()
        finally:
            stopped.cancel()

    # ------------------------------------------------------------- worker helpers

    def _is_started(self, pod_uid: str, container_name: str, container_id: str) -> bool:
        if (pod_uid, container_name, ProbeKind.STARTUP) not in self._workers:
            return True
        return self._caches[ProbeKind.STARTUP].get(container_id) is ProbeResult.SUCCESS

    def _record(self, worker: _Worker, outcome: ProbeOutcome) -> None:
        recorder = self.recorder
        if recorder is None:
            return
        event = probe_event(worker.kind, outcome)
        if event is None:
            return
        reason, message = event
        try:
            recorder.event(worker.pod, "Warning", reason, message, container=worker.container.name)
        except Exception:
            # A broken recorder must not cost the probe its result.
            log.exception("recording a %s probe event failed", worker.kind.value)

    async def _publish(self, worker: _Worker, result: ProbeResult, message: str) -> None:
        if not self._caches[worker.kind].set(worker.container_id, result):
            return
        await self._queue.put(
            ProbeUpdate(
                pod_uid=worker.pod.uid,
                container_name=worker.container.name,
                container_id=worker.container_id,
                kind=worker.kind,
                result=result,
                message=message,
                termination_grace_period_seconds=worker.probe.termination_grace_period_seconds,
            )
        )

    def _worker_done(self, worker: _Worker) -> None:
        current = self._workers.get(worker.key)
        if current is worker:
            del self._workers[worker.key]
        elif current is not None:
            # The pod was removed and added again before this worker ended: its
            # successor owns the results and the metric series now.
            return
        if worker.container_id:
            self._caches[worker.kind].remove(worker.container_id)
        self.metrics.forget(
            worker.kind,
            container=worker.container.name,
            pod=worker.pod.name,
            namespace=worker.pod.namespace,
            pod_uid=worker.pod.uid,
        )
