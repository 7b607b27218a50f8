"""FakeProbeManager: a ProbeManager whose probe results a test scripts.

A test of what the agent does when a probe fails says which results a probe
gives and moves the clock::

    clock = FakeClock()
    probes = FakeProbeManager(clock)
    probes.script("web", "app", ProbeKind.LIVENESS, [SUCCESS, FAILURE])
    ...                       # run() it, add_pod(pod), update_pod_status(pod, running)
    await clock.run_for(30)   # runs at 0, 10, 20, 30 s: S, F, F, F -> a FAILURE update

The fake keeps the kubelet's rules (those of
:class:`~kubelet_kit.prober.ReferenceProbeManager`, from the same pure helpers
in :mod:`kubelet_kit.prober.results`): one worker per (pod, container, probe
kind) that runs while :meth:`~FakeProbeManager.run` runs, probing every
``periodSeconds`` on the clock; nothing before ``initialDelaySeconds`` since the
container started nor against a container that is not running; only the startup
probe until it succeeds; ``successThreshold``/``failureThreshold`` equal results
in a row before a result is published; a prober error (UNKNOWN) discarded; a
published liveness failure or startup verdict holds the worker until the
container id changes. Containers are known from the statuses passed to
:meth:`~FakeProbeManager.update_pod_status` (for pods added and not removed).

Where a probe's result comes from, first match wins:

1. a script (:meth:`~FakeProbeManager.script`): a list of results (the last one
   repeats) or a callable of the run's number;
2. with ``runtime=``, an exec probe runs its command through that runtime's
   ``exec_sync``, as the reference manager does (exit 0 succeeds, another exit
   or a timeout fails, a runtime error is a prober error), so one FakeRuntime's
   exec handler drives the fake and the reference alike;
3. the ``default`` result (SUCCESS).

Deliberate differences from the reference: the first run of a worker is at once
(no random spread over the first period), a prober error is not retried, a
readiness probe is not run early when :meth:`~FakeProbeManager.update_pod_status`
finds a container started but not ready, and there are no metrics, events or
seeding from a previous agent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from kubelet_kit.api import Container, Pod, PodStatus, Probe
from kubelet_kit.clock import Clock
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult, ProbeUpdate
from kubelet_kit.prober.results import (
    INITIAL_RESULTS,
    ResultsCache,
    ThresholdCounter,
    fold_pod_status,
)
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import Call

if TYPE_CHECKING:
    from kubelet_kit.container import Runtime

__all__ = ["PROBE_MANAGER_METHODS", "FakeProbeManager", "ProbeRun", "ProbeScript"]

#: The methods of the ProbeManager protocol: what the call log records and what
#: :meth:`FakeProbeManager.inject_error` accepts.
PROBE_MANAGER_METHODS: Final = frozenset(
    {"run", "stop", "add_pod", "remove_pod", "update_pod_status", "updates"}
)

#: A script: results in order (the last repeats), or ``f(run_number) -> result``
#: with run numbers counted from 0 for that probe. UNKNOWN is a prober error.
ProbeScript = Sequence[ProbeResult] | Callable[[int], ProbeResult]

_Numbered = Callable[[int], ProbeResult]

_TERMINAL_PHASES: Final = frozenset({"Failed", "Succeeded"})


@attrs.frozen
class ProbeRun:
    """One run of a probe by a :class:`FakeProbeManager`.

    Attributes:
        time: The clock's monotonic time of the run.
        pod_uid: The pod.
        container_name: The container.
        container_id: The runtime's id of the container probed.
        kind: Which probe.
        result: What the run found (UNKNOWN: a prober error, discarded).
    """

    time: float
    pod_uid: str
    container_name: str
    container_id: str
    kind: ProbeKind
    result: ProbeResult


@attrs.define
class _ContainerView:
    container_id: str
    running: bool
    started_at: float | None
    terminated: bool


@attrs.define
class _PodView:
    phase: str = ""
    containers: dict[str, _ContainerView] = attrs.field(factory=dict)


@attrs.define(eq=False)
class _Worker:
    pod: Pod
    container: Container
    kind: ProbeKind
    probe: Probe
    counter: ThresholdCounter
    container_id: str = ""
    on_hold: bool = False
    number: int = 0
    task: asyncio.Task[None] | None = None

    @property
    def key(self) -> tuple[str, str, ProbeKind]:
        return (self.pod.uid, self.container.name, self.kind)


def _runtime_id(container_id: str) -> str:
    return container_id.partition("://")[2] if "://" in container_id else container_id


class FakeProbeManager:
    """A :class:`~kubelet_kit.prober.ProbeManager` with scripted probe results.

    Records every call of the protocol's methods in :attr:`calls` and every probe
    run in :attr:`runs`; :meth:`inject_error` makes a method raise.

    Args:
        clock: Times every probe (a new FakeClock if None); share the test's.
        runtime: If given, exec probes without a script run through its
            ``exec_sync``.
        default: The result of a probe with neither a script nor a runtime to
            run it.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        runtime: Runtime | None = None,
        default: ProbeResult = ProbeResult.SUCCESS,
    ) -> None:
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.runtime = runtime
        self.default = default
        #: Every call of a protocol method, oldest first.
        self.calls: list[Call] = []
        #: Every probe run, oldest first.
        self.runs: list[ProbeRun] = []
        self._scripts: dict[tuple[str, str, ProbeKind], list[ProbeResult] | _Numbered] = {}
        self._faults: list[tuple[str, BaseException, int]] = []
        self._workers: dict[tuple[str, str, ProbeKind], _Worker] = {}
        self._caches: dict[ProbeKind, ResultsCache] = {k: ResultsCache() for k in ProbeKind}
        self._pods: dict[str, _PodView] = {}
        self._added: set[str] = set()
        self._queue: asyncio.Queue[ProbeUpdate] = asyncio.Queue()
        self._tg: asyncio.TaskGroup | None = None
        self._stopped = asyncio.Event()
        self._done = asyncio.Event()

    # ------------------------------------------------------------ test controls

    def script(self, pod: Pod | str, container: str, kind: ProbeKind, results: ProbeScript) -> None:
        """Say what a probe finds from now on.

        Args:
            pod: The pod, or its uid, ``namespace/name`` or name.
            container: The container's name.
            kind: Which of its probes.
            results: Results for the next runs, in order (the last one repeats;
                an empty list removes the script), or a callable of the run's
                number (from 0, counted over every run of that probe, across
                container restarts). UNKNOWN is a prober error, which the
                manager discards.
        """
        key = (pod.uid if isinstance(pod, Pod) else pod, container, kind)
        if callable(results):
            self._scripts[key] = results
        elif results:
            self._scripts[key] = list(results)
        else:
            self._scripts.pop(key, None)

    def inject_error(self, method: str, exc: BaseException, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` raise ``exc``.

        ``updates`` raises when the iterator is first advanced; ``run`` raises
        at once (a fatal error of the manager).

        Raises:
            ValueError: ``method`` is not a ProbeManager method, or ``times < 1``.
        """
        if method not in PROBE_MANAGER_METHODS:
            raise ValueError(
                f"inject_error: {method!r} is not a ProbeManager method; expected one of "
                f"{', '.join(sorted(PROBE_MANAGER_METHODS))}"
            )
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._faults.append((method, exc, times))

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        return [c for c in self.calls if c.method == method]

    def runs_of(self, container: str, kind: ProbeKind) -> list[ProbeRun]:
        """The runs of one container's probe of ``kind`` (every pod), oldest first."""
        return [r for r in self.runs if r.container_name == container and r.kind is kind]

    def result(self, kind: ProbeKind, container_id: str) -> ProbeResult | None:
        """The published result of ``kind`` for a container id, or None."""
        return self._caches[kind].get(_runtime_id(container_id))

    def has_probe(self, pod_uid: str, container_name: str, kind: ProbeKind) -> bool:
        """Whether a worker exists for that probe."""
        return (pod_uid, container_name, kind) in self._workers

    # ------------------------------------------------------------ ProbeManager

    async def run(self) -> None:
        """Run the probe workers until :meth:`stop`. Call once; a stopped manager
        does not run again.

        Raises:
            BaseException: whatever :meth:`inject_error` queued for ``run``.
        """
        self._enter("run")
        if self._stopped.is_set():
            self._done.set()
            return
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for worker in list(self._workers.values()):
                    self._start(worker)
                await self._stopped.wait()
                for worker in list(self._workers.values()):
                    self._stop_worker(worker)
        finally:
            self._tg = None
            self._done.set()

    async def stop(self) -> None:
        """Stop every worker and end :meth:`updates`; waits for :meth:`run` to
        return. Idempotent."""
        self._enter("stop")
        self._stopped.set()
        if self._tg is not None:
            await self._done.wait()

    def add_pod(self, pod: Pod) -> None:
        """Start a worker for every probe of the pod's containers and sidecars.
        Never blocks; idempotent (an existing worker keeps its probe settings and
        takes the new pod object)."""
        self._enter("add_pod", pod)
        self._added.add(pod.uid)
        containers = [c for c in pod.spec.init_containers if c.is_sidecar]
        containers.extend(pod.spec.containers)
        for container in containers:
            for kind, probe in (
                (ProbeKind.STARTUP, container.startup_probe),
                (ProbeKind.READINESS, container.readiness_probe),
                (ProbeKind.LIVENESS, container.liveness_probe),
            ):
                if probe is None:
                    continue
                existing = self._workers.get((pod.uid, container.name, kind))
                if existing is not None:
                    existing.pod = pod
                    continue
                worker = _Worker(
                    pod,
                    container,
                    kind,
                    probe,
                    ThresholdCounter(probe.success_threshold, probe.failure_threshold),
                )
                self._workers[worker.key] = worker
                self._start(worker)

    def remove_pod(self, pod: Pod) -> None:
        """Stop the pod's workers and forget its results. Never blocks; idempotent."""
        self._enter("remove_pod", pod)
        for key, worker in list(self._workers.items()):
            if key[0] == pod.uid:
                self._stop_worker(worker)
        self._pods.pop(pod.uid, None)
        self._added.discard(pod.uid)

    def update_pod_status(self, pod: Pod, status: PodStatus) -> PodStatus:
        """Fold the published results into ``status`` (each container's
        ``started`` and ``ready``, as the kubelet does) and, for a pod that was
        added, take ``status`` as what the workers probe. Never blocks."""
        self._enter("update_pod_status", pod, status)
        if pod.uid in self._added:
            self._observe(pod.uid, status)
        folded, _trigger = fold_pod_status(
            pod,
            status,
            lambda kind, cid: self._caches[kind].get(_runtime_id(cid)) if cid else None,
            lambda name, kind: (pod.uid, name, kind) in self._workers,
        )
        return folded

    async def updates(self) -> AsyncIterator[ProbeUpdate]:
        """Published result changes, in order. Single consumer (the composer). Ends
        once the manager is stopped and the queued updates are drained."""
        self._enter("updates")
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
                    if not get.done():
                        get.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await get
                if not get.cancelled():
                    yield get.result()
        finally:
            stopped.cancel()

    # ------------------------------------------------------------ internals

    def _enter(self, method: str, *args: object) -> None:
        self.calls.append(Call(method, args))
        for i, (name, exc, times) in enumerate(self._faults):
            if name != method:
                continue
            if times <= 1:
                del self._faults[i]
            else:
                self._faults[i] = (name, exc, times - 1)
            raise exc.with_traceback(None)

    def _observe(self, pod_uid: str, status: PodStatus) -> None:
        view = self._pods.setdefault(pod_uid, _PodView())
        view.phase = status.phase
        for cs in (*status.init_container_statuses, *status.container_statuses):
            cid = _runtime_id(cs.container_id)
            running = cs.state.running
            started_at: float | None = None
            if running is not None:
                old = view.containers.get(cs.name)
                if running.started_at is not None:
                    started_at = running.started_at.timestamp()
                elif old is not None and old.container_id == cid and old.started_at is not None:
                    started_at = old.started_at
                else:
                    started_at = self.clock.now()
            view.containers[cs.name] = _ContainerView(
                cid, running is not None, started_at, cs.state.terminated is not None
            )

    def _start(self, worker: _Worker) -> None:
        if self._tg is None or worker.task is not None:
            return
        task = self._tg.create_task(
            self._work(worker), name=f"fake-probe-{worker.kind.value}-{worker.container.name}"
        )
        worker.task = task
        task.add_done_callback(lambda _t: self._worker_done(worker))

    def _stop_worker(self, worker: _Worker) -> None:
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]
        if worker.task is not None:
            worker.task.cancel()
        else:
            self._worker_done(worker)

    def _worker_done(self, worker: _Worker) -> None:
        current = self._workers.get(worker.key)
        if current is worker:
            del self._workers[worker.key]
        elif current is not None:
            return  # the pod was added again: the new worker owns the results
        if worker.container_id:
            self._caches[worker.kind].remove(worker.container_id)

    async def _work(self, worker: _Worker) -> None:
        period = float(worker.probe.period_seconds)
        while await self._tick(worker):
            await self.clock.sleep(period)

    async def _tick(self, w: _Worker) -> bool:
        """One period of a worker; False when it should end."""
        view = self._pods.get(w.pod.uid)
        if view is None:
            return True
        if view.phase in _TERMINAL_PHASES:
            return False
        c = view.containers.get(w.container.name)
        if c is None or not c.container_id:
            return True
        if c.container_id != w.container_id:
            if w.container_id:
                self._caches[w.kind].remove(w.container_id)
            w.container_id = c.container_id
            w.on_hold = False
            w.counter.reset()
            if self._caches[w.kind].get(w.container_id) is None:
                self._publish(w, INITIAL_RESULTS[w.kind], "")
        if w.on_hold:
            return True
        if not c.running:
            if w.kind is ProbeKind.READINESS:
                self._publish(w, ProbeResult.FAILURE, "container is not running")
            return not (c.terminated and w.pod.spec.restart_policy == "Never")
        if w.pod.metadata.deletion_timestamp is not None and w.kind is not ProbeKind.READINESS:
            self._publish(w, ProbeResult.SUCCESS, "")
            return False
        if c.started_at is not None and (
            int(self.clock.now() - c.started_at) < w.probe.initial_delay_seconds
        ):
            return True
        if self._is_started(w) == (w.kind is ProbeKind.STARTUP):
            return True
        result, message = await self._probe(w)
        self.runs.append(
            ProbeRun(
                self.clock.monotonic(), w.pod.uid, w.container.name, w.container_id, w.kind, result
            )
        )
        if result is ProbeResult.UNKNOWN or not w.counter.observe(result):
            return True
        self._publish(w, result, message)
        if w.kind is ProbeKind.STARTUP or (
            w.kind is ProbeKind.LIVENESS and result is ProbeResult.FAILURE
        ):
            w.on_hold = True
            w.counter.reset()
        return True

    def _is_started(self, w: _Worker) -> bool:
        if (w.pod.uid, w.container.name, ProbeKind.STARTUP) not in self._workers:
            return True
        return self._caches[ProbeKind.STARTUP].get(w.container_id) is ProbeResult.SUCCESS

    def _script_for(self, w: _Worker) -> list[ProbeResult] | _Numbered | None:
        pod = w.pod
        for name in (pod.uid, f"{pod.namespace}/{pod.name}", pod.name):
            script = self._scripts.get((name, w.container.name, w.kind))
            if script is not None:
                return script
        return None

    async def _probe(self, w: _Worker) -> tuple[ProbeResult, str]:
        number, w.number = w.number, w.number + 1
        script = self._script_for(w)
        if script is not None:
            if callable(script):
                return script(number), ""
            return (script.pop(0) if len(script) > 1 else script[0]), ""
        if self.runtime is not None and w.probe.exec is not None:
            from kubelet_kit.prober.probers import ProbeStatus, exec_probe, expand_command

            command = expand_command(w.probe.exec.command, w.container.env)
            outcome = await exec_probe(
                self.runtime, w.container_id, command, float(w.probe.timeout_seconds)
            )
            if outcome.status is ProbeStatus.UNKNOWN:
                return ProbeResult.UNKNOWN, outcome.output
            return (
                ProbeResult.SUCCESS if outcome.succeeded else ProbeResult.FAILURE
            ), outcome.output
        return self.default, ""

    def _publish(self, w: _Worker, result: ProbeResult, message: str) -> None:
        if not self._caches[w.kind].set(w.container_id, result):
            return
        self._queue.put_nowait(
            ProbeUpdate(
                pod_uid=w.pod.uid,
                container_name=w.container.name,
                container_id=w.container_id,
                kind=w.kind,
                result=result,
                message=message,
                termination_grace_period_seconds=w.probe.termination_grace_period_seconds,
            )
        )
