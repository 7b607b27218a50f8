"""Conversions of the stats messages of containers and pod sandboxes.

CPU, memory, process and writable-layer counters travel in wrapper messages, so
a counter the runtime did not report stays ``None`` rather than becoming zero;
a stats value's timestamp is the first one any of its parts carries.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import ContainerStats, PodSandboxStats
from kubelet_kit.cri._convert_values import (
    Message,
    _optional_u64,
    _set_u64,
    ns_to_seconds,
    seconds_to_ns,
)
from kubelet_kit.cri.gen import api_pb2 as pb

# ------------------------------------------------------------------- stats


def container_stats_to_pb(s: ContainerStats) -> Message:
    """A :class:`ContainerStats` as ``runtime.v1.ContainerStats``."""
    ts = seconds_to_ns(s.timestamp)
    msg = pb.ContainerStats(
        attributes=pb.ContainerAttributes(id=s.container_id),
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


def sandbox_stats_to_pb(s: PodSandboxStats) -> Message:
    """A :class:`PodSandboxStats` as ``runtime.v1.PodSandboxStats``."""
    ts = seconds_to_ns(s.timestamp)
    linux = pb.LinuxPodSandboxStats(
        cpu=pb.CpuUsage(timestamp=ts),
        memory=pb.MemoryUsage(timestamp=ts),
        process=pb.ProcessUsage(timestamp=ts),
        containers=[container_stats_to_pb(c) for c in s.containers],
    )
    _set_u64(linux.cpu, "usage_core_nano_seconds", s.cpu_usage_core_nanoseconds)
    _set_u64(linux.memory, "working_set_bytes", s.memory_working_set_bytes)
    _set_u64(linux.process, "process_count", s.process_count)
    return pb.PodSandboxStats(attributes=pb.PodSandboxAttributes(id=s.pod_sandbox_id), linux=linux)


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
