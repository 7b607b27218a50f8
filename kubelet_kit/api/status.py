"""The shape of a pod's status (``v1.PodStatus``): phase, conditions, container states.

Only the shape lives here; computing phase and conditions is the status subsystem's
work. Timestamps are timezone-aware datetimes.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any, Final

import attrs

from kubelet_kit.api.quantity import Quantity
from kubelet_kit.api.serde import Model, always_written

__all__ = [
    "DISRUPTION_TARGET",
    "TERMINATION_BY_KUBELET",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "PodCondition",
    "PodIP",
    "PodStatus",
]

#: The condition type of a pod about to be stopped for a disruption (eviction,
#: preemption, node shutdown), set by whoever stops it.
DISRUPTION_TARGET: Final = "DisruptionTarget"
#: Its reason when the kubelet stops the pod (node-pressure eviction).
TERMINATION_BY_KUBELET: Final = "TerminationByKubelet"


@attrs.frozen(kw_only=True)
class PodCondition(Model):
    """One pod condition (``PodScheduled``, ``Initialized``, ``ContainersReady``,
    ``Ready``, ``PodReadyToStartContainers``, ...); ``status`` is ``"True"``,
    ``"False"`` or ``"Unknown"``."""

    type: str = attrs.field(default="", metadata=always_written())
    status: str = attrs.field(default="", metadata=always_written())
    reason: str = ""
    message: str = ""
    last_probe_time: _dt.datetime | None = None
    last_transition_time: _dt.datetime | None = None


@attrs.frozen(kw_only=True)
class PodIP(Model):
    """One IP address of the pod (or host)."""

    ip: str = ""


@attrs.frozen(kw_only=True)
class ContainerStateWaiting(Model):
    """Not running yet, or waiting to restart (``reason`` e.g. ``CrashLoopBackOff``)."""

    reason: str = ""
    message: str = ""


@attrs.frozen(kw_only=True)
class ContainerStateRunning(Model):
    """Running since ``started_at``."""

    started_at: _dt.datetime | None = None


@attrs.frozen(kw_only=True)
class ContainerStateTerminated(Model):
    """Exited (``reason`` e.g. ``Completed``, ``Error``, ``OOMKilled``)."""

    exit_code: int = 0
    signal: int | None = None
    reason: str = ""
    message: str = ""
    started_at: _dt.datetime | None = None
    finished_at: _dt.datetime | None = None
    container_id: str = ""


@attrs.frozen(kw_only=True)
class ContainerState(Model):
    """A container's state: at most one of waiting, running and terminated is set.

    (Not to be confused with the runtime's ``kubelet_kit.container.ContainerState``
    enum, which is the CRI's view.)
    """

    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


@attrs.frozen(kw_only=True)
class ContainerStatus(Model):
    """Status of one container, as the kubelet reports it."""

    name: str = attrs.field(default="", metadata=always_written())
    state: ContainerState = attrs.field(factory=ContainerState)
    last_state: ContainerState = attrs.field(factory=ContainerState)
    ready: bool = attrs.field(default=False, metadata=always_written())
    restart_count: int = 0
    image: str = attrs.field(default="", metadata=always_written())
    image_id: str = attrs.field(default="", metadata=always_written())
    container_id: str = ""
    started: bool | None = None
    allocated_resources: Mapping[str, Quantity] = attrs.field(factory=dict)
    resources: Mapping[str, Any] | None = None

    def with_life(
        self,
        state: ContainerState,
        last_state: ContainerState,
        ready: bool,
        started: bool | None,
    ) -> ContainerStatus:
        """A copy with the four fields a container's life changes (``state``,
        ``lastState``, ``ready``, ``started``), every other field kept.

        Status generation copies statuses many times a second; this calls the
        constructor directly, where ``attrs.evolve`` looks the fields up each time.
        """
        return ContainerStatus(
            extra=self.extra,
            name=self.name,
            state=state,
            last_state=last_state,
            ready=ready,
            restart_count=self.restart_count,
            image=self.image,
            image_id=self.image_id,
            container_id=self.container_id,
            started=started,
            allocated_resources=self.allocated_resources,
            resources=self.resources,
        )

    def keeps_all_but_life_of(self, other: ContainerStatus) -> bool:
        """Whether every field :meth:`with_life` keeps is, in this status, the same
        as in ``other``, with the same parts: mappings and resources the same
        objects (or both an empty plain dict, a model's default), the restart
        count the same value of the same type, the strings equal.

        Stricter than ``==`` (which takes ``1`` for ``True``) and cheap: nothing
        is compared deeply. Status generation asks it of every container on every
        sync, to hand back a previous status instead of an equal copy.
        """
        return (
            type(self.restart_count) is type(other.restart_count)
            and self.restart_count == other.restart_count
            and self.name == other.name
            and self.image == other.image
            and self.image_id == other.image_id
            and self.container_id == other.container_id
            and self.resources is other.resources
            and same_mapping(self.allocated_resources, other.allocated_resources)
            and same_mapping(self.extra, other.extra)
        )


@attrs.frozen(kw_only=True)
class PodStatus(Model):
    """Observed state of a pod."""

    phase: str = ""
    conditions: tuple[PodCondition, ...] = ()
    message: str = ""
    reason: str = ""
    nominated_node_name: str = ""
    host_ip: str = ""
    host_ips: tuple[PodIP, ...] = ()
    pod_ip: str = ""
    pod_ips: tuple[PodIP, ...] = ()
    start_time: _dt.datetime | None = None
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    container_statuses: tuple[ContainerStatus, ...] = ()
    ephemeral_container_statuses: tuple[ContainerStatus, ...] = ()
    qos_class: str = ""

    def with_parts(
        self,
        init_container_statuses: tuple[ContainerStatus, ...],
        container_statuses: tuple[ContainerStatus, ...],
        conditions: tuple[PodCondition, ...],
    ) -> PodStatus:
        """A copy with other container statuses and conditions, every other field
        kept (a direct constructor call, as :meth:`ContainerStatus.with_life`)."""
        return PodStatus(
            extra=self.extra,
            phase=self.phase,
            conditions=conditions,
            message=self.message,
            reason=self.reason,
            nominated_node_name=self.nominated_node_name,
            host_ip=self.host_ip,
            host_ips=self.host_ips,
            pod_ip=self.pod_ip,
            pod_ips=self.pod_ips,
            start_time=self.start_time,
            init_container_statuses=init_container_statuses,
            container_statuses=container_statuses,
            ephemeral_container_statuses=self.ephemeral_container_statuses,
            qos_class=self.qos_class,
        )

    def condition(self, type_: str) -> PodCondition | None:
        """The condition of that type, or None."""
        return next((c for c in self.conditions if c.type == type_), None)


def same_mapping(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two mapping fields of a model are one object, or both a default
    empty dict (one per instance)."""
    return a is b or (type(a) is dict and not a and type(b) is dict and not b)
