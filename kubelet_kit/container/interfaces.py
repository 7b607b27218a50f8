"""The Runtime protocols and their runtime-neutral value types.

The shapes follow the CRI (runtime.v1) closely, in Python's words: every runtime
offers sandboxes (the pod's shared environment), containers inside them, and
status/list calls (:class:`RuntimeCore`); exec, images, stats and events are
capabilities a runtime may offer beside them (:class:`Runtime` has them all).
What to start, kill or restart for a pod is *not* here: the composer decides that
once, for every runtime, so a custom runtime stays small.

Timestamps are wall-clock seconds since the Unix epoch as floats (the CRI uses
nanoseconds; the CRI client converts at its edge). ``0.0`` means "not set".
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from kubelet_kit.container._frozen import frozen_map as _frozen_map

__all__ = [
    "AuthConfig",
    "ContainerConfig",
    "ContainerEvent",
    "ContainerEventType",
    "ContainerFilter",
    "ContainerInfo",
    "ContainerMetadata",
    "ContainerState",
    "ContainerStats",
    "ContainerStatus",
    "DNSConfig",
    "Device",
    "EventRuntime",
    "ExecResult",
    "ExecRuntime",
    "FilesystemUsage",
    "Image",
    "ImageFsReporter",
    "ImageService",
    "ImageSpec",
    "KeyValue",
    "LinuxContainerResources",
    "LinuxContainerSecurityContext",
    "LogReopener",
    "Mount",
    "MountPropagation",
    "NamespaceOptions",
    "PodSandbox",
    "PodSandboxConfig",
    "PodSandboxFilter",
    "PodSandboxMetadata",
    "PodSandboxState",
    "PodSandboxStats",
    "PodSandboxStatus",
    "PortMapping",
    "ResourceUpdater",
    "Runtime",
    "RuntimeCondition",
    "RuntimeCore",
    "RuntimeStatus",
    "SecurityProfile",
    "SecurityProfileType",
    "StatsRuntime",
    "VersionInfo",
]


def _selected(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether ``labels`` has every label of ``selector``, with the same value."""
    # A loop rather than all() over a generator, at half the cost: a list call
    # matches every sandbox or container, and selectors hold a label or two.
    for key, value in selector.items():  # noqa: SIM110 (cheaper than all())
        if labels.get(key) != value:
            return False
    return True


# --------------------------------------------------------------------------- enums


class PodSandboxState(enum.Enum):
    """State of a sandbox (CRI ``PodSandboxState``)."""

    READY = "SANDBOX_READY"
    NOTREADY = "SANDBOX_NOTREADY"


class ContainerState(enum.Enum):
    """State of a container (CRI ``ContainerState``)."""

    CREATED = "CONTAINER_CREATED"
    RUNNING = "CONTAINER_RUNNING"
    EXITED = "CONTAINER_EXITED"
    UNKNOWN = "CONTAINER_UNKNOWN"


class ContainerEventType(enum.Enum):
    """Kind of a runtime container event (CRI ``ContainerEventType``)."""

    CREATED = "CONTAINER_CREATED_EVENT"
    STARTED = "CONTAINER_STARTED_EVENT"
    STOPPED = "CONTAINER_STOPPED_EVENT"
    DELETED = "CONTAINER_DELETED_EVENT"


class MountPropagation(enum.Enum):
    """Mount propagation of a container mount (CRI ``MountPropagation``)."""

    PRIVATE = "PROPAGATION_PRIVATE"
    HOST_TO_CONTAINER = "PROPAGATION_HOST_TO_CONTAINER"
    BIDIRECTIONAL = "PROPAGATION_BIDIRECTIONAL"


# ------------------------------------------------------------------- small values


@attrs.frozen
class KeyValue:
    """An environment variable as passed to the runtime."""

    key: str
    value: str


@attrs.frozen
class Mount:
    """A host path mounted into a container."""

    container_path: str
    host_path: str
    readonly: bool = False
    selinux_relabel: bool = False
    propagation: MountPropagation = MountPropagation.PRIVATE


@attrs.frozen
class Device:
    """A host device made available in a container."""

    container_path: str
    host_path: str
    permissions: str = "rwm"


@attrs.frozen
class PortMapping:
    """A container port, optionally published on the host."""

    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@attrs.frozen
