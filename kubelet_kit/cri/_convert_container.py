"""Conversions of container messages: configs, containers, statuses, filters, exec.

What ``CreateContainer`` sends (:class:`ContainerConfig`, with the Linux security
context it shares its namespaces with the sandbox through), what
``ListContainers`` and ``ContainerStatus`` answer, the container and container
stats filters, and the answer of ``ExecSync``.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerFilter,
    ContainerInfo,
    ContainerStatus,
    Device,
    ExecResult,
    KeyValue,
    LinuxContainerSecurityContext,
    NamespaceOptions,
    PodSandboxConfig,
)
from kubelet_kit.cri._convert_security import get_profile, set_profile
from kubelet_kit.cri._convert_values import (
    Message,
    _container_metadata_from_pb,
    _container_metadata_to_pb,
    _container_state_from_pb,
    _container_state_to_pb,
    _map,
    _mount_from_pb,
    _mount_to_pb,
    _namespace_option_to_pb,
    image_spec_from_pb,
    image_spec_to_pb,
    ns_to_seconds,
    resources_from_pb,
    resources_to_pb,
    seconds_to_ns,
)
from kubelet_kit.cri.gen import api_pb2 as pb

# -------------------------------------------------------------- containers


def _security_context_to_pb(
    sc: LinuxContainerSecurityContext | None, namespaces: NamespaceOptions
) -> Message:
    msg = pb.LinuxContainerSecurityContext(namespace_options=_namespace_option_to_pb(namespaces))
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
    set_profile(msg, "seccomp", "seccomp_profile_path", sc.seccomp)
    set_profile(msg, "apparmor", "apparmor_profile", sc.apparmor)
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
        seccomp=get_profile(msg, "seccomp", "seccomp_profile_path"),
        apparmor=get_profile(msg, "apparmor", "apparmor_profile"),
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
            pb.Device(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
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
        or sc.HasField("seccomp")
        or sc.HasField("apparmor")
        or bool(sc.seccomp_profile_path)
        or bool(sc.apparmor_profile)
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
            Device(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
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
    return ExecResult(
        exit_code=int(msg.exit_code), stdout=bytes(msg.stdout), stderr=bytes(msg.stderr)
    )
