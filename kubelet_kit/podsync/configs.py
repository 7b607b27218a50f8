"""From a pod to the runtime's configs: sandbox and container configs, env, labels.

Pure functions (no I/O except the injectable ``/etc/resolv.conf`` reader) that
build what the kubelet hands the runtime, with the kubelet's values, so containers
made by a kubelet-kit agent are recognised by a kubelet and the other way round:

* :func:`sandbox_config`: hostname, log directory, labels, port mappings,
  namespaces, DNS, sysctls (``generatePodSandboxConfig``);
* :func:`container_config`: metadata, ``$(VAR)``-expanded command and args, env,
  mounts, labels and annotations (``labels.go``), log path, security context;
* :func:`resolve_env`: a container's environment (``makeEnvironmentVariables``):
  literal values with ``$(VAR)`` expansion, the downward API (``fieldRef``,
  ``resourceFieldRef``) and ConfigMap/Secret sources;
* :func:`container_hash`: the value of ``io.kubernetes.container.hash``;
* :func:`container_info_from_labels`: read a container's identity back from its
  labels and annotations (adoption after an agent restart);
* :func:`service_env`: the service-link variables (``KUBERNETES_SERVICE_HOST``,
  ...) from the services an agent knows (in cluster mode, the API server's).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import attrs

from kubelet_kit.api import (
    Container,
    ContainerPort,
    LifecycleHandler,
    Pod,
    Quantity,
    ResourceFieldSelector,
    Service,
)
from kubelet_kit.api.expand import expand, expand_all, mapping_for
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    Device,
    DNSConfig,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
    PortMapping,
)
from kubelet_kit.errors import KubeletKitError, PodSyncError
from kubelet_kit.volume.sources import ConfigSource

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "ContainerLabelInfo",
    "container_annotations",
    "container_config",
    "container_hash",
    "container_info_from_labels",
    "container_labels",
    "container_log_path",
    "pod_hostname",
    "pod_hostname_and_domain",
    "pod_log_directory",
    "read_resolv_conf",
    "resolve_env",
    "sandbox_annotations",
    "sandbox_config",
    "sandbox_labels",
    "service_env",
]

#: The waiting reason for a container whose config could not be built.
CREATE_CONTAINER_CONFIG_ERROR: Final = "CreateContainerConfigError"

#: Looks up a ConfigMap or Secret: ``(kind, namespace, name)`` -> its data, or
#: None when it does not exist. ``kind`` is ``"ConfigMap"`` or ``"Secret"``;
#: Secret values are given decoded (text), not base64.
_HOSTNAME_MAX = 63
_POD_DEFAULT_NDOTS = "ndots:5"


# ---------------------------------------------------------------------- sandbox


def pod_hostname(pod: Pod) -> str:
    """The pod's hostname: ``spec.hostname`` or the pod name, at most 63 characters.

    As the kubelet does, a truncated name loses any trailing ``-`` or ``.`` so it
    stays a valid DNS label.
    """
    name = pod.spec.hostname or pod.name
    if len(name) <= _HOSTNAME_MAX:
        return name
    return name[:_HOSTNAME_MAX].rstrip("-.")


def pod_hostname_and_domain(pod: Pod, cluster_domain: str = "") -> tuple[str, str]:
    """The pod's hostname (:func:`pod_hostname`) and its domain
    (``GeneratePodHostNameAndDomain``).

    A pod with ``spec.subdomain`` has the domain
    ``<subdomain>.<namespace>.svc.<cluster domain>``; one without has none ("").
    As in the kubelet the domain is built even when no cluster domain is
    configured (it then ends in ``svc.``).
    """
    subdomain = pod.spec.subdomain
    domain = f"{subdomain}.{pod.namespace}.svc.{cluster_domain}" if subdomain else ""
    return pod_hostname(pod), domain


def pod_log_directory(pod_logs_dir: str, pod: Pod) -> str:
    """``<podLogsDir>/<namespace>_<name>_<uid>``, the pod's log directory."""
    return os.path.join(pod_logs_dir, f"{pod.namespace}_{pod.name}_{pod.uid}")


