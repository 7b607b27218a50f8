"""FakeContainerManager: node resources, admission and pod cgroups in memory.

A :class:`~kubelet_kit.cm.ContainerManager` for tests of what sits above the
container manager (admission, pod sync, housekeeping, node status), with no
cgroup touched::

    cm = FakeContainerManager(capacity={"cpu": "2", "memory": "4Gi"},
                              reserved={"memory": "512Mi"})
    result = cm.admit_pod(big_pod, active_pods)
    assert result.reason == "OutOfmemory"
    path = await cm.ensure_pod_cgroup(pod)      # "/kubepods/burstable/pod<uid>"
    assert cm.pod_cgroups == {pod.uid: path}

It answers as the reference :class:`~kubelet_kit.cm.CgroupContainerManager`
does, from the same conversions: allocatable is capacity less the reservation
(floored at zero), admission refuses a pod whose requests do not fit beside the
active pods with the kubelet's ``OutOf<resource>`` reason and "Node didn't have
enough resource: ..." message, pod cgroups are named by QoS class the kubelet's
way (Guaranteed pods in ``kubepods``, the others in ``kubepods/burstable`` or
``kubepods/besteffort``), and container resources are the kubelet's shares,
quota and memory limit. The cgroups it "makes" are kept in :attr:`pod_cgroups`
with the limits the reference would write (:meth:`cgroup_config`).

Every call is logged (``calls``, ``calls_to``); ``inject_error(method, exc)``
makes the next call of a method raise, e.g. a ``ConfigurationError`` from
``ensure_pod_cgroup`` as a cgroup the kernel refuses would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from kubelet_kit.api import Container, Pod, Quantity, pod_requests
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.cm.allocatable import validate_reservations
from kubelet_kit.cm.helpers import (
    QUOTA_PERIOD,
    ResourceConfig,
    container_linux_resources,
    resource_config_for_pod,
)
from kubelet_kit.cm.interfaces import ContainerRunOptions
from kubelet_kit.cm.naming import (
    CgroupDriverName,
    cgroup_name_to_path,
    pod_cgroup_name,
    root_cgroup_name,
)
from kubelet_kit.container import LinuxContainerResources
from kubelet_kit.testing._fake_log import FakeCallLog

__all__ = ["DEFAULT_CAPACITY", "AdmitHandler", "FakeContainerManager"]

#: The capacity of a FakeContainerManager not told otherwise.
DEFAULT_CAPACITY: Final[Mapping[str, str]] = {
    "cpu": "4",
    "memory": "8Gi",
    "ephemeral-storage": "100Gi",
    "pods": "110",
}

#: ``handler(pod, active_pods)``: a test's own admission answer, or None to let
#: the fake decide.
AdmitHandler = Callable[[Pod, Sequence[Pod]], AdmitResult | None]

# The scheduler's order of checks after the pod count: cpu, memory, ephemeral
# storage, then the other resources by name.
_FIRST: Final = ("cpu", "memory", "ephemeral-storage")
_ZERO: Final = Quantity.from_int(0)


def _quantities(values: Mapping[str, Quantity | str | int]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for name, value in values.items():
        if isinstance(value, Quantity):
            out[name] = value
        elif isinstance(value, int):
            out[name] = Quantity.from_int(value)
        else:
            out[name] = Quantity.parse(value)
    return out


def _scaled(name: str, qty: Quantity) -> int:
    return qty.milli_value() if name == "cpu" else qty.value()


class FakeContainerManager(FakeCallLog):
    """An in-memory :class:`~kubelet_kit.cm.ContainerManager` (see the module docstring).

    Args:
        capacity: Node capacity (quantities or their text); default
            :data:`DEFAULT_CAPACITY`.
        reserved: What is held back from pods (system, kube and hard-eviction
            reservations together); allocatable is capacity less this, each
            resource floored at zero. :meth:`start` refuses a reservation above
            capacity with the kubelet's ``ConfigurationError``.
        cgroups_per_qos: Make pod cgroups (the kubelet's ``cgroupsPerQOS``);
            without, :meth:`ensure_pod_cgroup` returns "".
        cgroup_root: The kubelet's ``cgroupRoot``.
        cgroup_driver: ``"cgroupfs"`` or ``"systemd"``: how cgroup paths are spelt.
        cpu_cfs_quota: The kubelet's ``cpuCFSQuota``: give containers a CPU quota.
        cpu_period: CFS period in microseconds.
    """

    _PARAMS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "start": (),
        "stop": (),
        "node_capacity": (),
        "node_allocatable": (),
        "admit_pod": ("pod", "active_pods"),
        "ensure_pod_cgroup": ("pod",),
        "remove_pod_cgroup": ("pod",),
        "container_resources": ("pod", "container"),
        "remove_orphaned_pod_cgroups": ("active_pod_uids",),
        "container_run_options": ("pod", "container"),
    }
    _METHODS: ClassVar[frozenset[str]] = frozenset(_PARAMS)

    def __init__(
        self,
        *,
        capacity: Mapping[str, Quantity | str | int] | None = None,
        reserved: Mapping[str, Quantity | str | int] | None = None,
        cgroups_per_qos: bool = True,
        cgroup_root: str = "",
        cgroup_driver: CgroupDriverName = "cgroupfs",
        cpu_cfs_quota: bool = True,
        cpu_period: int = QUOTA_PERIOD,
    ) -> None:
        super().__init__()
        self.capacity = _quantities(capacity if capacity is not None else DEFAULT_CAPACITY)
        self.reserved = _quantities(reserved or {})
        self.cgroups_per_qos = cgroups_per_qos
        self.cgroup_driver: CgroupDriverName = cgroup_driver
        self.cpu_cfs_quota = cpu_cfs_quota
        self.cpu_period = cpu_period
        self._root = root_cgroup_name(cgroup_root, cgroup_driver)
        #: Whether :meth:`start` ran (and :meth:`stop` did not since).
        self.started = False
        self._cgroups: dict[str, tuple[str, ResourceConfig]] = {}
        self._run_options: dict[str, ContainerRunOptions] = {}
        self._admit_handler: AdmitHandler | None = None

    def _record(self, method: str, *args: Any) -> None:
        """Log a call of ``method`` (arguments also by parameter name) and raise
        the fault injected for it, if one is due."""
        self._enter(method, args, dict(zip(self._PARAMS[method], args, strict=True)))

    # ------------------------------------------------------------------ test controls

    @property
    def pod_cgroups(self) -> dict[str, str]:
        """The pod cgroups made and not removed: pod uid -> cgroup path."""
        return {uid: path for uid, (path, _) in self._cgroups.items()}

    def cgroup_config(self, pod_uid: str) -> ResourceConfig:
        """The limits the pod's cgroup was given (as the reference would write them).

        Raises:
            KeyError: The pod has no cgroup.
        """
        return self._cgroups[pod_uid][1]

    def set_admit_handler(self, handler: AdmitHandler | None) -> None:
        """Let ``handler(pod, active_pods)`` answer admission first; when it returns
        None (or with no handler) the fake decides by allocatable."""
        self._admit_handler = handler

    def set_run_options(self, container_name: str, options: ContainerRunOptions) -> None:
        """What :meth:`container_run_options` returns for containers of that name
        (as device plugins would add envs, mounts and devices)."""
        self._run_options[container_name] = options

    def pod_cgroup_path(self, pod: Pod) -> str:
        """Where the pod's cgroup is (or would be), in the driver's spelling."""
        return cgroup_name_to_path(pod_cgroup_name(pod, self._root), self.cgroup_driver)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Check the reservation against capacity. Idempotent.

        Raises:
            ConfigurationError: A reservation above capacity (the kubelet's message).
        """
        self._record("start")
        validate_reservations(self.capacity, self._reservation())
        self.started = True

    async def stop(self) -> None:
        """Idempotent. Pod cgroups stay, as the kubelet's do."""
        self._record("stop")
        self.started = False

    # ------------------------------------------------------------------ resources

    def _reservation(self) -> dict[str, Quantity]:
        return {k: v for k, v in self.reserved.items() if k in self.capacity and not v.is_zero()}

    def node_capacity(self) -> Mapping[str, Quantity]:
        """The configured capacity. Never blocks."""
        self._record("node_capacity")
        return dict(self.capacity)

    def node_allocatable(self) -> Mapping[str, Quantity]:
        """Capacity less the reservation, each resource floored at zero. Never blocks."""
        self._record("node_allocatable")
        return self._allocatable()

    def _allocatable(self) -> dict[str, Quantity]:
        out: dict[str, Quantity] = {}
        for name, cap in self.capacity.items():
            left = cap - self.reserved[name] if name in self.reserved else cap
            out[name] = left if left.sign() >= 0 else _ZERO
        return out

    def admit_pod(self, pod: Pod, active_pods: Sequence[Pod]) -> AdmitResult:
        """Whether ``pod``'s requests fit beside ``active_pods`` in allocatable.

        The test's admit handler answers first, if it answers. Then, as the
        kubelet: the pod count, then cpu (in milli-CPU), memory, ephemeral storage
        and the other requested resources by name; the first that does not fit
        refuses with ``OutOf<resource>`` and "Node didn't have enough resource:
        <resource>, requested: <n>, used: <n>, capacity: <n>". ``pod`` itself is
        not counted among ``active_pods``. Never blocks.
        """
        self._record("admit_pod", pod, active_pods)
        if self._admit_handler is not None:
            answer = self._admit_handler(pod, active_pods)
            if answer is not None:
                return answer
        allocatable = self._allocatable()
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
            for name, amount in pod_requests(other).items():
                used[name] = used.get(name, 0) + _scaled(name, amount)
        for name in order:
            req = _scaled(name, wanted[name])
            cap = _scaled(name, allocatable[name]) if name in allocatable else 0
            if req + used.get(name, 0) > cap:
                return AdmitResult.refuse(
                    f"OutOf{name}",
                    f"Node didn't have enough resource: {name}, requested: {req}, "
                    f"used: {used.get(name, 0)}, capacity: {cap}",
                )
        return AdmitResult.ok()

    def container_resources(self, pod: Pod, container: Container) -> LinuxContainerResources | None:
        """Shares from the CPU request (the limit without one), quota and period
        from the CPU limit (with ``cpu_cfs_quota``), memory limit, and the QoS
        ``oom_score_adj`` against the capacity's memory. Never blocks."""
        self._record("container_resources", pod, container)
        memory = self.capacity.get("memory")
        return container_linux_resources(
            pod,
            container,
            memory_capacity_bytes=memory.value()
            if memory is not None and memory.value() > 0
            else 1,
            cpu_cfs_quota=self.cpu_cfs_quota,
            cpu_period=self.cpu_period,
        )

    # ------------------------------------------------------------------ pod cgroups

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        """ "Make" the pod's cgroup (or update its limits); returns its path, or ""
        without ``cgroups_per_qos``. Idempotent."""
        self._record("ensure_pod_cgroup", pod)
        if not self.cgroups_per_qos:
            return ""
        if not self.started:
            # As the reference: the QoS hierarchy is made on first need.
            validate_reservations(self.capacity, self._reservation())
            self.started = True
        path = self.pod_cgroup_path(pod)
        config = resource_config_for_pod(
            pod, enforce_cpu_limits=self.cpu_cfs_quota, cpu_period=self.cpu_period
        )
        self._cgroups[pod.uid] = (path, config)
        return path

    async def remove_pod_cgroup(self, pod: Pod) -> None:
        """Forget the pod's cgroup. Idempotent; an unknown pod is no error."""
        self._record("remove_pod_cgroup", pod)
        self._cgroups.pop(pod.uid, None)

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Iterable[str]) -> list[str]:
        """Remove the cgroups of pods not in ``active_pod_uids``; returns their uids
        in the order they were made. Idempotent."""
        active = set(active_pod_uids)
        self._record("remove_orphaned_pod_cgroups", active)
        removed = [uid for uid in self._cgroups if uid not in active]
        for uid in removed:
            del self._cgroups[uid]
        return removed

    async def container_run_options(self, pod: Pod, container: Container) -> ContainerRunOptions:
        """What :meth:`set_run_options` set for the container's name; empty otherwise."""
        self._record("container_run_options", pod, container)
        return self._run_options.get(container.name, ContainerRunOptions())