class DNSConfig:
    """Resolver configuration for a sandbox."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def resolv_conf(self) -> str:
        """The ``/etc/resolv.conf`` a runtime writes for it, as containerd does: a
        ``search`` line, one ``nameserver`` line per server, an ``options`` line,
        each only when there is something to say ("" for an empty config)."""
        lines = []
        if self.searches:
            lines.append("search " + " ".join(self.searches))
        lines += [f"nameserver {server}" for server in self.servers]
        if self.options:
            lines.append("options " + " ".join(self.options))
        return "".join(f"{line}\n" for line in lines)


@attrs.frozen
class NamespaceOptions:
    """Which host namespaces a sandbox shares."""

    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False


@attrs.frozen
class LinuxContainerResources:
    """Linux resources of a container (CRI ``LinuxContainerResources``).

    Zero means "not set" for every numeric field, as in the CRI.
    """

    cpu_period: int = 0
    cpu_quota: int = 0
    cpu_shares: int = 0
    memory_limit_in_bytes: int = 0
    oom_score_adj: int = 0
    cpuset_cpus: str = ""
    cpuset_mems: str = ""
    unified: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)


class SecurityProfileType(enum.Enum):
    """Which seccomp or AppArmor profile applies (the CRI's ``ProfileType``)."""

    RUNTIME_DEFAULT = "RuntimeDefault"
    UNCONFINED = "Unconfined"
    LOCALHOST = "Localhost"


@attrs.frozen
class SecurityProfile:
    """A seccomp or AppArmor profile (CRI ``SecurityProfile``).

    ``localhost_ref`` names the node's profile for ``LOCALHOST``: an absolute path
    for seccomp, a profile name for AppArmor.
    """

    profile_type: SecurityProfileType = SecurityProfileType.RUNTIME_DEFAULT
    localhost_ref: str = ""


@attrs.frozen
class LinuxContainerSecurityContext:
    """The subset of a container's Linux security context the runtime applies.

    ``seccomp`` and ``apparmor`` of None leave the choice to the runtime
    (containerd: no seccomp filter, and its default AppArmor profile).
    """

    run_as_user: int | None = None
    run_as_group: int | None = None
    privileged: bool = False
    readonly_rootfs: bool = False
    no_new_privs: bool = False
    capabilities_add: tuple[str, ...] = ()
    capabilities_drop: tuple[str, ...] = ()
    supplemental_groups: tuple[int, ...] = ()
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None


@attrs.frozen
class ImageSpec:
    """An image reference, with the annotations the CRI allows beside it."""

    image: str
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)


# ------------------------------------------------------------------------ sandboxes


@attrs.frozen
class PodSandboxMetadata:
    """Identity of a sandbox: the pod it belongs to and the attempt number."""

    name: str
    namespace: str
    uid: str
    attempt: int = 0


@attrs.frozen
class PodSandboxConfig:
    """What the runtime needs to create a sandbox (CRI ``PodSandboxConfig``).

    Attributes:
        log_directory: Directory under which container log files are written.
        cgroup_parent: The pod-level cgroup the sandbox and its containers go in.
        privileged: Whether any container of the pod is privileged (the CRI's
            ``LinuxSandboxSecurityContext.privileged``): a runtime such as
            containerd refuses a privileged container in a sandbox without it.
        run_as_user: The pod's ``securityContext.runAsUser``, for the sandbox.
        run_as_group: The pod's ``securityContext.runAsGroup``, for the sandbox.
        supplemental_groups: The pod's ``fsGroup`` then its
            ``supplementalGroups``, for the sandbox.
        seccomp: The pod's seccomp profile, for the sandbox's own process.
        apparmor: The pod's AppArmor profile, for the sandbox's own process.
    """

    metadata: PodSandboxMetadata
    hostname: str = ""
    log_directory: str = ""
    dns_config: DNSConfig | None = None
    port_mappings: tuple[PortMapping, ...] = ()
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    cgroup_parent: str = ""
    namespace_options: NamespaceOptions = NamespaceOptions()
    sysctls: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    runtime_handler: str = ""
    privileged: bool = False
    run_as_user: int | None = None
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None


@attrs.frozen
class PodSandbox:
    """A sandbox as listed by :meth:`Runtime.list_pod_sandboxes`."""

    id: str
    metadata: PodSandboxMetadata
    state: PodSandboxState
    created_at: float
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    runtime_handler: str = ""


