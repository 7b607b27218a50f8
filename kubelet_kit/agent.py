"""The wiring root: the one place that picks and builds an agent's parts.

Every face of the agent goes through here: ``kubelet-kit run`` (standalone and
``--kubeconfig``), the :class:`Kubelet` composer embedded in a program, the
cluster runner and the examples. Give a part once and everything else is wired
around it as the kubelet wires it::

    kubelet = Kubelet(pleg=MyPLEG(...))                 # embedded: your PLEG, the rest ours
    agent = await build_agent(config, pleg=MyPLEG(...))  # + node API, + cluster side
    kubelet_kit.cli.main(["run", "--kubeconfig", "node.kubeconfig"], pleg=MyPLEG(...))

What each missing part becomes (from the KubeletConfiguration):

==================== =========================================================
runtime              a :class:`~kubelet_kit.cri.CRIRuntime` on
                     ``containerRuntimeEndpoint`` when set, else the embedded
                     :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`
                     (with CNI networking when ``cni_conf_dir`` is given);
                     always wrapped in an
                     :class:`~kubelet_kit.node.instrumented.InstrumentedRuntime`
pleg                 :class:`~kubelet_kit.pleg.GenericPLEG`
container_manager    :class:`~kubelet_kit.cm.CgroupContainerManager` (cgroupsPerQOS,
                     cgroupRoot, cgroupDriver, reservations, maxPods, CPU
                     manager, device plugins under ``<root-dir>/device-plugins``);
                     without the rights to make cgroups it warns and runs pods
                     without them
volume_manager       :class:`~kubelet_kit.volume.reconciler.ReconcilingVolumeManager`
probe_manager        :class:`~kubelet_kit.prober.ReferenceProbeManager`
eviction_manager     :class:`~kubelet_kit.eviction.manager.ThresholdEvictionManager`
                     over this machine's stats (evictionHard, evictionSoft, ...)
image_gc             :class:`~kubelet_kit.podsync.imagegc.ImageGCManager` (imageGC*)
container_log_manager :class:`~kubelet_kit.podsync.logrotate.ContainerLogManager`
                     (containerLogMaxSize, containerLogMaxFiles)
sources              staticPodPath, staticPodURL, plus those given (and the API
                     server in cluster mode)
==================== =========================================================

:func:`build_agent` adds the node API server (:mod:`kubelet_kit.server`) and, with
a kubeconfig, the cluster side (:mod:`kubelet_kit.cluster`): the API server as a
pod source, ConfigMaps/Secrets and Services read through it, the Node (publishing
the node API's port), its Lease, pod statuses, events and mirror pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
from prometheus_client import CollectorRegistry

from kubelet_kit.api import Quantity, Service
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.cm import ContainerManager
from kubelet_kit.config import FileSource, HTTPSource, PodSource
from kubelet_kit.container import Runtime
from kubelet_kit.errors import ConfigurationError, QuantityError
from kubelet_kit.eviction import EvictionManager
from kubelet_kit.node.defaults import default_node_name, default_pod_logs_dir, default_root_dir
from kubelet_kit.node.housekeeping import HOUSEKEEPING_PERIOD
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.node.kubelet import KubeletCore
from kubelet_kit.node.metrics import KubeletMetrics
from kubelet_kit.pleg import PLEG
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD
from kubelet_kit.podsync.imagegc import IMAGE_GC_PERIOD, ImageGCManager
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.prober import ProbeManager
from kubelet_kit.status import StatusManager
from kubelet_kit.volume import VolumeManager
from kubelet_kit.volume.sources import ConfigSource

if TYPE_CHECKING:
    from kubelet_kit.cluster.agent import ClusterNode
    from kubelet_kit.server import KubeletServer

__all__ = [
    "DEFAULT",
    "Agent",
    "Kubelet",
    "build_agent",
    "build_runtime",
    "default_node_name",
    "default_root_dir",
]

log = logging.getLogger("kubelet_kit")


class _Default(enum.Enum):
    DEFAULT = "default"


#: "Wire the default" for the parts whose None means "none" (``image_gc``,
#: ``container_log_manager``).
DEFAULT: Final = _Default.DEFAULT

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
    """The runtime ``config`` names: a CRIRuntime on ``containerRuntimeEndpoint``
    (timeout ``runtimeRequestTimeout``), or, when that is empty, the embedded
    HostProcessRuntime under ``root_dir/runtime``, with pods on their own network
    through the CNI configuration in ``cni_conf_dir`` when one is given."""
    if config.container_runtime_endpoint:
        from kubelet_kit.cri import CRIRuntime

        return CRIRuntime(config.container_runtime_endpoint,
                          timeout=config.seconds("runtime_request_timeout"))
    from kubelet_kit.runtimes.host import HostProcessRuntime

    network = None
    if cni_conf_dir:
        from kubelet_kit.network import CNINetwork

        network = CNINetwork(Path(cni_conf_dir), [str(d) for d in cni_bin_dirs] or CNI_BIN_DIRS,
                             cache_dir=root_dir / "cni", clock=clock)
    return HostProcessRuntime(root_dir / "runtime", clock=clock, network=network)


def _container_manager(config: KubeletConfiguration, root_dir: Path,
                       clock: Clock) -> ContainerManager:
    from kubelet_kit.cm.devicemanager import DeviceManager
    from kubelet_kit.cm.manager import CgroupContainerManager, cgroups_unavailable

    problem = cgroups_unavailable() if config.cgroups_per_qos else None
    if problem is not None:
        # The kubelet would refuse to start; an agent on a small box or in a
        # container still runs its pods, and says what it cannot do.
        log.warning("cgroupsPerQOS: %s: pods run without pod cgroups, so their "
                    "resource limits are not enforced", problem)
        config = attrs.evolve(config, cgroups_per_qos=False)
    # Device plugins register at <root-dir>/device-plugins/kubelet.sock, as with
    # the kubelet (whose root dir is /var/lib/kubelet).
    return CgroupContainerManager(
        config, state_dir=root_dir, clock=clock,
        device_manager=DeviceManager(plugins_dir=root_dir / "device-plugins", clock=clock))


async def _image_fs_usage(runtime: Runtime, root_dir: Path) -> tuple[int, int]:
    """``(capacity, available)`` bytes of the filesystem the runtime keeps images on."""
    from kubelet_kit.eviction.host_stats import fs_stats, image_fs_dir

    stats = fs_stats(await image_fs_dir(runtime, root_dir))
    return stats.capacity_bytes or 0, stats.available_bytes or 0


def _pod_cgroup_stats(cm: ContainerManager) -> dict[str, Any]:
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


def _eviction_manager(config: KubeletConfiguration, runtime: Runtime, root_dir: Path,
                      clock: Clock, cm: ContainerManager,
                      registry: CollectorRegistry) -> EvictionManager:
    from kubelet_kit.eviction.host_stats import HostStatsProvider
    from kubelet_kit.eviction.manager import ThresholdEvictionManager
    from kubelet_kit.volume.plugins import ephemeral_volume_dirs

    stats = HostStatsProvider(
        root_dir=root_dir, clock=clock,
        # Pods are measured (and ranked for eviction) by their cgroups when the
        # agent makes them, their containers and their volumes.
        runtime=runtime,
        pod_volume_dirs=functools.partial(ephemeral_volume_dirs, root_dir),
        **_pod_cgroup_stats(cm),
    )
    return ThresholdEvictionManager(stats=stats, runtime=runtime, clock=clock, config=config,
                                    registry=registry)


def _log_manager(config: KubeletConfiguration, runtime: Runtime,
                 clock: Clock) -> ContainerLogManager:
    try:
        max_size = Quantity.parse(config.container_log_max_size).value()
    except QuantityError as exc:
        raise ConfigurationError(
            f"containerLogMaxSize: {config.container_log_max_size!r}: {exc}") from None
    return ContainerLogManager(runtime, max_size=max_size,
                               max_files=config.container_log_max_files, clock=clock)


def _config_sources(config: KubeletConfiguration, node_name: str,
                    clock: Clock) -> list[PodSource]:
    sources: list[PodSource] = []
    if config.static_pod_path:
        sources.append(FileSource(config.static_pod_path, node_name=node_name, clock=clock,
                                  check_frequency=config.seconds("file_check_frequency")))
    if config.static_pod_url:
        headers = {k: ",".join(v) for k, v in config.static_pod_url_header.items()}
        sources.append(HTTPSource(config.static_pod_url, node_name=node_name, clock=clock,
                                  headers=headers,
                                  check_frequency=config.seconds("http_check_frequency")))
    return sources


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
        cni_conf_dir, cni_bin_dirs: CNI networking for the embedded runtime.
        image_gc, container_log_manager: None turns the task off; the default
            (:data:`DEFAULT`) wires it from ``config``.
        sync_frequency: Default ``config``'s syncFrequency.
        pod_logs_dir: Default ``config``'s podLogsDir when a config is given, else
            ``/var/log/pods`` as root and ``root_dir/logs`` otherwise.
        Others: as :class:`~kubelet_kit.node.kubelet.KubeletCore`.
    """

    def __init__(
        self,
        config: KubeletConfiguration | None = None,
        *,
        runtime: Runtime | None = None,
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
        image_gc: ImageGCManager | _Default | None = DEFAULT,
        image_gc_period: float = IMAGE_GC_PERIOD,
        container_log_manager: ContainerLogManager | _Default | None = DEFAULT,
        on_pod_problem: Callable[[str], None] | None = None,
        registry: CollectorRegistry | None = None,
        config_source: ConfigSource | None = None,
        services: Callable[[], Iterable[Service]] | None = None,
        host_ip: str | None = None,
        cni_conf_dir: str | os.PathLike[str] | None = None,
        cni_bin_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        given_config = config is not None
        config = config if config is not None else KubeletConfiguration()
        clock = clock or RealClock()
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        node_name = node_name or default_node_name()
        root = Path(root_dir) if root_dir is not None else default_root_dir()
        if pod_logs_dir is None:
            pod_logs_dir = (config.pod_logs_dir if given_config and config.pod_logs_dir
                            else default_pod_logs_dir(root))
        metrics = KubeletMetrics.for_registry(registry, node_name=node_name)
        base = runtime or build_runtime(config, root_dir=root, clock=clock,
                                        cni_conf_dir=cni_conf_dir, cni_bin_dirs=cni_bin_dirs)
        #: The runtime as given or built, before the metrics wrapper.
        self.base_runtime: Runtime = base
        # Every runtime call counts under the kubelet's runtime operation metrics.
        wrapped: Runtime = (base if isinstance(base, InstrumentedRuntime)
                            else InstrumentedRuntime(base, metrics, clock))
        if pleg is None:
            from kubelet_kit.pleg import GenericPLEG

            pleg = GenericPLEG(wrapped, clock, registry=registry)
        if container_manager is None:
            container_manager = _container_manager(config, root, clock)
        if volume_manager is None:
            from kubelet_kit.volume.reconciler import ReconcilingVolumeManager

            volume_manager = ReconcilingVolumeManager(
                root, config_source=config_source, clock=clock, registry=registry,
                node_allocatable=container_manager.node_allocatable())
        if probe_manager is None:
            from kubelet_kit.prober import ReferenceProbeManager

            probe_manager = ReferenceProbeManager(wrapped, clock, registry=registry)
        if eviction_manager is None:
            eviction_manager = _eviction_manager(config, wrapped, root, clock,
                                                 container_manager, registry)
        if image_gc is DEFAULT:
            image_gc = ImageGCManager(
                wrapped, functools.partial(_image_fs_usage, wrapped, root), clock=clock,
                high_threshold_percent=config.image_gc_high_threshold_percent,
                low_threshold_percent=config.image_gc_low_threshold_percent,
                minimum_age=config.seconds("image_minimum_gc_age"))
        if container_log_manager is DEFAULT:
            container_log_manager = _log_manager(config, wrapped, clock)
        #: The configuration this agent was wired from.
        self.config = config
        super().__init__(
            runtime=wrapped, pleg=pleg, clock=clock,
            container_manager=container_manager, volume_manager=volume_manager,
            probe_manager=probe_manager, eviction_manager=eviction_manager,
            sources=[*_config_sources(config, node_name, clock), *sources],
            status_manager=status_manager, node_name=node_name, root_dir=root,
            pod_logs_dir=pod_logs_dir,
            sync_frequency=(sync_frequency if sync_frequency is not None
                            else config.seconds("sync_frequency")),
            housekeeping_period=housekeeping_period, container_gc_period=container_gc_period,
            image_gc=image_gc, image_gc_period=image_gc_period,
            container_log_manager=container_log_manager, on_pod_problem=on_pod_problem,
            registry=registry, config_source=config_source, services=services,
            host_ip=host_ip)
        #: The agent-level metrics (shared with the node API's ``/metrics``).
        self.metrics = metrics

    @classmethod
    def from_config(cls, config: KubeletConfiguration, **parts: Any) -> Kubelet:
        """``Kubelet(config, **parts)``: the agent ``config`` describes."""
        return cls(config, **parts)


@attrs.define(kw_only=True)
class ClusterOptions:
    """How the agent joins an API server (the kubelet's cluster flags).

    Attributes:
        kubeconfig: The node's kubeconfig (path or content); None: in-cluster.
        context: Kubeconfig context.
        taints: Taints to register with (``--register-with-taints``).
        lease_duration: nodeLeaseDurationSeconds.
    """

    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None
    context: str | None = None
    taints: Sequence[Mapping[str, Any]] = ()
    lease_duration: int = 40


class Agent:
    """A whole node agent: the :class:`Kubelet`, its node API server, and, in
    cluster mode, its cluster side. Made by :func:`build_agent`.

    ``run()`` serves the node API, runs the Kubelet (and the cluster side) until
    :meth:`stop`, then closes everything it opened; pods keep running.
    """

    def __init__(self, kubelet: Kubelet, *, server: KubeletServer | None = None,
                 cluster: ClusterNode | None = None, api_client: Any = None,
                 background: Sequence[Callable[[], Any]] = (),
                 closers: Sequence[Callable[[], Any]] = ()) -> None:
        self.kubelet = kubelet
        self.server = server
        self.cluster = cluster
        self.api_client = api_client
        self._background = list(background)
        self._closers = list(closers)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._serving = False

    async def start_server(self) -> None:
        """Start listening on the node API's ports (idempotent; ``run`` calls it).

        Raises:
            OSError: A port cannot be bound.
        """
        if self.server is not None and not self._serving:
            await self.server.start()
            self._serving = True

    async def run(self) -> None:
        """Run until :meth:`stop` (pods keep running). Raises if a part fails."""
        self._stop.clear()
        try:
            await self.start_server()
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self.kubelet.run(), name="kubelet")]
                if self.cluster is not None:
                    tasks.append(tg.create_task(self.cluster.run(), name="cluster-node"))
                for start in self._background:
                    tasks.append(tg.create_task(start()))
                stop = tg.create_task(self._stop.wait())
                await asyncio.wait([*tasks, stop], return_when=asyncio.FIRST_COMPLETED)
                # Whichever ended first (a stop, or a part that failed), the rest go.
                self.kubelet.stop()
                if self.cluster is not None:
                    self.cluster.stop()
                for task in tasks[1 + (self.cluster is not None):]:
                    task.cancel()
                stop.cancel()
        finally:
            await self.close()

    def stop(self) -> None:
        """Ask :meth:`run` to return. Idempotent; pods keep running."""
        self._stop.set()

    async def drain(self, grace_period: float | None = None) -> None:
        """Stop every pod (gracefully) and wait until they are stopped."""
        await self.kubelet.drain(grace_period)

    async def close(self) -> None:
        """Stop serving and close the clients the agent opened. Idempotent."""
        if self.server is not None and self._serving:
            self._serving = False
            await self.server.stop()
        closers, self._closers = self._closers, []
        for close in closers:
            with contextlib.suppress(Exception):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        close_runtime = getattr(self.kubelet.runtime, "close", None)
        if close_runtime is not None:
            with contextlib.suppress(Exception):
                await close_runtime()

    async def __aenter__(self) -> Agent:
        await self.start_server()
        self._task = asyncio.create_task(self.run(), name="agent")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def build_agent(
    config: KubeletConfiguration | None = None,
    *,
    cluster: ClusterOptions | None = None,
    serve: bool = True,
    cert_dir: str | os.PathLike[str] | None = None,
    node_ip: str | None = None,
    **parts: Any,
) -> Agent:
    """Build the whole agent ``config`` describes: the :class:`Kubelet` (``parts``
    as its keyword arguments), the node API server (``address``, ``port``,
    ``tlsCertFile``, ``authentication``, ``authorization``, ...; a self-signed
    certificate in ``cert_dir``, default ``<root-dir>/pki``, when none is given),
    and with ``cluster`` the cluster side.

    Args:
        config: The KubeletConfiguration (default: the kubelet's, on the embedded
            runtime).
        cluster: Join this API server as a Node (needs ``kubelet-kit[cluster]``).
        serve: Serve the node API (``config``'s ports; a port of 0 is off).
        cert_dir: Where a self-signed serving certificate is made.
        node_ip: The node's address (``--node-ip``): ``status.hostIP`` of its pods
            and the InternalIP of its Node; default the default route's address.
        parts: Keyword arguments of :class:`Kubelet` (``runtime``, ``pleg``, ...).

    Raises:
        ConfigurationError: A setting is malformed (named by its field path), or
            the kubeconfig cannot be used.
    """
    config = config if config is not None else KubeletConfiguration()
    if node_ip:
        parts.setdefault("host_ip", node_ip)
    closers: list[Callable[[], Any]] = []
    background: list[Callable[[], Any]] = []
    api_client: Any = None
    if cluster is not None:
        from kubelet_kit.cluster.client import connect
        from kubelet_kit.cluster.configsource import APIConfigSource
        from kubelet_kit.cluster.services import APIServices
        from kubelet_kit.config.apiserver import APIServerSource

        api_client = await connect(cluster.kubeconfig, context=cluster.context)
        closers.append(api_client.close)
        node_name = parts.get("node_name") or default_node_name()
        parts["node_name"] = node_name
        clock = parts.setdefault("clock", RealClock())
        parts["sources"] = [APIServerSource(api_client, node_name, clock=clock),
                            *parts.get("sources", ())]
        if parts.get("config_source") is None:
            config_source = parts["config_source"] = APIConfigSource(api_client)
            closers.insert(0, functools.partial(asyncio.to_thread, config_source.close))
        if parts.get("services") is None:
            services = parts["services"] = APIServices(api_client, clock=clock)
            background.append(services.run)
    try:
        kubelet = Kubelet(config, **parts)
        server = await _build_server(kubelet, config, cert_dir) if serve else None
        cluster_node = None
        if cluster is not None:
            from kubelet_kit.cluster.agent import ClusterNode
            from kubelet_kit.node.nodestatus import NodeStatusProvider

            port = server.port if server is not None and server.port else 0
            provider = NodeStatusProvider(
                kubelet, kubelet_port=port,
                addresses=(lambda: [node_ip]) if node_ip else None)

            async def node_status() -> Mapping[str, Any]:
                return (await provider.status()).to_dict()

            cluster_node = ClusterNode(
                kubelet, api_client, node_status=node_status, labels=config.node_labels,
                taints=cluster.taints, lease_duration=cluster.lease_duration,
                node_status_update_frequency=config.seconds("node_status_update_frequency"),
                node_status_report_frequency=config.seconds("node_status_report_frequency"))
    except BaseException:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        raise
    return Agent(kubelet, server=server, cluster=cluster_node, api_client=api_client,
                 background=background, closers=closers)


async def _build_server(kubelet: Kubelet, config: KubeletConfiguration,
                        cert_dir: str | os.PathLike[str] | None) -> KubeletServer | None:
    """The node API server of ``config``, or None when every port is off."""
    from kubelet_kit.server import KubeletServer
    from kubelet_kit.server.config import ensure_self_signed, server_options

    options = server_options(config)
    if not any(options[p] for p in ("port", "read_only_port", "healthz_port")):
        return None
    if options["port"] is not None and not (options["tls_cert_file"]
                                            and options["tls_private_key_file"]):
        where = Path(cert_dir) if cert_dir is not None else kubelet.root_dir / "pki"
        try:
            cert, key = await asyncio.to_thread(ensure_self_signed, where, kubelet.node_name)
        except ConfigurationError as exc:
            log.warning("not serving the secure port: %s", exc)
            options["port"] = None
        else:
            options["tls_cert_file"], options["tls_private_key_file"] = cert, key
    return KubeletServer(kubelet, metrics=kubelet.metrics, **options)