def sandbox_labels(pod: Pod) -> dict[str, str]:
    """The pod's labels plus ``io.kubernetes.pod.name/namespace/uid``."""
    labels = dict(pod.metadata.labels)
    labels[kl.POD_NAME] = pod.name
    labels[kl.POD_NAMESPACE] = pod.namespace
    labels[kl.POD_UID] = pod.uid
    return labels


def sandbox_annotations(pod: Pod) -> dict[str, str]:
    """The pod's annotations, as they are."""
    return dict(pod.metadata.annotations)


def read_resolv_conf(path: str = "/etc/resolv.conf") -> DNSConfig:
    """Parse a resolv.conf: ``nameserver`` lines, the last ``search``, ``options``.

    A missing file gives an empty config. Comments (``#``, ``;``) are skipped.
    Blocks on the file read (small; call it once and pass the result around).
    The parsed result is kept while the file's inode, size, modification and
    change times stay the same, so each further call costs one ``stat``.
    """
    try:
        st = os.stat(path)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = _resolv_cache.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        text = Path(path).read_text()
    except FileNotFoundError:
        return DNSConfig()
    config = _parse_resolv_conf(text)
    _resolv_cache[path] = (signature, config)
    return config


# Without a resolver config given to the syncer, every new sandbox reads the
# node's resolv.conf; reading and parsing it each time cost more than the rest
# of the sandbox config together.
_resolv_cache: dict[str, tuple[tuple[int, int, int, int], DNSConfig]] = {}


def _parse_resolv_conf(text: str) -> DNSConfig:
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        line = re.split(r"[#;]", line, maxsplit=1)[0].strip()
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            servers.append(fields[1])
        elif fields[0] == "search":
            searches = fields[1:]  # the last search line wins, as in the resolver
        elif fields[0] == "options":
            options.extend(fields[1:])
    return DNSConfig(tuple(servers), tuple(searches), tuple(options))


