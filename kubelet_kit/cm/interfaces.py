"""The ContainerManager protocol: node resources, pod cgroups, admission."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from kubelet_kit.container import Device, KeyValue, Mount

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod, Quantity
    from kubelet_kit.api.admission import AdmitResult
    from kubelet_kit.container import LinuxContainerResources

__all__ = ["ContainerManager", "ContainerRunOptions"]


# --- device plugins: what a ContainerManager adds to a container (devicemanager) ---
@attrs.frozen
class ContainerRunOptions:
    """What the node's device plugins add to one container's config.

    The composer puts ``envs`` and ``mounts`` before the container's own (as the
    kubelet does, so a variable the pod sets itself wins), passes ``devices``
    to the runtime and ``annotations`` as extra container annotations (the
    kubelet's own annotation keys win).

    Attributes:
        envs: Environment variables.
        mounts: Host paths to mount (libraries, tools).
        devices: Host device nodes to expose.
        annotations: Container annotations for the runtime.
    """

    envs: tuple[KeyValue, ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[Device, ...] = ()
    annotations: Mapping[str, str] = attrs.field(factory=dict)


# --- end device plugins ---


@runtime_checkable
class ContainerManager(Protocol):
    """Owns the node's resources: capacity, allocatable, cgroups, admission.

    The composer calls :meth:`ensure_pod_cgroup` before a pod's sandbox is made,
    passes :meth:`container_resources` to the runtime for each container, and asks
    :meth:`admit_pod` before accepting a pod.

    Device plugins (extended resources such as ``example.com/widget``) plug in
    here: a manager holding a device manager reports the devices in
    :meth:`node_capacity` (all devices) and :meth:`node_allocatable` (healthy
    ones), refuses in :meth:`admit_pod` a pod asking for more devices than are
    free (``UnexpectedAdmissionError``), and the composer awaits
    :meth:`container_run_options` before building each container's config,
    adding its envs, mounts, devices and annotations. A pod's devices are freed
    by :meth:`remove_pod_cgroup` and :meth:`remove_orphaned_pod_cgroups`.
    """

    async def start(self) -> None:
        """Create and verify the cgroup hierarchy. Idempotent; raises
        ConfigurationError when the node cannot be managed as configured."""

    async def stop(self) -> None:
        """Release what :meth:`start` holds. Idempotent. Pods keep running."""

    def node_capacity(self) -> Mapping[str, Quantity]:
        """The node's total resources (``cpu``, ``memory``, ``pods``, ...). Never blocks."""

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """What pods may use: capacity less reservations. Never blocks."""

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Whether ``pod`` fits beside ``active_pods``. Never blocks."""

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """Create or update the pod's cgroup; returns the cgroup parent to hand the
        runtime ("" when the manager makes none). Idempotent."""

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """Remove the pod's cgroup after its containers are gone. Idempotent."""

    def container_resources(self, pod: Pod, container: Container) -> LinuxContainerResources | None:
        """Linux resources for one container (shares, quota, memory limit,
        oom_score_adj, cpuset), or None to let the runtime decide. Never blocks."""

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """Housekeeping: remove the cgroups of pods not in ``active_pod_uids`` (killing
        what still runs in them); returns their uids. Idempotent."""

    # --- device plugins ---
    async def container_run_options(self, pod: Pod, container: Container) -> ContainerRunOptions:
        """What device plugins add to ``container`` before it is created: allocates
        its devices on first use (asking the plugins), calls PreStartContainer
        where a plugin wants it, and returns the plugins' envs, mounts, devices
        and annotations (empty without device plugins).

        Awaits plugin RPCs; idempotent for a container that already holds its
        devices (the stored answer is reused, so a restart sees the same devices).

        Raises:
            PodSyncError: ``CreateContainerConfigError`` when the devices cannot be
                allocated or a plugin call fails (naming the resource).
        """

    # --- end device plugins ---
