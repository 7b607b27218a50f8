"""Validation of a pod's containers: ports, environment, resources, probes and more.

:class:`ContainerChecks` checks one container of ``spec.containers`` or
``spec.initContainers`` with the pod's spec around it: its name, image and
policies, ports, ``env`` and ``envFrom``, resource requests and limits, volume
mounts (against the pod's volume names), probes, lifecycle handlers and security
context, and the host ports the containers of a pod may not share.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubelet_kit.api._names import (
    ENV_NAME_RE,
    HTTP_HEADER_MSG,
    HTTP_HEADER_RE,
    is_dns1123_label,
    is_qualified_name,
    is_valid_port_name,
)
from kubelet_kit.api._validate_base import ZERO, ValidatorBase
from kubelet_kit.api.pod import (
    Container,
    EnvVar,
    GRPCAction,
    HTTPGetAction,
    LifecycleHandler,
    PodSpec,
    Probe,
    ResourceRequirements,
    SecurityContext,
    TCPSocketAction,
    VolumeMount,
)
from kubelet_kit.api.serde import child_path

__all__ = ["ContainerChecks"]

_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_TERMINATION_MESSAGE_POLICIES = ("FallbackToLogsOnError", "File")
_MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
_SCHEMES = ("HTTP", "HTTPS")
_ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


class ContainerChecks(ValidatorBase):
    """The checks of a container, its parts, and the containers of a pod together."""

    def env(self, env: Sequence[EnvVar], path: str) -> None:
        for i, var in enumerate(env):
            p = f"{path}[{i}]"
            if not var.name:
                self.required(f"{p}.name")
            elif not ENV_NAME_RE.match(var.name):
                self.invalid(
                    f"{p}.name",
                    var.name,
                    "a valid environment variable name must "
                    "consist only of printable ASCII characters other than '='",
                )
            src = var.value_from
            if src is None:
                continue
            sources = [
                s
                for s in (
                    src.field_ref,
                    src.resource_field_ref,
                    src.config_map_key_ref,
                    src.secret_key_ref,
                )
                if s is not None
            ]
            vpath = f"{p}.valueFrom"
            if var.value:
                self.invalid(vpath, "", "may not be specified when `value` is not empty")
            if not sources:
                self.required(
                    vpath,
                    "must specify one of: `fieldRef`, `resourceFieldRef`, "
                    "`configMapKeyRef` or `secretKeyRef`",
                )
            elif len(sources) > 1:
                self.invalid(vpath, "", "may not have more than one field specified at a time")
            if src.field_ref is not None:
                self.field_ref(src.field_ref, f"{vpath}.fieldRef", _ENV_FIELD_PATHS)
            if src.resource_field_ref is not None:
                self.resource_field_ref(
                    src.resource_field_ref, f"{vpath}.resourceFieldRef", container_required=False
                )
            for key, ref in (
                ("configMapKeyRef", src.config_map_key_ref),
                ("secretKeyRef", src.secret_key_ref),
            ):
                if ref is None:
                    continue
                if not ref.key:
                    self.required(f"{vpath}.{key}.key")
                if not ref.name:
                    self.required(f"{vpath}.{key}.name")

    # ------------------------------------------------------------------ containers

    def resources(self, res: ResourceRequirements, path: str) -> None:
        for kind, values in (("limits", res.limits), ("requests", res.requests)):
            for name, qty in values.items():
                p = child_path(f"{path}.{kind}", name)
                if "/" not in name:
                    if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith(
                        "hugepages-"
                    ):
                        self.invalid(p, name, "must be a standard resource for containers")
                else:
                    self.each(p, name, is_qualified_name(name))
                if qty < ZERO:
                    self.invalid(p, str(qty), "must be greater than or equal to 0")
        for name, req in res.requests.items():
            limit = res.limits.get(name)
            p = child_path(f"{path}.requests", name)
            overcommit = "/" not in name or name.startswith("kubernetes.io/")
            overcommit = overcommit and not name.startswith("hugepages-")
            if limit is None:
                if not overcommit:
                    self.required(
                        child_path(f"{path}.limits", name),
                        "Limit must be set for non overcommitable resources",
                    )
            elif not overcommit and req != limit:
                self.invalid(p, str(req), f"must be equal to {name} limit of {limit}")
            elif req > limit:
                self.invalid(p, str(req), f"must be less than or equal to {name} limit of {limit}")

    def probe(self, probe: Probe, path: str, *, liveness_like: bool) -> None:
        self.handlers(
            path,
            (
                ("exec", probe.exec),
                ("httpGet", probe.http_get),
                ("tcpSocket", probe.tcp_socket),
                ("grpc", probe.grpc),
            ),
        )
        for key, value in (
            ("initialDelaySeconds", probe.initial_delay_seconds),
            ("timeoutSeconds", probe.timeout_seconds),
            ("periodSeconds", probe.period_seconds),
            ("successThreshold", probe.success_threshold),
            ("failureThreshold", probe.failure_threshold),
        ):
            self.nonnegative(f"{path}.{key}", value)
        if liveness_like and probe.success_threshold != 1:
            self.invalid(f"{path}.successThreshold", probe.success_threshold, "must be 1")
        grace = probe.termination_grace_period_seconds
        if grace is not None and grace <= 0:
            self.invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0")

    def handlers(self, path: str, handlers: Sequence[tuple[str, object]]) -> None:
        set_ = [(k, h) for k, h in handlers if h is not None]
        if not set_:
            self.required(path, "must specify a handler type")
        for key, _h in set_[1:]:
            self.forbidden(f"{path}.{key}", "may not specify more than 1 handler type")
        for key, h in set_:
            p = f"{path}.{key}"
            if key == "exec":
                if not getattr(h, "command", ()):
                    self.required(f"{p}.command")
            elif isinstance(h, HTTPGetAction):
                if not h.path:
                    self.required(f"{p}.path")
                self.port_num_or_name(f"{p}.port", h.port)
                if h.scheme not in _SCHEMES:
                    self.not_supported(f"{p}.scheme", h.scheme, _SCHEMES)
                for j, header in enumerate(h.http_headers):
                    if not HTTP_HEADER_RE.match(header.name):
                        self.invalid(f"{p}.httpHeaders[{j}].name", header.name, HTTP_HEADER_MSG)
            elif isinstance(h, TCPSocketAction):
                self.port_num_or_name(f"{p}.port", h.port)
            elif isinstance(h, GRPCAction):
                self.port_number(f"{p}.port", h.port)

    def lifecycle_handler(self, h: LifecycleHandler, path: str, grace: int) -> None:
        self.handlers(
            path,
            (
                ("exec", h.exec),
                ("httpGet", h.http_get),
                ("tcpSocket", h.tcp_socket),
                ("sleep", h.sleep),
            ),
        )
        if h.sleep is not None and not 0 <= h.sleep.seconds <= grace:
            self.invalid(
                f"{path}.sleep.seconds",
                h.sleep.seconds,
                f"must be non-negative and less than terminationGracePeriodSeconds ({grace})",
            )

    def security_context(self, sc: SecurityContext, path: str) -> None:
        for key, value in (("runAsUser", sc.run_as_user), ("runAsGroup", sc.run_as_group)):
            if value is not None and not 0 <= value <= 2147483647:
                self.invalid(f"{path}.{key}", value, "must be between 0 and 2147483647, inclusive")
        if sc.privileged and sc.allow_privilege_escalation is False:
            self.invalid(
                f"{path}",
                sc.allow_privilege_escalation,
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            )

    def volume_mounts(self, c: Container, path: str, volumes: set[str]) -> None:
        seen: set[str] = set()
        for i, m in enumerate(c.volume_mounts):
            p = f"{path}[{i}]"
            self.volume_mount(m, p, volumes, c)
            if m.mount_path:
                if m.mount_path in seen:
                    self.invalid(f"{p}.mountPath", m.mount_path, "must be unique")
                seen.add(m.mount_path)

    def volume_mount(self, m: VolumeMount, p: str, volumes: set[str], c: Container) -> None:
        if not m.name:
            self.required(f"{p}.name")
        elif m.name not in volumes:
            self.not_found(f"{p}.name", m.name)
        if not m.mount_path:
            self.required(f"{p}.mountPath")
        if m.sub_path:
            self.relative_path(f"{p}.subPath", m.sub_path)
        if m.sub_path_expr:
            if m.sub_path:
                self.invalid(
                    f"{p}.subPathExpr",
                    m.sub_path_expr,
                    "subPathExpr and subPath are mutually exclusive",
                )
            self.relative_path(f"{p}.subPathExpr", m.sub_path_expr)
        if m.mount_propagation is not None:
            if m.mount_propagation not in _MOUNT_PROPAGATIONS:
                self.not_supported(
                    f"{p}.mountPropagation", m.mount_propagation, _MOUNT_PROPAGATIONS
                )
            elif m.mount_propagation == "Bidirectional" and not (
                c.security_context and c.security_context.privileged
            ):
                self.forbidden(
                    f"{p}.mountPropagation",
                    "Bidirectional mount propagation is available only to privileged containers",
                )

    def container(
        self, c: Container, path: str, *, init: bool, spec: PodSpec, volumes: set[str]
    ) -> None:
        if not c.name:
            self.required(f"{path}.name")
        else:
            self.each(f"{path}.name", c.name, is_dns1123_label(c.name))
        if not c.image:
            self.required(f"{path}.image")
        elif c.image != c.image.strip():
            self.invalid(f"{path}.image", c.image, "must not have leading or trailing whitespace")
        self.enum(f"{path}.imagePullPolicy", c.image_pull_policy, _PULL_POLICIES)
        self.enum(
            f"{path}.terminationMessagePolicy",
            c.termination_message_policy,
            _TERMINATION_MESSAGE_POLICIES,
        )
        if init:
            if c.restart_policy is not None and c.restart_policy != "Always":
                self.not_supported(f"{path}.restartPolicy", c.restart_policy, ("Always",))
        elif c.restart_policy is not None:
            self.forbidden(f"{path}.restartPolicy", "may not be set for non-init containers")
        # Ports: numbers in range, names unique within the container.
        names: set[str] = set()
        for i, port in enumerate(c.ports):
            p = f"{path}.ports[{i}]"
            if port.name:
                self.each(f"{p}.name", port.name, is_valid_port_name(port.name))
                if port.name in names:
                    self.duplicate(f"{p}.name", port.name)
                names.add(port.name)
            if port.container_port == 0:
                self.required(f"{p}.containerPort")
            else:
                self.port_number(f"{p}.containerPort", port.container_port)
            if port.host_port:
                self.port_number(f"{p}.hostPort", port.host_port)
                if spec.host_network and port.host_port != port.container_port:
                    self.invalid(
                        f"{p}.hostPort",
                        port.host_port,
                        "must match `containerPort` when `hostNetwork` is true",
                    )
            self.enum(f"{p}.protocol", port.protocol, _PROTOCOLS)
        self.env(c.env, f"{path}.env")
        for i, ef in enumerate(c.env_from):
            p = f"{path}.envFrom[{i}]"
            refs = [r for r in (ef.config_map_ref, ef.secret_ref) if r is not None]
            if not refs:
                self.required(p, "must specify one of: `configMapRef` or `secretRef`")
            elif len(refs) > 1:
                self.invalid(p, "", "may not have more than one field specified at a time")
            if ef.config_map_ref is not None and not ef.config_map_ref.name:
                self.required(f"{p}.configMapRef.name")
            if ef.secret_ref is not None and not ef.secret_ref.name:
                self.required(f"{p}.secretRef.name")
            if ef.prefix and not ENV_NAME_RE.match(ef.prefix):
                self.invalid(
                    f"{p}.prefix",
                    ef.prefix,
                    "a valid environment variable name must "
                    "consist only of printable ASCII characters other than '='",
                )
        self.resources(c.resources, f"{path}.resources")
        self.volume_mounts(c, f"{path}.volumeMounts", volumes)
        plain_init = init and not c.is_sidecar
        for key, probe, liveness_like in (
            ("livenessProbe", c.liveness_probe, True),
            ("readinessProbe", c.readiness_probe, False),
            ("startupProbe", c.startup_probe, True),
        ):
            if probe is None:
                continue
            if plain_init:
                self.forbidden(
                    f"{path}.{key}",
                    "may not be set for init containers without restartPolicy=Always",
                )
            else:
                self.probe(probe, f"{path}.{key}", liveness_like=liveness_like)
        if c.lifecycle is not None:
            if plain_init:
                self.forbidden(
                    f"{path}.lifecycle",
                    "may not be set for init containers without restartPolicy=Always",
                )
            else:
                for key, h in (
                    ("postStart", c.lifecycle.post_start),
                    ("preStop", c.lifecycle.pre_stop),
                ):
                    if h is not None:
                        self.lifecycle_handler(
                            h, f"{path}.lifecycle.{key}", spec.termination_grace_period_seconds
                        )
        if c.security_context is not None:
            self.security_context(c.security_context, f"{path}.securityContext")

    def host_port_conflicts(self, containers: Sequence[tuple[str, Container]]) -> None:
        seen: set[str] = set()
        for cpath, c in containers:
            for j, port in enumerate(c.ports):
                if not port.host_port:
                    continue
                key = f"{port.host_ip}/{port.protocol}/{port.host_port}"
                if key in seen:
                    self.duplicate(f"{cpath}.ports[{j}].hostPort", key)
                seen.add(key)
