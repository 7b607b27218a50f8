"""The v1 Service, as much of it as a node agent reads: what service-link
environment variables (``<NAME>_SERVICE_HOST``, ...) are made from."""

from __future__ import annotations

import attrs

from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.api.serde import Model, json_name

__all__ = ["Service", "ServicePort", "ServiceSpec"]


@attrs.frozen(kw_only=True)
class ServicePort(Model):
    """One port of a Service (``spec.ports[*]``); protocol defaults to TCP."""

    name: str = ""
    port: int = 0
    protocol: str = "TCP"


@attrs.frozen(kw_only=True)
class ServiceSpec(Model):
    """``spec`` of a Service; ``cluster_ip`` is ``""`` or ``"None"`` when it has none."""

    cluster_ip: str = attrs.field(default="", metadata=json_name("clusterIP"))
    ports: tuple[ServicePort, ...] = ()


@attrs.frozen(kw_only=True)
class Service(Model):
    """A v1 Service: its name, namespace, cluster IP and ports."""

    api_version: str = "v1"
    kind: str = "Service"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: ServiceSpec = attrs.field(factory=ServiceSpec)

    @property
    def has_cluster_ip(self) -> bool:
        """Whether the service has a cluster IP (not headless, not unset)."""
        return self.spec.cluster_ip not in ("", "None")
