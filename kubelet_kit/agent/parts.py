"""The builders of an agent's reference parts, one per part, from a
KubeletConfiguration; :class:`kubelet_kit.agent.Kubelet` calls them for the parts
it is not given."""

from __future__ import annotations

import enum
import functools
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from kubelet_kit.api import Quantity
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.clock import Clock
from kubelet_kit.cm import ContainerManager
from kubelet_kit.config import FileSource, HTTPSource, PodSource
from kubelet_kit.container import Runtime
from kubelet_kit.errors import ConfigurationError, QuantityError
from kubelet_kit.eviction import EvictionManager
from kubelet_kit.podsync.logrotate import ContainerLogManager

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "CNI_BIN_DIRS",
    "DEFAULT",
    "build_runtime",
    "config_sources",
    "container_manager_for",
    "eviction_manager_for",
    "image_fs_usage",
    "log_manager_for",
    "pod_cgroup_stats",
]

log = logging.getLogger("kubelet_kit")


class DefaultPart(enum.Enum):
    """The type of :data:`DEFAULT`."""

    DEFAULT = "default"


#: "Wire the default" for the parts whose None means "none" (``image_gc``,
#: ``container_log_manager``).
DEFAULT: Final = DefaultPart.DEFAULT

#: Where CNI plugins are looked for when no ``cni_bin_dirs`` are given.
CNI_BIN_DIRS: Final = ("/opt/cni/bin", "/usr/lib/cni")


def build_runtime(
    config: KubeletConfiguration,
    *,
    root_dir: Path,
    clock: Clock,
    cni_conf_dir: str | os.PathLike[str] | None = None,
    cni_bin_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Runtime:
    """The runtime ``config`` names: a CRIRuntime on ``containerRuntimeEndpoint``,
    or, when that is empty, the embedded HostProcessRuntime under
    ``root_dir/runtime``, with pods on their own network through the CNI
    configuration in ``cni_conf_dir`` when one is given. Either way the
    runtime's deadline is ``runtimeRequestTimeout``."""
    if config.container_runtime_endpoint:
        from kubelet_kit.cri import CRIRuntime

        return CRIRuntime(
            config.container_runtime_endpoint, timeout=config.seconds("runtime_request_timeout")
        )
    from kubelet_kit.runtimes.host import HostProcessRuntime

    network = None
    if cni_conf_dir:
        from kubelet_kit.network import CNINetwork

        network = CNINetwork(
            Path(cni_conf_dir),
            [str(d) for d in cni_bin_dirs] or CNI_BIN_DIRS,
            cache_dir=root_dir / "cni",
            clock=clock,
        )
    return HostProcessRuntime(
        root_dir / "runtime",
        clock=clock,
        network=network,
        start_timeout=config.seconds("runtime_request_timeout"),
    )


def container_manager_for(
    config: KubeletConfiguration, root_dir: Path, clock: Clock
) -> ContainerManager:
    from kubelet_kit.cm.devicemanager import DeviceManager
    from kubelet_kit.cm.manager import CgroupContainerManager, cgroups_unavailable

    problem = cgroups_unavailable() if config.cgroups_per_qos else None
    if problem is not None:
        # The kubelet would refuse to start; an agent on a small box or in a
        # container still runs its pods, and says what it cannot do.
        log.warning(
            "cgroupsPerQOS: %s: pods run without pod cgroups, so their "
            "resource limits are not enforced",
            problem,
        )
        config = attrs.evolve(config, cgroups_per_qos=False)
    # Device plugins register at <root-dir>/device-plugins/kubelet.sock, as with
    # the kubelet (whose root dir is /var/lib/kubelet).
    return CgroupContainerManager(
        config,
        state_dir=root_dir,
        clock=clock,
        device_manager=DeviceManager(plugins_dir=root_dir / "device-plugins", clock=clock),
    )


async def image_fs_usage(runtime: Runtime, root_dir: Path) -> tuple[int, int]:
    """``(capacity, available)`` bytes of the filesystem the runtime keeps images on."""
    from kubelet_kit.eviction.host_stats import fs_stats, image_fs_dir

    stats = fs_stats(await image_fs_dir(runtime, root_dir))
    return stats.capacity_bytes or 0, stats.available_bytes or 0


def pod_cgroup_stats(cm: ContainerManager) -> dict[str, Any]:
    """HostStatsProvider's cgroup arguments for a container manager that makes pod
    cgroups on this machine (none otherwise)."""
    from kubelet_kit.cm.manager import CgroupContainerManager, memory_hierarchy

    if not isinstance(cm, CgroupContainerManager) or not cm.config.cgroups_per_qos:
        return {}
    memory = memory_hierarchy()
    if memory is None:
        return {}
    return {
        "memory_cgroup_root": memory,
        "pods_cgroup": memory + cm.kubepods_path(),
        "pod_cgroup": lambda pod: memory + cm.pod_cgroup_path(pod),
    }


def eviction_manager_for(
    config: KubeletConfiguration,
    runtime: Runtime,
    root_dir: Path,
    clock: Clock,
    cm: ContainerManager,
    registry: CollectorRegistry,
) -> EvictionManager:
    from kubelet_kit.eviction.host_stats import HostStatsProvider
    from kubelet_kit.eviction.manager import ThresholdEvictionManager
    from kubelet_kit.volume.plugins import ephemeral_volume_dirs

    stats = HostStatsProvider(
        root_dir=root_dir,
        clock=clock,
        # Pods are measured (and ranked for eviction) by their cgroups when the
        # agent makes them, their containers and their volumes.
        runtime=runtime,
        pod_volume_dirs=functools.partial(ephemeral_volume_dirs, root_dir),
        **pod_cgroup_stats(cm),
    )
    return ThresholdEvictionManager(
        stats=stats, runtime=runtime, clock=clock, config=config, registry=registry
    )


def log_manager_for(
    config: KubeletConfiguration, runtime: Runtime, clock: Clock
) -> ContainerLogManager:
    try:
        max_size = Quantity.parse(config.container_log_max_size).value()
    except QuantityError as exc:
        raise ConfigurationError(
            f"containerLogMaxSize: {config.container_log_max_size!r}: {exc}"
        ) from None
    return ContainerLogManager(
        runtime, max_size=max_size, max_files=config.container_log_max_files, clock=clock
    )


def config_sources(config: KubeletConfiguration, node_name: str, clock: Clock) -> list[PodSource]:
    sources: list[PodSource] = []
    if config.static_pod_path:
        sources.append(
            FileSource(
                config.static_pod_path,
                node_name=node_name,
                clock=clock,
                check_frequency=config.seconds("file_check_frequency"),
            )
        )
    if config.static_pod_url:
        headers = {k: ",".join(v) for k, v in config.static_pod_url_header.items()}
        sources.append(
            HTTPSource(
                config.static_pod_url,
                node_name=node_name,
                clock=clock,
                headers=headers,
                check_frequency=config.seconds("http_check_frequency"),
            )
        )
    return sources
