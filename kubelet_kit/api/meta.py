"""Object metadata (``metav1.ObjectMeta``) as a node agent needs it."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet_kit.api.serde import Model

__all__ = ["ObjectMeta"]


@attrs.frozen(kw_only=True)
class ObjectMeta(Model):
    """``metadata`` of a Kubernetes object.

    Attributes:
        name: Object name (a DNS-1123 subdomain for pods).
        generate_name: Prefix for a server-generated name.
        namespace: Namespace; Kubernetes' default ``"default"`` is applied.
        uid: Unique id; the loader derives one for manifests that have none.
        labels: Label map.
        annotations: Annotation map.
        creation_timestamp: When the object was created (timezone-aware).
        deletion_timestamp: When deletion was requested, if it was.
        deletion_grace_period_seconds: Grace period granted at deletion.
        owner_references: Owner references, kept as plain data.
        resource_version: Opaque version string from the API server.
        generation: Generation counter of the spec.
    """

    name: str = ""
    generate_name: str = ""
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    creation_timestamp: _dt.datetime | None = None
    deletion_timestamp: _dt.datetime | None = None
    deletion_grace_period_seconds: int | None = None
    owner_references: tuple[Mapping[str, Any], ...] = ()
    resource_version: str = ""
    generation: int | None = None
