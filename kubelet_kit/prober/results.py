"""Probe bookkeeping without an event loop: threshold counting, result caches, and
folding cached results into a pod's status.

Everything here is plain synchronous code, so the kubelet's rules are tested
directly (``tests/test_prober_results.py``) and the async workers stay thin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Final

import attrs

from kubelet_kit.api import ContainerStatus, Pod, PodStatus
from kubelet_kit.prober.interfaces import ProbeKind, ProbeResult

__all__ = [
    "INITIAL_RESULTS",
    "ResultsCache",
    "ThresholdCounter",
    "fold_pod_status",
    "is_started",
]

#: What a probe reports for a new container before its first verdict (the kubelet's
#: worker ``initialValue``): not ready, alive, start not yet known.
INITIAL_RESULTS: Final = {
    ProbeKind.READINESS: ProbeResult.FAILURE,
    ProbeKind.LIVENESS: ProbeResult.SUCCESS,
    ProbeKind.STARTUP: ProbeResult.UNKNOWN,
}


@attrs.define
class ThresholdCounter:
    """Counts consecutive equal results against a probe's thresholds.

    A result is acted upon only once it has been seen ``success_threshold``
    (success) or ``failure_threshold`` (failure) times in a row, as the kubelet's
    worker does with ``lastResult``/``resultRun``.
    """

    success_threshold: int
    failure_threshold: int
    last: ProbeResult | None = None
    run: int = 0

    def observe(self, result: ProbeResult) -> bool:
        """Record ``result``; True when it has now reached its threshold."""
        if result is self.last:
            self.run += 1
        else:
            self.last = result
            self.run = 1
        if result is ProbeResult.FAILURE:
            return self.run >= self.failure_threshold
        if result is ProbeResult.SUCCESS:
            return self.run >= self.success_threshold
        return True

    def reset(self) -> None:
        """Forget the run (after a published verdict that puts the worker on hold,
        and for a new container)."""
        self.last = None
        self.run = 0


class ResultsCache:
    """The latest published result of one probe kind, by container id."""

    def __init__(self) -> None:
        self._results: dict[str, ProbeResult] = {}

    def get(self, container_id: str) -> ProbeResult | None:
        """The cached result, or None if there is none."""
        return self._results.get(container_id)

    def set(self, container_id: str, result: ProbeResult) -> bool:
        """Cache ``result``; True if that changed what was cached."""
        previous = self._results.get(container_id)
        self._results[container_id] = result
        return previous is not result

    def remove(self, container_id: str) -> None:
        """Forget the container. Idempotent."""
        self._results.pop(container_id, None)

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._results))


ResultLookup = Callable[[ProbeKind, str], ProbeResult | None]
WorkerLookup = Callable[[str, ProbeKind], bool]


def is_started(status: ContainerStatus, result_of: ResultLookup, has_worker: WorkerLookup) -> bool:
    """The kubelet's ``started``: running, and the startup probe succeeded (or
    there is none)."""
    if status.state.running is None:
        return False
    startup = result_of(ProbeKind.STARTUP, status.container_id)
    if startup is not None:
        return startup is ProbeResult.SUCCESS
    # A startup probe that has not run yet means "not started"; none means started.
    return not has_worker(status.name, ProbeKind.STARTUP)


def _ready(
    status: ContainerStatus,
    result_of: ResultLookup,
    has_worker: WorkerLookup,
    trigger: list[str],
) -> bool:
    if status.state.running is None:
        return False
    if result_of(ProbeKind.READINESS, status.container_id) is ProbeResult.SUCCESS:
        return True
    if has_worker(status.name, ProbeKind.READINESS):
        # Not ready yet: ask the readiness worker to run now rather than at its
        # next period, as the kubelet does.
        trigger.append(status.name)
        return False
    return True  # no readiness probe: ready once started and running


def fold_pod_status(
    pod: Pod,
    status: PodStatus,
    result_of: ResultLookup,
    has_worker: WorkerLookup,
    previous: PodStatus | None = None,
) -> tuple[PodStatus, list[str]]:
    """Set ``started`` and ``ready`` of every container status from probe results.

    The kubelet's ``UpdatePodStatus``: a regular container or sidecar is started
    when it runs and its startup probe succeeded (or it has none), and ready when
    it is started, runs, and its readiness probe succeeded (or it has none). A
    regular init container is ready once it exited 0.

    Args:
        pod: The pod (to tell sidecars from other init containers).
        status: The status to fold into; not modified.
        result_of: ``(kind, container_id) -> cached result or None``.
        has_worker: ``(container_name, kind) -> whether that probe exists``.
        previous: What the last fold for this pod returned, if known. A container
            status that needs a copy and equals the one at its place there is
            that one (statuses are generated on every sync, mostly unchanged:
            the previous copy serves, and the caller's "did it change?" is
            answered by identity).

    Returns:
        The new status, and the names of containers whose readiness probe should
        run now.
    """
    trigger: list[str] = []
    regular = _fold_all(
        status.container_statuses,
        frozenset(),
        result_of,
        has_worker,
        trigger,
        previous.container_statuses if previous is not None else (),
    )
    inits: Sequence[ContainerStatus] = status.init_container_statuses
    if inits:
        sidecars = frozenset(c.name for c in pod.spec.init_containers if c.is_sidecar)
        inits = _fold_all(
            inits,
            sidecars,
            result_of,
            has_worker,
            trigger,
            previous.init_container_statuses if previous is not None else (),
            init=True,
        )
    if regular is status.container_statuses and inits is status.init_container_statuses:
        return status, trigger
    folded = status.with_parts(tuple(inits), tuple(regular), status.conditions)
    return folded, trigger


def _fold_all(
    statuses: Sequence[ContainerStatus],
    sidecars: frozenset[str],
    result_of: ResultLookup,
    has_worker: WorkerLookup,
    trigger: list[str],
    before: Sequence[ContainerStatus],
    *,
    init: bool = False,
) -> Sequence[ContainerStatus]:
    # ``statuses`` itself when no status changes. The lookups are made in the
    # order is_started and _ready make them (a caller's lookups may count).
    # Copies name every field of the model: a direct constructor costs about half
    # of attrs.evolve, and tests/test_prober_results.py fails when a field is
    # added to ContainerStatus or PodStatus without being added here.
    folded: list[ContainerStatus] | None = None
    for i, cs in enumerate(statuses):
        started = is_started(cs, result_of, has_worker)
        if init and cs.name not in sidecars:
            # A regular init container is ready once it exited 0.
            term = cs.state.terminated
            ready = term is not None and term.exit_code == 0
        else:
            ready = started and _ready(cs, result_of, has_worker, trigger)
        if cs.started is started and cs.ready is ready:
            continue  # (a value: the same one serves, and costs no copy)
        if folded is None:
            folded = list(statuses)
        prior = before[i] if i < len(before) else None
        if prior is not None and _is_folded_copy(prior, cs, ready, started):
            folded[i] = prior
        else:
            folded[i] = cs.with_life(cs.state, cs.last_state, ready, started)
    return statuses if folded is None else folded


def _is_folded_copy(
    prior: ContainerStatus, cs: ContainerStatus, ready: bool, started: bool
) -> bool:
    """Whether ``prior`` equals ``cs.with_life(cs.state, cs.last_state, ready,
    started)`` with the same parts (see ``ContainerStatus.keeps_all_but_life_of``)."""
    return (
        prior.ready is ready
        and prior.started is started
        and prior.state is cs.state
        and prior.last_state is cs.last_state
        and prior.keeps_all_but_life_of(cs)
    )
