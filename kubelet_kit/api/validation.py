"""Pod validation with Kubernetes' rules, paths and messages.

:func:`validate_pod` returns *every* problem as a
:class:`~kubelet_kit.errors.FieldError` (never only the first), with paths in
Kubernetes' style (``spec.containers[1].resources.limits.memory``) and messages in
Kubernetes' words (``Required value``, ``Unsupported value: "Sometimes": supported
values: "Always", "Never", "OnFailure"``, ``Duplicate value: "app"``, ...). The rules
follow upstream ``pkg/apis/core/validation`` for what a node agent must rely on; map
keys are written ``.key`` (``[key]`` when the key has dots or slashes).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.api.pod import (
    Container,
    DownwardAPIVolumeFile,
    EnvVar,
    GRPCAction,
    HTTPGetAction,
    KeyToPath,
    LifecycleHandler,
    ObjectFieldSelector,
    Pod,
    PodSpec,
    Probe,
    ResourceFieldSelector,
    ResourceRequirements,
    SecurityContext,
    TCPSocketAction,
    Volume,
    VolumeMount,
)
from kubelet_kit.api.quantity import Quantity
from kubelet_kit.api.serde import child_path
from kubelet_kit.api.serde import format_value as _show
from kubelet_kit.errors import FieldError

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_valid_port_name",
    "validate_pod",
    "validate_pod_update",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_HTTP_HEADER_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_RE = re.compile(f"^{_HTTP_HEADER_FMT}$")
_PORT_NAME_CHARSET = re.compile("^[-a-z0-9]+$")
_PORT_NAME_LETTER = re.compile("[a-z]")
_ENV_NAME_RE = re.compile(r"^[\x20-\x3c\x3e-\x7e]+$")  # printable ASCII but '='


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # Kubernetes' validation.RegexError, spacing included.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_LABEL_MSG = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character", _LABEL_FMT,
    "my-name", "123-abc")
_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character", _SUBDOMAIN_FMT,
    "example.com")
_QUALIFIED_NAME_MSG = _regex_error(
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character", _QUALIFIED_NAME_FMT,
    "MyName", "my.name", "123-abc")
_LABEL_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character", _LABEL_VALUE_FMT,
    "MyValue", "my_value", "12345")
_HTTP_HEADER_MSG = _regex_error(
    "a valid HTTP header must consist of alphanumeric characters or '-'", _HTTP_HEADER_FMT,
    "X-Header-Name")
_PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 label (empty list when valid)."""
    errs = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(_max_len(DNS1123_LABEL_MAX_LENGTH))
    if not _LABEL_RE.match(value):
        errs.append("must not contain dots" if _SUBDOMAIN_RE.match(value) else _LABEL_MSG)
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 subdomain (empty list when valid)."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def is_valid_port_name(value: str) -> list[str]:
    """Problems with ``value`` as an IANA_SVC_NAME port name (empty when valid)."""
    errs = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not _PORT_NAME_CHARSET.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _is_qualified_name(value: str) -> list[str]:
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [_regex_error(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character", _QUALIFIED_NAME_FMT,
            "MyName", "my.name", "123-abc") + " with an optional DNS subdomain prefix and "
            "'/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if name and not _QUALIFIED_NAME_RE.match(name):
        errs.append(_QUALIFIED_NAME_MSG)
    return errs


def _supported(values: Iterable[str]) -> str:
    return ", ".join(f'"{v}"' for v in sorted(values))


_RESTART_POLICIES = ("Always", "Never", "OnFailure")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
_TERMINATION_MESSAGE_POLICIES = ("FallbackToLogsOnError", "File")
_MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
_HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate",
                    "File", "FileOrCreate", "Socket")
_SCHEMES = ("HTTP", "HTTPS")
_ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                    "spec.serviceAccountName", "status.hostIP", "status.hostIPs",
                    "status.podIP", "status.podIPs")
_VOLUME_FIELD_PATHS = ("metadata.annotations", "metadata.labels", "metadata.name",
                       "metadata.namespace", "metadata.uid")
_RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory",
                    "requests.cpu", "requests.ephemeral-storage", "requests.memory")
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_SUBSCRIPT_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
_ZERO = Quantity.parse("0")
#: The divisors a resourceFieldRef may have (besides zero, which reads as 1), by
#: their canonical spelling.
_CPU_DIVISORS: tuple[str, ...] = ("1m", "1")
_BYTE_DIVISORS: tuple[str, ...] = (
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
#: Resources counted in bytes, and how upstream's divisor message names them.
_BYTE_RESOURCE_NAMES = {"memory": "memory", "ephemeral-storage": "local ephemeral storage"}


class _Validator:
    """Collects errors; one method per Kubernetes error type."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def required(self, path: str, detail: str = "") -> None:
        self.errors.append(FieldError(path, "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.errors.append(FieldError(path, f"Invalid value: {_show(value)}: {detail}"))

    def not_supported(self, path: str, value: str, supported: Iterable[str]) -> None:
        self.errors.append(FieldError(
            path, f"Unsupported value: {_show(value)}: supported values: {_supported(supported)}"))

    def duplicate(self, path: str, value: object) -> None:
        self.errors.append(FieldError(path, f"Duplicate value: {_show(value)}"))

    def not_found(self, path: str, value: object) -> None:
        self.errors.append(FieldError(path, f"Not found: {_show(value)}"))

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, f"Forbidden: {detail}"))

    def each(self, path: str, value: str, problems: Iterable[str]) -> None:
        for msg in problems:
            self.invalid(path, value, msg)

    def enum(self, path: str, value: str, supported: Sequence[str]) -> None:
        if value == "" and "" not in supported:
            self.required(path)
        elif value not in supported:
            self.not_supported(path, value, supported)

    def nonnegative(self, path: str, value: int) -> None:
        if value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def port_number(self, path: str, value: int) -> None:
        if not 1 <= value <= 65535:
            self.invalid(path, value, _PORT_RANGE_MSG)

    def port_num_or_name(self, path: str, value: int | str) -> None:
        if isinstance(value, int):
            self.port_number(path, value)
        elif value == "":
            self.required(path)
        else:
            self.each(path, value, is_valid_port_name(value))

    def mode(self, path: str, value: int | None) -> None:
        if value is not None and not 0 <= value <= 0o777:
            self.invalid(path, value, _MODE_MSG)

    def relative_path(self, path: str, value: str, *, item: bool = False) -> None:
        # Kubernetes' validateLocalDescendingPath; file items of configMap, secret and
        # downwardAPI volumes may not even start with "..".
        if posixpath.isabs(value):
            self.invalid(path, value, "must be a relative path")
        if ".." in value.split("/"):
            self.invalid(path, value, "must not contain '..'")
        if item and value.startswith(".."):
            self.invalid(path, value, "must not start with '..'")

    # ------------------------------------------------------------------ metadata

    def metadata(self, meta: ObjectMeta, path: str = "metadata") -> None:
        if not meta.name and not meta.generate_name:
            self.required(f"{path}.name", "name or generateName is required")
        elif meta.name:
            self.each(f"{path}.name", meta.name, is_dns1123_subdomain(meta.name))
        if not meta.namespace:
            self.required(f"{path}.namespace")
        else:
            self.each(f"{path}.namespace", meta.namespace, is_dns1123_label(meta.namespace))
        for key, value in meta.labels.items():
            self.each(f"{path}.labels", key, _is_qualified_name(key))
            problems = []
            if len(value) > 63:
                problems.append(_max_len(63))
            if not _LABEL_VALUE_RE.match(value):
                problems.append(_LABEL_VALUE_MSG)
            self.each(f"{path}.labels", value, problems)
        for key in meta.annotations:
            self.each(f"{path}.annotations", key, _is_qualified_name(key.lower()))
        if meta.deletion_grace_period_seconds is not None:
            self.nonnegative(f"{path}.deletionGracePeriodSeconds",
                             meta.deletion_grace_period_seconds)

    # ------------------------------------------------------------------ volumes

    def volumes(self, volumes: Sequence[Volume], path: str) -> set[str]:
        names: set[str] = set()
        for i, vol in enumerate(volumes):
            vpath = f"{path}[{i}]"
            if not vol.name:
                self.required(f"{vpath}.name")
            else:
                self.each(f"{vpath}.name", vol.name, is_dns1123_label(vol.name))
                if vol.name in names:
                    self.duplicate(f"{vpath}.name", vol.name)
                names.add(vol.name)
            self.volume_source(vol, vpath)
        return names

    def volume_source(self, vol: Volume, path: str) -> None:
        kinds = vol.source_kinds
        if not kinds:
            self.required(path, "must specify a volume type")
            return
        for extra_kind in kinds[1:]:
            self.forbidden(f"{path}.{extra_kind}", "may not specify more than 1 volume type")
        if vol.empty_dir is not None:
            p = f"{path}.emptyDir"
            medium = vol.empty_dir.medium
            if medium not in ("", "Memory", "HugePages") and not medium.startswith("HugePages-"):
                self.not_supported(f"{p}.medium", medium, ("", "HugePages", "Memory"))
            limit = vol.empty_dir.size_limit
            if limit is not None and limit < _ZERO:
                self.forbidden(f"{p}.sizeLimit", "SizeLimit field must be a valid resource "
                                                 "quantity")
        if vol.host_path is not None:
            p = f"{path}.hostPath"
            if not vol.host_path.path:
                self.required(f"{p}.path")
            elif ".." in vol.host_path.path.split("/"):
                self.invalid(f"{p}.path", vol.host_path.path, "must not contain '..'")
            if vol.host_path.type not in _HOST_PATH_TYPES:
                self.not_supported(f"{p}.type", vol.host_path.type, _HOST_PATH_TYPES)
        if vol.config_map is not None:
            p = f"{path}.configMap"
            if not vol.config_map.name:
                self.required(f"{p}.name")
            self.mode(f"{p}.defaultMode", vol.config_map.default_mode)
            self.key_to_paths(vol.config_map.items, f"{p}.items")
        if vol.secret is not None:
            p = f"{path}.secret"
            if not vol.secret.secret_name:
                self.required(f"{p}.secretName")
            self.mode(f"{p}.defaultMode", vol.secret.default_mode)
            self.key_to_paths(vol.secret.items, f"{p}.items")
        if vol.downward_api is not None:
            p = f"{path}.downwardAPI"
            self.mode(f"{p}.defaultMode", vol.downward_api.default_mode)
            self.downward_files(vol.downward_api.items, f"{p}.items")
        if vol.projected is not None:
            self.projected(vol, f"{path}.projected")
        if vol.persistent_volume_claim is not None and not vol.persistent_volume_claim.claim_name:
            self.required(f"{path}.persistentVolumeClaim.claimName")

    def projected(self, vol: Volume, path: str) -> None:
        assert vol.projected is not None
        self.mode(f"{path}.defaultMode", vol.projected.default_mode)
        for i, src in enumerate(vol.projected.sources):
            p = f"{path}.sources[{i}]"
            kinds = [k for k, v in (("secret", src.secret), ("configMap", src.config_map),
                                    ("downwardAPI", src.downward_api),
                                    ("serviceAccountToken", src.service_account_token))
                     if v is not None]
            kinds.extend(src.extra)
            if not kinds:
                self.required(p, "must specify one source")
            for kind in kinds[1:]:
                self.forbidden(f"{p}.{kind}", "may not specify more than 1 volume type per "
                                              "source")
            if src.secret is not None:
                if not src.secret.name:
                    self.required(f"{p}.secret.name")
                self.key_to_paths(src.secret.items, f"{p}.secret.items")
            if src.config_map is not None:
                if not src.config_map.name:
                    self.required(f"{p}.configMap.name")
                self.key_to_paths(src.config_map.items, f"{p}.configMap.items")
            if src.downward_api is not None:
                self.downward_files(src.downward_api.items, f"{p}.downwardAPI.items")
            token = src.service_account_token
            if token is not None:
                if not token.path:
                    self.required(f"{p}.serviceAccountToken.path")
                else:
                    self.relative_path(f"{p}.serviceAccountToken.path", token.path)
                if token.expiration_seconds < 600:
                    self.invalid(f"{p}.serviceAccountToken.expirationSeconds",
                                 token.expiration_seconds,
                                 "may not specify a duration less than 10 minutes")

    def key_to_paths(self, items: Sequence[KeyToPath], path: str) -> None:
        for i, item in enumerate(items):
            p = f"{path}[{i}]"
            if not item.key:
                self.required(f"{p}.key")
            if not item.path:
                self.required(f"{p}.path")
            else:
                self.relative_path(f"{p}.path", item.path, item=True)
            self.mode(f"{p}.mode", item.mode)

    def downward_files(self, items: Sequence[DownwardAPIVolumeFile], path: str) -> None:
        for i, item in enumerate(items):
            p = f"{path}[{i}]"
            if not item.path:
                self.required(f"{p}.path")
            else:
                self.relative_path(f"{p}.path", item.path, item=True)
            self.mode(f"{p}.mode", item.mode)
            if item.field_ref is not None and item.resource_field_ref is not None:
                self.invalid(p, "resource", "fieldRef and resourceFieldRef can not be "
                                            "specified simultaneously")
            elif item.field_ref is not None:
                self.field_ref(item.field_ref, f"{p}.fieldRef", _VOLUME_FIELD_PATHS)
            elif item.resource_field_ref is not None:
                self.resource_field_ref(item.resource_field_ref, f"{p}.resourceFieldRef",
                                        container_required=True)
            else:
                self.required(p, "one of fieldRef and resourceFieldRef is required")

    # ------------------------------------------------------------------ env

    def field_ref(self, ref: ObjectFieldSelector, path: str, supported: Sequence[str]) -> None:
        if not ref.api_version:
            self.required(f"{path}.apiVersion")
        if not ref.field_path:
            self.required(f"{path}.fieldPath")
            return
        m = _SUBSCRIPT_FIELD.match(ref.field_path)
        if m:
            key = m.group(2)
            problems = _is_qualified_name(key.lower() if m.group(1) == "annotations" else key)
            self.each(f"{path}.fieldPath", ref.field_path, problems)
        elif ref.field_path not in supported:
            self.not_supported(f"{path}.fieldPath", ref.field_path, supported)

    def resource_field_ref(self, ref: ResourceFieldSelector, path: str, *,
                           container_required: bool) -> None:
        if container_required and not ref.container_name:
            self.required(f"{path}.containerName")
        if not ref.resource:
            self.required(f"{path}.resource")
        elif ref.resource not in _RESOURCE_FIELDS and not ref.resource.startswith(
                ("limits.hugepages-", "requests.hugepages-")):
            self.not_supported(f"{path}.resource", ref.resource, _RESOURCE_FIELDS)
        self.divisor(ref, path)

    def divisor(self, ref: ResourceFieldSelector, path: str) -> None:
        # Upstream validateContainerResourceDivisor. A zero divisor is the unset
        # Quantity, which the API server writes for a divisor nobody gave; it reads
        # as 1 (ExtractContainerResourceValue). Any other divisor must be one of the
        # unit values of its resource, shown with the resource as the bad value.
        divisor = ref.divisor
        if divisor is None or divisor.is_zero():
            return
        section, _, name = ref.resource.partition(".")
        if section not in ("limits", "requests"):
            return  # an unsupported resource, reported as such already
        if name == "cpu":
            allowed, what = _CPU_DIVISORS, "1m and 1 are supported with the cpu resource"
        elif name in _BYTE_RESOURCE_NAMES or name.startswith("hugepages-"):
            noun = _BYTE_RESOURCE_NAMES.get(name, "hugepages")
            allowed = _BYTE_DIVISORS
            what = f"{', '.join(allowed)} are supported with the {noun} resource"
        else:
            return  # an unsupported resource, reported as such already
        if str(divisor) not in allowed:
            self.invalid(f"{path}.divisor", ref.resource, f"only divisor's values {what}")

    def env(self, env: Sequence[EnvVar], path: str) -> None:
        for i, var in enumerate(env):
            p = f"{path}[{i}]"
            if not var.name:
                self.required(f"{p}.name")
            elif not _ENV_NAME_RE.match(var.name):
                self.invalid(f"{p}.name", var.name, "a valid environment variable name must "
                             "consist only of printable ASCII characters other than '='")
            src = var.value_from
            if src is None:
                continue
            sources = [s for s in (src.field_ref, src.resource_field_ref,
                                   src.config_map_key_ref, src.secret_key_ref) if s is not None]
            vpath = f"{p}.valueFrom"
            if var.value:
                self.invalid(vpath, "", "may not be specified when `value` is not empty")
            if not sources:
                self.required(vpath, "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                     "`configMapKeyRef` or `secretKeyRef`")
            elif len(sources) > 1:
                self.invalid(vpath, "", "may not have more than one field specified at a time")
            if src.field_ref is not None:
                self.field_ref(src.field_ref, f"{vpath}.fieldRef", _ENV_FIELD_PATHS)
            if src.resource_field_ref is not None:
                self.resource_field_ref(src.resource_field_ref, f"{vpath}.resourceFieldRef",
                                        container_required=False)
            for key, ref in (("configMapKeyRef", src.config_map_key_ref),
                             ("secretKeyRef", src.secret_key_ref)):
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
                            "hugepages-"):
                        self.invalid(p, name, "must be a standard resource for containers")
                else:
                    self.each(p, name, _is_qualified_name(name))
                if qty < _ZERO:
                    self.invalid(p, str(qty), "must be greater than or equal to 0")
        for name, req in res.requests.items():
            limit = res.limits.get(name)
            p = child_path(f"{path}.requests", name)
            overcommit = "/" not in name or name.startswith("kubernetes.io/")
            overcommit = overcommit and not name.startswith("hugepages-")
            if limit is None:
                if not overcommit:
                    self.required(child_path(f"{path}.limits", name),
                                  "Limit must be set for non overcommitable resources")
            elif not overcommit and req != limit:
                self.invalid(p, str(req), f"must be equal to {name} limit of {limit}")
            elif req > limit:
                self.invalid(p, str(req), f"must be less than or equal to {name} limit of "
                                          f"{limit}")

    def probe(self, probe: Probe, path: str, *, liveness_like: bool) -> None:
        self.handlers(
            path,
            (("exec", probe.exec), ("httpGet", probe.http_get),
             ("tcpSocket", probe.tcp_socket), ("grpc", probe.grpc)),
        )
        for key, value in (("initialDelaySeconds", probe.initial_delay_seconds),
                           ("timeoutSeconds", probe.timeout_seconds),
                           ("periodSeconds", probe.period_seconds),
                           ("successThreshold", probe.success_threshold),
                           ("failureThreshold", probe.failure_threshold)):
            self.nonnegative(f"{path}.{key}", value)
        if liveness_like and probe.success_threshold != 1:
            self.invalid(f"{path}.successThreshold", probe.success_threshold, "must be 1")
        grace = probe.termination_grace_period_seconds
        if grace is not None and grace <= 0:
            self.invalid(f"{path}.terminationGracePeriodSeconds", grace,
                         "must be greater than 0")

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
                    if not _HTTP_HEADER_RE.match(header.name):
                        self.invalid(f"{p}.httpHeaders[{j}].name", header.name, _HTTP_HEADER_MSG)
            elif isinstance(h, TCPSocketAction):
                self.port_num_or_name(f"{p}.port", h.port)
            elif isinstance(h, GRPCAction):
                self.port_number(f"{p}.port", h.port)

    def lifecycle_handler(self, h: LifecycleHandler, path: str, grace: int) -> None:
        self.handlers(path, (("exec", h.exec), ("httpGet", h.http_get),
                             ("tcpSocket", h.tcp_socket), ("sleep", h.sleep)))
        if h.sleep is not None and not 0 <= h.sleep.seconds <= grace:
            self.invalid(f"{path}.sleep.seconds", h.sleep.seconds,
                         f"must be non-negative and less than terminationGracePeriodSeconds "
                         f"({grace})")

    def security_context(self, sc: SecurityContext, path: str) -> None:
        for key, value in (("runAsUser", sc.run_as_user), ("runAsGroup", sc.run_as_group)):
            if value is not None and not 0 <= value <= 2147483647:
                self.invalid(f"{path}.{key}", value, "must be between 0 and 2147483647, "
                                                     "inclusive")
        if sc.privileged and sc.allow_privilege_escalation is False:
            self.invalid(f"{path}", sc.allow_privilege_escalation,
                         "cannot set `allowPrivilegeEscalation` to false and `privileged` to "
                         "true")

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
                self.invalid(f"{p}.subPathExpr", m.sub_path_expr,
                             "subPathExpr and subPath are mutually exclusive")
            self.relative_path(f"{p}.subPathExpr", m.sub_path_expr)
        if m.mount_propagation is not None:
            if m.mount_propagation not in _MOUNT_PROPAGATIONS:
                self.not_supported(f"{p}.mountPropagation", m.mount_propagation,
                                   _MOUNT_PROPAGATIONS)
            elif m.mount_propagation == "Bidirectional" and not (
                    c.security_context and c.security_context.privileged):
                self.forbidden(f"{p}.mountPropagation", "Bidirectional mount propagation is "
                                                        "available only to privileged containers")

    def container(self, c: Container, path: str, *, init: bool, spec: PodSpec,
                  volumes: set[str]) -> None:
        if not c.name:
            self.required(f"{path}.name")
        else:
            self.each(f"{path}.name", c.name, is_dns1123_label(c.name))
        if not c.image:
            self.required(f"{path}.image")
        elif c.image != c.image.strip():
            self.invalid(f"{path}.image", c.image, "must not have leading or trailing whitespace")
        self.enum(f"{path}.imagePullPolicy", c.image_pull_policy, _PULL_POLICIES)
        self.enum(f"{path}.terminationMessagePolicy", c.termination_message_policy,
                  _TERMINATION_MESSAGE_POLICIES)
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
                    self.invalid(f"{p}.hostPort", port.host_port,
                                 "must match `containerPort` when `hostNetwork` is true")
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
            if ef.prefix and not _ENV_NAME_RE.match(ef.prefix):
                self.invalid(f"{p}.prefix", ef.prefix, "a valid environment variable name must "
                             "consist only of printable ASCII characters other than '='")
        self.resources(c.resources, f"{path}.resources")
        self.volume_mounts(c, f"{path}.volumeMounts", volumes)
        plain_init = init and not c.is_sidecar
        for key, probe, liveness_like in (
                ("livenessProbe", c.liveness_probe, True),
                ("readinessProbe", c.readiness_probe, False),
                ("startupProbe", c.startup_probe, True)):
            if probe is None:
                continue
            if plain_init:
                self.forbidden(f"{path}.{key}", "may not be set for init containers without "
                                                "restartPolicy=Always")
            else:
                self.probe(probe, f"{path}.{key}", liveness_like=liveness_like)
        if c.lifecycle is not None:
            if plain_init:
                self.forbidden(f"{path}.lifecycle", "may not be set for init containers without "
                                                    "restartPolicy=Always")
            else:
                for key, h in (("postStart", c.lifecycle.post_start),
                               ("preStop", c.lifecycle.pre_stop)):
                    if h is not None:
                        self.lifecycle_handler(h, f"{path}.lifecycle.{key}",
                                               spec.termination_grace_period_seconds)
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

    # ------------------------------------------------------------------ spec

    def spec(self, spec: PodSpec, path: str = "spec") -> None:
        volumes = self.volumes(spec.volumes, f"{path}.volumes")
        if not spec.containers:
            self.required(f"{path}.containers")
        names: set[str] = set()
        for key, group, init in (("initContainers", spec.init_containers, True),
                                 ("containers", spec.containers, False)):
            for i, c in enumerate(group):
                cpath = f"{path}.{key}[{i}]"
                self.container(c, cpath, init=init, spec=spec, volumes=volumes)
                if c.name:
                    if c.name in names:
                        self.duplicate(f"{cpath}.name", c.name)
                    names.add(c.name)
        # Host ports may not collide across the app containers; init containers run
        # one at a time, so each is checked on its own.
        for i, c in enumerate(spec.init_containers):
            self.host_port_conflicts([(f"{path}.initContainers[{i}]", c)])
        self.host_port_conflicts(
            [(f"{path}.containers[{i}]", c) for i, c in enumerate(spec.containers)])
        self.enum(f"{path}.restartPolicy", spec.restart_policy, _RESTART_POLICIES)
        self.enum(f"{path}.dnsPolicy", spec.dns_policy, _DNS_POLICIES)
        if spec.dns_policy == "None" and spec.dns_config is None:
            self.required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None")
        self.nonnegative(f"{path}.terminationGracePeriodSeconds",
                         spec.termination_grace_period_seconds)
        ads = spec.active_deadline_seconds
        if ads is not None and not 1 <= ads <= 2147483647:
            self.invalid(f"{path}.activeDeadlineSeconds", ads,
                         "must be between 1 and 2147483647, inclusive")
        for key, name in (("nodeName", spec.node_name),
                          ("serviceAccountName", spec.service_account_name),
                          ("priorityClassName", spec.priority_class_name)):
            if name:
                self.each(f"{path}.{key}", name, is_dns1123_subdomain(name))
        if spec.hostname:
            self.each(f"{path}.hostname", spec.hostname, is_dns1123_label(spec.hostname))
        if spec.subdomain:
            self.each(f"{path}.subdomain", spec.subdomain, is_dns1123_label(spec.subdomain))
        for name, qty in spec.overhead.items():
            if qty < _ZERO:
                self.invalid(child_path(f"{path}.overhead", name), str(qty),
                             "must be greater than or equal to 0")
        sc = spec.security_context
        for key, value in (("runAsUser", sc.run_as_user), ("runAsGroup", sc.run_as_group),
                           ("fsGroup", sc.fs_group)):
            if value is not None and not 0 <= value <= 2147483647:
                self.invalid(f"{path}.securityContext.{key}", value,
                             "must be between 0 and 2147483647, inclusive")


def validate_pod(pod: Pod) -> list[FieldError]:
    """Check a pod against Kubernetes' validation rules.

    Does no I/O and never raises for a bad pod.

    Args:
        pod: The pod, as loaded (defaults applied).

    Returns:
        Every problem found, in field order; empty when the pod is valid.
    """
    v = _Validator()
    if not pod.api_version:
        v.required("apiVersion")
    elif pod.api_version != "v1":
        v.not_supported("apiVersion", pod.api_version, ("v1",))
    if not pod.kind:
        v.required("kind")
    elif pod.kind != "Pod":
        v.not_supported("kind", pod.kind, ("Pod",))
    v.metadata(pod.metadata)
    v.spec(pod.spec)
    return v.errors



#: What a pod update may change, in the API server's words.
_UPDATABLE_POD_SPEC_FIELDS = ",".join((
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
    "negative)",
))


def validate_pod_update(new: Pod, old: Pod) -> list[FieldError]:
    """Check an update of a pod against the API server's rule for pod updates.

    A pod's spec is fixed once created but for its containers' images, a lower
    ``activeDeadlineSeconds``, added tolerations, and a negative grace period
    raised to 1 (``ValidatePodUpdate``). The kubelet relies on this: a container
    is restarted for a changed image and for nothing else. ``new`` is assumed to
    pass :func:`validate_pod` already.

    Returns:
        Every problem found; empty when the update is allowed.
    """
    v = _Validator()
    pairs = (("containers", new.spec.containers, old.spec.containers),
             ("initContainers", new.spec.init_containers, old.spec.init_containers))
    for key, new_list, old_list in pairs:
        if len(new_list) != len(old_list):
            v.forbidden(f"spec.{key}", "pod updates may not add or remove containers")
            return v.errors
    new_deadline, old_deadline = new.spec.active_deadline_seconds, old.spec.active_deadline_seconds
    if new_deadline is None and old_deadline is not None:
        v.invalid("spec.activeDeadlineSeconds", None,
                  "must not update from a positive integer to nil value")
    elif new_deadline is not None and old_deadline is not None and new_deadline > old_deadline:
        v.invalid("spec.activeDeadlineSeconds", new_deadline,
                  "must be less than or equal to previous value")
    if v.errors:
        return v.errors

    # The API server's way: carry the fields an update may change over from the
    # old spec, and what remains must be equal.
    old_grace = old.spec.termination_grace_period_seconds
    grace_raised = old_grace < 0 and new.spec.termination_grace_period_seconds == 1
    tolerations_added = all(t in new.spec.tolerations for t in old.spec.tolerations)
    munged = attrs.evolve(
        new.spec,
        containers=tuple(attrs.evolve(n, image=o.image)
                         for n, o in zip(new.spec.containers, old.spec.containers,
                                         strict=True)),
        init_containers=tuple(attrs.evolve(n, image=o.image)
                              for n, o in zip(new.spec.init_containers,
                                              old.spec.init_containers, strict=True)),
        active_deadline_seconds=old_deadline,
        tolerations=old.spec.tolerations if tolerations_added else new.spec.tolerations,
        termination_grace_period_seconds=(
            old_grace if grace_raised else new.spec.termination_grace_period_seconds),
    )
    if munged != old.spec:
        changed = _changed_paths(munged.to_dict(), old.spec.to_dict(), "spec")
        v.forbidden("spec", f"pod updates may not change fields other than "
                    f"{_UPDATABLE_POD_SPEC_FIELDS} (changed: {', '.join(changed[:5])}"
                    f"{', ...' if len(changed) > 5 else ''})")
    return v.errors


def _changed_paths(new: Any, old: Any, path: str) -> list[str]:
    """The field paths at which two JSON-shaped values differ."""
    if new == old:
        return []
    if isinstance(new, dict) and isinstance(old, dict):
        return [p for key in sorted(new.keys() | old.keys())
                for p in _changed_paths(new.get(key), old.get(key), child_path(path, key))]
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [p for i, (n, o) in enumerate(zip(new, old, strict=True))
                for p in _changed_paths(n, o, f"{path}[{i}]")]
    return [path]