def _dedupe(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _merge_options(base: Sequence[str], extra: Sequence[str]) -> tuple[str, ...]:
    # An option from the pod's dnsConfig replaces a same-named one.
    merged: dict[str, str] = {}
    for opt in (*base, *extra):
        merged[opt.split(":", 1)[0]] = opt
    return tuple(merged.values())


def _dns_config(
    pod: Pod,
    *,
    resolv_conf: DNSConfig,
    cluster_dns: Sequence[str],
    cluster_domain: str,
) -> DNSConfig:
    policy = pod.spec.dns_policy
    if policy == "ClusterFirst" and pod.spec.host_network:
        policy = "Default"  # only ClusterFirstWithHostNet gives host-network pods cluster DNS
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet") and not cluster_dns:
        # No cluster DNS configured: the kubelet falls back to the node's resolver.
        policy = "Default"
    if policy == "None":
        base = DNSConfig()
    elif policy == "Default":
        base = resolv_conf
    else:
        searches: list[str] = []
        if cluster_domain:
            ns = pod.namespace
            searches = [f"{ns}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
        base = DNSConfig(
            tuple(cluster_dns),
            _dedupe([*searches, *resolv_conf.searches]),
            (_POD_DEFAULT_NDOTS,),
        )
    extra = pod.spec.dns_config or {}
    extra_options = [
        f"{o['name']}:{o['value']}" if o.get("value") is not None else str(o.get("name", ""))
        for o in extra.get("options", ())
    ]
    return DNSConfig(
        _dedupe([*base.servers, *extra.get("nameservers", ())]),
        _dedupe([*base.searches, *extra.get("searches", ())]),
        _merge_options(base.options, extra_options),
    )


def sandbox_config(
    pod: Pod,
    *,
    attempt: int,
    pod_logs_dir: str,
    cgroup_parent: str = "",
    runtime_handler: str = "",
    resolv_conf: DNSConfig | None = None,
    read_resolv: Callable[[], DNSConfig] = read_resolv_conf,
    cluster_dns: Sequence[str] = (),
    cluster_domain: str = "",
) -> PodSandboxConfig:
    """The sandbox config the kubelet would create for ``pod``.

    Args:
        pod: The pod.
        attempt: Sandbox attempt number (0 for the first sandbox of the pod).
        pod_logs_dir: The agent's pod log root (the kubelet's ``podLogsDir``).
        cgroup_parent: The pod's cgroup (from the ContainerManager).
        runtime_handler: Runtime handler for the pod's runtimeClassName.
        resolv_conf: The node's resolver config; read with ``read_resolv`` when
            None and the pod's DNS policy needs it.
        read_resolv: Reads the node's resolver config (injectable for tests).
        cluster_dns: Cluster DNS server IPs; without them ``ClusterFirst``
            falls back to the node's resolver, as the kubelet does.
        cluster_domain: The cluster domain (e.g. ``cluster.local``) for searches.

    Returns:
        The PodSandboxConfig. A host-network pod gets no hostname (it shares the
        node's); port mappings come from regular containers' ports with a
        ``hostPort``.
    """
    spec = pod.spec
    needs_host_resolver = spec.dns_policy != "None"
    if resolv_conf is None:
        resolv_conf = read_resolv() if needs_host_resolver else DNSConfig()
    ports = tuple(
        PortMapping(
            container_port=p.container_port,
            host_port=p.host_port or 0,
            protocol=p.protocol or "TCP",
            host_ip=p.host_ip,
        )
        for c in spec.containers
        for p in c.ports
        if p.host_port
    )
    sysctls = {
        str(s.get("name", "")): str(s.get("value", "")) for s in spec.security_context.sysctls
    }
    psc = spec.security_context
    # The pod's groups as the kubelet hands them to the sandbox: fsGroup first.
    groups = ((psc.fs_group,) if psc.fs_group is not None else ()) + tuple(
        psc.supplemental_groups)
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(pod.name, pod.namespace, pod.uid, attempt),
        hostname="" if spec.host_network else pod_hostname(pod),
        log_directory=pod_log_directory(pod_logs_dir, pod),
        dns_config=_dns_config(
            pod, resolv_conf=resolv_conf, cluster_dns=cluster_dns, cluster_domain=cluster_domain
        ),
        port_mappings=ports,
        labels=sandbox_labels(pod),
        annotations=sandbox_annotations(pod),
        cgroup_parent=cgroup_parent,
        namespace_options=NamespaceOptions(
            host_network=spec.host_network, host_pid=spec.host_pid, host_ipc=spec.host_ipc
        ),
        sysctls=sysctls,
        runtime_handler=runtime_handler,
        privileged=has_privileged_container(pod),
        run_as_user=psc.run_as_user,
        run_as_group=psc.run_as_group,
        supplemental_groups=groups,
    )


def has_privileged_container(pod: Pod) -> bool:
    """Whether any container of ``pod``, init containers included, asks for
    ``securityContext.privileged`` (the kubelet's ``HasPrivilegedContainer``,
    which makes the sandbox privileged too)."""
    return any(
        c.security_context is not None and bool(c.security_context.privileged)
        for c in (*pod.spec.init_containers, *pod.spec.containers)
    )


# -------------------------------------------------------------------- container


def container_hash(container: Container) -> str:
    """The container's hash, as written to ``io.kubernetes.container.hash``.

    The kubelet's own value (``HashContainer`` since Kubernetes 1.31), so that a
    kubelet and a kubelet-kit agent taking over each other's node see matching
    hashes and leave the containers running. It covers the container's name and
    image only: in the API a pod update may change no other field of a container,
    and leaving the rest out keeps containers running across upgrades that add
    fields. A changed image therefore restarts the container, and nothing else
    does.

    The bytes hashed are Go's: ``json.Marshal`` of ``{"image": ..., "name": ...}``
    (keys sorted, HTML characters escaped), as the ``go-spew`` printer renders
    that byte slice (``([]uint8)[123 34 ...]``), hashed with FNV-1a (32 bit) and
    written in lowercase hex without leading zeros.
    """
    return _hash_name_and_image(container.name, container.image)


@functools.lru_cache(maxsize=4096)
def _hash_name_and_image(name: str, image: str) -> str:
    # Every sync of every pod hashes each of its containers; the pairs repeat.
    encoded = ("{" + f'"image":{_go_json_string(image)},"name":{_go_json_string(name)}'
               + "}").encode()
    rendered = "([]uint8)[" + " ".join(map(str, encoded)) + "]"
    return format(_fnv1a_32(rendered.encode()), "x")


def _go_json_string(value: str) -> str:
    """``value`` as Go's ``encoding/json`` writes a string (Go 1.22 and later).

    Python's encoder agrees on quotes, backslashes and control characters
    (``\\b \\f \\n \\r \\t`` short, the rest ``\\u00xx``); Go also escapes
    ``<``, ``>``, ``&``, U+2028 and U+2029, and writes what is not valid UTF-8
    (here: lone surrogates) as ``\\ufffd``.
    """
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _GO_JSON_EXTRA_ESCAPES:
        if char in text:
            text = text.replace(char, escaped)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(r"\\ufffd", text)
    return text


_GO_JSON_EXTRA_ESCAPES: Final = (
    ("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _fnv1a_32(data: bytes) -> int:
    h = 0x811C9DC5  # FNV-1a 32-bit offset basis
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF  # FNV 32-bit prime
    return h


def container_log_path(container_name: str, restart_count: int) -> str:
    """``<container name>/<restart count>.log``, relative to the sandbox log directory."""
    return f"{container_name}/{restart_count}.log"


def container_labels(pod: Pod, container: Container) -> dict[str, str]:
    """``io.kubernetes.pod.name/namespace/uid`` and ``io.kubernetes.container.name``."""
    return {
        kl.POD_NAME: pod.name,
        kl.POD_NAMESPACE: pod.namespace,
        kl.POD_UID: pod.uid,
        kl.CONTAINER_NAME: container.name,
    }


def _ports_json(ports: Sequence[ContainerPort]) -> str:
    # Go's field order and omitempty rules for v1.ContainerPort.
    out = []
    for p in ports:
        item: dict[str, Any] = {}
        if p.name:
            item["name"] = p.name
        if p.host_port:
            item["hostPort"] = p.host_port
        item["containerPort"] = p.container_port
        if p.protocol:
            item["protocol"] = p.protocol
        if p.host_ip:
            item["hostIP"] = p.host_ip
        out.append(item)
    return json.dumps(out, separators=(",", ":"))


def container_annotations(
    pod: Pod,
    container: Container,
    restart_count: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The kubelet's container annotations (``newContainerAnnotations``).

    Hash, restart count, termination message path and policy, the pod's deletion
    and termination grace periods, the preStop handler and ports as JSON, and the
    container type (``init`` or ``container``). ``extra`` (e.g. from a device
    plugin) goes in first, so the kubelet's keys win over it.
    """
    annotations = dict(extra or {})
    annotations[kl.CONTAINER_HASH] = container_hash(container)
    annotations[kl.CONTAINER_RESTART_COUNT] = str(restart_count)
    annotations[kl.CONTAINER_TERMINATION_MESSAGE_PATH] = container.termination_message_path
    annotations[kl.CONTAINER_TERMINATION_MESSAGE_POLICY] = container.termination_message_policy
    if pod.metadata.deletion_grace_period_seconds is not None:
        annotations[kl.POD_DELETION_GRACE_PERIOD] = str(
            pod.metadata.deletion_grace_period_seconds
        )
    annotations[kl.POD_TERMINATION_GRACE_PERIOD] = str(pod.spec.termination_grace_period_seconds)
    if container.lifecycle is not None and container.lifecycle.pre_stop is not None:
        annotations[kl.CONTAINER_PRESTOP_HANDLER] = json.dumps(
            container.lifecycle.pre_stop.to_dict(), separators=(",", ":")
        )
    if container.ports:
        annotations[kl.CONTAINER_PORTS] = _ports_json(container.ports)
    if any(c.name == container.name for c in pod.spec.init_containers):
        annotations[kl.CONTAINER_TYPE] = "init"
    elif any(c.name == container.name for c in pod.spec.containers):
        annotations[kl.CONTAINER_TYPE] = "container"
    return annotations


def _security_context(pod: Pod, container: Container) -> LinuxContainerSecurityContext:
    psc = pod.spec.security_context
    csc = container.security_context
    run_as_user = csc.run_as_user if csc and csc.run_as_user is not None else psc.run_as_user
    run_as_group = (
        csc.run_as_group if csc and csc.run_as_group is not None else psc.run_as_group
    )
    privileged = bool(csc and csc.privileged)
    groups = list(psc.supplemental_groups)
    if psc.fs_group is not None and psc.fs_group not in groups:
        groups.append(psc.fs_group)
    return LinuxContainerSecurityContext(
        run_as_user=run_as_user,
        run_as_group=run_as_group,
        privileged=privileged,
        readonly_rootfs=bool(csc and csc.read_only_root_filesystem),
        # Set only when privilege escalation is explicitly refused (and the
        # container is not privileged), as the kubelet does.
        no_new_privs=bool(csc and csc.allow_privilege_escalation is False and not privileged),
        capabilities_add=tuple(csc.capabilities.add) if csc and csc.capabilities else (),
        capabilities_drop=tuple(csc.capabilities.drop) if csc and csc.capabilities else (),
        supplemental_groups=tuple(groups),
    )


def container_config(
    pod: Pod,
    container: Container,
    *,
    restart_count: int,
    env: Sequence[KeyValue],
    mounts: Sequence[Mount] = (),
    devices: Sequence[Device] = (),
    resources: LinuxContainerResources | None = None,
    image: str | None = None,
    extra_annotations: Mapping[str, str] | None = None,
) -> ContainerConfig:
    """The container config the kubelet would create (``generateContainerConfig``).

    Args:
        pod: The pod.
        container: The container (init, sidecar or regular).
        restart_count: How many times it was restarted; the metadata attempt,
            the restartCount annotation and the log file name.
        env: The resolved environment (:func:`resolve_env`); also the variables
            ``$(VAR)`` references in command and args expand to.
        mounts: Volume mounts (from the VolumeManager).
        devices: Devices (from the ContainerManager).
        resources: Linux resources (from the ContainerManager).
        image: The image reference to run (the pulled image's id or digest);
            ``container.image`` when None.
        extra_annotations: Annotations to add (device plugins); the kubelet's
            own keys win.

    Returns:
        The ContainerConfig.
    """
    env_map = {kv.key: kv.value for kv in env}
    return ContainerConfig(
        metadata=ContainerMetadata(container.name, restart_count),
        image=ImageSpec(image if image is not None else container.image),
        command=expand_all(container.command, env_map),
        args=expand_all(container.args, env_map),
        working_dir=container.working_dir,
        envs=tuple(env),
        mounts=tuple(mounts),
        devices=tuple(devices),
        labels=container_labels(pod, container),
        annotations=container_annotations(pod, container, restart_count, extra_annotations),
        log_path=container_log_path(container.name, restart_count),
        stdin=container.stdin,
        stdin_once=container.stdin_once,
        tty=container.tty,
        resources=resources,
        security_context=_security_context(pod, container),
    )


# -------------------------------------------------------------------------- env


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
    if kind == "limits" and name in _ALLOCATABLE_DEFAULTED and (
        quantity is None or quantity.is_zero()
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
    pod_ips = list(pod_ips) if pod_ips is not None else ([pod_ip] if pod_ip else [])
    host_ips = list(host_ips) if host_ips is not None else ([host_ip] if host_ip else [])
    ns = pod.namespace
    cache: dict[tuple[str, str], Mapping[str, str] | None] = {}

    def lookup(kind: Literal["ConfigMap", "Secret"], name: str) -> Mapping[str, str] | None:
        if (kind, name) not in cache:
            data = None
            if config_source is not None:
                get = (config_source.get_config_map if kind == "ConfigMap"
                       else config_source.get_secret)
                data = get(ns, name)
            cache[(kind, name)] = (
                None if data is None
                else {k: v.decode("utf-8", "replace") for k, v in data.items()}
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
                env[f"{prefix}_SERVICE_PORT_{port.name.upper().replace('-', '_')}"] = str(
                    port.port)
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


# ---------------------------------------------------------------- label readers


@attrs.frozen
class ContainerLabelInfo:
    """What a runtime container's labels and annotations say about it.

    Attributes:
        name: The container name (``io.kubernetes.container.name``).
        pod_name: The pod name.
        pod_namespace: The pod namespace.
        pod_uid: The pod uid.
        hash: The spec hash (lowercase hex; "" when absent).
        restart_count: The restart count (0 when absent or unreadable).
        termination_grace_period: The pod's terminationGracePeriodSeconds.
        deletion_grace_period: The pod's deletionGracePeriodSeconds, if set.
        termination_message_path: Where the termination message is read.
        termination_message_policy: ``File`` or ``FallbackToLogsOnError``.
        pre_stop: The preStop handler, if the container had one.
        ports: The container's ports.
        container_type: ``init``, ``container`` or "".
    """

    name: str = ""
    pod_name: str = ""
    pod_namespace: str = ""
    pod_uid: str = ""
    hash: str = ""
    restart_count: int = 0
    termination_grace_period: int | None = None
    deletion_grace_period: int | None = None
    termination_message_path: str = ""
    termination_message_policy: str = ""
    pre_stop: LifecycleHandler | None = None
    ports: tuple[ContainerPort, ...] = ()
    container_type: str = ""


def _int_or(value: str | None, default: int | None) -> int | None:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default  # an unreadable value counts as absent, as upstream


def container_info_from_labels(
    labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ContainerLabelInfo:
    """Read back what :func:`container_labels` and :func:`container_annotations` wrote.

    Tolerant like the kubelet: a missing or unreadable value gets its default,
    so containers made by older or other agents are still adopted.
    """
    pre_stop: LifecycleHandler | None = None
    raw = annotations.get(kl.CONTAINER_PRESTOP_HANDLER)
    if raw:
        try:
            pre_stop = LifecycleHandler.from_dict(json.loads(raw))
        except (ValueError, TypeError, AttributeError, KubeletKitError):
            pre_stop = None
    ports: tuple[ContainerPort, ...] = ()
    raw = annotations.get(kl.CONTAINER_PORTS)
    if raw:
        try:
            ports = tuple(ContainerPort.from_dict(p) for p in json.loads(raw))
        except (ValueError, TypeError, AttributeError, KubeletKitError):
            ports = ()
    raw_hash = annotations.get(kl.CONTAINER_HASH, "")
    return ContainerLabelInfo(
        name=labels.get(kl.CONTAINER_NAME, ""),
        pod_name=labels.get(kl.POD_NAME, ""),
        pod_namespace=labels.get(kl.POD_NAMESPACE, ""),
        pod_uid=labels.get(kl.POD_UID, ""),
        hash=raw_hash.lower(),
        restart_count=_int_or(annotations.get(kl.CONTAINER_RESTART_COUNT), 0) or 0,
        termination_grace_period=_int_or(annotations.get(kl.POD_TERMINATION_GRACE_PERIOD), None),
        deletion_grace_period=_int_or(annotations.get(kl.POD_DELETION_GRACE_PERIOD), None),
        termination_message_path=annotations.get(kl.CONTAINER_TERMINATION_MESSAGE_PATH, ""),
        termination_message_policy=annotations.get(kl.CONTAINER_TERMINATION_MESSAGE_POLICY, ""),
        pre_stop=pre_stop,
        ports=ports,
        container_type=annotations.get(kl.CONTAINER_TYPE, ""),
    )
