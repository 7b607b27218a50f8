"""Conversion between the Runtime's attrs types and runtime.v1 protobuf messages.

Pure functions, both directions: the client (:mod:`kubelet_kit.cri.remote`) turns
requests into messages and responses back into attrs values; the server
(:mod:`kubelet_kit.cri.server`) does the opposite. Keeping both directions side by
side lets the tests check that a value survives the round trip.

Conventions at this edge:

* Timestamps are int64 nanoseconds on the wire and float seconds in kubelet-kit;
  ``0`` stays ``0`` (not set) both ways.
* Enums share their names with the protobuf enums (``SANDBOX_READY``...); an
  enum value a newer runtime sends and this file does not know becomes the
  ``UNKNOWN``/``NOTREADY`` state rather than an exception.
* Optional numbers (``run_as_user``, stats counters) travel in wrapper messages,
  so "unset" and zero stay different.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kubelet_kit.container.interfaces import (
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    ContainerStats,
    ContainerStatus,
    Device,
    DNSConfig,
    ExecResult,
    FilesystemUsage,
    Image,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    NamespaceOptions,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStats,
    PodSandboxStatus,
    PortMapping,
    RuntimeCondition,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.errors import InvalidArgumentError

__all__ = [
    "auth_config_from_pb",
    "auth_config_to_pb",
    "container_config_from_pb",
    "container_config_to_pb",
    "container_event_from_pb",
    "container_event_to_pb",
    "container_filter_from_pb",
    "container_filter_to_pb",
    "container_from_pb",
    "container_stats_filter_to_pb",
    "container_stats_from_pb",
    "container_stats_to_pb",
    "container_status_from_pb",
    "container_status_to_pb",
    "container_to_pb",
    "exec_result_from_pb",
    "image_from_pb",
    "image_spec_from_pb",
    "image_spec_to_pb",
    "image_to_pb",
    "ns_to_seconds",
    "resources_from_pb",
    "resources_to_pb",
    "runtime_status_from_pb",
    "runtime_status_to_pb",
    "sandbox_config_from_pb",
    "sandbox_config_to_pb",
    "sandbox_filter_from_pb",
    "sandbox_filter_to_pb",
    "sandbox_from_pb",
    "sandbox_stats_from_pb",
    "sandbox_stats_to_pb",
    "sandbox_status_from_pb",
    "sandbox_status_to_pb",
    "sandbox_to_pb",
    "seconds_to_ns",
    "version_from_pb",
    "version_to_pb",
]

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


# --------------------------------------------------------------- sandboxes


def sandbox_config_to_pb(config: PodSandboxConfig) -> Message:
    """A :class:`PodSandboxConfig` as ``runtime.v1.PodSandboxConfig``.

    Raises:
        InvalidArgumentError: a port mapping names a protocol the CRI does not know.
    """
    msg = pb.PodSandboxConfig(
        metadata=_sandbox_metadata_to_pb(config.metadata),
        hostname=config.hostname,
        log_directory=config.log_directory,
        port_mappings=[_port_to_pb(p) for p in config.port_mappings],
        labels=_map(config.labels),
        annotations=_map(config.annotations),
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=config.cgroup_parent,
            sysctls=_map(config.sysctls),
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=_namespace_option_to_pb(config.namespace_options),
                privileged=config.privileged,
                supplemental_groups=list(config.supplemental_groups),
            ),
        ),
    )
    sc = msg.linux.security_context
    if config.run_as_user is not None:
        sc.run_as_user.value = config.run_as_user
    if config.run_as_group is not None:
        sc.run_as_group.value = config.run_as_group
    if config.dns_config is not None:
        msg.dns_config.CopyFrom(
            pb.DNSConfig(
                servers=list(config.dns_config.servers),
                searches=list(config.dns_config.searches),
                options=list(config.dns_config.options),
            )
        )
    return msg


def sandbox_config_from_pb(msg: Message, runtime_handler: str = "") -> PodSandboxConfig:
    """A ``runtime.v1.PodSandboxConfig`` as :class:`PodSandboxConfig`.

    Args:
        msg: The message.
        runtime_handler: The handler named beside it in ``RunPodSandboxRequest``.
    """
    sc = msg.linux.security_context
    dns = None
    if msg.HasField("dns_config"):
        dns = DNSConfig(
            servers=tuple(msg.dns_config.servers),
            searches=tuple(msg.dns_config.searches),
            options=tuple(msg.dns_config.options),
        )
    return PodSandboxConfig(
        metadata=_sandbox_metadata_from_pb(msg.metadata),
        hostname=msg.hostname,
        log_directory=msg.log_directory,
        dns_config=dns,
        port_mappings=tuple(_port_from_pb(p) for p in msg.port_mappings),
        labels=msg.labels,
        annotations=msg.annotations,
        cgroup_parent=msg.linux.cgroup_parent,
        namespace_options=_namespace_option_from_pb(
            msg.linux.security_context.namespace_options
        ),
        sysctls=msg.linux.sysctls,
        runtime_handler=runtime_handler,
        privileged=sc.privileged,
        run_as_user=sc.run_as_user.value if sc.HasField("run_as_user") else None,
        run_as_group=sc.run_as_group.value if sc.HasField("run_as_group") else None,
        supplemental_groups=tuple(sc.supplemental_groups),
    )


def sandbox_to_pb(sandbox: PodSandbox) -> Message:
    """A :class:`PodSandbox` as ``runtime.v1.PodSandbox``."""
    return pb.PodSandbox(
        id=sandbox.id,
        metadata=_sandbox_metadata_to_pb(sandbox.metadata),
        state=_sandbox_state_to_pb(sandbox.state),
        created_at=seconds_to_ns(sandbox.created_at),
        labels=_map(sandbox.labels),
        annotations=_map(sandbox.annotations),
        runtime_handler=sandbox.runtime_handler,
    )


def sandbox_from_pb(msg: Message) -> PodSandbox:
    """A ``runtime.v1.PodSandbox`` as :class:`PodSandbox`."""
    return PodSandbox(
        id=msg.id,
        metadata=_sandbox_metadata_from_pb(msg.metadata),
        state=_sandbox_state_from_pb(msg.state),
        created_at=ns_to_seconds(msg.created_at),
        labels=msg.labels,
        annotations=msg.annotations,
        runtime_handler=msg.runtime_handler,
    )


def sandbox_status_to_pb(status: PodSandboxStatus) -> Message:
    """A :class:`PodSandboxStatus` as ``runtime.v1.PodSandboxStatus``."""
    return pb.PodSandboxStatus(
        id=status.id,
        metadata=_sandbox_metadata_to_pb(status.metadata),
        state=_sandbox_state_to_pb(status.state),
        created_at=seconds_to_ns(status.created_at),
        network=pb.PodSandboxNetworkStatus(
            ip=status.ip, additional_ips=[pb.PodIP(ip=ip) for ip in status.additional_ips]
        ),
        linux=pb.LinuxPodSandboxStatus(
            namespaces=pb.Namespace(options=_namespace_option_to_pb(status.namespace_options))
        ),
        labels=_map(status.labels),
        annotations=_map(status.annotations),
        runtime_handler=status.runtime_handler,
    )


def sandbox_status_from_pb(msg: Message) -> PodSandboxStatus:
    """A ``runtime.v1.PodSandboxStatus`` as :class:`PodSandboxStatus`."""
    return PodSandboxStatus(
        id=msg.id,
        metadata=_sandbox_metadata_from_pb(msg.metadata),
        state=_sandbox_state_from_pb(msg.state),
        created_at=ns_to_seconds(msg.created_at),
        ip=msg.network.ip,
        additional_ips=tuple(p.ip for p in msg.network.additional_ips),
        namespace_options=_namespace_option_from_pb(msg.linux.namespaces.options),
        labels=msg.labels,
        annotations=msg.annotations,
        runtime_handler=msg.runtime_handler,
    )


def sandbox_filter_to_pb(flt: PodSandboxFilter | None) -> Message | None:
    """A :class:`PodSandboxFilter` as ``runtime.v1.PodSandboxFilter`` (None: no filter)."""
    if flt is None:
        return None
    msg = pb.PodSandboxFilter(id=flt.id or "", label_selector=_map(flt.label_selector))
    if flt.state is not None:
        msg.state.CopyFrom(pb.PodSandboxStateValue(state=_sandbox_state_to_pb(flt.state)))
    return msg


def sandbox_filter_from_pb(msg: Message) -> PodSandboxFilter:
    """A ``runtime.v1.PodSandboxFilter`` as :class:`PodSandboxFilter`."""
    return PodSandboxFilter(
        id=msg.id or None,
        state=_sandbox_state_from_pb(msg.state.state) if msg.HasField("state") else None,
        label_selector=msg.label_selector,
    )


# -------------------------------------------------------------- containers


def _security_context_to_pb(
    sc: LinuxContainerSecurityContext | None, namespaces: NamespaceOptions
) -> Message:
    msg = pb.LinuxContainerSecurityContext(
        namespace_options=_namespace_option_to_pb(namespaces)
    )
    if sc is None:
        return msg
    msg.privileged = sc.privileged
    msg.readonly_rootfs = sc.readonly_rootfs
    msg.no_new_privs = sc.no_new_privs
    msg.supplemental_groups.extend(sc.supplemental_groups)
    if sc.capabilities_add or sc.capabilities_drop:
        msg.capabilities.CopyFrom(
            pb.Capability(
                add_capabilities=list(sc.capabilities_add),
                drop_capabilities=list(sc.capabilities_drop),
            )
        )
    if sc.run_as_user is not None:
        msg.run_as_user.value = sc.run_as_user
    if sc.run_as_group is not None:
        msg.run_as_group.value = sc.run_as_group
    return msg


def _security_context_from_pb(msg: Message) -> LinuxContainerSecurityContext:
    return LinuxContainerSecurityContext(
        run_as_user=int(msg.run_as_user.value) if msg.HasField("run_as_user") else None,
        run_as_group=int(msg.run_as_group.value) if msg.HasField("run_as_group") else None,
        privileged=msg.privileged,
        readonly_rootfs=msg.readonly_rootfs,
        no_new_privs=msg.no_new_privs,
        capabilities_add=tuple(msg.capabilities.add_capabilities),
        capabilities_drop=tuple(msg.capabilities.drop_capabilities),
        supplemental_groups=tuple(int(g) for g in msg.supplemental_groups),
    )


def container_config_to_pb(
    config: ContainerConfig, sandbox_config: PodSandboxConfig | None = None
) -> Message:
    """A :class:`ContainerConfig` as ``runtime.v1.ContainerConfig``.

    Args:
        config: The container's configuration.
        sandbox_config: The sandbox's; its namespace options are the container's
            too (a container of a host-network pod must ask for the host network,
            or the runtime looks for a pod network namespace that does not exist).
    """
    namespaces = sandbox_config.namespace_options if sandbox_config else NamespaceOptions()
    linux = pb.LinuxContainerConfig(
        security_context=_security_context_to_pb(config.security_context, namespaces)
    )
    if config.resources is not None:
        linux.resources.CopyFrom(resources_to_pb(config.resources))
    return pb.ContainerConfig(
        metadata=_container_metadata_to_pb(config.metadata),
        image=image_spec_to_pb(config.image),
        command=list(config.command),
        args=list(config.args),
        working_dir=config.working_dir,
        envs=[pb.KeyValue(key=e.key, value=e.value) for e in config.envs],
        mounts=[_mount_to_pb(m) for m in config.mounts],
        devices=[
            pb.Device(container_path=d.container_path, host_path=d.host_path,
                      permissions=d.permissions)
            for d in config.devices
        ],
        labels=_map(config.labels),
        annotations=_map(config.annotations),
        log_path=config.log_path,
        stdin=config.stdin,
        stdin_once=config.stdin_once,
        tty=config.tty,
        linux=linux,
    )


def container_config_from_pb(msg: Message) -> ContainerConfig:
    """A ``runtime.v1.ContainerConfig`` as :class:`ContainerConfig`."""
    linux = msg.linux
    sc = linux.security_context
    has_sc = linux.HasField("security_context") and (
        sc.privileged
        or sc.readonly_rootfs
        or sc.no_new_privs
        or sc.HasField("run_as_user")
        or sc.HasField("run_as_group")
        or len(sc.supplemental_groups) > 0
        or sc.HasField("capabilities")
    )
    return ContainerConfig(
        metadata=_container_metadata_from_pb(msg.metadata),
        image=image_spec_from_pb(msg.image),
        command=tuple(msg.command),
        args=tuple(msg.args),
        working_dir=msg.working_dir,
        envs=tuple(KeyValue(key=e.key, value=e.value) for e in msg.envs),
        mounts=tuple(_mount_from_pb(m) for m in msg.mounts),
        devices=tuple(
            Device(container_path=d.container_path, host_path=d.host_path,
                   permissions=d.permissions)
            for d in msg.devices
        ),
        labels=msg.labels,
        annotations=msg.annotations,
        log_path=msg.log_path,
        stdin=msg.stdin,
        stdin_once=msg.stdin_once,
        tty=msg.tty,
        resources=resources_from_pb(linux.resources) if linux.HasField("resources") else None,
        security_context=_security_context_from_pb(sc) if has_sc else None,
    )


def container_to_pb(c: ContainerInfo) -> Message:
    """A :class:`ContainerInfo` as ``runtime.v1.Container``."""
    return pb.Container(
        id=c.id,
        pod_sandbox_id=c.pod_sandbox_id,
        metadata=_container_metadata_to_pb(c.metadata),
        image=pb.ImageSpec(image=c.image),
        image_ref=c.image_ref,
        state=_container_state_to_pb(c.state),
        created_at=seconds_to_ns(c.created_at),
        labels=_map(c.labels),
        annotations=_map(c.annotations),
    )


def container_from_pb(msg: Message) -> ContainerInfo:
    """A ``runtime.v1.Container`` as :class:`ContainerInfo`."""
    return ContainerInfo(
        id=msg.id,
        pod_sandbox_id=msg.pod_sandbox_id,
        metadata=_container_metadata_from_pb(msg.metadata),
        image=msg.image.image,
        image_ref=msg.image_ref,
        state=_container_state_from_pb(msg.state),
        created_at=ns_to_seconds(msg.created_at),
        labels=msg.labels,
        annotations=msg.annotations,
    )


def container_status_to_pb(s: ContainerStatus) -> Message:
    """A :class:`ContainerStatus` as ``runtime.v1.ContainerStatus``."""
    msg = pb.ContainerStatus(
        id=s.id,
        metadata=_container_metadata_to_pb(s.metadata),
        state=_container_state_to_pb(s.state),
        created_at=seconds_to_ns(s.created_at),
        started_at=seconds_to_ns(s.started_at),
        finished_at=seconds_to_ns(s.finished_at),
        exit_code=s.exit_code,
        image=pb.ImageSpec(image=s.image),
        image_ref=s.image_ref,
        reason=s.reason,
        message=s.message,
        labels=_map(s.labels),
        annotations=_map(s.annotations),
        mounts=[_mount_to_pb(m) for m in s.mounts],
        log_path=s.log_path,
    )
    if s.resources is not None:
        msg.resources.linux.CopyFrom(resources_to_pb(s.resources))
    return msg


def container_status_from_pb(msg: Message) -> ContainerStatus:
    """A ``runtime.v1.ContainerStatus`` as :class:`ContainerStatus`."""
    resources = None
    if msg.HasField("resources") and msg.resources.HasField("linux"):
        resources = resources_from_pb(msg.resources.linux)
    return ContainerStatus(
        id=msg.id,
        metadata=_container_metadata_from_pb(msg.metadata),
        state=_container_state_from_pb(msg.state),
        created_at=ns_to_seconds(msg.created_at),
        image=msg.image.image,
        image_ref=msg.image_ref,
        started_at=ns_to_seconds(msg.started_at),
        finished_at=ns_to_seconds(msg.finished_at),
        exit_code=int(msg.exit_code),
        reason=msg.reason,
        message=msg.message,
        labels=msg.labels,
        annotations=msg.annotations,
        mounts=tuple(_mount_from_pb(m) for m in msg.mounts),
        log_path=msg.log_path,
        resources=resources,
    )


def container_filter_to_pb(flt: ContainerFilter | None) -> Message | None:
    """A :class:`ContainerFilter` as ``runtime.v1.ContainerFilter`` (None: no filter)."""
    if flt is None:
        return None
    msg = pb.ContainerFilter(
        id=flt.id or "",
        pod_sandbox_id=flt.pod_sandbox_id or "",
        label_selector=_map(flt.label_selector),
    )
    if flt.state is not None:
        msg.state.CopyFrom(pb.ContainerStateValue(state=_container_state_to_pb(flt.state)))
    return msg


def container_filter_from_pb(msg: Message) -> ContainerFilter:
    """A ``runtime.v1.ContainerFilter`` (or ``ContainerStatsFilter``) as a
    :class:`ContainerFilter`; the stats filter has no state."""
    state = None
    if "state" in msg.DESCRIPTOR.fields_by_name and msg.HasField("state"):
        state = _container_state_from_pb(msg.state.state)
    return ContainerFilter(
        id=msg.id or None,
        state=state,
        pod_sandbox_id=msg.pod_sandbox_id or None,
        label_selector=msg.label_selector,
    )


def container_stats_filter_to_pb(flt: ContainerFilter | None) -> Message | None:
    """The parts of a :class:`ContainerFilter` a ``ContainerStatsFilter`` can carry
    (everything but the state, which the caller applies itself)."""
    if flt is None:
        return None
    return pb.ContainerStatsFilter(
        id=flt.id or "",
        pod_sandbox_id=flt.pod_sandbox_id or "",
        label_selector=_map(flt.label_selector),
    )


def exec_result_from_pb(msg: Message) -> ExecResult:
    """A ``runtime.v1.ExecSyncResponse`` as :class:`ExecResult`."""
    return ExecResult(exit_code=int(msg.exit_code), stdout=bytes(msg.stdout),
                      stderr=bytes(msg.stderr))


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
    return pb.PodSandboxStats(attributes=pb.PodSandboxAttributes(id=s.pod_sandbox_id),
                              linux=linux)


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


# ------------------------------------------------------------------ images


def image_to_pb(image: Image) -> Message:
    """An :class:`Image` as ``runtime.v1.Image``."""
    return pb.Image(
        id=image.id,
        repo_tags=list(image.repo_tags),
        repo_digests=list(image.repo_digests),
        size=image.size,
        pinned=image.pinned,
    )


def image_from_pb(msg: Message) -> Image:
    """A ``runtime.v1.Image`` as :class:`Image`."""
    return Image(
        id=msg.id,
        repo_tags=tuple(msg.repo_tags),
        repo_digests=tuple(msg.repo_digests),
        size=int(msg.size),
        pinned=msg.pinned,
    )


def filesystem_usage_to_pb(usage: FilesystemUsage) -> Message:
    """A :class:`FilesystemUsage` as ``runtime.v1.FilesystemUsage``."""
    msg = pb.FilesystemUsage(timestamp=seconds_to_ns(usage.timestamp),
                             fs_id=pb.FilesystemIdentifier(mountpoint=usage.mountpoint))
    if usage.used_bytes is not None:
        msg.used_bytes.value = usage.used_bytes
    if usage.inodes_used is not None:
        msg.inodes_used.value = usage.inodes_used
    return msg


def filesystem_usage_from_pb(msg: Message) -> FilesystemUsage:
    """A ``runtime.v1.FilesystemUsage`` as :class:`FilesystemUsage` (unset counts: None)."""
    return FilesystemUsage(
        mountpoint=msg.fs_id.mountpoint,
        used_bytes=int(msg.used_bytes.value) if msg.HasField("used_bytes") else None,
        inodes_used=int(msg.inodes_used.value) if msg.HasField("inodes_used") else None,
        timestamp=ns_to_seconds(msg.timestamp),
    )


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
            pb.RuntimeCondition(type=c.type, status=c.status, reason=c.reason,
                                message=c.message)
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
