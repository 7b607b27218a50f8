"""The Kubernetes v1 Pod spec as a node agent needs it: containers, probes, volumes.

Every class is a frozen attrs value; change one with ``attrs.evolve``. Kubernetes'
API defaults are the attribute defaults, so a loaded manifest already carries them
(restartPolicy ``Always``, terminationGracePeriodSeconds 30, probe timings, protocol
``TCP``, ...). Two defaults depend on other fields and are applied on construction:
a container's ``image_pull_policy`` (from the image tag) and a missing resource
request (set to its limit). Lists are tuples and maps are read-only mappings.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.api.quantity import Quantity
from kubelet_kit.api.serde import Model, not_serialized
from kubelet_kit.api.status import PodStatus
from kubelet_kit.errors import FieldError

__all__ = [
    "OTHER_VOLUME_SOURCES",
    "Capabilities",
    "ConfigMapEnvSource",
    "ConfigMapKeySelector",
    "ConfigMapProjection",
    "ConfigMapVolumeSource",
    "Container",
    "ContainerPort",
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
    "ObjectFieldSelector",
    "PersistentVolumeClaimVolumeSource",
    "Pod",
    "PodSecurityContext",
    "PodSpec",
    "Probe",
    "ProjectedVolumeSource",
    "ResourceFieldSelector",
    "ResourceRequirements",
    "SecretEnvSource",
    "SecretKeySelector",
    "SecretProjection",
    "SecretVolumeSource",
    "SecurityContext",
    "ServiceAccountTokenProjection",
    "SleepAction",
    "TCPSocketAction",
    "Volume",
    "VolumeMount",
    "VolumeProjection",
    "default_image_pull_policy",
]

# ----------------------------------------------------------------------- env


@attrs.frozen(kw_only=True)
class ObjectFieldSelector(Model):
    """``fieldRef``: a field of the pod (``metadata.name``, ``status.podIP``, ...)."""

    api_version: str = "v1"
    field_path: str = ""


@attrs.frozen(kw_only=True)
class ResourceFieldSelector(Model):
    """``resourceFieldRef``: a container's resource (``limits.cpu``, ...)."""

    container_name: str = ""
    resource: str = ""
    divisor: Quantity | None = None


@attrs.frozen(kw_only=True)
class ConfigMapKeySelector(Model):
    """``configMapKeyRef``: one key of a ConfigMap."""

    name: str = ""
    key: str = ""
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class SecretKeySelector(Model):
    """``secretKeyRef``: one key of a Secret."""

    name: str = ""
    key: str = ""
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class EnvVarSource(Model):
    """``valueFrom`` of an env var; exactly one source should be set."""

    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: ConfigMapKeySelector | None = None
    secret_key_ref: SecretKeySelector | None = None


@attrs.frozen(kw_only=True)
class EnvVar(Model):
    """One environment variable: a literal ``value`` or a ``value_from`` source."""

    name: str = ""
    value: str | None = None
    value_from: EnvVarSource | None = None


@attrs.frozen(kw_only=True)
class ConfigMapEnvSource(Model):
    """``configMapRef`` of ``envFrom``."""

    name: str = ""
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class SecretEnvSource(Model):
    """``secretRef`` of ``envFrom``."""

    name: str = ""
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class EnvFromSource(Model):
    """One ``envFrom`` entry: every key of a ConfigMap or Secret, with a prefix."""

    prefix: str = ""
    config_map_ref: ConfigMapEnvSource | None = None
    secret_ref: SecretEnvSource | None = None


# ----------------------------------------------------------------------- ports, resources


@attrs.frozen(kw_only=True)
class ContainerPort(Model):
    """A port the container listens on (``hostPort`` 0 or absent means none)."""

    name: str = ""
    container_port: int = 0
    host_port: int | None = None
    protocol: str = "TCP"
    host_ip: str = ""


