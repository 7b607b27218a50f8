"""CgroupContainerManager: the reference ContainerManager on real (or fake) cgroups.

What it does, as the kubelet's container manager does:

- ``start()`` checks the reservations against capacity, checks the hierarchy offers
  the controllers it needs, and creates ``<cgroupRoot>/kubepods`` (limited to
  capacity - systemReserved - kubeReserved when ``enforceNodeAllocatable`` holds
  ``pods``) with its ``burstable`` and ``besteffort`` tiers.
- ``admit_pod()`` refuses a pod whose requests do not fit in node allocatable beside
  the active pods (``OutOfcpu``, ``OutOfmemory``, ``OutOfpods``... with the
  scheduler's message) and gives the static CPU manager its say.
- ``ensure_pod_cgroup()`` creates or updates ``pod<uid>`` in the pod's tier with the
  pod's limits and returns its path for the runtime's ``cgroup_parent``; the
  Burstable tier's shares follow the sum of Burstable requests (updated before a
  new pod's cgroup is made, as the kubelet's ``UpdateQOSCgroups``).
- ``remove_pod_cgroup()`` kills what is left inside and removes the cgroup.
- ``container_resources()`` gives the runtime shares, quota, memory limit,
  ``oom_score_adj`` and cpuset for each container.
- With MemoryQoS (``featureGates: {MemoryQoS: true}``) on a cgroup v2 node, memory
  requests are protected by ``memory.min`` at every level: container (through
  ``container_resources()``'s ``unified`` map, with ``memory.high`` from
  ``memoryThrottlingFactor``), pod, the Burstable tier (the sum of Burstable
  requests) and ``kubepods`` (Guaranteed plus Burstable requests).
- ``pod_cgroup_stats()`` reads the pod cgroup's usage for the eviction signals.

Only ``pods`` enforcement is implemented: ``system-reserved`` and ``kube-reserved``
enforcement need cgroups this configuration does not name, and are refused. With
``cgroupDriver: systemd`` the cgroups get systemd's slice names and paths, but are
made directly in cgroupfs rather than as units through systemd's D-Bus API.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from kubelet_kit.api import Container, Pod, Quantity, pod_requests, qos_class
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.clock import Clock
from kubelet_kit.cm.allocatable import (
    allocatable_absolute,
    hard_eviction_reservation,
    node_allocatable,
    node_allocatable_reservation,
    parse_reserved,
    validate_reservations,
)
from kubelet_kit.cm.capacity import detect_capacity
from kubelet_kit.cm.cpumanager import CPUManager
from kubelet_kit.cm.driver import CgroupDriver, CgroupStats
from kubelet_kit.cm.helpers import (
    DEFAULT_MEMORY_THROTTLING_FACTOR,
    MEMORY_MIN,
    MIN_SHARES,
    QUOTA_PERIOD,
    ResourceConfig,
    container_linux_resources,
    milli_cpu_to_shares,
    qos_memory_limits,
    qos_memory_min,
    resource_config_for_pod,
)
from kubelet_kit.cm.interfaces import ContainerRunOptions
from kubelet_kit.cm.naming import (
    CgroupDriverName,
    CgroupName,
    cgroup_name_to_path,
    parse_systemd,
    pod_cgroup_name,
    qos_cgroup_name,
    root_cgroup_name,
)
from kubelet_kit.container import LinuxContainerResources
from kubelet_kit.errors import ConfigurationError

if TYPE_CHECKING:
    from kubelet_kit.cm.devicemanager import DeviceManager

__all__ = [
    "QOS_UPDATE_PERIOD",
    "CgroupContainerManager",
    "cgroups_unavailable",
    "default_cgroup_driver",
    "detect_capacity",
    "memory_hierarchy",
]

_REQUIRED: Final = frozenset({"cpu", "memory", "pids"})
_ENFORCE_VALUES: Final = frozenset(
    {
        "pods",
        "none",
        "system-reserved",
        "kube-reserved",
        "system-reserved-compressible",
        "kube-reserved-compressible",
    }
)
# The scheduler's order of checks: pods, cpu, memory, ephemeral storage, the rest.
_FIRST: Final = ("cpu", "memory", "ephemeral-storage")
#: The kubelet re-applies the QoS tiers' settings this often (periodicQOSCgroupUpdateInterval).
QOS_UPDATE_PERIOD: Final = 60.0


def cgroups_unavailable() -> str | None:
    """Why this process cannot make pod cgroups, or None when it can.

    An agent checks before it turns ``cgroupsPerQOS`` on: not root, a read-only
    ``/sys/fs/cgroup`` (as in most containers), or a v1 hierarchy without the
    cpu, memory or pids controllers.
    """
    if os.geteuid() != 0:
        return "making cgroups needs root"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        if not os.access("/sys/fs/cgroup", os.W_OK):
            return "/sys/fs/cgroup is read-only"
        return None
    from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts

    mounts = discover_v1_mounts()
    missing = sorted(_REQUIRED - set(mounts))
    if missing:
        return f"no cgroup v1 hierarchy for {', '.join(missing)}"
    if not all(os.access(mounts[c], os.W_OK) for c in _REQUIRED):
        return "the cgroup v1 hierarchies are read-only"
    return None


def memory_hierarchy() -> str | None:
    """Where this machine's memory cgroups are: ``/sys/fs/cgroup`` (unified), the
    v1 memory controller's mount, or None without one. A cgroup ``/a/b`` is then
    the directory ``memory_hierarchy() + "/a/b"``."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "/sys/fs/cgroup"
    from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts

    return discover_v1_mounts(("memory",)).get("memory")


