"""FakeEvictionManager: an EvictionManager driven by node stats a test sets.

A test of what the agent does under memory pressure sets the numbers and moves
the clock::

    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    evictions = FakeEvictionManager(clock=clock, stats=stats)  # memory.available<100Mi
    stats.set_pod(hog, memory="900Mi")
    stats.set_memory(available="50Mi", capacity="8Gi")
    ...                          # the agent runs evictions.run(kill_pod, active_pods)
    await clock.run_for(10)      # the hog is evicted: reason Evicted, the kubelet's message
    assert evictions.node_conditions() == {"MemoryPressure"}
    assert evictions.evicted == ["hog"]

The fake decides with the project's own pure functions, as the reference
:class:`~kubelet_kit.eviction.ThresholdEvictionManager` does: the thresholds met
(:func:`~kubelet_kit.eviction.thresholds_met`, minimum reclaim included), the
conditions held for the transition period, soft thresholds acting after their
grace period, the kubelet's ranking for the signal
(:func:`~kubelet_kit.eviction.rank_for_signal`), one pod per round, critical
pods spared, the kubelet's message (:func:`~kubelet_kit.eviction.eviction_message`)
and admission (:func:`~kubelet_kit.eviction.admit_under_pressure`). A round runs
when :meth:`~FakeEvictionManager.run` starts and every monitoring interval after;
:meth:`~FakeEvictionManager.synchronize` runs one by hand.

Pressure can also be scripted outright: :meth:`~FakeEvictionManager.set_pressure`
reports a condition whatever the stats say (and clears it at once when
removed); under scripted ``MemoryPressure`` (``DiskPressure``, ``PIDPressure``)
every round evicts the pod the kubelet's memory (disk, PID) ranking puts first,
as a hard threshold would.

Deliberate differences from the reference: nothing is reclaimed at node level
(no dead containers or images are deleted before evicting), pods over their own
local-storage limits are not evicted, and there are no metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.api.status import DISRUPTION_TARGET, TERMINATION_BY_KUBELET, PodCondition
from kubelet_kit.clock import Clock
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.eviction.interfaces import ActivePodsFunc, KillPodFunc
from kubelet_kit.eviction.policy import (
    EVICTED_REASON,
    admit_under_pressure,
    eviction_message,
    is_critical_pod,
)
from kubelet_kit.eviction.ranking import RequestCache, rank_for_signal
from kubelet_kit.eviction.stats import PodUsage, StatsProvider, make_observations
from kubelet_kit.eviction.thresholds import (
    DISK_PRESSURE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    PID_AVAILABLE,
    PID_PRESSURE,
    SIGNAL_TO_RESOURCE,
    EvictionConfig,
    Observation,
    Threshold,
    merge_thresholds,
    node_conditions,
    node_conditions_last_observed_at,
    node_conditions_observed_since,
    sort_by_eviction_priority,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
)
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import Call
from kubelet_kit.testing.fake_stats import FakeStatsProvider

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = ["EVICTION_MANAGER_METHODS", "Eviction", "FakeEvictionManager"]

_log = logging.getLogger(__name__)

#: The methods the call log records and :meth:`FakeEvictionManager.inject_error`
#: accepts: the EvictionManager protocol's, and ``synchronize`` (one round).
EVICTION_MANAGER_METHODS: Final = frozenset(
    {"run", "stop", "admit", "node_conditions", "synchronize"}
)

#: The signal a scripted condition evicts for, as a hard threshold of it would.
_SCRIPTED_SIGNAL: Final[Mapping[str, str]] = {
    MEMORY_PRESSURE: MEMORY_AVAILABLE,
    DISK_PRESSURE: NODEFS_AVAILABLE,
    PID_PRESSURE: PID_AVAILABLE,
}
_CONDITIONS: Final = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)


@attrs.frozen
class Eviction:
    """One pod a :class:`FakeEvictionManager` evicted (what it passed to ``kill_pod``).

    Attributes:
        pod: The pod.
        grace_period: Seconds it was given.
        reason: ``Evicted``.
        message: The kubelet's message.
        condition: The ``DisruptionTarget`` condition given with it.
        signal: The signal it was evicted for.
        time: The clock's monotonic time of the eviction.
    """

    pod: Pod
    grace_period: float
    reason: str
    message: str
    condition: PodCondition | None
    signal: str
    time: float


class FakeEvictionManager:
    """A working :class:`~kubelet_kit.eviction.EvictionManager` for tests.

    Records every call in :attr:`calls` and every eviction in :attr:`evictions`;
    :meth:`inject_error` makes a method raise (an error injected into
    ``synchronize`` fails one round, which :meth:`run` logs before going on, as
    the reference does with a failed round).

    Args:
        clock: Times rounds, grace and transition periods (a new FakeClock if
            None); share the test's.
        stats: What the node measures; a :class:`FakeStatsProvider` on ``clock``
            (reachable as :attr:`stats`) if None.
        config: A KubeletConfiguration whose ``eviction*`` fields to read
            (default: the kubelet's defaults, ``memory.available<100Mi`` and
            the disk thresholds).
        thresholds: The thresholds to enforce, instead of the configuration's.
        pressure_transition_period: Instead of the configuration's.
        max_pod_grace_period: Instead of the configuration's.
        monitoring_interval: Seconds between rounds (10 by default).
        hard_eviction_grace_period: Grace period of a hard eviction (0).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        stats: StatsProvider | None = None,
        config: KubeletConfiguration | None = None,
        thresholds: Sequence[Threshold] | None = None,
        pressure_transition_period: float | None = None,
        max_pod_grace_period: int | None = None,
        monitoring_interval: float | None = None,
        hard_eviction_grace_period: float = 0.0,
    ) -> None:
        cfg = EvictionConfig.from_kubelet_config(config or KubeletConfiguration())
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.stats: StatsProvider = (
            stats if stats is not None else FakeStatsProvider(clock=self.clock)
        )
        self.thresholds: tuple[Threshold, ...] = (
            tuple(thresholds) if thresholds is not None else cfg.thresholds
        )
        self.pressure_transition_period = (
            cfg.pressure_transition_period
            if pressure_transition_period is None
            else pressure_transition_period
        )
        self.max_pod_grace_period = (
            cfg.max_pod_grace_period if max_pod_grace_period is None else max_pod_grace_period
        )
        self.monitoring_interval = (
            cfg.monitoring_interval if monitoring_interval is None else monitoring_interval
        )
        self.hard_eviction_grace_period = hard_eviction_grace_period
        #: Every call, oldest first.
        self.calls: list[Call] = []
        #: Every eviction, oldest first.
        self.evictions: list[Eviction] = []
        self._scripted: set[str] = set()
        self._faults: list[tuple[str, BaseException, int]] = []
        self._conditions: list[str] = []
        self._last_observed: dict[str, float] = {}
        self._first_observed: dict[Threshold, float] = {}
        self._met: list[Threshold] = []
        self._last_observations: dict[str, Observation] = {}
        self._requests = RequestCache()
        self._stopped = asyncio.Event()

    # ------------------------------------------------------------ test controls

    def set_pressure(self, *conditions: str) -> None:
        """Report exactly these conditions on top of what the stats say, and evict
        for them every round (``set_pressure()`` clears the script).

        Raises:
            ValueError: not ``MemoryPressure``, ``DiskPressure`` or ``PIDPressure``.
        """
        unknown = [c for c in conditions if c not in _CONDITIONS]
        if unknown:
            raise ValueError(f"set_pressure: unknown condition(s) {unknown}")
        self._scripted = set(conditions)

    def inject_error(self, method: str, exc: BaseException, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` raise ``exc``.

        Raises:
            ValueError: ``method`` is not one of :data:`EVICTION_MANAGER_METHODS`,
                or ``times < 1``.
        """
        if method not in EVICTION_MANAGER_METHODS:
            raise ValueError(
                f"inject_error: {method!r} is not an EvictionManager method; expected one of "
                f"{', '.join(sorted(EVICTION_MANAGER_METHODS))}"
            )
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._faults.append((method, exc, times))

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        return [c for c in self.calls if c.method == method]

    @property
    def evicted(self) -> list[str]:
        """Names of the pods evicted, in order."""
        return [e.pod.name for e in self.evictions]

    # ------------------------------------------------------------ EvictionManager

    async def run(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> None:
        """A round now and every monitoring interval until :meth:`stop`. A failed
        round is logged and the next one runs on time.

        Raises:
            BaseException: whatever :meth:`inject_error` queued for ``run``.
        """
        self._enter("run", kill_pod, active_pods)
        while not self._stopped.is_set():
            try:
                await self.synchronize(kill_pod, active_pods)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("fake eviction manager: a round failed")
            sleeper = asyncio.ensure_future(self.clock.sleep(self.monitoring_interval))
            stopper = asyncio.ensure_future(self._stopped.wait())
            try:
                await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                stopper.cancel()

    async def stop(self) -> None:
        """Make :meth:`run` return. Idempotent."""
        self._enter("stop")
        self._stopped.set()

    def admit(self, pod: Pod) -> AdmitResult:
        """Refuse what the kubelet refuses under the conditions now reported. Never
        blocks."""
        self._enter("admit", pod)
        return admit_under_pressure(pod, self._reported())

    def node_conditions(self) -> frozenset[str]:
        """Conditions now reported, from the stats and the script. Never blocks."""
        self._enter("node_conditions")
        return frozenset(self._reported())

    async def synchronize(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> Pod | None:
        """One round: measure, update the conditions, evict at most one pod.

        Returns:
            The pod evicted, if any.

        Raises:
            BaseException: whatever :meth:`inject_error` queued for
                ``synchronize``. A stats error (KubeletKitError or OSError) ends
                the round quietly, as in the reference.
        """
        self._enter("synchronize", kill_pod, active_pods)
        pods = list(active_pods())
        try:
            summary = await self.stats.summary(pods)
        except (KubeletKitError, OSError) as exc:
            _log.error("fake eviction manager: failed to get stats: %s", exc)
            return None
        observations = make_observations(summary)
        usage = {p.uid: p for p in summary.pods}
        now = self.clock.monotonic()
        met = thresholds_met(self.thresholds, observations, False)
        if self._met:
            met = merge_thresholds(met, thresholds_met(self._met, observations, True))
        first = thresholds_first_observed_at(met, self._first_observed, now)
        last = node_conditions_last_observed_at(node_conditions(met), self._last_observed, now)
        self._conditions = node_conditions_observed_since(
            last, self.pressure_transition_period, now
        )
        self._first_observed, self._last_observed = first, last
        self._met = acting = thresholds_met_grace_period(first, now)
        acting = thresholds_updated_stats(acting, observations, self._last_observations)
        self._last_observations = observations

        threshold = next(
            (t for t in sort_by_eviction_priority(acting) if t.signal in SIGNAL_TO_RESOURCE), None
        )
        if threshold is not None:
            signal, hard = threshold.signal, threshold.hard
        else:
            scripted = [c for c in _CONDITIONS if c in self._scripted]
            if not scripted:
                return None
            signal, hard = _SCRIPTED_SIGNAL[scripted[0]], True
        return await self._evict_one(
            pods, usage, signal, hard, acting, observations, summary.dedicated_image_fs, kill_pod
        )

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

    def _reported(self) -> list[str]:
        found = set(self._conditions) | self._scripted
        return [c for c in _CONDITIONS if c in found]

    async def _evict_one(
        self,
        pods: list[Pod],
        usage: Mapping[str, PodUsage],
        signal: str,
        hard: bool,
        acting: Sequence[Threshold],
        observations: Mapping[str, Observation],
        dedicated_image_fs: bool,
        kill_pod: KillPodFunc,
    ) -> Pod | None:
        rank = rank_for_signal(signal, dedicated_image_fs)
        if rank is None or not pods:
            return None
        ranked = rank(pods, usage, cache=self._requests)
        self._requests.retain(pods)
        victim = next((p for p in ranked if not is_critical_pod(p)), None)
        if victim is None:
            return None
        resource = SIGNAL_TO_RESOURCE[signal]
        message = eviction_message(resource, victim, usage.get(victim.uid), acting, observations)
        condition = PodCondition(
            type=DISRUPTION_TARGET, status="True", reason=TERMINATION_BY_KUBELET, message=message
        )
        if hard:
            grace = self.hard_eviction_grace_period
        else:
            grace = float(
                min(max(0, self.max_pod_grace_period), victim.spec.termination_grace_period_seconds)
            )
        self.evictions.append(
            Eviction(
                victim, grace, EVICTED_REASON, message, condition, signal, self.clock.monotonic()
            )
        )
        try:
            await kill_pod(victim, grace, EVICTED_REASON, message, condition=condition)
        except asyncio.CancelledError:
            raise
        except Exception:
            # As the kubelet: the pod counts as evicted even when stopping it failed.
            _log.exception("fake eviction manager: pod %s failed to evict", victim.full_name)
        return victim
