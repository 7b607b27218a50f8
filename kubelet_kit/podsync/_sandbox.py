"""From a pod to its sandbox config: hostname and domain, log directory, DNS.

The kubelet's ``generatePodSandboxConfig`` as pure functions: the pod's hostname
(:func:`pod_hostname`, :func:`pod_hostname_and_domain`), its log directory
(:func:`pod_log_directory`), the sandbox's labels and annotations, its DNS config
from the pod's DNS policy and the node's resolver (:func:`read_resolv_conf`, the
only I/O), and :func:`sandbox_config` putting them together with port mappings,
namespaces, sysctls and the pod's user and groups. Re-exported by
:mod:`kubelet_kit.podsync.configs`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from kubelet_kit.api import Container, Pod
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    DNSConfig,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
    PortMapping,
)

__all__ = [
    "has_privileged_container",
    "pod_hostname",
    "pod_hostname_and_domain",
    "pod_log_directory",
    "read_resolv_conf",
    "sandbox_annotations",
    "sandbox_config",
    "sandbox_labels",
]

#: Looks up a ConfigMap or Secret: ``(kind, namespace, name)`` -> its data, or
#: None when it does not exist. ``kind`` is ``"ConfigMap"`` or ``"Secret"``;
#: Secret values are given decoded (text), not base64.
_HOSTNAME_MAX = 63
_POD_DEFAULT_NDOTS = "ndots:5"


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
    meta = pod.metadata
    leaf = f"{meta.namespace}_{meta.name}_{meta.uid}"
    if type(pod_logs_dir) is str and pod_logs_dir and pod_logs_dir[-1] != "/" and leaf[:1] != "/":
        # What os.path.join gives in the usual case, without its generic path
        # handling: asked several times for each pod started.
        return f"{pod_logs_dir}/{leaf}"
    return os.path.join(pod_logs_dir, leaf)


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
    extra = pod.spec.dns_config
    if not extra:
        # Without a dnsConfig of the pod's own, the result depends on values that
        # the node's pods share (the namespace only under cluster DNS): each
        # combination is built once. The resolver config is keyed by its values.
        return _shared_dns_config(
            policy,
            pod.namespace if policy not in ("None", "Default") else "",
            (tuple(resolv_conf.servers), tuple(resolv_conf.searches), tuple(resolv_conf.options)),
            tuple(cluster_dns),
            cluster_domain,
        )
    base = _base_dns_config(policy, pod.namespace, resolv_conf, cluster_dns, cluster_domain)
    extra_options = [
        f"{o['name']}:{o['value']}" if o.get("value") is not None else str(o.get("name", ""))
        for o in extra.get("options", ())
    ]
    return DNSConfig(
        _dedupe([*base.servers, *extra.get("nameservers", ())]),
        _dedupe([*base.searches, *extra.get("searches", ())]),
        _merge_options(base.options, extra_options),
    )


def _base_dns_config(
    policy: str,
    namespace: str,
    resolv_conf: DNSConfig,
    cluster_dns: Sequence[str],
    cluster_domain: str,
) -> DNSConfig:
    """The DNS config of the (effective) ``policy``, before the pod's dnsConfig."""
    if policy == "None":
        return DNSConfig()
    if policy == "Default":
        return resolv_conf
    searches: list[str] = []
    if cluster_domain:
        searches = [f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
    return DNSConfig(
        tuple(cluster_dns),
        _dedupe([*searches, *resolv_conf.searches]),
        (_POD_DEFAULT_NDOTS,),
    )


@functools.lru_cache(maxsize=256)
def _shared_dns_config(
    policy: str,
    namespace: str,
    resolv_conf: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
    cluster_dns: tuple[str, ...],
    cluster_domain: str,
) -> DNSConfig:
    """The DNS config of a pod without a dnsConfig of its own (frozen: shared)."""
    base = _base_dns_config(policy, namespace, DNSConfig(*resolv_conf), cluster_dns, cluster_domain)
    return DNSConfig(
        _dedupe(base.servers), _dedupe(base.searches), _merge_options(base.options, ())
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
    psc = spec.security_context
    sysctls = {str(s.get("name", "")): str(s.get("value", "")) for s in psc.sysctls}
    # The pod's groups as the kubelet hands them to the sandbox: fsGroup first.
    groups = ((psc.fs_group,) if psc.fs_group is not None else ()) + tuple(psc.supplemental_groups)
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(pod.name, pod.namespace, pod.uid, attempt),
        hostname="" if spec.host_network else pod_hostname(pod),
        log_directory=pod_log_directory(pod_logs_dir, pod),
        dns_config=_dns_config(
            pod, resolv_conf=resolv_conf, cluster_dns=cluster_dns, cluster_domain=cluster_domain
        ),
        port_mappings=_port_mappings(spec.containers),
        labels=sandbox_labels(pod),
        # As sandbox_annotations gives them: the config keeps a copy of its own.
        annotations=pod.metadata.annotations,
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


def _port_mappings(containers: Sequence[Container]) -> tuple[PortMapping, ...]:
    """The port mappings of the regular containers' ports that have a ``hostPort``."""
    mappings: list[PortMapping] = []
    for c in containers:
        if not c.ports:
            continue  # most containers: no ports at all
        mappings.extend(
            PortMapping(
                container_port=p.container_port,
                host_port=p.host_port or 0,
                protocol=p.protocol or "TCP",
                host_ip=p.host_ip,
            )
            for p in c.ports
            if p.host_port
        )
    return tuple(mappings)


def has_privileged_container(pod: Pod) -> bool:
    """Whether any container of ``pod``, init containers included, asks for
    ``securityContext.privileged`` (the kubelet's ``HasPrivilegedContainer``,
    which makes the sandbox privileged too)."""
    # Plain loops, without joining the two tuples: asked for every sandbox.
    for containers in (pod.spec.init_containers, pod.spec.containers):
        for c in containers:
            if c.security_context is not None and c.security_context.privileged:
                return True
    return False
