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

The sandbox functions live in :mod:`kubelet_kit.podsync._sandbox` and the
environment ones in :mod:`kubelet_kit.podsync._env`; this module holds the
container config, its labels, annotations and hash, and re-exports the rest.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from kubelet_kit.api import Container, ContainerPort, LifecycleHandler, Pod
from kubelet_kit.api.expand import expand_all
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    Device,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
)
from kubelet_kit.errors import KubeletKitError
from kubelet_kit.podsync._env import CREATE_CONTAINER_CONFIG_ERROR, resolve_env, service_env

# Public names outside ``__all__``, importable from here as they always were.
from kubelet_kit.podsync._env import MASTER_SERVICE_NAMESPACE as MASTER_SERVICE_NAMESPACE
from kubelet_kit.podsync._env import MASTER_SERVICES as MASTER_SERVICES
from kubelet_kit.podsync._sandbox import has_privileged_container as has_privileged_container
from kubelet_kit.podsync._sandbox import (
    pod_hostname,
    pod_hostname_and_domain,
    pod_log_directory,
    read_resolv_conf,
    sandbox_annotations,
    sandbox_config,
    sandbox_labels,
)

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
    encoded = (
        "{" + f'"image":{_go_json_string(image)},"name":{_go_json_string(name)}' + "}"
    ).encode()
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
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
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
    """The ports annotation's JSON, from the five fields of each port it shows."""
    return _ports_json_of(
        tuple((p.name, p.host_port, p.container_port, p.protocol, p.host_ip) for p in ports)
    )


# Written for every container created, restarts included; encoding costs several
# times what looking up the same ports does, and a node's pods repeat them.
@functools.lru_cache(maxsize=1024)
def _ports_json_of(ports: tuple[tuple[str, int | None, int, str, str], ...]) -> str:
    # Go's field order and omitempty rules for v1.ContainerPort.
    out = []
    for name, host_port, container_port, protocol, host_ip in ports:
        item: dict[str, Any] = {}
        if name:
            item["name"] = name
        if host_port:
            item["hostPort"] = host_port
        item["containerPort"] = container_port
        if protocol:
            item["protocol"] = protocol
        if host_ip:
            item["hostIP"] = host_ip
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
    # One dict display rather than a copy and four assignments (made for every
    # container created): a key of ``extra`` keeps its place and takes the
    # kubelet's value, as the assignments gave it.
    annotations = {
        **(extra or {}),
        kl.CONTAINER_HASH: container_hash(container),
        kl.CONTAINER_RESTART_COUNT: str(restart_count),
        kl.CONTAINER_TERMINATION_MESSAGE_PATH: container.termination_message_path,
        kl.CONTAINER_TERMINATION_MESSAGE_POLICY: container.termination_message_policy,
    }
    if pod.metadata.deletion_grace_period_seconds is not None:
        annotations[kl.POD_DELETION_GRACE_PERIOD] = str(pod.metadata.deletion_grace_period_seconds)
    annotations[kl.POD_TERMINATION_GRACE_PERIOD] = str(pod.spec.termination_grace_period_seconds)
    if container.lifecycle is not None and container.lifecycle.pre_stop is not None:
        annotations[kl.CONTAINER_PRESTOP_HANDLER] = json.dumps(
            container.lifecycle.pre_stop.to_dict(), separators=(",", ":")
        )
    if container.ports:
        annotations[kl.CONTAINER_PORTS] = _ports_json(container.ports)
    if _has_container_named(pod.spec.init_containers, container.name):
        annotations[kl.CONTAINER_TYPE] = "init"
    elif _has_container_named(pod.spec.containers, container.name):
        annotations[kl.CONTAINER_TYPE] = "container"
    return annotations


def _has_container_named(containers: Sequence[Container], name: str) -> bool:
    # A loop rather than any() over a generator: about half the cost, for every
    # container created, and a pod has a few containers.
    for c in containers:  # noqa: SIM110 (cheaper than any())
        if c.name == name:
            return True
    return False


def _security_context(pod: Pod, container: Container) -> LinuxContainerSecurityContext:
    psc = pod.spec.security_context
    csc = container.security_context
    if csc is None:
        # Most containers set nothing themselves: then the context follows from
        # four pod-level values, and pods of a node share a few combinations.
        return _pod_level_security_context(
            psc.run_as_user, psc.run_as_group, tuple(psc.supplemental_groups), psc.fs_group
        )
    privileged = bool(csc.privileged)
    return LinuxContainerSecurityContext(
        run_as_user=csc.run_as_user if csc.run_as_user is not None else psc.run_as_user,
        run_as_group=csc.run_as_group if csc.run_as_group is not None else psc.run_as_group,
        privileged=privileged,
        readonly_rootfs=bool(csc.read_only_root_filesystem),
        # Set only when privilege escalation is explicitly refused (and the
        # container is not privileged), as the kubelet does.
        no_new_privs=csc.allow_privilege_escalation is False and not privileged,
        capabilities_add=tuple(csc.capabilities.add) if csc.capabilities else (),
        capabilities_drop=tuple(csc.capabilities.drop) if csc.capabilities else (),
        supplemental_groups=_groups(tuple(psc.supplemental_groups), psc.fs_group),
    )


@functools.lru_cache(maxsize=256)
def _pod_level_security_context(
    run_as_user: int | None,
    run_as_group: int | None,
    supplemental_groups: tuple[int, ...],
    fs_group: int | None,
) -> LinuxContainerSecurityContext:
    """The security context of a container without a ``securityContext`` of its
    own (the values are frozen, so one instance serves every such container)."""
    return LinuxContainerSecurityContext(
        run_as_user=run_as_user,
        run_as_group=run_as_group,
        supplemental_groups=_groups(supplemental_groups, fs_group),
    )


def _groups(supplemental_groups: tuple[int, ...], fs_group: int | None) -> tuple[int, ...]:
    """The container's supplemental groups: the pod's, then its fsGroup if new."""
    if fs_group is not None and fs_group not in supplemental_groups:
        return (*supplemental_groups, fs_group)
    return supplemental_groups


def _command_and_args(
    container: Container, env: Sequence[KeyValue]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The container's command and args, ``$(VAR)``-expanded against ``env``.

    The lookup map of ``env`` is built only when some string holds a ``$``: most
    commands and args reference nothing, and an environment can be long.
    """
    command, args = tuple(container.command), tuple(container.args)
    for text in (*command, *args):
        if "$" in text:
            env_map = {kv.key: kv.value for kv in env}
            return expand_all(command, env_map), expand_all(args, env_map)
    return command, args


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
    command, args = _command_and_args(container, env)
    return ContainerConfig(
        metadata=ContainerMetadata(container.name, restart_count),
        image=ImageSpec(image if image is not None else container.image),
        command=command,
        args=args,
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
