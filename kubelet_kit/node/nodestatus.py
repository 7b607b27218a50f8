"""Node status for embedding agents: what the kubelet would report about its node.

:class:`NodeStatusProvider` watches a :class:`~kubelet_kit.Kubelet` from outside and
builds a :class:`NodeStatus` with the kubelet's setters' rules and strings:

* capacity and allocatable from the ContainerManager;
* conditions ``Ready``, ``MemoryPressure``, ``DiskPressure`` and ``PIDPressure``
  with the kubelet's reasons and messages; the heartbeat time is each build's
  time, the transition time changes only when the status does;
* addresses ``InternalIP`` (the default route's interface, read over netlink with
  pyroute2; without pyroute2, the host name's non-loopback address) and
  ``Hostname``;
* nodeInfo: machine, system and boot ids, kernel, OS image, OS and architecture
  (Go's names), runtime ``name://version``, the kubelet-kit version;
* images (largest first, at most 50, at most 5 names each) and the daemon
  endpoint (the kubelet port).

``NodeStatus.to_dict()`` is the Kubernetes v1 ``NodeStatus`` JSON shape, ready to
PATCH to an API server or hand to another system.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import os
import platform
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from kubelet_kit._version import __version__
from kubelet_kit.clock import Clock
from kubelet_kit.container.optional import IMAGES, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError

if TYPE_CHECKING:
    from kubelet_kit.node.kubelet import KubeletCore as Kubelet

__all__ = [
    "ContainerImage",
    "NodeAddress",
    "NodeCondition",
    "NodeStatus",
    "NodeStatusProvider",
    "NodeSystemInfo",
    "host_addresses",
]

#: The kubelet's nodeStatusMaxImages and maxNamesPerImageInNodeStatus.
MAX_IMAGES: Final = 50
MAX_NAMES_PER_IMAGE: Final = 5

# Go's GOARCH for Python's platform.machine().
_GOARCH: Final = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i686": "386",
    "i386": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}

# (condition, status True reason/message, status False reason/message), the kubelet's.
_PRESSURE: Final = (
    (
        "MemoryPressure",
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    (
        "DiskPressure",
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    (
        "PIDPressure",
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
)


def _time(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(int(epoch), tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.frozen
class NodeCondition:
    """One node condition.

    Attributes:
        type: ``Ready``, ``MemoryPressure``, ``DiskPressure`` or ``PIDPressure``.
        status: ``"True"``, ``"False"`` or ``"Unknown"``.
        reason: The kubelet's reason (``KubeletReady``, ``KubeletHasNoDiskPressure``...).
        message: The kubelet's message.
        last_heartbeat_time: When it was last reported (epoch seconds).
        last_transition_time: When ``status`` last changed (epoch seconds).
    """

    type: str
    status: str
    reason: str
    message: str
    last_heartbeat_time: float
    last_transition_time: float

    def to_dict(self) -> dict[str, Any]:
        """The v1 NodeCondition JSON object."""
        return {
            "type": self.type,
            "status": self.status,
            "lastHeartbeatTime": _time(self.last_heartbeat_time),
            "lastTransitionTime": _time(self.last_transition_time),
            "reason": self.reason,
            "message": self.message,
        }


@attrs.frozen
class NodeAddress:
    """An address of the node: ``type`` is ``InternalIP`` or ``Hostname``."""

    type: str
    address: str


@attrs.frozen
class NodeSystemInfo:
    """The node's nodeInfo, with the v1 field meanings."""

    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    container_runtime_version: str
    kubelet_version: str
    kube_proxy_version: str = ""
    operating_system: str = "linux"
    architecture: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The v1 NodeSystemInfo JSON object."""
        return {
            "machineID": self.machine_id,
            "systemUUID": self.system_uuid,
            "bootID": self.boot_id,
            "kernelVersion": self.kernel_version,
            "osImage": self.os_image,
            "containerRuntimeVersion": self.container_runtime_version,
            "kubeletVersion": self.kubelet_version,
            "kubeProxyVersion": self.kube_proxy_version,
            "operatingSystem": self.operating_system,
            "architecture": self.architecture,
        }


@attrs.frozen
class ContainerImage:
    """An image on the node: its names (digests then tags) and size."""

    names: tuple[str, ...]
    size_bytes: int


@attrs.frozen
class NodeStatus:
    """What the kubelet reports about its node (v1 ``NodeStatus``).

    Attributes:
        capacity: Total resources (quantities as strings).
        allocatable: What pods may use.
        conditions: Ready and the three pressure conditions.
        addresses: InternalIP (if found) and Hostname.
        node_info: System information.
        images: Images on the node, largest first.
        kubelet_port: The daemon endpoint's port (0: none).
    """

    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    conditions: tuple[NodeCondition, ...]
    addresses: tuple[NodeAddress, ...]
    node_info: NodeSystemInfo
    images: tuple[ContainerImage, ...] = ()
    kubelet_port: int = 0

    def condition(self, type_: str) -> NodeCondition | None:
        """The condition of ``type_``, or None."""
        return next((c for c in self.conditions if c.type == type_), None)

    def to_dict(self) -> dict[str, Any]:
        """The v1 NodeStatus JSON object (camelCase, times in RFC 3339)."""
        return {
            "capacity": dict(self.capacity),
            "allocatable": dict(self.allocatable),
            "conditions": [c.to_dict() for c in self.conditions],
            "addresses": [{"type": a.type, "address": a.address} for a in self.addresses],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": self.node_info.to_dict(),
            "images": [{"names": list(i.names), "sizeBytes": i.size_bytes} for i in self.images],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON document."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


# ------------------------------------------------------------------------ the host


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return ""


def host_addresses() -> list[str]:
    """The host's IPv4 addresses, best first: the default route's interface, then the
    other global ones. Uses netlink through pyroute2; without it, resolves the host
    name. Blocks briefly (call it from a thread inside an event loop)."""
    try:
        from pyroute2 import IPRoute
    except ImportError:
        return _addresses_by_name()
    try:
        with IPRoute() as ipr:
            default_ifs = [
                r.get_attr("RTA_OIF") for r in ipr.get_default_routes(family=socket.AF_INET)
            ]
            found: list[tuple[int, str]] = []
            for msg in ipr.get_addr(family=socket.AF_INET):
                address = msg.get_attr("IFA_ADDRESS")
                if not address or msg.get("scope") != 0 or address.startswith("127."):
                    continue  # scope 0 is global: skip host- and link-local addresses
                rank = 0 if msg.get("index") in default_ifs else 1
                found.append((rank, address))
    except OSError:
        return _addresses_by_name()
    return [a for _, a in sorted(found, key=lambda x: x[0])]


def _addresses_by_name() -> list[str]:
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    out: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if not address.startswith("127.") and address not in out:
            out.append(address)
    return out


def _system_info_sync() -> dict[str, str]:
    return {
        "machine_id": _read("/etc/machine-id"),
        "system_uuid": _read("/sys/class/dmi/id/product_uuid"),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "kernel_version": os.uname().release,
        "os_image": _os_image(),
        "architecture": _GOARCH.get(platform.machine(), platform.machine()),
    }


# ------------------------------------------------------------------------ provider


class NodeStatusProvider:
    """Builds the node's status from a running Kubelet, keeping transition times.

    Args:
        kubelet: The agent to report on.
        kubelet_port: The port reported as the daemon endpoint.
        clock: Source of heartbeat and transition times; default the kubelet's.
        addresses: Returns the host's addresses, best first (default
            :func:`host_addresses`); called in a thread.
        hostname: The Hostname address (default the node name).
    """

    def __init__(
        self,
        kubelet: Kubelet,
        *,
        kubelet_port: int = 0,
        clock: Clock | None = None,
        addresses: Callable[[], Sequence[str]] | None = None,
        hostname: str | None = None,
    ) -> None:
        self.kubelet = kubelet
        self.kubelet_port = kubelet_port
        self.clock = clock or kubelet.clock
        self._addresses = addresses or host_addresses
        self.hostname = hostname or kubelet.node_name
        self._conditions: dict[str, NodeCondition] = {}

    def _condition(
        self, type_: str, status: str, reason: str, message: str, now: float
    ) -> NodeCondition:
        last = self._conditions.get(type_)
        transition = last.last_transition_time if last and last.status == status else now
        cond = NodeCondition(type_, status, reason, message, now, transition)
        self._conditions[type_] = cond
        return cond

    async def _ready_problems(self, capacity: Mapping[str, str]) -> list[str]:
        problems = []
        try:
            status = await self.kubelet.runtime.status()
        except ContainerRuntimeError:
            problems.append("container runtime status check may not have completed yet")
        else:
            for type_, what in (
                ("RuntimeReady", "container runtime not ready"),
                ("NetworkReady", "container runtime network not ready"),
            ):
                cond = status.condition(type_)
                if cond is None or not cond.status:
                    reason = cond.reason if cond else ""
                    message = cond.message if cond else ""
                    problems.append(f"{what}: {type_}=false reason:{reason} message:{message}")
        pleg_ok, pleg_message = self.kubelet.pleg.healthy()
        if not pleg_ok:
            problems.append(f"PLEG is not healthy: {pleg_message}")
        missing = [r for r in ("cpu", "memory", "pods") if r not in capacity]
        if missing:
            problems.append(f"missing node capacity for resources: {', '.join(missing)}")
        return problems

    async def status(self) -> NodeStatus:
        """Build the status now. Never raises for a runtime that cannot answer: its
        problems show in the Ready condition and the images are left out."""
        now = self.clock.now()
        cm = self.kubelet.container_manager
        capacity = {k: str(v) for k, v in cm.node_capacity().items()}
        allocatable = {k: str(v) for k, v in cm.node_allocatable().items()}
        problems = await self._ready_problems(capacity)
        if problems:
            ready = self._condition("Ready", "False", "KubeletNotReady", ", ".join(problems), now)
        else:
            ready = self._condition(
                "Ready", "True", "KubeletReady", "kubelet is posting ready status", now
            )
        pressure = self.kubelet.eviction_manager.node_conditions()
        conditions = [ready]
        for type_, (yes_reason, yes_msg), (no_reason, no_msg) in _PRESSURE:
            if type_ in pressure:
                conditions.append(self._condition(type_, "True", yes_reason, yes_msg, now))
            else:
                conditions.append(self._condition(type_, "False", no_reason, no_msg, now))
        info = await asyncio.to_thread(_system_info_sync)
        try:
            version = await self.kubelet.runtime.version()
            runtime_version = f"{version.runtime_name}://{version.runtime_version}"
        except ContainerRuntimeError:
            runtime_version = ""
        addresses = [
            NodeAddress("InternalIP", a) for a in (await asyncio.to_thread(self._addresses))[:1]
        ]
        addresses.append(NodeAddress("Hostname", self.hostname))
        images = []
        if IMAGES in runtime_capabilities(self.kubelet.runtime):
            with contextlib.suppress(ContainerRuntimeError):
                images = await self.kubelet.runtime.list_images()
        images.sort(key=lambda i: i.size, reverse=True)
        return NodeStatus(
            capacity=capacity,
            allocatable=allocatable,
            conditions=tuple(conditions),
            addresses=tuple(addresses),
            node_info=NodeSystemInfo(
                container_runtime_version=runtime_version,
                kubelet_version=f"v{__version__}+kubelet-kit",
                **info,
            ),
            images=tuple(
                ContainerImage(
                    (*i.repo_digests, *i.repo_tags)[:MAX_NAMES_PER_IMAGE] or (i.id,), i.size
                )
                for i in images[:MAX_IMAGES]
            ),
            kubelet_port=self.kubelet_port,
        )

    async def to_json(self) -> str:
        """The status now, as a v1 NodeStatus JSON document."""
        return (await self.status()).to_json()
