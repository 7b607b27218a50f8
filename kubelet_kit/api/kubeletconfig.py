"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1), the fields kubelet-kit reads.

Field names and defaults are the kubelet's; durations are Go duration strings
(``"20s"``, ``"1m0s"``). Fields kubelet-kit does not use yet are kept verbatim in
``extra``, so a real kubelet's configuration file loads unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from kubelet_kit.api.duration import parse_duration
from kubelet_kit.api.serde import Model, decode, format_value, json_name, json_names
from kubelet_kit.errors import FieldError, ValidationError

__all__ = ["KubeletConfiguration", "load_kubelet_config"]

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
#: ``memoryThrottlingFactor``'s default from v1.27 (0.8 before).
DEFAULT_MEMORY_THROTTLING_FACTOR = 0.9

_DURATIONS = (
    "sync_frequency",
    "file_check_frequency",
    "http_check_frequency",
    "node_status_update_frequency",
    "node_status_report_frequency",
    "runtime_request_timeout",
    "eviction_pressure_transition_period",
    "image_minimum_gc_age",
    "streaming_connection_idle_timeout",
)


@attrs.frozen(kw_only=True)
class KubeletConfiguration(Model):
    """The kubelet's configuration file, with the kubelet's defaults.

    Durations are kept as Go strings (as written); read them in seconds with
    :meth:`seconds`, e.g. ``config.seconds("sync_frequency")``.

    One default differs from the kubelet's: ``containerRuntimeEndpoint`` is empty,
    which means the embedded host-process runtime; set it (for example to
    ``unix:///run/containerd/containerd.sock``) to drive a CRI runtime.

    ``featureGates`` maps gate names to booleans; read one with
    :meth:`feature_gate`. kubelet-kit acts on ``MemoryQoS`` (off by default) and
    keeps the others as given. ``memoryThrottlingFactor`` (a number in (0, 1],
    default 0.9 as from v1.27) sets MemoryQoS's ``memory.high``; it is typed
    ``Any`` because it is the one floating-point field here, and is checked by
    :func:`load_kubelet_config`.
    """

    api_version: str = API_VERSION
    kind: str = KIND
    static_pod_path: str = ""
    static_pod_url: str = attrs.field(default="", metadata=json_name("staticPodURL"))
    static_pod_url_header: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=dict, metadata=json_name("staticPodURLHeader")
    )
    sync_frequency: str = "1m0s"
    file_check_frequency: str = "20s"
    http_check_frequency: str = "20s"
    node_status_update_frequency: str = "10s"
    node_status_report_frequency: str = "5m0s"
    runtime_request_timeout: str = "2m0s"
    streaming_connection_idle_timeout: str = "4h0m0s"
    container_runtime_endpoint: str = ""
    image_service_endpoint: str = ""
    pod_logs_dir: str = "/var/log/pods"
    max_pods: int = 110
    pod_pids_limit: int = -1
    cgroup_driver: str = "cgroupfs"
    cgroups_per_qos: bool = attrs.field(default=True, metadata=json_name("cgroupsPerQOS"))
    cgroup_root: str = ""
    enforce_node_allocatable: tuple[str, ...] = ("pods",)
    system_reserved: Mapping[str, str] = attrs.field(factory=dict)
    kube_reserved: Mapping[str, str] = attrs.field(factory=dict)
    eviction_hard: Mapping[str, str] | None = None
    eviction_soft: Mapping[str, str] = attrs.field(factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = attrs.field(factory=dict)
    eviction_minimum_reclaim: Mapping[str, str] = attrs.field(factory=dict)
    eviction_pressure_transition_period: str = "5m0s"
    eviction_max_pod_grace_period: int = 0
    local_storage_capacity_isolation: bool = True
    image_gc_high_threshold_percent: int = attrs.field(
        default=85, metadata=json_name("imageGCHighThresholdPercent")
    )
    image_gc_low_threshold_percent: int = attrs.field(
        default=80, metadata=json_name("imageGCLowThresholdPercent")
    )
    image_minimum_gc_age: str = attrs.field(default="2m0s", metadata=json_name("imageMinimumGCAge"))
    container_log_max_size: str = "10Mi"
    container_log_max_files: int = 5
    address: str = "0.0.0.0"
    port: int = 10250
    read_only_port: int = 0
    healthz_bind_address: str = "127.0.0.1"
    healthz_port: int = 10248
    # The API client's token bucket; the kubelet's int32 fields, with the defaults
    # of current kubelets (5 and 10 until 1.26); 0 means client-go's 5 and 10.
    kube_api_qps: int = attrs.field(default=50, metadata=json_name("kubeAPIQPS"))
    kube_api_burst: int = attrs.field(default=100, metadata=json_name("kubeAPIBurst"))
    serialize_image_pulls: bool = True
    register_node: bool = True
    node_labels: Mapping[str, str] = attrs.field(factory=dict)
    cpu_cfs_quota: bool = attrs.field(default=True, metadata=json_name("cpuCFSQuota"))
    cpu_manager_policy: str = "none"
    fail_swap_on: bool = True
    feature_gates: Mapping[str, bool] = attrs.field(factory=dict)
    memory_throttling_factor: Any = DEFAULT_MEMORY_THROTTLING_FACTOR

    def feature_gate(self, name: str, default: bool = False) -> bool:
        """Whether ``featureGates`` turns ``name`` on (``default`` when not listed)."""
        return bool(self.feature_gates.get(name, default))

    def seconds(self, field: str) -> float:
        """A duration field in seconds (e.g. ``seconds("sync_frequency")`` -> 60.0)."""
        return parse_duration(getattr(self, field))


def _validate(config: KubeletConfiguration) -> list[FieldError]:
    errors: list[FieldError] = []
    if config.api_version != API_VERSION:
        errors.append(
            FieldError(
                "apiVersion",
                f'Unsupported value: "{config.api_version}": supported values: "{API_VERSION}"',
            )
        )
    if config.kind != KIND:
        errors.append(
            FieldError("kind", f'Unsupported value: "{config.kind}": supported values: "{KIND}"')
        )
    names = json_names(KubeletConfiguration)
    for name in _DURATIONS:
        value = getattr(config, name)
        json = names[name]
        try:
            if parse_duration(value) < 0:
                errors.append(FieldError(json, f'Invalid value: "{value}": must be >= 0'))
        except ValueError as exc:
            errors.append(FieldError(json, f'Invalid value: "{value}": {exc}'))
    if config.cgroup_driver not in ("cgroupfs", "systemd"):
        errors.append(
            FieldError(
                "cgroupDriver",
                f'Unsupported value: "{config.cgroup_driver}": '
                'supported values: "cgroupfs", "systemd"',
            )
        )
    if config.max_pods < 0:
        errors.append(FieldError("maxPods", f"Invalid value: {config.max_pods}: must be >= 0"))
    for name, value in (
        ("port", config.port),
        ("readOnlyPort", config.read_only_port),
        ("healthzPort", config.healthz_port),
    ):
        if not 0 <= value <= 65535:
            errors.append(
                FieldError(name, f"Invalid value: {value}: must be between 0 and 65535, inclusive")
            )
    # The kubelet's rule (pkg/kubelet/apis/config/validation): not negative; zero
    # is allowed and means client-go's defaults.
    for name, value in (
        ("kubeAPIQPS", config.kube_api_qps),
        ("kubeAPIBurst", config.kube_api_burst),
    ):
        if value < 0:
            errors.append(
                FieldError(name, f"Invalid value: {value}: must not be a negative number")
            )
    errors.extend(_validate_memory_qos(config))
    return errors


def _validate_memory_qos(config: KubeletConfiguration) -> list[FieldError]:
    # The kubelet's rules (pkg/kubelet/apis/config/validation): a factor in (0, 1],
    # and one is needed when MemoryQoS is on.
    factor = config.memory_throttling_factor
    if factor is None:
        if config.feature_gate("MemoryQoS"):
            return [
                FieldError(
                    "memoryThrottlingFactor",
                    "Required value: memoryThrottlingFactor is required when "
                    "MemoryQoS feature flag is enabled",
                )
            ]
        return []
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        return [
            FieldError(
                "memoryThrottlingFactor",
                f"Invalid value: {format_value(factor)}: expected a number",
            )
        ]
    if not 0 < factor <= 1.0:
        return [
            FieldError(
                "memoryThrottlingFactor",
                f"Invalid value: {format_value(factor)}: must be greater than 0 "
                "and less than or equal to 1.0",
            )
        ]
    return []


def load_kubelet_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
) -> KubeletConfiguration:
    """Load a KubeletConfiguration from a YAML/JSON file or a mapping.

    Raises:
        ValidationError: every problem, each with its field path (e.g.
            ``syncFrequency: Invalid value: "1 minute": time: invalid duration ...``).
    """
    where: str | None = None
    data: Any
    if isinstance(source, Mapping):
        data = source
    else:
        where = str(source)
        try:
            data = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValidationError.single("", f"cannot read: {exc.strerror}", source=where) from None
        except yaml.YAMLError as exc:
            raise ValidationError.single("", f"invalid YAML: {exc}", source=where) from None
    errors: list[FieldError] = []
    config = decode(KubeletConfiguration, data or {}, errors=errors)
    decoded_badly = {e.path for e in errors}
    errors.extend(e for e in _validate(config) if e.path not in decoded_badly)
    if errors:
        raise ValidationError(errors, source=where)
    return config
