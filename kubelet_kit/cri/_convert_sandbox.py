"""Conversions of pod sandbox messages: configs, sandboxes, statuses and filters.

What ``RunPodSandbox`` sends (:class:`PodSandboxConfig`, with its DNS, ports and
Linux security context), what ``ListPodSandbox`` and ``PodSandboxStatus`` answer,
and the ``PodSandboxFilter`` a list is narrowed with.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import (
    DNSConfig,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxStatus,
)
from kubelet_kit.cri._convert_security import get_profile, set_profile
from kubelet_kit.cri._convert_values import (
    Message,
    _map,
    _namespace_option_from_pb,
    _namespace_option_to_pb,
    _port_from_pb,
    _port_to_pb,
    _sandbox_metadata_from_pb,
    _sandbox_metadata_to_pb,
    _sandbox_state_from_pb,
    _sandbox_state_to_pb,
    ns_to_seconds,
    seconds_to_ns,
)
from kubelet_kit.cri.gen import api_pb2 as pb

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
    set_profile(sc, "seccomp", "seccomp_profile_path", config.seccomp)
    set_profile(sc, "apparmor", None, config.apparmor)
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
        namespace_options=_namespace_option_from_pb(msg.linux.security_context.namespace_options),
        sysctls=msg.linux.sysctls,
        runtime_handler=runtime_handler,
        privileged=sc.privileged,
        run_as_user=sc.run_as_user.value if sc.HasField("run_as_user") else None,
        run_as_group=sc.run_as_group.value if sc.HasField("run_as_group") else None,
        supplemental_groups=tuple(sc.supplemental_groups),
        seccomp=get_profile(sc, "seccomp", "seccomp_profile_path"),
        apparmor=get_profile(sc, "apparmor", None),
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