@attrs.frozen(kw_only=True)
class ResourceRequirements(Model):
    """``resources``: requests and limits by resource name.

    The constructor keeps what it is given; the loader applies Kubernetes' API
    defaulting (:meth:`with_defaults`: a resource that has a limit but no request
    gets the limit as its request), as the API server does before a kubelet sees a pod.
    """

    limits: Mapping[str, Quantity] = attrs.field(factory=dict)
    requests: Mapping[str, Quantity] = attrs.field(factory=dict)
    claims: tuple[Mapping[str, Any], ...] = ()

    def with_defaults(self) -> ResourceRequirements:
        """This value with every missing request set to its limit."""
        missing = {k: v for k, v in self.limits.items() if k not in self.requests}
        if not missing:
            return self
        return attrs.evolve(self, requests={**self.requests, **missing})


# ----------------------------------------------------------------------- probes, hooks


@attrs.frozen(kw_only=True)
class ExecAction(Model):
    """Run a command in the container; exit status 0 is success."""

    command: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class HTTPHeader(Model):
    """One HTTP header of an ``httpGet`` probe or hook."""

    name: str = ""
    value: str = ""


@attrs.frozen(kw_only=True)
class HTTPGetAction(Model):
    """HTTP GET against the pod; ``port`` is a number or a named container port."""

    path: str = "/"
    port: int | str = 0
    host: str = ""
    scheme: str = "HTTP"
    http_headers: tuple[HTTPHeader, ...] = ()


@attrs.frozen(kw_only=True)
class TCPSocketAction(Model):
    """Open a TCP connection; ``port`` is a number or a named container port."""

    port: int | str = 0
    host: str = ""


@attrs.frozen(kw_only=True)
class GRPCAction(Model):
    """gRPC health check (``grpc.health.v1``) on a port, for an optional service."""

    port: int = 0
    service: str | None = None


@attrs.frozen(kw_only=True)
class SleepAction(Model):
    """Sleep for a number of seconds (lifecycle hooks only)."""

    seconds: int = 0


# Kubernetes treats 0 in these probe fields as "not set" and defaults it.
def _zero_is_1(value: int) -> int:
    return value or 1


def _zero_is_3(value: int) -> int:
    return value or 3


def _zero_is_10(value: int) -> int:
    return value or 10


@attrs.frozen(kw_only=True)
class Probe(Model):
    """A liveness, readiness or startup probe with Kubernetes' default timings.

    Exactly one of ``exec``, ``http_get``, ``tcp_socket`` and ``grpc`` should be set
    (validation checks it); :attr:`handler` returns it.
    """

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: int = 0
    timeout_seconds: int = attrs.field(default=1, converter=_zero_is_1)
    period_seconds: int = attrs.field(default=10, converter=_zero_is_10)
    success_threshold: int = attrs.field(default=1, converter=_zero_is_1)
    failure_threshold: int = attrs.field(default=3, converter=_zero_is_3)
    termination_grace_period_seconds: int | None = None

    @property
    def handler(self) -> ExecAction | HTTPGetAction | TCPSocketAction | GRPCAction | None:
        """The first handler that is set, or None."""
        return self.exec or self.http_get or self.tcp_socket or self.grpc


@attrs.frozen(kw_only=True)
class LifecycleHandler(Model):
    """A postStart or preStop hook; exactly one action should be set."""

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    sleep: SleepAction | None = None

    @property
    def handler(self) -> ExecAction | HTTPGetAction | TCPSocketAction | SleepAction | None:
        """The first action that is set, or None."""
        return self.exec or self.http_get or self.tcp_socket or self.sleep


@attrs.frozen(kw_only=True)
class Lifecycle(Model):
    """Container lifecycle hooks."""

    post_start: LifecycleHandler | None = None
    pre_stop: LifecycleHandler | None = None


# ----------------------------------------------------------------------- security