def default_cgroup_driver(clock: Clock | None = None) -> CgroupDriver:
    """The v2 driver on a unified ``/sys/fs/cgroup``, else the v1 driver.

    Raises:
        ConfigurationError: Neither hierarchy is usable.
    """
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver

        return CgroupV2Driver("/sys/fs/cgroup", clock=clock)
    from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver

    return CgroupV1Driver(clock=clock)


def _scaled(name: str, qty: Quantity) -> int:
    return qty.milli_value() if name == "cpu" else qty.value()


class CgroupContainerManager:
    """The reference :class:`~kubelet_kit.cm.ContainerManager` (see the module docstring).

    Args:
        config: The kubelet's configuration (cgroupDriver, cgroupsPerQOS, cgroupRoot,
            enforceNodeAllocatable, systemReserved, kubeReserved, evictionHard,
            maxPods, podPidsLimit, cpuCFSQuota, cpuManagerPolicy).
        driver: The cgroup driver (default: v2 if ``/sys/fs/cgroup`` is unified, else
            v1), built lazily at :meth:`start`.
        capacity: Node capacity (default: detected from this machine).
        cpu_manager: A CPU manager (default: one for ``cpuManagerPolicy`` on the
            capacity's CPUs, keeping its checkpoint in ``state_dir``).
        state_dir: Where the CPU manager's checkpoint lives (None: memory only).
        enforce_memory_qos: MemoryQoS: protect memory requests with memory.min and
            throttle containers with memory.high, on cgroup v2 only (None: the
            configuration's ``featureGates`` ``MemoryQoS``, off by default).
        memory_throttling_factor: MemoryQoS's ``memory.high`` factor (None: the
            configuration's ``memoryThrottlingFactor``).
        qos_reserved_memory_percent: ``qosReserved`` memory percentage (0: off).
        cpu_period: CFS period in microseconds.
        clock: Handed to the default driver; times the periodic re-application
            of the QoS tiers' settings (real time when None).
        device_manager: Device plugins' extended resources: merged into capacity
            and allocatable, checked at admission (before the other resources, as
            upstream), allocated through :meth:`container_run_options`.

    Raises:
        ConfigurationError: A reservation that is not a quantity, an unknown
            enforceNodeAllocatable value, or a CPU manager that cannot be set up.
    """

    def __init__(
        self,
        config: KubeletConfiguration | None = None,
        *,
        driver: CgroupDriver | None = None,
        capacity: Mapping[str, Quantity] | None = None,
        cpu_manager: CPUManager | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        enforce_memory_qos: bool | None = None,
        memory_throttling_factor: float | None = None,
        qos_reserved_memory_percent: int = 0,
        cpu_period: int = QUOTA_PERIOD,
        clock: Clock | None = None,
        device_manager: DeviceManager | None = None,
    ) -> None:
        self.device_manager = device_manager
        self.config = config if config is not None else KubeletConfiguration()
        c = self.config
        unknown = sorted(set(c.enforce_node_allocatable) - _ENFORCE_VALUES)
        if unknown:
            raise ConfigurationError(
                f'enforceNodeAllocatable: Unsupported value: "{unknown[0]}": supported values: '
                '"pods", "system-reserved", "kube-reserved", "none"'
            )
        beyond = sorted(set(c.enforce_node_allocatable) - {"pods", "none"})
        if beyond:
            raise ConfigurationError(
                f'enforceNodeAllocatable: "{beyond[0]}" needs a reserved cgroup, which this '
                'manager does not manage; use "pods"'
            )
        if c.cgroup_driver not in ("cgroupfs", "systemd"):
            raise ConfigurationError(
                f'cgroupDriver: Unsupported value: "{c.cgroup_driver}": supported values: '
                '"cgroupfs", "systemd"'
            )
        self.driver_name: CgroupDriverName = (
            "systemd" if c.cgroup_driver == "systemd" else "cgroupfs"
        )
        self._driver = driver
        self._clock = clock
        self.capacity: dict[str, Quantity] = (
            dict(capacity) if capacity is not None else detect_capacity(max_pods=c.max_pods)
        )
        self.system_reserved = parse_reserved(c.system_reserved, "systemReserved")
        self.kube_reserved = parse_reserved(c.kube_reserved, "kubeReserved")
        self.enforce_memory_qos = (
            c.feature_gate("MemoryQoS") if enforce_memory_qos is None else enforce_memory_qos
        )
        factor = (
            c.memory_throttling_factor
            if memory_throttling_factor is None
            else memory_throttling_factor
        )
        if factor is None and not self.enforce_memory_qos:
            factor = DEFAULT_MEMORY_THROTTLING_FACTOR
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
            raise ConfigurationError(
                f"memoryThrottlingFactor: Invalid value: {factor!r}: must be greater than 0 "
                "and less than or equal to 1.0"
            )
        self.memory_throttling_factor = float(factor)
        self.qos_reserved_memory_percent = qos_reserved_memory_percent
        self.cpu_period = cpu_period
        try:
            root = root_cgroup_name(c.cgroup_root, self.driver_name)
        except ValueError as exc:
            raise ConfigurationError(
                f'cgroupRoot: Invalid value: "{c.cgroup_root}": {exc}'
            ) from None
        self.root: CgroupName = root
        if cpu_manager is None:
            reserved_milli = sum(
                r["cpu"].milli_value()
                for r in (self.system_reserved, self.kube_reserved)
                if "cpu" in r
            )
            # With a given capacity the CPU ids are 0..n-1; else those this process may use.
            cpus = (
                range(self.capacity["cpu"].value())
                if capacity is not None and "cpu" in self.capacity
                else None
            )
            cpu_manager = CPUManager(
                c.cpu_manager_policy,
                cpus=cpus,
                reserved_milli_cpu=reserved_milli,
                state_dir=state_dir,
            )
        self.cpu_manager = cpu_manager
        self._pods: dict[str, Pod] = {}
        self._requests_cache: dict[str, tuple[Pod, dict[str, int]]] = {}
        self._started = False
        self._memory_qos_on_v2: bool | None = None
        self._allocatable_memory: int | None = None
        self._last_qos_update: float | None = None

    # ------------------------------------------------------------------ naming

    @property
    def driver(self) -> CgroupDriver:
        """The cgroup driver (built on first use)."""
        if self._driver is None:
            self._driver = default_cgroup_driver(self._clock)
        return self._driver

    def _path(self, name: CgroupName) -> str:
        return cgroup_name_to_path(name, self.driver_name)

    def kubepods_path(self) -> str:
        """The node allocatable cgroup (``/kubepods`` or ``/kubepods.slice``...)."""
        return self._path((*self.root, "kubepods"))

    def pod_cgroup_path(self, pod: Pod) -> str:
        """The pod's cgroup path in the driver's spelling."""
        return self._path(pod_cgroup_name(pod, self.root))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Check the configuration and create the QoS hierarchy. Idempotent.

        Raises:
            ConfigurationError: Reservations above capacity, a hierarchy without the
                needed controllers (naming them), or a bad CPU manager checkpoint.
        """
        if self.device_manager is not None:
            await self.device_manager.start()
        validate_reservations(
            self.capacity,
            node_allocatable_reservation(
                self.capacity,
                system_reserved=self.system_reserved,
                kube_reserved=self.kube_reserved,
                eviction_reservation=hard_eviction_reservation(
                    self.config.eviction_hard, self.capacity
                ),
            ),
        )
        self.cpu_manager.start()
        if not self.config.cgroups_per_qos:
            self._started = True
            return
        have = await self.driver.available_controllers()
        missing = sorted(_REQUIRED - have)
        if missing:
            raise ConfigurationError(
                f"cgroup v{self.driver.version} hierarchy lacks the controllers "
                f"{', '.join(missing)} the pods' cgroups need (it offers: "
                f"{', '.join(sorted(have)) or 'none'})"
            )
        await self.driver.create(self.kubepods_path(), self._kubepods_config())
        for qos in ("Burstable", "BestEffort"):
            await self.driver.create(
                self._path(qos_cgroup_name(self.root, qos)), ResourceConfig(cpu_shares=MIN_SHARES)
            )
        await self._update_qos()
        self._started = True

    async def stop(self) -> None:
        """Nothing to release: cgroups outlive the agent, as the kubelet's do. Stops
        the device manager, if any."""
        self._started = False
        if self.device_manager is not None:
            await self.device_manager.stop()

    def _kubepods_config(self) -> ResourceConfig:
        values = self.capacity
        if "pods" in self.config.enforce_node_allocatable:
            values = allocatable_absolute(
                self.capacity,
                system_reserved=self.system_reserved,
                kube_reserved=self.kube_reserved,
            )
        return ResourceConfig(
            cpu_shares=milli_cpu_to_shares(values["cpu"].milli_value())
            if "cpu" in values
            else None,
            memory=values["memory"].value() if "memory" in values else None,
            pids_limit=values["pid"].value() if "pid" in values else None,
        )

    def memory_qos_enforced(self) -> bool:
        """Whether MemoryQoS applies: asked for, and the driver is cgroup v2 (the
        kubelet checks its feature gate and the unified hierarchy). Never blocks."""
        if not self.enforce_memory_qos:
            return False
        if self._memory_qos_on_v2 is None:
            try:
                self._memory_qos_on_v2 = self.driver.version == 2
            except ConfigurationError:
                # No hierarchy to build a driver on: nothing to protect.
                self._memory_qos_on_v2 = False
        return self._memory_qos_on_v2

    def _allocatable_memory_bytes(self) -> int:
        """Capacity less system and kube reservations (``GetNodeAllocatableAbsolute``)."""
        if self._allocatable_memory is None:
            absolute = allocatable_absolute(
                self.capacity,
                system_reserved=self.system_reserved,
                kube_reserved=self.kube_reserved,
            )
            memory = absolute.get("memory")
            self._allocatable_memory = memory.value() if memory is not None else 0
        return self._allocatable_memory

    async def update_qos_cgroups(self) -> None:
        """Re-apply the QoS tiers' settings from the pods this manager holds (the
        kubelet's ``UpdateQOSCgroups``): Burstable shares, ``qosReserved`` memory
        limits and, with MemoryQoS, ``memory.min`` of the Burstable tier and of
        ``kubepods``. Runs on its own when pods come and go; idempotent.

        Raises:
            ConfigurationError: A tier's file cannot be written (naming it).
        """
        if not self.config.cgroups_per_qos:
            return
        if not self._started:
            await self.start()
            return
        await self._update_qos()

    async def _update_qos(self) -> None:
        self._last_qos_update = self._monotonic()
        burstable_milli = 0
        mem_by_qos: dict[str, int] = {}
        for pod in self._pods.values():
            qos = qos_class(pod)
            reqs = pod_requests(pod)
            if qos == "Burstable" and "cpu" in reqs:
                burstable_milli += reqs["cpu"].milli_value()
            if "memory" in reqs:
                mem_by_qos[qos] = mem_by_qos.get(qos, 0) + reqs["memory"].value()
        limits: dict[str, int] = {}
        if self.qos_reserved_memory_percent > 0:
            absolute = allocatable_absolute(
                self.capacity,
                system_reserved=self.system_reserved,
                kube_reserved=self.kube_reserved,
            )
            if "memory" in absolute:
                limits = qos_memory_limits(
                    absolute["memory"].value(), mem_by_qos, self.qos_reserved_memory_percent
                )
        burstable_unified: dict[str, str] = {}
        if self.memory_qos_enforced():
            protect = qos_memory_min(mem_by_qos)
            # 0 is written too: when the last pod goes, so does the protection
            # (v1.27-v1.35 left the last value behind; later kubelets clear it).
            burstable_unified[MEMORY_MIN] = str(protect["Burstable"])
            await self.driver.update(
                self.kubepods_path(),
                ResourceConfig(unified={MEMORY_MIN: str(protect["Guaranteed"])}),
            )
        await self.driver.update(
            self._path(qos_cgroup_name(self.root, "Burstable")),
            ResourceConfig(
                cpu_shares=milli_cpu_to_shares(burstable_milli),
                memory=limits.get("Burstable"),
                unified=burstable_unified,
            ),
        )
        await self.driver.update(
            self._path(qos_cgroup_name(self.root, "BestEffort")),
            ResourceConfig(cpu_shares=MIN_SHARES, memory=limits.get("BestEffort")),
        )

    def _monotonic(self) -> float:
        return self._clock.monotonic() if self._clock is not None else time.monotonic()

    # ------------------------------------------------------------------ resources

    def node_capacity(self) -> Mapping[str, Quantity]:
        """The node's capacity (cpu, memory, ephemeral-storage, pods, devices...)."""
        if self.device_manager is not None:
            return {**self.capacity, **self.device_manager.capacity_quantities()}
        return dict(self.capacity)

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """Capacity less system/kube reservations and the hard eviction thresholds
        (and the healthy devices of device plugins)."""
        out = node_allocatable(
            self.capacity,
            system_reserved=self.system_reserved,
            kube_reserved=self.kube_reserved,
            eviction_hard=self.config.eviction_hard,
        )
        if self.device_manager is not None:
            return {**out, **self.device_manager.allocatable_quantities()}
        return out

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Whether ``pod`` fits beside ``active_pods`` in node allocatable.

        Refuses with ``OutOf<resource>`` and "Node didn't have enough resource: <r>,
        requested: <n>, used: <n>, capacity: <n>" (CPU in milli-CPU, the rest in
        units), then asks the CPU manager for exclusive CPUs. Never blocks.
        """
        if self.device_manager is not None:
            # Devices first, as upstream's resource allocator runs before its
            # predicates; a later refusal gives the reservation back.
            devices = self.device_manager.admit(pod)
            if not devices.admit:
                return devices
            result = self._admit_resources(pod, active_pods)
            if not result.admit:
                self.device_manager.forget_reservation(pod.uid)
            return result
        return self._admit_resources(pod, active_pods)

    def _admit_resources(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        allocatable = self.node_allocatable()
        others = [p for p in active_pods if p.uid != pod.uid]
        if "pods" in allocatable:
            cap = allocatable["pods"].value()
            if len(others) + 1 > cap:
                return AdmitResult.refuse(
                    "OutOfpods",
                    f"Node didn't have enough resource: pods, requested: 1, "
                    f"used: {len(others)}, capacity: {cap}",
                )
        wanted = {k: v for k, v in pod_requests(pod).items() if not v.is_zero() and k != "pods"}
        order = [r for r in _FIRST if r in wanted] + sorted(set(wanted) - set(_FIRST))
        used: dict[str, int] = {}
        for other in others:
            for name, amount in self._scaled_requests(other).items():
                used[name] = used.get(name, 0) + amount
        for name in order:
            req = _scaled(name, wanted[name])
            cap = _scaled(name, allocatable[name]) if name in allocatable else 0
            if req + used.get(name, 0) > cap:
                return AdmitResult.refuse(
                    f"OutOf{name}",
                    f"Node didn't have enough resource: {name}, requested: "
                    f"{req}, used: {used.get(name, 0)}, capacity: {cap}",
                )
        return self.cpu_manager.allocate_pod(pod)

    def _scaled_requests(self, pod: Pod) -> dict[str, int]:
        # Admission sums every active pod's requests; pods are immutable values, so
        # the sum per pod object is computed once (the cache holds the pod itself,
        # keyed by uid, so an updated pod replaces its entry).
        hit = self._requests_cache.get(pod.uid)
        if hit is not None and hit[0] is pod:
            return hit[1]
        scaled = {name: _scaled(name, qty) for name, qty in pod_requests(pod).items()}
        if len(self._requests_cache) > 4 * max(len(self._pods), 256):
            self._requests_cache.clear()
        self._requests_cache[pod.uid] = (pod, scaled)
        return scaled

    def container_resources(self, pod: Pod, container: Container) -> LinuxContainerResources | None:
        """Shares, quota/period, memory limit, oom_score_adj and cpuset; with MemoryQoS
        on cgroup v2, ``memory.min`` and ``memory.high`` in ``unified``. Never blocks."""
        memory = self.capacity.get("memory")
        qos = self.memory_qos_enforced()
        return container_linux_resources(
            pod,
            container,
            memory_capacity_bytes=memory.value()
            if memory is not None and memory.value() > 0
            else 1,
            cpu_cfs_quota=self.config.cpu_cfs_quota,
            cpu_period=self.cpu_period,
            cpuset_cpus=self.cpu_manager.cpuset(pod, container),
            enforce_memory_qos=qos,
            allocatable_memory_bytes=self._allocatable_memory_bytes() if qos else 0,
            memory_throttling_factor=self.memory_throttling_factor,
        )

    # ------------------------------------------------------------------ pod cgroups

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """Create or update the pod's cgroup; returns its path ("" without cgroupsPerQOS).

        Raises:
            ConfigurationError: The cgroup cannot be made or limited (naming the file).
        """
        if not self.config.cgroups_per_qos:
            return ""
        if not self._started:
            await self.start()
        path = self.pod_cgroup_path(pod)
        pids = self.config.pod_pids_limit
        known = self._pods.get(pod.uid)
        self._pods[pod.uid] = pod
        if known is None or (known is not pod and pod_requests(known) != pod_requests(pod)):
            # The tiers first, as the kubelet updates them before it makes a new
            # pod cgroup: a parent's memory.min bounds what its children get.
            await self._update_qos()
        await self.driver.create(
            path,
            resource_config_for_pod(
                pod,
                enforce_cpu_limits=self.config.cpu_cfs_quota,
                cpu_period=self.cpu_period,
                enforce_memory_qos=self.memory_qos_enforced(),
                pids_limit=pids if pids > 0 else None,
            ),
        )
        return path

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """Kill what is left in the pod's cgroup and remove it; free its CPUs and
        devices. Idempotent."""
        self.cpu_manager.remove_pod(pod.uid)
        if self.device_manager is not None:
            await self.device_manager.remove_pod(pod.uid)
        if not self.config.cgroups_per_qos:
            return
        await self.driver.remove(self.pod_cgroup_path(pod))
        if self._pods.pop(pod.uid, None) is not None and self._started:
            await self._update_qos()

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """Remove pod cgroups of pods no longer known (the kubelet's housekeeping).

        Looks in every QoS tier for ``pod<uid>`` cgroups whose uid is not in
        ``active_pod_uids``, kills what still runs there and removes them. Also
        re-applies the QoS tiers' settings after a removal, and at least every
        :data:`QOS_UPDATE_PERIOD` seconds (the kubelet's periodic ``UpdateCgroups``).

        Returns:
            The uids whose cgroups were removed.
        """
        active = set(active_pod_uids)
        if self.device_manager is not None:
            await self.device_manager.retain_pods(active)
        if not self.config.cgroups_per_qos:
            return []
        removed: list[str] = []
        for qos in ("Guaranteed", "Burstable", "BestEffort"):
            tier = qos_cgroup_name(self.root, qos)
            for child in await self.driver.children(self._path(tier)):
                uid = self._pod_uid_of(child)
                if uid is None or uid in active:
                    continue
                await self.driver.remove(self._path((*tier, "pod" + uid)))
                self._pods.pop(uid, None)
                self.cpu_manager.remove_pod(uid)
                removed.append(uid)
        if self._started and (
            removed
            or self._last_qos_update is None
            or self._monotonic() - self._last_qos_update >= QOS_UPDATE_PERIOD
        ):
            await self._update_qos()
        return removed

    def _pod_uid_of(self, child: str) -> str | None:
        """The uid in a tier's child directory name, or None if it is no pod cgroup."""
        if self.driver_name == "systemd":
            if not child.endswith(".slice"):
                return None
            last = parse_systemd(child)[-1]
            return last[3:] if last.startswith("pod") else None
        return child[3:] if child.startswith("pod") else None

    async def container_run_options(self, pod: Pod, container: Container) -> ContainerRunOptions:
        """The device manager's envs, mounts, devices and annotations for
        ``container`` (empty without one); see the ContainerManager protocol."""
        if self.device_manager is None:
            return ContainerRunOptions()
        return await self.device_manager.container_run_options(pod, container)

    async def pod_cgroup_stats(self, pod: Pod) -> CgroupStats:
        """Usage of the pod's cgroup (memory working set, OOM kills, CPU, pids, PSI).

        Raises:
            ConfigurationError: The pod has no cgroup.
        """
        return await self.driver.stats(self.pod_cgroup_path(pod))
