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

from typing import Any

import attrs

from kubelet_kit.api._names import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    LABEL_VALUE_MSG,
    LABEL_VALUE_RE,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_port_name,
    max_len,
)
from kubelet_kit.api._validate_base import ZERO
from kubelet_kit.api._validate_containers import ContainerChecks
from kubelet_kit.api._validate_volumes import VolumeChecks
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.api.pod import Pod, PodSpec
from kubelet_kit.api.serde import child_path
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

_RESTART_POLICIES = ("Always", "Never", "OnFailure")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")


class _Validator(ContainerChecks, VolumeChecks):
    """Collects errors; one method per Kubernetes error type (see the base), one
    per part of a pod (the containers' and the volumes' in their own classes)."""

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
            self.each(f"{path}.labels", key, is_qualified_name(key))
            problems = []
            if len(value) > 63:
                problems.append(max_len(63))
            if not LABEL_VALUE_RE.match(value):
                problems.append(LABEL_VALUE_MSG)
            self.each(f"{path}.labels", value, problems)
        for key in meta.annotations:
            self.each(f"{path}.annotations", key, is_qualified_name(key.lower()))
        if meta.deletion_grace_period_seconds is not None:
            self.nonnegative(
                f"{path}.deletionGracePeriodSeconds", meta.deletion_grace_period_seconds
            )

    # ------------------------------------------------------------------ spec

    def spec(self, spec: PodSpec, path: str = "spec") -> None:
        volumes = self.volumes(spec.volumes, f"{path}.volumes")
        if not spec.containers:
            self.required(f"{path}.containers")
        names: set[str] = set()
        for key, group, init in (
            ("initContainers", spec.init_containers, True),
            ("containers", spec.containers, False),
        ):
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
            [(f"{path}.containers[{i}]", c) for i, c in enumerate(spec.containers)]
        )
        self.enum(f"{path}.restartPolicy", spec.restart_policy, _RESTART_POLICIES)
        self.enum(f"{path}.dnsPolicy", spec.dns_policy, _DNS_POLICIES)
        if spec.dns_policy == "None" and spec.dns_config is None:
            self.required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None")
        self.nonnegative(
            f"{path}.terminationGracePeriodSeconds", spec.termination_grace_period_seconds
        )
        ads = spec.active_deadline_seconds
        if ads is not None and not 1 <= ads <= 2147483647:
            self.invalid(
                f"{path}.activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive"
            )
        for key, name in (
            ("nodeName", spec.node_name),
            ("serviceAccountName", spec.service_account_name),
            ("priorityClassName", spec.priority_class_name),
        ):
            if name:
                self.each(f"{path}.{key}", name, is_dns1123_subdomain(name))
        if spec.hostname:
            self.each(f"{path}.hostname", spec.hostname, is_dns1123_label(spec.hostname))
        if spec.subdomain:
            self.each(f"{path}.subdomain", spec.subdomain, is_dns1123_label(spec.subdomain))
        for name, qty in spec.overhead.items():
            if qty < ZERO:
                self.invalid(
                    child_path(f"{path}.overhead", name),
                    str(qty),
                    "must be greater than or equal to 0",
                )
        sc = spec.security_context
        for key, value in (
            ("runAsUser", sc.run_as_user),
            ("runAsGroup", sc.run_as_group),
            ("fsGroup", sc.fs_group),
        ):
            if value is not None and not 0 <= value <= 2147483647:
                self.invalid(
                    f"{path}.securityContext.{key}",
                    value,
                    "must be between 0 and 2147483647, inclusive",
                )


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
_UPDATABLE_POD_SPEC_FIELDS = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    )
)


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
    pairs = (
        ("containers", new.spec.containers, old.spec.containers),
        ("initContainers", new.spec.init_containers, old.spec.init_containers),
    )
    for key, new_list, old_list in pairs:
        if len(new_list) != len(old_list):
            v.forbidden(f"spec.{key}", "pod updates may not add or remove containers")
            return v.errors
    new_deadline, old_deadline = new.spec.active_deadline_seconds, old.spec.active_deadline_seconds
    if new_deadline is None and old_deadline is not None:
        v.invalid(
            "spec.activeDeadlineSeconds",
            None,
            "must not update from a positive integer to nil value",
        )
    elif new_deadline is not None and old_deadline is not None and new_deadline > old_deadline:
        v.invalid(
            "spec.activeDeadlineSeconds",
            new_deadline,
            "must be less than or equal to previous value",
        )
    if v.errors:
        return v.errors

    # The API server's way: carry the fields an update may change over from the
    # old spec, and what remains must be equal.
    old_grace = old.spec.termination_grace_period_seconds
    grace_raised = old_grace < 0 and new.spec.termination_grace_period_seconds == 1
    tolerations_added = all(t in new.spec.tolerations for t in old.spec.tolerations)
    munged = attrs.evolve(
        new.spec,
        containers=tuple(
            attrs.evolve(n, image=o.image)
            for n, o in zip(new.spec.containers, old.spec.containers, strict=True)
        ),
        init_containers=tuple(
            attrs.evolve(n, image=o.image)
            for n, o in zip(new.spec.init_containers, old.spec.init_containers, strict=True)
        ),
        active_deadline_seconds=old_deadline,
        tolerations=old.spec.tolerations if tolerations_added else new.spec.tolerations,
        termination_grace_period_seconds=(
            old_grace if grace_raised else new.spec.termination_grace_period_seconds
        ),
    )
    if munged != old.spec:
        changed = _changed_paths(munged.to_dict(), old.spec.to_dict(), "spec")
        v.forbidden(
            "spec",
            f"pod updates may not change fields other than "
            f"{_UPDATABLE_POD_SPEC_FIELDS} (changed: {', '.join(changed[:5])}"
            f"{', ...' if len(changed) > 5 else ''})",
        )
    return v.errors


def _changed_paths(new: Any, old: Any, path: str) -> list[str]:
    """The field paths at which two JSON-shaped values differ."""
    if new == old:
        return []
    if isinstance(new, dict) and isinstance(old, dict):
        return [
            p
            for key in sorted(new.keys() | old.keys())
            for p in _changed_paths(new.get(key), old.get(key), child_path(path, key))
        ]
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [
            p
            for i, (n, o) in enumerate(zip(new, old, strict=True))
            for p in _changed_paths(n, o, f"{path}[{i}]")
        ]
    return [path]