@attrs.frozen
class PodSandboxStatus:
    """Detailed status of one sandbox (CRI ``PodSandboxStatus``)."""

    id: str
    metadata: PodSandboxMetadata
    state: PodSandboxState
    created_at: float
    ip: str = ""
    additional_ips: tuple[str, ...] = ()
    namespace_options: NamespaceOptions = NamespaceOptions()
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    runtime_handler: str = ""


@attrs.frozen
class PodSandboxFilter:
    """Selects sandboxes in :meth:`Runtime.list_pod_sandboxes`; unset fields match all."""

    id: str | None = None
    state: PodSandboxState | None = None
    label_selector: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)

    def matches(self, sandbox: PodSandbox) -> bool:
        """Whether ``sandbox`` passes this filter (exact id, state, every label)."""
        if self.id is not None and sandbox.id != self.id:
            return False
        if self.state is not None and sandbox.state != self.state:
            return False
        return _selected(sandbox.labels, self.label_selector)


# ----------------------------------------------------------------------- containers


@attrs.frozen
class ContainerMetadata:
    """Identity of a container within its sandbox: name and attempt (restart count)."""

    name: str
    attempt: int = 0


@attrs.frozen
class ContainerConfig:
    """What the runtime needs to create a container (CRI ``ContainerConfig``).

    Attributes:
        log_path: Path of the container's log file, relative to the sandbox's
            ``log_directory`` (the kubelet uses ``<name>/<restart>.log``).
    """

    metadata: ContainerMetadata
    image: ImageSpec
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    envs: tuple[KeyValue, ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[Device, ...] = ()
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    log_path: str = ""
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    resources: LinuxContainerResources | None = None
    security_context: LinuxContainerSecurityContext | None = None


@attrs.frozen
class ContainerInfo:
    """A container as listed by :meth:`Runtime.list_containers` (CRI ``Container``)."""

    id: str
    pod_sandbox_id: str
    metadata: ContainerMetadata
    image: str
    image_ref: str
    state: ContainerState
    created_at: float
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)


@attrs.frozen
class ContainerStatus:
    """Detailed status of one container (CRI ``ContainerStatus``).

    Attributes:
        reason: Why the container is in its state, e.g. ``Completed``, ``Error``,
            ``OOMKilled`` for an exited container.
        log_path: Absolute path of the container's log file, if it has one.
    """

    id: str
    metadata: ContainerMetadata
    state: ContainerState
    created_at: float
    image: str
    image_ref: str = ""
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    mounts: tuple[Mount, ...] = ()
    log_path: str = ""
    resources: LinuxContainerResources | None = None


@attrs.frozen
class ContainerFilter:
    """Selects containers in :meth:`Runtime.list_containers`; unset fields match all."""

    id: str | None = None
    state: ContainerState | None = None
    pod_sandbox_id: str | None = None
    label_selector: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)

    def matches(self, container: ContainerInfo) -> bool:
        """Whether ``container`` passes this filter."""
        if self.id is not None and container.id != self.id:
            return False
        if self.state is not None and container.state != self.state:
            return False
        if self.pod_sandbox_id is not None and container.pod_sandbox_id != self.pod_sandbox_id:
            return False
        return _selected(container.labels, self.label_selector)


