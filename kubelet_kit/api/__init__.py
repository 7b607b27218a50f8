"""The Kubernetes v1 Pod as a node agent needs it: models, loading, validation, QoS.

Models are frozen attrs classes with snake_case attributes and Kubernetes' defaults;
``load_pod`` / ``load_manifests`` read camelCase YAML or JSON and report every
problem at once as a :class:`~kubelet_kit.errors.ValidationError`; ``Pod.to_dict()``
writes the camelCase shape back.

Unknown fields are kept (each model's ``extra``) and written back by ``to_dict``, so
nothing is lost in a round trip; ``strict=True`` reports them instead. A manifest
without ``metadata.uid`` gets a deterministic one (:func:`static_pod_uid`).
``qos_class``, ``pod_requests`` and ``pod_limits`` follow upstream's rules, sidecars
included.

The names below are loaded on first use (PEP 562 ``__getattr__``): importing
``kubelet_kit.api`` or one of its submodules does not pull in YAML loading,
validation and the pod models unless they are asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubelet_kit.api.loading import (
        ManifestResult,
        apply_defaults,
        load_manifests,
        load_pod,
        read_manifest_text,
        read_manifests,
        static_pod_uid,
    )
    from kubelet_kit.api.meta import ObjectMeta
    from kubelet_kit.api.pod import (
        Capabilities,
        ConfigMapEnvSource,
        ConfigMapKeySelector,
        ConfigMapProjection,
        ConfigMapVolumeSource,
        Container,
        ContainerPort,
        DownwardAPIProjection,
        DownwardAPIVolumeFile,
        DownwardAPIVolumeSource,
        EmptyDirVolumeSource,
        EnvFromSource,
        EnvVar,
        EnvVarSource,
        ExecAction,
        GRPCAction,
        HostPathVolumeSource,
        HTTPGetAction,
        HTTPHeader,
        KeyToPath,
        Lifecycle,
        LifecycleHandler,
        ObjectFieldSelector,
        PersistentVolumeClaimVolumeSource,
        Pod,
        PodSecurityContext,
        PodSpec,
        Probe,
        ProjectedVolumeSource,
        ResourceFieldSelector,
        ResourceRequirements,
        SecretEnvSource,
        SecretKeySelector,
        SecretProjection,
        SecretVolumeSource,
        SecurityContext,
        ServiceAccountTokenProjection,
        SleepAction,
        TCPSocketAction,
        Volume,
        VolumeMount,
        VolumeProjection,
        default_image_pull_policy,
    )
    from kubelet_kit.api.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, QOSClass, qos_class
    from kubelet_kit.api.quantity import Quantity
    from kubelet_kit.api.resources import pod_limits, pod_requests
    from kubelet_kit.api.serde import Model, format_time, parse_time
    from kubelet_kit.api.service import Service, ServicePort, ServiceSpec
    from kubelet_kit.api.status import (
        ContainerState,
        ContainerStateRunning,
        ContainerStateTerminated,
        ContainerStateWaiting,
        ContainerStatus,
        PodCondition,
        PodIP,
        PodStatus,
    )
    from kubelet_kit.api.validation import validate_pod

# Which submodule defines each public name; __getattr__ imports it on first use.
_EXPORTS: dict[str, str] = {
    "ManifestResult": "kubelet_kit.api.loading",
    "apply_defaults": "kubelet_kit.api.loading",
    "load_manifests": "kubelet_kit.api.loading",
    "load_pod": "kubelet_kit.api.loading",
    "read_manifest_text": "kubelet_kit.api.loading",
    "read_manifests": "kubelet_kit.api.loading",
    "static_pod_uid": "kubelet_kit.api.loading",
    "ObjectMeta": "kubelet_kit.api.meta",
    "Capabilities": "kubelet_kit.api.pod",
    "ConfigMapEnvSource": "kubelet_kit.api.pod",
    "ConfigMapKeySelector": "kubelet_kit.api.pod",
    "ConfigMapProjection": "kubelet_kit.api.pod",
    "ConfigMapVolumeSource": "kubelet_kit.api.pod",
    "Container": "kubelet_kit.api.pod",
    "ContainerPort": "kubelet_kit.api.pod",
    "DownwardAPIProjection": "kubelet_kit.api.pod",
    "DownwardAPIVolumeFile": "kubelet_kit.api.pod",
    "DownwardAPIVolumeSource": "kubelet_kit.api.pod",
    "EmptyDirVolumeSource": "kubelet_kit.api.pod",
    "EnvFromSource": "kubelet_kit.api.pod",
    "EnvVar": "kubelet_kit.api.pod",
    "EnvVarSource": "kubelet_kit.api.pod",
    "ExecAction": "kubelet_kit.api.pod",
    "GRPCAction": "kubelet_kit.api.pod",
    "HTTPGetAction": "kubelet_kit.api.pod",
    "HTTPHeader": "kubelet_kit.api.pod",
    "HostPathVolumeSource": "kubelet_kit.api.pod",
    "KeyToPath": "kubelet_kit.api.pod",
    "Lifecycle": "kubelet_kit.api.pod",
    "LifecycleHandler": "kubelet_kit.api.pod",
    "ObjectFieldSelector": "kubelet_kit.api.pod",
    "PersistentVolumeClaimVolumeSource": "kubelet_kit.api.pod",
    "Pod": "kubelet_kit.api.pod",
    "PodSecurityContext": "kubelet_kit.api.pod",
    "PodSpec": "kubelet_kit.api.pod",
    "Probe": "kubelet_kit.api.pod",
    "ProjectedVolumeSource": "kubelet_kit.api.pod",
    "ResourceFieldSelector": "kubelet_kit.api.pod",
    "ResourceRequirements": "kubelet_kit.api.pod",
    "SecretEnvSource": "kubelet_kit.api.pod",
    "SecretKeySelector": "kubelet_kit.api.pod",
    "SecretProjection": "kubelet_kit.api.pod",
    "SecretVolumeSource": "kubelet_kit.api.pod",
    "SecurityContext": "kubelet_kit.api.pod",
    "ServiceAccountTokenProjection": "kubelet_kit.api.pod",
    "SleepAction": "kubelet_kit.api.pod",
    "TCPSocketAction": "kubelet_kit.api.pod",
    "Volume": "kubelet_kit.api.pod",
    "VolumeMount": "kubelet_kit.api.pod",
    "VolumeProjection": "kubelet_kit.api.pod",
    "default_image_pull_policy": "kubelet_kit.api.pod",
    "BEST_EFFORT": "kubelet_kit.api.qos",
    "BURSTABLE": "kubelet_kit.api.qos",
    "GUARANTEED": "kubelet_kit.api.qos",
    "QOSClass": "kubelet_kit.api.qos",
    "qos_class": "kubelet_kit.api.qos",
    "Quantity": "kubelet_kit.api.quantity",
    "pod_limits": "kubelet_kit.api.resources",
    "pod_requests": "kubelet_kit.api.resources",
    "Model": "kubelet_kit.api.serde",
    "format_time": "kubelet_kit.api.serde",
    "parse_time": "kubelet_kit.api.serde",
    "Service": "kubelet_kit.api.service",
    "ServicePort": "kubelet_kit.api.service",
    "ServiceSpec": "kubelet_kit.api.service",
    "ContainerState": "kubelet_kit.api.status",
    "ContainerStateRunning": "kubelet_kit.api.status",
    "ContainerStateTerminated": "kubelet_kit.api.status",
    "ContainerStateWaiting": "kubelet_kit.api.status",
    "ContainerStatus": "kubelet_kit.api.status",
    "PodCondition": "kubelet_kit.api.status",
    "PodIP": "kubelet_kit.api.status",
    "PodStatus": "kubelet_kit.api.status",
    "validate_pod": "kubelet_kit.api.validation",
}

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "Capabilities",
    "ConfigMapEnvSource",
    "ConfigMapKeySelector",
    "ConfigMapProjection",
    "ConfigMapVolumeSource",
    "Container",
    "ContainerPort",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "DownwardAPIProjection",
    "DownwardAPIVolumeFile",
    "DownwardAPIVolumeSource",
    "EmptyDirVolumeSource",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "ExecAction",
    "GRPCAction",
    "HTTPGetAction",
    "HTTPHeader",
    "HostPathVolumeSource",
    "KeyToPath",
    "Lifecycle",
    "LifecycleHandler",
    "ManifestResult",
    "Model",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PersistentVolumeClaimVolumeSource",
    "Pod",
    "PodCondition",
    "PodIP",
    "PodSecurityContext",
    "PodSpec",
    "PodStatus",
    "Probe",
    "ProjectedVolumeSource",
    "QOSClass",
    "Quantity",
    "ResourceFieldSelector",
    "ResourceRequirements",
    "SecretEnvSource",
    "SecretKeySelector",
    "SecretProjection",
    "SecretVolumeSource",
    "SecurityContext",
    "Service",
    "ServiceAccountTokenProjection",
    "ServicePort",
    "ServiceSpec",
    "SleepAction",
    "TCPSocketAction",
    "Volume",
    "VolumeMount",
    "VolumeProjection",
    "apply_defaults",
    "default_image_pull_policy",
    "format_time",
    "load_manifests",
    "load_pod",
    "parse_time",
    "pod_limits",
    "pod_requests",
    "qos_class",
    "read_manifest_text",
    "read_manifests",
    "static_pod_uid",
    "validate_pod",
]


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` and cache the value in this module."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    # Cached in the module's namespace, so later lookups never reach __getattr__.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name, loaded or not, as ``dir()`` of an eager package would show."""
    return sorted(set(globals()) | set(__all__))
