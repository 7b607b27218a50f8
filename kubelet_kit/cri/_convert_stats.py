"""Conversions of the stats messages of containers and pod sandboxes.

CPU, memory, process and writable-layer counters travel in wrapper messages, so
a counter the runtime did not report stays ``None`` rather than becoming zero;
a stats value's timestamp is the first one any of its parts carries. The
attributes of a stats message (metadata, labels, annotations) come from the
container or sandbox it is about, when the caller has it: a kubelet names each
container of ``/stats/summary`` by ``attributes.metadata.name``.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerStats,
    PodSandbox,
    PodSandboxStats,
)
from kubelet_kit.cri._convert_values import (
    Message,
    _container_metadata_to_pb,
    _optional_u64,
    _sandbox_metadata_to_pb,
    _set_u64,
    ns_to_seconds,
    seconds_to_ns,
)
from kubelet_kit.cri.gen import api_pb2 as pb

# ------------------------------------------------------------------- stats


def container_stats_to_pb(s: ContainerStats, container: ContainerInfo | None = None) -> Message:
    """A :class:`ContainerStats` as ``runtime.v1.ContainerStats``; ``container`` (the
    one the stats are of) gives the attributes their metadata, labels and annotations."""
    ts = seconds_to_ns(s.timestamp)
    attributes = pb.ContainerAttributes(id=s.container_id)
    if container is not None:
        attributes.metadata.CopyFrom(_container_metadata_to_pb(container.metadata))
        attributes.labels.update(container.labels)
        attributes.annotations.update(container.annotations)
    msg = pb.ContainerStats(
        attributes=attributes,
        cpu=pb.CpuUsage(timestamp=ts),
        memory=pb.MemoryUsage(timestamp=ts),
    )
    _set_u64(msg.cpu, "usage_core_nano_seconds", s.cpu_usage_core_nanoseconds)
    _set_u64(msg.memory, "working_set_bytes", s.memory_working_set_bytes)
    _set_u64(msg.memory, "usage_bytes", s.memory_usage_bytes)
    if s.writable_layer_bytes is not None or s.writable_layer_inodes is not None:
        msg.writable_layer.timestamp = ts
        _set_u64(msg.writable_layer, "used_bytes", s.writable_layer_bytes)
        _set_u64(msg.writable_layer, "inodes_used", s.writable_layer_inodes)
    return msg


def _stats_timestamp(*parts: Message) -> float:
    for part in parts:
        if part.timestamp:
            return ns_to_seconds(part.timestamp)
    return 0.0


def container_stats_from_pb(msg: Message) -> ContainerStats:
    """A ``runtime.v1.ContainerStats`` as :class:`ContainerStats`."""
    return ContainerStats(
        container_id=msg.attributes.id,
        timestamp=_stats_timestamp(msg.cpu, msg.memory, msg.writable_layer),
        cpu_usage_core_nanoseconds=_optional_u64(msg.cpu, "usage_core_nano_seconds"),
        memory_working_set_bytes=_optional_u64(msg.memory, "working_set_bytes"),
        memory_usage_bytes=_optional_u64(msg.memory, "usage_bytes"),
        writable_layer_bytes=_optional_u64(msg.writable_layer, "used_bytes"),
        writable_layer_inodes=_optional_u64(msg.writable_layer, "inodes_used"),
    )


def sandbox_stats_to_pb(
    s: PodSandboxStats,
    sandbox: PodSandbox | None = None,
    containers: Mapping[str, ContainerInfo] | None = None,
) -> Message:
    """A :class:`PodSandboxStats` as ``runtime.v1.PodSandboxStats``; ``sandbox`` and
    ``containers`` (by id) give the attributes of it and its containers."""
    found = containers or {}
    ts = seconds_to_ns(s.timestamp)
    linux = pb.LinuxPodSandboxStats(
        cpu=pb.CpuUsage(timestamp=ts),
        memory=pb.MemoryUsage(timestamp=ts),
        process=pb.ProcessUsage(timestamp=ts),
        containers=[container_stats_to_pb(c, found.get(c.container_id)) for c in s.containers],
    )
    _set_u64(linux.cpu, "usage_core_nano_seconds", s.cpu_usage_core_nanoseconds)
    _set_u64(linux.memory, "working_set_bytes", s.memory_working_set_bytes)
    _set_u64(linux.process, "process_count", s.process_count)
    attributes = pb.PodSandboxAttributes(id=s.pod_sandbox_id)
    if sandbox is not None:
        attributes.metadata.CopyFrom(_sandbox_metadata_to_pb(sandbox.metadata))
        attributes.labels.update(sandbox.labels)
        attributes.annotations.update(sandbox.annotations)
    return pb.PodSandboxStats(attributes=attributes, linux=linux)


def sandbox_stats_from_pb(msg: Message) -> PodSandboxStats:
    """A ``runtime.v1.PodSandboxStats`` as :class:`PodSandboxStats`."""
    linux = msg.linux
    return PodSandboxStats(
        pod_sandbox_id=msg.attributes.id,
        timestamp=_stats_timestamp(linux.cpu, linux.memory, linux.process),
        cpu_usage_core_nanoseconds=_optional_u64(linux.cpu, "usage_core_nano_seconds"),
        memory_working_set_bytes=_optional_u64(linux.memory, "working_set_bytes"),
        process_count=_optional_u64(linux.process, "process_count"),
        containers=tuple(container_stats_from_pb(c) for c in linux.containers),
    )