@attrs.frozen
class ExecResult:
    """Outcome of :meth:`Runtime.exec_sync`."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""


@attrs.frozen
class ContainerStats:
    """Resource usage of one container; ``None`` where the runtime cannot tell."""

    container_id: str
    timestamp: float
    cpu_usage_core_nanoseconds: int | None = None
    memory_working_set_bytes: int | None = None
    memory_usage_bytes: int | None = None
    writable_layer_bytes: int | None = None
    writable_layer_inodes: int | None = None


@attrs.frozen
class PodSandboxStats:
    """Resource usage of a sandbox and its containers."""

    pod_sandbox_id: str
    timestamp: float
    cpu_usage_core_nanoseconds: int | None = None
    memory_working_set_bytes: int | None = None
    process_count: int | None = None
    containers: tuple[ContainerStats, ...] = ()


@attrs.frozen
class ContainerEvent:
    """A change reported by the runtime's event stream (CRI ``ContainerEventResponse``).

    For a sandbox's own events ``container_id`` is the sandbox id.
    """

    container_id: str
    type: ContainerEventType
    created_at: float
    pod_sandbox_status: PodSandboxStatus | None = None
    containers_statuses: tuple[ContainerStatus, ...] = ()


# --------------------------------------------------------------------------- images


@attrs.frozen
class AuthConfig:
    """Registry credentials for one pull (CRI ``AuthConfig``).

    ``auth`` is the base64 ``user:password`` form a docker config carries;
    ``server_address`` is the registry key the credentials were found under.
    The ``repr`` hides every secret, so a logged pull request leaks nothing.
    """

    username: str = ""
    password: str = attrs.field(default="", repr=False)
    auth: str = attrs.field(default="", repr=False)
    server_address: str = ""
    identity_token: str = attrs.field(default="", repr=False)
    registry_token: str = attrs.field(default="", repr=False)


@attrs.frozen
class Image:
    """An image the runtime holds.

    ``uid`` and ``username`` are the user of the image's config (what its
    containers run as when their config names no user), as the CRI reports it: a
    numeric ``User`` (``"1000"``, or ``"1000:1000"`` with a group) is ``uid``, a
    name (``"www-data"``) is ``username``; never both, neither for an image
    whose config names no user (see :func:`kubelet_kit.container.images.image_user`).
    """

    id: str
    repo_tags: tuple[str, ...] = ()
    repo_digests: tuple[str, ...] = ()
    size: int = 0
    pinned: bool = False
    uid: int | None = None
    username: str = ""


@attrs.frozen
class FilesystemUsage:
    """One filesystem a runtime keeps images (or writable layers) on (CRI
    ``FilesystemUsage``): its mount point and what the runtime's data uses of it."""

    mountpoint: str
    used_bytes: int | None = None
    inodes_used: int | None = None
    timestamp: float = 0.0


# -------------------------------------------------------------------- runtime info


@attrs.frozen
class VersionInfo:
    """What :meth:`Runtime.version` reports."""

    runtime_name: str
    runtime_version: str
    runtime_api_version: str = "v1"
    version: str = "0.1.0"


@attrs.frozen
class RuntimeCondition:
    """One runtime condition; the kubelet requires ``RuntimeReady`` and ``NetworkReady``."""

    type: str
    status: bool
    reason: str = ""
    message: str = ""


@attrs.frozen
class RuntimeStatus:
    """What :meth:`Runtime.status` reports."""

    conditions: tuple[RuntimeCondition, ...] = ()

    def condition(self, type_: str) -> RuntimeCondition | None:
        """The condition of ``type_``, or None if the runtime did not report it."""
        return next((c for c in self.conditions if c.type == type_), None)


# -------------------------------------------------------------------------- protocol


@runtime_checkable
class RuntimeCore(Protocol):
    """What every runtime offers: its version and status, sandboxes, containers,
    and their list and status calls.

    This is all a runtime must have for the agent to run pods on it. The rest is
    optional, in capability protocols a runtime declares (see
    :mod:`kubelet_kit.container.optional`): exec (:class:`ExecRuntime`), an image
    service (:class:`ImageService`), stats (:class:`StatsRuntime`), an event
    stream (:class:`EventRuntime`), resource updates (:class:`ResourceUpdater`),
    log reopening (:class:`LogReopener`), the image filesystem
    (:class:`ImageFsReporter`) and streams
    (:class:`~kubelet_kit.container.streams.StreamingRuntime`).

    Every method is a coroutine that waits on the runtime; none blocks the loop.
    Expected failures raise the typed errors of :mod:`kubelet_kit.errors`:
    ``NotFoundError`` for an unknown id, ``RuntimeUnavailableError`` when the
    runtime cannot be reached. Stop and remove calls are idempotent, as in the
    CRI: stopping a stopped container or removing a removed one succeeds.
    """

    async def version(self) -> VersionInfo:
        """Name and version of the runtime."""

    async def status(self) -> RuntimeStatus:
        """Runtime conditions (RuntimeReady, NetworkReady)."""

    # -- sandboxes

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create and start a sandbox; returns its id. Not idempotent."""

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop the sandbox and every container in it. Idempotent."""

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Remove a sandbox and its containers. Idempotent (unknown id succeeds)."""

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``."""

    # -- containers

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Create a container in a sandbox; returns its id. Raises NotFoundError for
        an unknown sandbox and ContainerStartError when it cannot be created."""

    async def start_container(self, container_id: str) -> None:
        """Start a created container. Raises ContainerStartError if it cannot run."""

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """Ask the container to stop (SIGTERM), kill it after ``timeout`` seconds.
        Returns once it has exited. Idempotent."""

    async def remove_container(self, container_id: str) -> None:
        """Remove a container (killing it if running). Idempotent."""

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``."""

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""


