"""The shared ground of the CRI conversions: scalars, enums, metadata, small values.

Timestamps (float seconds and int64 nanoseconds), maps, the state enums, the
optional-number wrappers, sandbox and container metadata, and the small messages
both sandboxes and containers carry: image specs, registry credentials, mounts,
port mappings, Linux resources and namespace options. :data:`Message` is the
type every conversion takes or returns a generated protobuf message as.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kubelet_kit.container.interfaces import (
    AuthConfig,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    LinuxContainerResources,
    Mount,
    MountPropagation,
    NamespaceOptions,
    PodSandboxMetadata,
    PodSandboxState,
    PortMapping,
)
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.errors import InvalidArgumentError

#: A generated protobuf message. The generated modules are not type-checked, so
#: messages are ``Any`` here; the functions below are the typed boundary.
Message = Any

_NS_PER_SECOND = 1_000_000_000
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})


# ------------------------------------------------------------------- scalars


def seconds_to_ns(seconds: float) -> int:
    """Float seconds since the epoch to int nanoseconds (``0.0`` stays ``0``).

    Whole and fractional seconds are scaled apart: multiplying an epoch time by
    1e9 in one float step loses the nanoseconds (1767225600.25 would become
    ...249999872).
    """
    whole = math.floor(seconds)
    return whole * _NS_PER_SECOND + round((seconds - whole) * _NS_PER_SECOND)


def ns_to_seconds(ns: int) -> float:
    """Int nanoseconds since the epoch to float seconds (``0`` stays ``0.0``)."""
    return int(ns) / _NS_PER_SECOND


# Towards the wire: str() every key and value, since attrs values may be anything.
# From the wire, protobuf maps (str already) go straight to the attrs fields,
# whose converter copies them into a plain dict; one copy, not two.
def _map(value: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()}


# Wire number -> enum member, built once: the status and list paths run per
# container on every relist, and a table lookup is a fraction of Name() + Enum().
_SANDBOX_STATES = {pb.PodSandboxState.Value(s.value): s for s in PodSandboxState}
_CONTAINER_STATES = {pb.ContainerState.Value(s.value): s for s in ContainerState}


def _sandbox_state_from_pb(value: int) -> PodSandboxState:
    return _SANDBOX_STATES.get(value, PodSandboxState.NOTREADY)


def _container_state_from_pb(value: int) -> ContainerState:
    return _CONTAINER_STATES.get(value, ContainerState.UNKNOWN)


# Enum values go into messages by name: the attrs enums carry the protobuf names.
def _container_state_to_pb(state: ContainerState) -> str:
    return state.value


def _sandbox_state_to_pb(state: PodSandboxState) -> str:
    return state.value


def _optional_u64(msg: Message, field: str) -> int | None:
    return int(getattr(msg, field).value) if msg.HasField(field) else None


def _set_u64(msg: Message, field: str, value: int | None) -> None:
    if value is not None:
        getattr(msg, field).value = value


# ---------------------------------------------------------------- metadata


def _sandbox_metadata_to_pb(meta: PodSandboxMetadata) -> Message:
    return pb.PodSandboxMetadata(
        name=meta.name, namespace=meta.namespace, uid=meta.uid, attempt=meta.attempt
    )


def _sandbox_metadata_from_pb(msg: Message) -> PodSandboxMetadata:
    return PodSandboxMetadata(
        name=msg.name, namespace=msg.namespace, uid=msg.uid, attempt=int(msg.attempt)
    )


def _container_metadata_to_pb(meta: ContainerMetadata) -> Message:
    return pb.ContainerMetadata(name=meta.name, attempt=meta.attempt)


def _container_metadata_from_pb(msg: Message) -> ContainerMetadata:
    return ContainerMetadata(name=msg.name, attempt=int(msg.attempt))


# -------------------------------------------------------------- small values


def image_spec_to_pb(spec: ImageSpec) -> Message:
    """An :class:`ImageSpec` as a ``runtime.v1.ImageSpec``."""
    return pb.ImageSpec(image=spec.image, annotations=_map(spec.annotations))


def image_spec_from_pb(msg: Message) -> ImageSpec:
    """A ``runtime.v1.ImageSpec`` as an :class:`ImageSpec`."""
    return ImageSpec(image=msg.image, annotations=msg.annotations)


def auth_config_to_pb(auth: AuthConfig) -> Message:
    """An :class:`AuthConfig` as a ``runtime.v1.AuthConfig``."""
    return pb.AuthConfig(
        username=auth.username,
        password=auth.password,
        auth=auth.auth,
        server_address=auth.server_address,
        identity_token=auth.identity_token,
        registry_token=auth.registry_token,
    )


def auth_config_from_pb(msg: Message) -> AuthConfig:
    """A ``runtime.v1.AuthConfig`` as an :class:`AuthConfig`."""
    return AuthConfig(
        username=msg.username,
        password=msg.password,
        auth=msg.auth,
        server_address=msg.server_address,
        identity_token=msg.identity_token,
        registry_token=msg.registry_token,
    )


def _mount_to_pb(m: Mount) -> Message:
    return pb.Mount(
        container_path=m.container_path,
        host_path=m.host_path,
        readonly=m.readonly,
        selinux_relabel=m.selinux_relabel,
        propagation=pb.MountPropagation.Value(m.propagation.value),
    )


_PROPAGATIONS = {pb.MountPropagation.Value(p.value): p for p in MountPropagation}


def _mount_from_pb(msg: Message) -> Mount:
    propagation = _PROPAGATIONS.get(msg.propagation, MountPropagation.PRIVATE)
    return Mount(
        container_path=msg.container_path,
        host_path=msg.host_path,
        readonly=msg.readonly,
        selinux_relabel=msg.selinux_relabel,
        propagation=propagation,
    )


def _port_to_pb(p: PortMapping) -> Message:
    protocol = p.protocol.upper() or "TCP"
    if protocol not in _PROTOCOLS:
        # Refuse rather than silently sending the enum's default (TCP).
        raise InvalidArgumentError(
            f"port_mappings: protocol {p.protocol!r} is not one of TCP, UDP, SCTP"
        )
    return pb.PortMapping(
        protocol=pb.Protocol.Value(protocol),
        container_port=p.container_port,
        host_port=p.host_port,
        host_ip=p.host_ip,
    )


def _port_from_pb(msg: Message) -> PortMapping:
    try:
        protocol = str(pb.Protocol.Name(msg.protocol))
    except ValueError:
        protocol = "TCP"
    return PortMapping(
        container_port=int(msg.container_port),
        host_port=int(msg.host_port),
        protocol=protocol,
        host_ip=msg.host_ip,
    )


def resources_to_pb(res: LinuxContainerResources) -> Message:
    """:class:`LinuxContainerResources` as ``runtime.v1.LinuxContainerResources``."""
    return pb.LinuxContainerResources(
        cpu_period=res.cpu_period,
        cpu_quota=res.cpu_quota,
        cpu_shares=res.cpu_shares,
        memory_limit_in_bytes=res.memory_limit_in_bytes,
        oom_score_adj=res.oom_score_adj,
        cpuset_cpus=res.cpuset_cpus,
        cpuset_mems=res.cpuset_mems,
        unified=_map(res.unified),
    )


def resources_from_pb(msg: Message) -> LinuxContainerResources:
    """``runtime.v1.LinuxContainerResources`` as :class:`LinuxContainerResources`."""
    return LinuxContainerResources(
        cpu_period=int(msg.cpu_period),
        cpu_quota=int(msg.cpu_quota),
        cpu_shares=int(msg.cpu_shares),
        memory_limit_in_bytes=int(msg.memory_limit_in_bytes),
        oom_score_adj=int(msg.oom_score_adj),
        cpuset_cpus=msg.cpuset_cpus,
        cpuset_mems=msg.cpuset_mems,
        unified=msg.unified,
    )


def _mode(host: bool, otherwise: str) -> str:
    return "NODE" if host else otherwise


def _namespace_option_to_pb(ns: NamespaceOptions) -> Message:
    # The kubelet asks for a per-container PID namespace unless the pod shares the
    # host's (the CRI default, POD, would put every container in one PID space).
    return pb.NamespaceOption(
        network=_mode(ns.host_network, "POD"),
        pid=_mode(ns.host_pid, "CONTAINER"),
        ipc=_mode(ns.host_ipc, "POD"),
    )


def _namespace_option_from_pb(msg: Message) -> NamespaceOptions:
    return NamespaceOptions(
        host_network=msg.network == pb.NODE,
        host_pid=msg.pid == pb.NODE,
        host_ipc=msg.ipc == pb.NODE,
    )
