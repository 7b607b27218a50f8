"""The :class:`Kubelet` composer: the agent core with its missing parts wired."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelet_kit.agent.parts import (
    DEFAULT,
    DefaultPart,
    build_runtime,
    config_sources,
    container_manager_for,
    eviction_manager_for,
    image_fs_usage,
    log_manager_for,
)
from kubelet_kit.api import Service
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm import ContainerManager
from kubelet_kit.config import PodSource
from kubelet_kit.container import Runtime, RuntimeCore
from kubelet_kit.eviction import EvictionManager
from kubelet_kit.node.defaults import default_node_name, default_pod_logs_dir, default_root_dir
from kubelet_kit.node.housekeeping import HOUSEKEEPING_PERIOD
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.node.kubelet import KubeletCore
from kubelet_kit.node.metrics import KubeletMetrics, new_registry
from kubelet_kit.pleg import PLEG
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD
from kubelet_kit.podsync.imagegc import IMAGE_GC_PERIOD, ImageGCManager
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.podsync.syncer import EventLog
from kubelet_kit.prober import ProbeManager
from kubelet_kit.status import StatusManager
from kubelet_kit.volume import VolumeManager
from kubelet_kit.volume.sources import ConfigSource

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.prober import ReferenceProbeManager

__all__ = ["Kubelet"]


class Kubelet(KubeletCore):
    """The node agent: :class:`~kubelet_kit.node.kubelet.KubeletCore` with every
    part that is not given wired from ``config`` as ``kubelet-kit run`` wires it
    (see the table in :mod:`kubelet_kit.agent`).

    ``Kubelet()`` alone runs an agent on the embedded host-process runtime with
    volumes, pod cgroups (as root), probes, eviction, container and image GC and
    log rotation. Pass any part to replace it; it only has to satisfy its
    ``typing.Protocol``. Pass the Stub* parts (``StubContainerManager``,
    ``StubVolumeManager``, ``StubEvictionManager``) to leave a subsystem out.

    Args:
        config: The KubeletConfiguration the defaults come from (default: the
            kubelet's defaults, with the embedded runtime).
        runtime: Any :class:`~kubelet_kit.container.RuntimeCore`; the agent uses
            only the capabilities it offers
            (:func:`~kubelet_kit.container.runtime_capabilities`). Default: the
            one ``config`` names (see :mod:`kubelet_kit.agent`).
        cni_conf_dir, cni_bin_dirs: CNI networking for the embedded runtime.
        image_gc, container_log_manager: None turns the task off; the default
            (:data:`DEFAULT`) wires it from ``config``.
        sync_frequency: Default ``config``'s syncFrequency.
        pod_logs_dir: Default ``config``'s podLogsDir when a config is given, else
            ``/var/log/pods`` as root and ``root_dir/logs`` otherwise.
        probe_manager: Default a
            :class:`~kubelet_kit.prober.ReferenceProbeManager` recording its probe
            events in :attr:`events`; a manager that is given records where it
            was told to.
        events: Where the agent's pod events go and are kept (:attr:`events`);
            default a new :class:`~kubelet_kit.podsync.syncer.EventLog`.
        Others: as :class:`~kubelet_kit.node.kubelet.KubeletCore`.
    """

    def __init__(
        self,
        config: KubeletConfiguration | None = None,
        *,
        runtime: RuntimeCore | None = None,
        pleg: PLEG | None = None,
        clock: Clock | None = None,
        sources: Sequence[PodSource] = (),
        container_manager: ContainerManager | None = None,
        volume_manager: VolumeManager | None = None,
        probe_manager: ProbeManager | None = None,
        eviction_manager: EvictionManager | None = None,
        status_manager: StatusManager | None = None,
        node_name: str | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        pod_logs_dir: str | os.PathLike[str] | None = None,
        sync_frequency: float | None = None,
        housekeeping_period: float = HOUSEKEEPING_PERIOD,
        container_gc_period: float = CONTAINER_GC_PERIOD,
        image_gc: ImageGCManager | DefaultPart | None = DEFAULT,
        image_gc_period: float = IMAGE_GC_PERIOD,
        container_log_manager: ContainerLogManager | DefaultPart | None = DEFAULT,
        on_pod_problem: Callable[[str], None] | None = None,
        registry: CollectorRegistry | None = None,
        config_source: ConfigSource | None = None,
        services: Callable[[], Iterable[Service]] | None = None,
        host_ip: str | None = None,
        cni_conf_dir: str | os.PathLike[str] | None = None,
        cni_bin_dirs: Sequence[str | os.PathLike[str]] = (),
        events: EventLog | None = None,
    ) -> None:
        given_config = config is not None
        config = config if config is not None else KubeletConfiguration()
        clock = clock or RealClock()
        registry = registry if registry is not None else new_registry(auto_describe=True)
        node_name = node_name or default_node_name()
        root = Path(root_dir) if root_dir is not None else default_root_dir()
        if pod_logs_dir is None:
            pod_logs_dir = (
                config.pod_logs_dir
                if given_config and config.pod_logs_dir
                else default_pod_logs_dir(root)
            )
        metrics = KubeletMetrics.for_registry(registry, node_name=node_name)
        base = runtime or build_runtime(
            config, root_dir=root, clock=clock, cni_conf_dir=cni_conf_dir, cni_bin_dirs=cni_bin_dirs
        )
        #: The runtime as given or built, before the metrics wrapper.
        self.base_runtime: RuntimeCore = base
        # Every runtime call counts under the kubelet's runtime operation metrics.
        wrapped: Runtime = (
            base
            if isinstance(base, InstrumentedRuntime)
            else InstrumentedRuntime(base, metrics, clock)
        )
        if pleg is None:
            from kubelet_kit.pleg import GenericPLEG

            pleg = GenericPLEG(wrapped, clock, registry=registry)
        if container_manager is None:
            container_manager = container_manager_for(config, root, clock)
        if volume_manager is None:
            from kubelet_kit.volume.reconciler import ReconcilingVolumeManager

            volume_manager = ReconcilingVolumeManager(
                root,
                config_source=config_source,
                clock=clock,
                registry=registry,
                node_allocatable=container_manager.node_allocatable(),
            )
        built_probes: ReferenceProbeManager | None = None
        if probe_manager is None:
            from kubelet_kit.prober import ReferenceProbeManager

            probe_manager = built_probes = ReferenceProbeManager(wrapped, clock, registry=registry)
        if eviction_manager is None:
            eviction_manager = eviction_manager_for(
                config, wrapped, root, clock, container_manager, registry
            )
        if image_gc is DEFAULT:
            image_gc = ImageGCManager(
                wrapped,
                functools.partial(image_fs_usage, wrapped, root),
                clock=clock,
                high_threshold_percent=config.image_gc_high_threshold_percent,
                low_threshold_percent=config.image_gc_low_threshold_percent,
                minimum_age=config.seconds("image_minimum_gc_age"),
            )
        if container_log_manager is DEFAULT:
            container_log_manager = log_manager_for(config, wrapped, clock)
        #: The configuration this agent was wired from.
        self.config = config
        super().__init__(
            runtime=wrapped,
            pleg=pleg,
            clock=clock,
            container_manager=container_manager,
            volume_manager=volume_manager,
            probe_manager=probe_manager,
            eviction_manager=eviction_manager,
            sources=[*config_sources(config, node_name, clock), *sources],
            status_manager=status_manager,
            node_name=node_name,
            root_dir=root,
            pod_logs_dir=pod_logs_dir,
            sync_frequency=(
                sync_frequency if sync_frequency is not None else config.seconds("sync_frequency")
            ),
            housekeeping_period=housekeeping_period,
            container_gc_period=container_gc_period,
            image_gc=image_gc,
            image_gc_period=image_gc_period,
            container_log_manager=container_log_manager,
            on_pod_problem=on_pod_problem,
            registry=registry,
            config_source=config_source,
            services=services,
            host_ip=host_ip,
            events=events,
        )
        if built_probes is not None:
            # The agent's event log exists only once the core is built: probe events
            # (Unhealthy, ProbeWarning) join the syncer's there, and so reach the
            # API server in cluster mode.
            built_probes.recorder = self.events
        #: The agent-level metrics (shared with the node API's ``/metrics``).
        self.metrics = metrics

    @classmethod
    def from_config(cls, config: KubeletConfiguration, **parts: Any) -> Kubelet:
        """``Kubelet(config, **parts)``: the agent ``config`` describes."""
        return cls(config, **parts)
