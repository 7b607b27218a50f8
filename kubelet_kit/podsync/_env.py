"""A container's environment: ``env``/``envFrom`` resolution and service links.

The kubelet's ``makeEnvironmentVariables`` (:func:`resolve_env`): literal values
with ``$(VAR)`` expansion, the downward API (``fieldRef``, ``resourceFieldRef``)
and ConfigMap/Secret sources, failing with :data:`CREATE_CONTAINER_CONFIG_ERROR`;
and the service-link variables (:func:`service_env`) from the services an agent
knows. Re-exported by :mod:`kubelet_kit.podsync.configs`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

from kubelet_kit.api import Container, Pod, Quantity, ResourceFieldSelector, Service
from kubelet_kit.api.expand import expand, mapping_for
from kubelet_kit.container.interfaces import KeyValue
from kubelet_kit.errors import PodSyncError
from kubelet_kit.volume.sources import ConfigSource

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "MASTER_SERVICES",
    "MASTER_SERVICE_NAMESPACE",
    "resolve_env",
    "service_env",
]

#: The waiting reason for a container whose config could not be built.
CREATE_CONTAINER_CONFIG_ERROR: Final = "CreateContainerConfigError"


def _config_error(container: Container, message: str) -> PodSyncError:
    return PodSyncError(CREATE_CONTAINER_CONFIG_ERROR, message, container=container.name)


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def _field_value(
    pod: Pod,
    path: str,
    *,
    pod_ips: Sequence[str],
    host_ips: Sequence[str],
    node_name: str,
) -> str | None:
    meta = pod.metadata
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": pod.spec.node_name or node_name,
        "spec.serviceAccountName": pod.spec.service_account_name,
        "status.podIP": pod_ips[0] if pod_ips else "",
        "status.podIPs": ",".join(pod_ips),
        "status.hostIP": host_ips[0] if host_ips else "",
        "status.hostIPs": ",".join(host_ips),
    }
    if path in simple:
        return simple[path]
    match = _SUBSCRIPT.match(path)
    if match is not None:
        source = meta.labels if match.group(1) == "labels" else meta.annotations
        return source.get(match.group(2), "")
    return None


_ONE = Quantity.parse("1")
_ALLOCATABLE_DEFAULTED = ("cpu", "memory", "ephemeral-storage")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _resource_value(
    pod: Pod,
    container: Container,
    ref: ResourceFieldSelector,
    allocatable: Mapping[str, Quantity] | None,
    field_path: str,
) -> str:
    target = container
    if ref.container_name:
        found = next((c for c in pod.spec.all_containers() if c.name == ref.container_name), None)
        if found is None:
            raise _config_error(
                container, f"{field_path}: container {ref.container_name!r} not found in pod"
            )
        target = found
    kind, _, name = ref.resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise _config_error(container, f"unsupported container resource : {ref.resource}")
    values = target.resources.limits if kind == "limits" else target.resources.requests
    quantity = values.get(name)
    if (
        kind == "limits"
        and name in _ALLOCATABLE_DEFAULTED
        and (quantity is None or quantity.is_zero())
    ):
        # No limit: the node's allocatable is the effective limit.
        if allocatable is None or name not in allocatable:
            raise _config_error(
                container,
                f"{field_path}: {ref.resource} has no limit and the node's allocatable "
                f"{name} is unknown",
            )
        quantity = allocatable[name]
    if quantity is None:
        quantity = Quantity.parse("0")
    divisor = ref.divisor if ref.divisor is not None and not ref.divisor.is_zero() else _ONE
    if name == "cpu":
        value = _ceil_div(quantity.milli_value(), divisor.milli_value())
    elif name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        value = _ceil_div(quantity.value(), divisor.value())
    else:
        raise _config_error(container, f"unsupported container resource : {ref.resource}")
    return str(value)


def _valid_env_name(name: str) -> bool:
    # Any printable ASCII except "=" (Kubernetes' relaxed env var name rule).
    return bool(name) and "=" not in name and all(" " <= ch <= "~" for ch in name)


def resolve_env(
    pod: Pod,
    container: Container,
    *,
    pod_ip: str = "",
    host_ip: str = "",
    node_name: str = "",
    pod_ips: Sequence[str] | None = None,
    host_ips: Sequence[str] | None = None,
    config_source: ConfigSource | None = None,
    allocatable: Mapping[str, Quantity] | None = None,
    services: Iterable[Service] = (),
) -> list[KeyValue]:
    """The container's environment, as the kubelet computes it.

    ``envFrom`` sources come first (with their prefix; keys that are not valid
    variable names are skipped), then ``env`` in order: a literal value is
    ``$(VAR)``-expanded against the variables defined before it; ``valueFrom``
    reads the downward API (``fieldRef``: ``metadata.name``, ``.namespace``,
    ``.uid``, ``.labels['k']``, ``.annotations['k']``, ``spec.nodeName``,
    ``spec.serviceAccountName``, ``status.podIP(s)``, ``status.hostIP(s)``;
    ``resourceFieldRef``: ``limits``/``requests`` of ``cpu``, ``memory``,
    ``ephemeral-storage``, divided by the divisor and rounded up, a missing limit
    meaning the node's allocatable) or a ConfigMap/Secret key. A later variable
    replaces an earlier one of the same name, keeping its first position.

    Args:
        pod: The pod.
        container: The container.
        pod_ip: The pod's primary IP.
        host_ip: The node's primary IP.
        node_name: The node's name (used when ``spec.nodeName`` is empty).
        pod_ips: All pod IPs (default: ``[pod_ip]``).
        host_ips: All node IPs (default: ``[host_ip]``).
        config_source: Looks up ConfigMaps and Secrets; without it every such
            reference counts as missing.
        allocatable: The node's allocatable resources (for limits not set).
        services: The cluster's services, for the service-link variables
            (:func:`service_env`); they come after the container's own variables,
            which ``$(VAR)`` sees first and which win over them.

    Returns:
        The variables, in order.

    Raises:
        PodSyncError: reason ``CreateContainerConfigError``, with the kubelet's
            message: a non-optional ConfigMap/Secret or key is missing, or a field
            or resource reference cannot be resolved.
    """
    if not container.env and not container.env_from:
        # Nothing of the container's own (many containers): only the service
        # links, with no lookup to prepare, nothing to expand and nothing to fail.
        return [KeyValue(k, v) for k, v in service_env(pod, services).items()]
    pod_ips = list(pod_ips) if pod_ips is not None else ([pod_ip] if pod_ip else [])
    host_ips = list(host_ips) if host_ips is not None else ([host_ip] if host_ip else [])
    ns = pod.namespace
    cache: dict[tuple[str, str], Mapping[str, str] | None] = {}

    def lookup(kind: Literal["ConfigMap", "Secret"], name: str) -> Mapping[str, str] | None:
        if (kind, name) not in cache:
            data = None
            if config_source is not None:
                get = (
                    config_source.get_config_map
                    if kind == "ConfigMap"
                    else config_source.get_secret
                )
                data = get(ns, name)
            cache[(kind, name)] = (
                None if data is None else {k: v.decode("utf-8", "replace") for k, v in data.items()}
            )
        return cache[(kind, name)]

    def not_found(kind: str, name: str) -> PodSyncError:
        # The API server's NotFound text, which the kubelet passes on.
        resource = "configmap" if kind == "ConfigMap" else "secret"
        return _config_error(container, f'{resource} "{name}" not found')

    env: dict[str, str] = {}
    for source in container.env_from:
        if source.config_map_ref is not None:
            kind: Literal["ConfigMap", "Secret"] = "ConfigMap"
            name, optional = source.config_map_ref.name, bool(source.config_map_ref.optional)
        elif source.secret_ref is not None:
            kind = "Secret"
            name, optional = source.secret_ref.name, bool(source.secret_ref.optional)
        else:
            continue
        data = lookup(kind, name)
        if data is None:
            if optional:
                continue
            raise not_found(kind, name)
        for key, value in data.items():
            full = source.prefix + key
            if _valid_env_name(full):
                env[full] = value

    links = service_env(pod, services)
    resolve_var = mapping_for(env, links)
    for index, var in enumerate(container.env):
        field_path = f"env[{index}]"
        value_from = var.value_from
        if var.value or value_from is None:
            env[var.name] = expand(var.value or "", resolve_var)
            continue
        if value_from.field_ref is not None:
            path = value_from.field_ref.field_path
            resolved = _field_value(
                pod, path, pod_ips=pod_ips, host_ips=host_ips, node_name=node_name
            )
            if resolved is None:
                raise _config_error(container, f"unsupported fieldPath: {path}")
            env[var.name] = resolved
        elif value_from.resource_field_ref is not None:
            env[var.name] = _resource_value(
                pod, container, value_from.resource_field_ref, allocatable, field_path
            )
        elif value_from.config_map_key_ref is not None or value_from.secret_key_ref is not None:
            ref = value_from.config_map_key_ref or value_from.secret_key_ref
            assert ref is not None
            kind = "ConfigMap" if value_from.config_map_key_ref is not None else "Secret"
            optional = bool(ref.optional)
            data = lookup(kind, ref.name)
            if data is None:
                if optional:
                    continue
                raise not_found(kind, ref.name)
            if ref.key not in data:
                if optional:
                    continue
                raise _config_error(
                    container, f"couldn't find key {ref.key} in {kind} {ns}/{ref.name}"
                )
            env[var.name] = data[ref.key]
        else:
            env[var.name] = ""
    return [
        *(KeyValue(k, v) for k, v in env.items()),
        *(KeyValue(k, v) for k, v in links.items() if k not in env),
    ]


#: Services whose variables every pod gets (from the default namespace), even with
#: ``enableServiceLinks: false``: how a pod finds its API server.
MASTER_SERVICES: Final = frozenset({"kubernetes"})
MASTER_SERVICE_NAMESPACE: Final = "default"


def service_env(pod: Pod, services: Iterable[Service]) -> dict[str, str]:
    """The service-link variables the kubelet gives ``pod``'s containers.

    The ``kubernetes`` service of the default namespace always; with
    ``enableServiceLinks`` (the default) also every service of the pod's own
    namespace, which wins over a master service of the same name. Services
    without a cluster IP (headless) give none. Per service ``NAME`` (upper case,
    ``-`` as ``_``): ``NAME_SERVICE_HOST``, ``NAME_SERVICE_PORT`` (first port),
    ``NAME_SERVICE_PORT_<PORTNAME>`` per named port, and the Docker-link forms
    ``NAME_PORT`` (first port), ``NAME_PORT_<port>_<PROTO>`` with ``_PROTO``,
    ``_PORT`` and ``_ADDR`` (``getServiceEnvVarMap`` and ``envvars.FromServices``).
    """
    chosen: dict[str, Service] = {}
    for service in services:
        if not service.has_cluster_ip or not service.spec.ports:
            continue
        meta = service.metadata
        if meta.namespace == MASTER_SERVICE_NAMESPACE and meta.name in MASTER_SERVICES:
            chosen.setdefault(meta.name, service)
        elif meta.namespace == pod.namespace and pod.spec.enable_service_links:
            chosen[meta.name] = service
    env: dict[str, str] = {}
    for service in chosen.values():
        prefix = service.metadata.name.upper().replace("-", "_")
        ip = service.spec.cluster_ip
        ports = service.spec.ports
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0].port)
        for port in ports:
            if port.name:
                env[f"{prefix}_SERVICE_PORT_{port.name.upper().replace('-', '_')}"] = str(port.port)
        host = f"[{ip}]" if ":" in ip else ip  # net.JoinHostPort
        for i, port in enumerate(ports):
            proto = (port.protocol or "TCP").upper()
            url = f"{proto.lower()}://{host}:{port.port}"
            if i == 0:
                env[f"{prefix}_PORT"] = url
            base = f"{prefix}_PORT_{port.port}_{proto}"
            env[base] = url
            env[f"{base}_PROTO"] = proto.lower()
            env[f"{base}_PORT"] = str(port.port)
            env[f"{base}_ADDR"] = ip
    return env