@attrs.frozen(kw_only=True)
class Capabilities(Model):
    """Linux capabilities to add and drop (names without ``CAP_``)."""

    add: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SecurityContext(Model):
    """Container ``securityContext``; unset fields are ``None``."""

    capabilities: Capabilities | None = None
    privileged: bool | None = None
    se_linux_options: Mapping[str, Any] | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    proc_mount: str | None = None
    seccomp_profile: Mapping[str, Any] | None = None
    app_armor_profile: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class PodSecurityContext(Model):
    """Pod ``securityContext``; unset fields are ``None``."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    fs_group: int | None = None
    fs_group_change_policy: str | None = None
    supplemental_groups: tuple[int, ...] = ()
    sysctls: tuple[Mapping[str, Any], ...] = ()
    se_linux_options: Mapping[str, Any] | None = None
    seccomp_profile: Mapping[str, Any] | None = None
    app_armor_profile: Mapping[str, Any] | None = None


# ----------------------------------------------------------------------- containers


@attrs.frozen(kw_only=True)
class VolumeMount(Model):
    """Where a pod volume appears inside a container."""

    name: str = ""
    mount_path: str = ""
    sub_path: str = ""
    sub_path_expr: str = ""
    read_only: bool = False
    mount_propagation: str | None = None


def default_image_pull_policy(image: str) -> str:
    """Kubernetes' default pull policy for an image reference.

    ``Always`` when the tag is ``latest`` or there is neither tag nor digest (which
    means ``latest``); ``IfNotPresent`` otherwise. A digest counts as a tag.
    """
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry's ":port" is not a tag
    tag = last.partition(":")[2] if ":" in last else ""
    if not tag and not digest and image:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


@attrs.frozen(kw_only=True)
class Container(Model):
    """A container of the pod (regular, init or sidecar).

    Attributes:
        restart_policy: Only for init containers: ``"Always"`` makes it a sidecar
            (a restartable init container, see :attr:`is_sidecar`).
        image_pull_policy: Defaults from the image: ``Always`` for ``:latest`` or no
            tag, else ``IfNotPresent``.
        resize_policy: In-place resize policy, kept as data.
    """

    name: str = ""
    image: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    ports: tuple[ContainerPort, ...] = ()
    env_from: tuple[EnvFromSource, ...] = ()
    env: tuple[EnvVar, ...] = ()
    resources: ResourceRequirements = attrs.field(factory=ResourceRequirements)
    resize_policy: tuple[Mapping[str, Any], ...] = ()
    restart_policy: str | None = None
    volume_mounts: tuple[VolumeMount, ...] = ()
    volume_devices: tuple[Mapping[str, Any], ...] = ()
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    lifecycle: Lifecycle | None = None
    termination_message_path: str = "/dev/termination-log"
    termination_message_policy: str = "File"
    image_pull_policy: str = attrs.field()
    security_context: SecurityContext | None = None
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False

    @image_pull_policy.default
    def _default_pull_policy(self) -> str:
        return default_image_pull_policy(self.image)

    @property
    def is_sidecar(self) -> bool:
        """True for a restartable init container (``restartPolicy: Always``)."""
        return self.restart_policy == "Always"

    def resolve_port(self, port: int | str) -> int | None:
        """The port number a probe or hook means (upstream ``ResolveContainerPort``).

        A number is itself; a name is looked up among this container's ports; a name
        that matches no port but is all digits is read as a number.

        Returns:
            The port number, or None when the name matches nothing or the number is
            outside 1..65535.
        """
        number: int | None
        if isinstance(port, int):
            number = port
        else:
            number = next((p.container_port for p in self.ports if p.name == port), None)
            if number is None and port.isdigit():
                number = int(port)
        return number if number is not None and 0 < number < 65536 else None


# ----------------------------------------------------------------------- volumes


@attrs.frozen(kw_only=True)
class KeyToPath(Model):
    """Project one key of a ConfigMap or Secret to a relative file path."""

    key: str = ""
    path: str = ""
    mode: int | None = None


@attrs.frozen(kw_only=True)
class EmptyDirVolumeSource(Model):
    """``emptyDir``: medium ``""`` (node disk), ``Memory`` (tmpfs) or ``HugePages``."""

    medium: str = ""
    size_limit: Quantity | None = None


@attrs.frozen(kw_only=True)
class HostPathVolumeSource(Model):
    """``hostPath``; ``type`` ``""`` means no check before mounting."""

    path: str = ""
    type: str = ""


@attrs.frozen(kw_only=True)
class ConfigMapVolumeSource(Model):
    """``configMap`` volume; ``default_mode`` 0644 as Kubernetes defaults it."""

    name: str = ""
    items: tuple[KeyToPath, ...] = ()
    default_mode: int = 0o644
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class SecretVolumeSource(Model):
    """``secret`` volume; ``default_mode`` 0644 as Kubernetes defaults it."""

    secret_name: str = ""
    items: tuple[KeyToPath, ...] = ()
    default_mode: int = 0o644
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class DownwardAPIVolumeFile(Model):
    """One file of a downward API volume: a pod field or a container resource."""

    path: str = ""
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    mode: int | None = None


@attrs.frozen(kw_only=True)
class DownwardAPIVolumeSource(Model):
    """``downwardAPI`` volume."""

    items: tuple[DownwardAPIVolumeFile, ...] = ()
    default_mode: int = 0o644


@attrs.frozen(kw_only=True)
class SecretProjection(Model):
    """A Secret inside a projected volume."""

    name: str = ""
    items: tuple[KeyToPath, ...] = ()
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class ConfigMapProjection(Model):
    """A ConfigMap inside a projected volume."""

    name: str = ""
    items: tuple[KeyToPath, ...] = ()
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class DownwardAPIProjection(Model):
    """Downward API files inside a projected volume."""

    items: tuple[DownwardAPIVolumeFile, ...] = ()


@attrs.frozen(kw_only=True)
class ServiceAccountTokenProjection(Model):
    """A service account token inside a projected volume (default one hour)."""

    audience: str = ""
    expiration_seconds: int = 3600
    path: str = ""


@attrs.frozen(kw_only=True)
class VolumeProjection(Model):
    """One source of a projected volume; other kinds stay in ``extra``."""

    secret: SecretProjection | None = None
    config_map: ConfigMapProjection | None = None
    downward_api: DownwardAPIProjection | None = None
    service_account_token: ServiceAccountTokenProjection | None = None


@attrs.frozen(kw_only=True)
class ProjectedVolumeSource(Model):
    """``projected`` volume: several sources in one directory."""

    sources: tuple[VolumeProjection, ...] = ()
    default_mode: int = 0o644


@attrs.frozen(kw_only=True)
class PersistentVolumeClaimVolumeSource(Model):
    """``persistentVolumeClaim`` volume."""

    claim_name: str = ""
    read_only: bool = False


#: Volume source kinds Kubernetes knows that are not modelled here: they are kept
#: as data in ``Volume.extra`` and count as a source in validation.
OTHER_VOLUME_SOURCES = frozenset(
    {
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "csi",
        "ephemeral",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "gitRepo",
        "glusterfs",
        "image",
        "iscsi",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    }
)

_MODELLED_SOURCES = (
    ("empty_dir", "emptyDir"),
    ("host_path", "hostPath"),
    ("config_map", "configMap"),
    ("secret", "secret"),
    ("downward_api", "downwardAPI"),
    ("projected", "projected"),
    ("persistent_volume_claim", "persistentVolumeClaim"),
)


@attrs.frozen(kw_only=True)
class Volume(Model):
    """A pod volume: a name and exactly one source."""

    name: str = ""
    empty_dir: EmptyDirVolumeSource | None = None
    host_path: HostPathVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    downward_api: DownwardAPIVolumeSource | None = None
    projected: ProjectedVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None

    @property
    def source_kinds(self) -> tuple[str, ...]:
        """JSON names of every source set, modelled or kept in ``extra``."""
        kinds = [key for attr, key in _MODELLED_SOURCES if getattr(self, attr) is not None]
        kinds.extend(k for k in self.extra if k in OTHER_VOLUME_SOURCES)
        return tuple(kinds)

    @property
    def kind(self) -> str | None:
        """The JSON name of the (first) source, e.g. ``"emptyDir"``, or None."""
        kinds = self.source_kinds
        return kinds[0] if kinds else None


# ----------------------------------------------------------------------- pod


@attrs.frozen(kw_only=True)
class PodSpec(Model):
    """``spec`` of a pod, with Kubernetes' defaults.

    Data-only fields (tolerations, affinity, host aliases, ...) are kept as plain
    mappings; fields not listed here stay in ``extra``.
    """

    volumes: tuple[Volume, ...] = ()
    init_containers: tuple[Container, ...] = ()
    containers: tuple[Container, ...] = ()
    restart_policy: str = "Always"
    termination_grace_period_seconds: int = 30
    active_deadline_seconds: int | None = None
    dns_policy: str = "ClusterFirst"
    node_selector: Mapping[str, str] = attrs.field(factory=dict)
    service_account_name: str = ""
    automount_service_account_token: bool | None = None
    node_name: str = ""
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    share_process_namespace: bool | None = None
    security_context: PodSecurityContext = attrs.field(factory=PodSecurityContext)
    image_pull_secrets: tuple[Mapping[str, Any], ...] = ()
    hostname: str = ""
    subdomain: str = ""
    affinity: Mapping[str, Any] | None = None
    scheduler_name: str = "default-scheduler"
    tolerations: tuple[Mapping[str, Any], ...] = ()
    host_aliases: tuple[Mapping[str, Any], ...] = ()
    priority_class_name: str = ""
    priority: int | None = None
    dns_config: Mapping[str, Any] | None = None
    readiness_gates: tuple[Mapping[str, Any], ...] = ()
    runtime_class_name: str | None = None
    enable_service_links: bool = True
    preemption_policy: str | None = None
    overhead: Mapping[str, Quantity] = attrs.field(factory=dict)
    resources: ResourceRequirements | None = None
    os: Mapping[str, Any] | None = None

    @property
    def sidecars(self) -> tuple[Container, ...]:
        """Init containers with ``restartPolicy: Always``, in order."""
        return tuple(c for c in self.init_containers if c.is_sidecar)

    def all_containers(self) -> Iterator[Container]:
        """Init containers (sidecars included) then regular containers, in order."""
        yield from self.init_containers
        yield from self.containers


@attrs.frozen(kw_only=True)
class Pod(Model):
    """A Kubernetes v1 Pod.

    Attributes:
        api_version: Always ``"v1"`` for a valid pod.
        kind: Always ``"Pod"`` for a valid pod.
        metadata: Name, namespace, uid, labels, ...
        spec: What to run.
        status: Observed state (see :mod:`kubelet_kit.api.status`).
        source: Where the pod was loaded from (file path or URL); not serialized
            and not part of equality.
        problems: What the loader could not read in a pod it still served (a pod
            of the API server, see :func:`kubelet_kit.api.loading.load_api_pod`);
            the agent rejects such a pod at admission. Not serialized and not part
            of equality.
    """

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PodSpec = attrs.field(factory=PodSpec)
    status: PodStatus = attrs.field(factory=PodStatus)
    source: str | None = attrs.field(default=None, eq=False, metadata=not_serialized())
    problems: tuple[FieldError, ...] = attrs.field(default=(), eq=False, metadata=not_serialized())

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    @property
    def namespace(self) -> str:
        """``metadata.namespace``."""
        return self.metadata.namespace

    @property
    def uid(self) -> str:
        """``metadata.uid``."""
        return self.metadata.uid

    @property
    def full_name(self) -> str:
        """``<name>_<namespace>``, the kubelet's pod full name."""
        return f"{self.metadata.name}_{self.metadata.namespace}"

    @property
    def creation_timestamp(self) -> _dt.datetime | None:
        """``metadata.creationTimestamp``."""
        return self.metadata.creation_timestamp
