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

from kubelet_kit.agent.kubelet import Kubelet
from kubelet_kit.agent.parts import DEFAULT, build_runtime
from kubelet_kit.agent.process import Agent, ClusterOptions, build_agent
from kubelet_kit.node.defaults import default_node_name, default_root_dir

__all__ = [
    "DEFAULT",
    "Agent",
    "ClusterOptions",
    "Kubelet",
    "build_agent",
    "build_runtime",
    "default_node_name",
    "default_root_dir",
]
