"""Conversions of the runtime's own messages: version, status, container events.

What ``Version`` and ``Status`` answer, and the ``ContainerEventResponse`` of
the event stream, which carries sandbox and container statuses.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    RuntimeCondition,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.cri._convert_container import container_status_from_pb, container_status_to_pb
from kubelet_kit.cri._convert_sandbox import sandbox_status_from_pb, sandbox_status_to_pb
from kubelet_kit.cri._convert_values import Message, ns_to_seconds, seconds_to_ns
from kubelet_kit.cri.gen import api_pb2 as pb

# ------------------------------------------------------------ runtime info


def version_to_pb(v: VersionInfo) -> Message:
    """A :class:`VersionInfo` as ``runtime.v1.VersionResponse``."""
    return pb.VersionResponse(
        version=v.version,
        runtime_name=v.runtime_name,
        runtime_version=v.runtime_version,
        runtime_api_version=v.runtime_api_version,
    )


def version_from_pb(msg: Message) -> VersionInfo:
    """A ``runtime.v1.VersionResponse`` as :class:`VersionInfo`."""
    return VersionInfo(
        runtime_name=msg.runtime_name,
        runtime_version=msg.runtime_version,
        runtime_api_version=msg.runtime_api_version,
        version=msg.version,
    )


def runtime_status_to_pb(status: RuntimeStatus) -> Message:
    """A :class:`RuntimeStatus` as ``runtime.v1.RuntimeStatus``."""
    return pb.RuntimeStatus(
        conditions=[
            pb.RuntimeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in status.conditions
        ]
    )


def runtime_status_from_pb(msg: Message) -> RuntimeStatus:
    """A ``runtime.v1.RuntimeStatus`` as :class:`RuntimeStatus`."""
    return RuntimeStatus(
        conditions=tuple(
            RuntimeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in msg.conditions
        )
    )


# ------------------------------------------------------------------ events


def container_event_to_pb(event: ContainerEvent) -> Message:
    """A :class:`ContainerEvent` as ``runtime.v1.ContainerEventResponse``."""
    msg = pb.ContainerEventResponse(
        container_id=event.container_id,
        container_event_type=pb.ContainerEventType.Value(event.type.value),
        created_at=seconds_to_ns(event.created_at),
        containers_statuses=[container_status_to_pb(s) for s in event.containers_statuses],
    )
    if event.pod_sandbox_status is not None:
        msg.pod_sandbox_status.CopyFrom(sandbox_status_to_pb(event.pod_sandbox_status))
    return msg


def container_event_from_pb(msg: Message) -> ContainerEvent:
    """A ``runtime.v1.ContainerEventResponse`` as :class:`ContainerEvent`.

    Raises:
        ValueError: the event type is one this version does not know.
    """
    return ContainerEvent(
        container_id=msg.container_id,
        type=ContainerEventType(pb.ContainerEventType.Name(msg.container_event_type)),
        created_at=ns_to_seconds(msg.created_at),
        pod_sandbox_status=(
            sandbox_status_from_pb(msg.pod_sandbox_status)
            if msg.HasField("pod_sandbox_status")
            else None
        ),
        containers_statuses=tuple(container_status_from_pb(s) for s in msg.containers_statuses),
    )
