"""What the eviction manager tests share: pods with requests, limits and volumes, a
kill function that frees what the pod held, and a manager with a default threshold."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kubelet_kit.api import (
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodCondition,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Volume,
)
from kubelet_kit.eviction import (
    ThresholdEvictionManager,
    parse_threshold_config,
)
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_stats import FakeStatsProvider

Mi = 1024 * 1024


def make_pod(
    name: str,
    *,
    priority: int | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    grace: int = 30,
    annotations: Mapping[str, str] | None = None,
    tolerations: tuple[Mapping[str, str], ...] = (),
    empty_dirs: tuple[str, ...] = (),
    container: str | None = None,
) -> Pod:
    res = ResourceRequirements(
        requests={k: Quantity.parse(v) for k, v in (requests or {}).items()},
        limits={k: Quantity.parse(v) for k, v in (limits or {}).items()},
    )
    return Pod(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}", annotations=dict(annotations or {})),
        spec=PodSpec(
            priority=priority,
            termination_grace_period_seconds=grace,
            tolerations=tolerations,
            volumes=tuple(Volume(name=v, empty_dir=EmptyDirVolumeSource()) for v in empty_dirs),
            containers=(
                Container(name=container or f"{name}-c", image="busybox:1.36", resources=res),
            ),
        ),
    )


@attrs.define
class Killer:
    """A kill_pod that records its calls and removes the pod from the node."""

    pods: list[Pod]
    stats: FakeStatsProvider
    frees: Mapping[str, int] = attrs.field(factory=dict)
    calls: list[tuple[str, float, str, str]] = attrs.field(factory=list)
    conditions: list[PodCondition | None] = attrs.field(factory=list)

    async def __call__(
        self,
        pod: Pod,
        grace: float,
        reason: str,
        message: str,
        /,
        *,
        condition: PodCondition | None = None,
    ) -> None:
        self.calls.append((pod.name, grace, reason, message))
        self.conditions.append(condition)
        self.pods.remove(pod)
        self.stats.remove_pod(pod)
        freed = self.frees.get(pod.name, 0)
        if freed and self.stats.memory is not None:
            m = self.stats.memory
            assert m.available_bytes is not None and m.working_set_bytes is not None
            self.stats.memory = attrs.evolve(
                m,
                available_bytes=m.available_bytes + freed,
                working_set_bytes=m.working_set_bytes - freed,
            )

    def active(self) -> list[Pod]:
        return list(self.pods)

    @property
    def evicted(self) -> list[str]:
        return [c[0] for c in self.calls]


def manager(
    stats: FakeStatsProvider, clock: FakeClock, **kwargs: object
) -> ThresholdEvictionManager:
    kwargs.setdefault(
        "thresholds", parse_threshold_config(eviction_hard={"memory.available": "500Mi"})
    )
    return ThresholdEvictionManager(stats=stats, clock=clock, **kwargs)  # type: ignore[arg-type]
