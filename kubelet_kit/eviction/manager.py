"""ThresholdEvictionManager: the kubelet's eviction control loop on an injected Clock.

Every monitoring interval (10 s, as the kubelet) one :meth:`synchronize` round:

1. measures the node and the active pods through the :class:`StatsProvider`;
2. finds the thresholds met now, plus those met before whose minimum reclaim is
   not yet satisfied;
3. reports pressure conditions, each held until the transition period has passed
   since its threshold was last met;
4. keeps the thresholds met for their grace period (hard ones at once) whose
   stats are newer than at the last round;
5. for the first of them (memory first), frees node-level resources through the
   Runtime where the signal allows (dead containers, unused images) and stops if
   that resolved every threshold;
6. otherwise ranks the active pods for that signal and evicts the first one that
   is not critical: ``kill_pod(pod, grace, "Evicted", message)``, grace
   ``hard_eviction_grace_period`` for a hard threshold, else
   ``min(max_pod_grace_period, terminationGracePeriodSeconds)``.

Between steps 3 and 4, while ``local_storage_capacity_isolation`` is on (the
kubelet's default), every pod over a local-storage limit of its own (an emptyDir's
``sizeLimit``, the pod's or a container's ``ephemeral-storage`` limit; see
:mod:`kubelet_kit.eviction.local_storage`) is evicted at once, and the round ends
there. Those pods get no ``DisruptionTarget`` condition, as upstream; a pod
evicted for a node threshold gets ``DisruptionTarget`` (``True``,
``TerminationByKubelet``, with the eviction message).

At most one pod is evicted per round for a node threshold. Condition times and
grace periods are read from the clock's monotonic time, so a FakeClock test drives
the whole loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.api.status import DISRUPTION_TARGET, TERMINATION_BY_KUBELET, PodCondition
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.interfaces import Runtime
from kubelet_kit.errors import ConfigurationError, KubeletKitError
from kubelet_kit.eviction.interfaces import ActivePodsFunc, KillPodFunc
from kubelet_kit.eviction.local_storage import LocalStorageViolation, local_storage_violations
from kubelet_kit.eviction.policy import (
    EVICTED_REASON,
    admit_under_pressure,
    eviction_message,
    is_critical_pod,
)
from kubelet_kit.eviction.ranking import RequestCache, rank_for_signal
from kubelet_kit.eviction.reclaim import reclaim_funcs
from kubelet_kit.eviction.stats import NodeSummary, PodUsage, StatsProvider, make_observations
from kubelet_kit.eviction.thresholds import (
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

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.api import Pod
    from kubelet_kit.eviction.metrics import EvictionMetrics

__all__ = ["IMMEDIATE_EVICTION_GRACE_PERIOD", "ThresholdEvictionManager"]

_log = logging.getLogger(__name__)

#: Grace period (seconds) of a pod evicted for a hard threshold. The kubelet used
#: 0 for years; its newest releases give 1 s (pass ``hard_eviction_grace_period=1``).
IMMEDIATE_EVICTION_GRACE_PERIOD = 0.0


class ThresholdEvictionManager:
    """The reference :class:`~kubelet_kit.eviction.EvictionManager`.

    Configure it from a ``KubeletConfiguration`` (``config=``), from an
    :class:`EvictionConfig` (``eviction_config=``), or with plain arguments;
    plain arguments override the other two.

    Args:
        stats: Measures the node and pods.
        runtime: Used to reclaim dead containers and unused images before
            evicting for disk pressure; without one nothing is reclaimed.
        clock: Time source; the machine's clock by default.
        config: A KubeletConfiguration whose ``eviction*`` fields to read.
        eviction_config: Parsed thresholds and periods.
        thresholds: The thresholds to enforce.
        pressure_transition_period: Seconds a condition stays reported after
            its threshold was last met.
        max_pod_grace_period: Cap on the grace period of a soft eviction.
        monitoring_interval: Seconds between rounds.
        hard_eviction_grace_period: Grace period of a hard eviction, and of an
            eviction for a local-storage limit.
        local_storage_capacity_isolation: Evict pods over their own local-storage
            limits (``localStorageCapacityIsolation``, on by default).
        metrics: Where to count; fresh metrics in ``registry`` when None.
        registry: Registry for fresh metrics.

    Raises:
        ValidationError: ``config`` has a bad eviction field (the field is named).
        ConfigurationError: a plain argument is out of range.
    """

    def __init__(
        self,
        *,
        stats: StatsProvider,
        runtime: Runtime | None = None,
        clock: Clock | None = None,
        config: KubeletConfiguration | None = None,
        eviction_config: EvictionConfig | None = None,
        thresholds: Sequence[Threshold] | None = None,
        pressure_transition_period: float | None = None,
        max_pod_grace_period: int | None = None,
        monitoring_interval: float | None = None,
        hard_eviction_grace_period: float = IMMEDIATE_EVICTION_GRACE_PERIOD,
        local_storage_capacity_isolation: bool | None = None,
        metrics: EvictionMetrics | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if eviction_config is None:
            eviction_config = (
                EvictionConfig.from_kubelet_config(config)
                if config is not None
                else EvictionConfig.from_kubelet_config(KubeletConfiguration())
            )
        cfg = eviction_config
        self.thresholds: tuple[Threshold, ...] = (
            tuple(thresholds) if thresholds is not None else cfg.thresholds
        )
        self.pressure_transition_period = (
            pressure_transition_period
            if pressure_transition_period is not None
            else cfg.pressure_transition_period
        )
        self.max_pod_grace_period = (
            max_pod_grace_period if max_pod_grace_period is not None else cfg.max_pod_grace_period
        )
        self.monitoring_interval = (
            monitoring_interval if monitoring_interval is not None else cfg.monitoring_interval
        )
        self.hard_eviction_grace_period = hard_eviction_grace_period
        self.local_storage_capacity_isolation = (
            local_storage_capacity_isolation
            if local_storage_capacity_isolation is not None
            else cfg.local_storage_capacity_isolation
        )
        for name, value in (
            ("pressure_transition_period", self.pressure_transition_period),
            ("hard_eviction_grace_period", self.hard_eviction_grace_period),
        ):
            if value < 0:
                raise ConfigurationError(f"{name}: must be >= 0, got {value}")
        if self.monitoring_interval <= 0:
            raise ConfigurationError(
                f"monitoring_interval: must be > 0, got {self.monitoring_interval}"
            )
        self.stats = stats
        self.runtime = runtime
        self.clock: Clock = clock if clock is not None else RealClock()
        if metrics is None:  # (prometheus_client loads with the manager, not the module)
            from kubelet_kit.eviction.metrics import EvictionMetrics

            metrics = EvictionMetrics(registry)
        self.metrics = metrics
        self._conditions: list[str] = []
        self._conditions_last_observed: dict[str, float] = {}
        self._first_observed: dict[Threshold, float] = {}
        self._thresholds_met: list[Threshold] = []
        self._last_observations: dict[str, Observation] = {}
        self._requests = RequestCache()
        self._stopped = asyncio.Event()

    # -- EvictionManager protocol ------------------------------------------------

    async def run(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> None:
        """Synchronize every monitoring interval until :meth:`stop`.

        A failed round is logged and the next one runs on time; returns once
        stopped. Raises nothing else.
        """
        while not self._stopped.is_set():
            try:
                await self.synchronize(kill_pod, active_pods)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("eviction manager: synchronize failed")
            sleeper = asyncio.ensure_future(self.clock.sleep(self.monitoring_interval))
            stopper = asyncio.ensure_future(self._stopped.wait())
            try:
                await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                stopper.cancel()

    async def stop(self) -> None:
        """Make :meth:`run` return after the current round. Idempotent."""
        self._stopped.set()

    def admit(self, pod: Pod) -> AdmitResult:
        """Refuse pods the node cannot take under the pressure now reported: BestEffort
        pods under memory pressure, every non-critical pod under disk or PID
        pressure (reason ``Evicted``). Never blocks."""
        return admit_under_pressure(pod, self._conditions)

    def node_conditions(self) -> frozenset[str]:
        """Pressure conditions now reported. Never blocks."""
        return frozenset(self._conditions)

    # -- the control loop ----------------------------------------------------------

    async def synchronize(self, kill_pod: KillPodFunc, active_pods: ActivePodsFunc) -> Pod | None:
        """One round of the control loop; returns the pod evicted, if any.

        Public so tests (and agents with their own loop) can drive rounds one by
        one. Expected failures raise nothing: a stats failure (a KubeletKitError
        or OSError from the StatsProvider) ends the round, a failed reclaim is
        logged, and a failing ``kill_pod`` is logged with the pod still counted as
        evicted, as the kubelet does. Anything else propagates (``run`` logs it).
        When local-storage limits evict several pods in one round, the first of
        them is returned.
        """
        if not self.thresholds and not self.local_storage_capacity_isolation:
            return None
        pods = list(active_pods())
        try:
            summary = await self.stats.summary(pods)
        except (KubeletKitError, OSError) as exc:
            _log.error("eviction manager: failed to get stats: %s", exc)
            return None
        observations = make_observations(summary)
        usage = {p.uid: p for p in summary.pods}

        met = thresholds_met(self.thresholds, observations, False)
        if self._thresholds_met:
            met = merge_thresholds(met, thresholds_met(self._thresholds_met, observations, True))
        now = self.clock.monotonic()
        first_observed = thresholds_first_observed_at(met, self._first_observed, now)
        last_observed = node_conditions_last_observed_at(
            node_conditions(met), self._conditions_last_observed, now
        )
        conditions = node_conditions_observed_since(
            last_observed, self.pressure_transition_period, now
        )
        acting = thresholds_met_grace_period(first_observed, now)

        self._conditions = conditions
        self._first_observed = first_observed
        self._conditions_last_observed = last_observed
        self._thresholds_met = acting
        acting = thresholds_updated_stats(acting, observations, self._last_observations)
        self._last_observations = observations
        self.metrics.set_conditions(conditions)

        if self.local_storage_capacity_isolation:
            over = local_storage_violations(
                pods, usage, dedicated_image_fs=summary.dedicated_image_fs
            )
            evicted = [v.pod for v in over if await self._evict_over_limit(v, kill_pod)]
            if evicted:
                return evicted[0]
        if not acting:
            return None
        acting = sort_by_eviction_priority(acting)
        threshold = next((t for t in acting if t.signal in SIGNAL_TO_RESOURCE), None)
        if threshold is None:
            return None
        resource = SIGNAL_TO_RESOURCE[threshold.signal]
        _log.info("eviction manager: attempting to reclaim %s", resource)

        if await self._reclaim_node_level(threshold.signal, summary, pods):
            _log.info("eviction manager: reclaimed %s without evicting pods", resource)
            return None
        rank = rank_for_signal(threshold.signal, summary.dedicated_image_fs)
        if rank is None or not pods:
            return None
        for t in acting:
            obs = observations.get(t.signal)
            if obs is not None and obs.time:
                self.metrics.stats_age.labels(eviction_signal=t.signal).observe(
                    max(0.0, self.clock.now() - obs.time)
                )
        ranked = rank(pods, usage, cache=self._requests)
        self._requests.retain(pods)
        for pod in ranked:
            if is_critical_pod(pod):
                _log.error("eviction manager: cannot evict a critical pod %s", pod.full_name)
                continue
            await self._evict(pod, threshold, resource, usage, acting, observations, kill_pod)
            return pod
        _log.info("eviction manager: unable to evict any pods from the node")
        return None

    def grace_period_for(self, pod: Pod, threshold: Threshold) -> float:
        """Seconds ``pod`` is given when evicted for ``threshold``."""
        if threshold.hard:
            return self.hard_eviction_grace_period
        return float(
            min(max(0, self.max_pod_grace_period), pod.spec.termination_grace_period_seconds)
        )

    async def _evict(
        self,
        pod: Pod,
        threshold: Threshold,
        resource: str,
        usage: Mapping[str, PodUsage],
        acting: Sequence[Threshold],
        observations: Mapping[str, Observation],
        kill_pod: KillPodFunc,
    ) -> None:
        message = eviction_message(resource, pod, usage.get(pod.uid), acting, observations)
        condition = PodCondition(
            type=DISRUPTION_TARGET, status="True", reason=TERMINATION_BY_KUBELET, message=message
        )
        grace = self.grace_period_for(pod, threshold)
        await self._kill(pod, grace, message, kill_pod, condition)
        self.metrics.evictions.inc(threshold.signal)

    async def _evict_over_limit(self, over: LocalStorageViolation, kill_pod: KillPodFunc) -> bool:
        """Evict a pod over its own local-storage limit; False for a critical pod."""
        if is_critical_pod(over.pod):
            _log.error("eviction manager: cannot evict a critical pod %s", over.pod.full_name)
            return False
        await self._kill(over.pod, self.hard_eviction_grace_period, over.message, kill_pod, None)
        self.metrics.evictions.inc(over.signal)
        return True

    async def _kill(
        self,
        pod: Pod,
        grace: float,
        message: str,
        kill_pod: KillPodFunc,
        condition: PodCondition | None,
    ) -> None:
        _log.info("eviction manager: evicting pod %s (%s)", pod.full_name, message.strip())
        try:
            await kill_pod(pod, grace, EVICTED_REASON, message, condition=condition)
        except asyncio.CancelledError:
            raise
        except Exception:
            # As the kubelet: the pod counts as evicted even when stopping it failed;
            # the next round sees whether pressure is gone.
            _log.exception("eviction manager: pod %s failed to evict", pod.full_name)

    async def _reclaim_node_level(
        self, signal: str, summary: NodeSummary, pods: Sequence[Pod]
    ) -> bool:
        if self.runtime is None:
            return False
        funcs = reclaim_funcs(signal, summary.dedicated_image_fs)
        if not funcs:
            return False
        for func in funcs:
            try:
                await func(self.runtime)
            except KubeletKitError as exc:
                _log.warning("eviction manager: reclaim of %s failed: %s", signal, exc)
        try:
            after = await self.stats.summary(pods)
        except (KubeletKitError, OSError) as exc:
            _log.error("eviction manager: failed to get stats after reclaim: %s", exc)
            return False
        return not thresholds_met(self.thresholds, make_observations(after), True)