@runtime_checkable
class ExecRuntime(Protocol):
    """A runtime that runs commands in a running container (capability ``exec``):
    exec probes, exec lifecycle hooks and the node API's ``/run`` need it."""

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` in the container and wait for it. Raises DeadlineExceededError
        when it runs longer than ``timeout`` seconds (None: no limit)."""


@runtime_checkable
class ResourceUpdater(Protocol):
    """A runtime that changes a running container's resources (capability
    ``update_resources``)."""

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Change a running container's resources."""


@runtime_checkable
class StatsRuntime(Protocol):
    """A runtime that measures its containers (capability ``stats``): the node
    API's stats and the eviction manager's per-pod usage need it."""

    async def container_stats(self, container_id: str) -> ContainerStats:
        """Resource usage of one container."""

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Resource usage of every container matching ``filter``."""

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Resource usage of a sandbox and its containers."""


@runtime_checkable
class ImageService(Protocol):
    """A runtime that pulls and keeps images (capability ``images``). Without it,
    the agent pulls nothing and takes every image as present; image garbage
    collection and the node's image list are off."""

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Pull an image, with the registry credentials ``auth`` when given (None:
        anonymous); returns the image reference (id or digest).
        Raises ImagePullError (ImageNotFoundError when the reference does not exist)."""

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image if the runtime has it, else None."""

    async def list_images(self) -> list[Image]:
        """Every image the runtime holds."""

    async def remove_image(self, image: ImageSpec) -> None:
        """Remove an image. Idempotent."""


@runtime_checkable
class EventRuntime(Protocol):
    """A runtime with a container event stream (capability ``events``), which the
    evented PLEG follows."""

    def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """Stream of container events. A runtime that turns out to have none
        raises UnimplementedError when iteration starts. Single consumer per call."""


@runtime_checkable
class Runtime(
    RuntimeCore,
    ExecRuntime,
    ResourceUpdater,
    StatsRuntime,
    ImageService,
    EventRuntime,
    Protocol,
):
    """A container runtime, CRI-shaped, with every capability: :class:`RuntimeCore`
    and the capability protocols :class:`ExecRuntime`, :class:`ResourceUpdater`,
    :class:`StatsRuntime`, :class:`ImageService` and :class:`EventRuntime`.

    Expected failures raise the typed errors of :mod:`kubelet_kit.errors`:
    ``NotFoundError`` for an unknown id, ``RuntimeUnavailableError`` when the
    runtime cannot be reached, ``ImagePullError`` for a failed pull,
    ``UnimplementedError`` for an optional operation the runtime lacks. Stop and
    remove calls are idempotent, as in the CRI.

    A runtime need not be all of it: the agent takes any :class:`RuntimeCore` and
    uses only the capabilities it offers
    (:func:`~kubelet_kit.container.optional.runtime_capabilities`).

    Implementations: :class:`kubelet_kit.testing.FakeRuntime` (in memory),
    ``kubelet_kit.runtimes.host.HostProcessRuntime`` (host processes),
    ``kubelet_kit.cri.CRIRuntime`` (any CRI runtime over gRPC).
    """


@runtime_checkable
class ImageFsReporter(Protocol):
    """A runtime that says where it keeps its images (CRI ``ImageFsInfo``).

    Optional, beside :class:`Runtime`: the kubelet measures its image filesystem
    (the ``imagefs.*`` eviction signals, image garbage collection) where the runtime
    says; without this, the agent's own state directory stands in for it.
    """

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """The filesystems holding images; empty when the runtime cannot tell."""


@runtime_checkable
class LogReopener(Protocol):
    """A runtime that can start a new log file for a running container (CRI
    ``ReopenContainerLog``), which the kubelet's log rotation needs.

    Optional, beside :class:`Runtime`: without it, container logs are not rotated.
    """

    async def reopen_container_log(self, container_id: str) -> None:
        """Make the runtime write the container's output to a new file at its log
        path (the old one was renamed). Returns once the new file exists.
        Raises NotFoundError for an unknown container, ContainerRuntimeError for
        one that is not running."""
