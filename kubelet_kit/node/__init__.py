"""The agent core, one job per module.

=================== ==============================================================
``kubelet``         :class:`KubeletCore`: the sync loop over the parts it is given
``podworkers``      one worker per pod: syncing, terminating, terminated
``admission``       whether a new pod may run beside the active ones
``housekeeping``    periodic clean-up: orphans, container GC, log rotation, image GC
``nodestatus``      the v1 NodeStatus of a running agent
``metrics``         agent-level metrics with the kubelet's names
``instrumented``    a Runtime wrapper that counts calls under the kubelet's metrics
``transitions``     the one log line per pod transition
``defaults``        node name, state and log directories when none is given
=================== ==============================================================

Nothing here picks or builds a subsystem's implementation: that is the wiring
root's job (:mod:`kubelet_kit.agent`). The core imports the subsystems' protocols
and the pod-sync logic (:mod:`kubelet_kit.podsync`), never ``agent``, ``server``,
``cluster`` or ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_kit.node.admission import admit_pod
    from kubelet_kit.node.defaults import default_node_name, default_pod_logs_dir, default_root_dir
    from kubelet_kit.node.housekeeping import HOUSEKEEPING_PERIOD, Housekeeping
    from kubelet_kit.node.instrumented import InstrumentedRuntime
    from kubelet_kit.node.kubelet import KubeletCore
    from kubelet_kit.node.metrics import KubeletMetrics, TimedPodSyncer
    from kubelet_kit.node.nodestatus import NodeStatus, NodeStatusProvider, host_addresses
    from kubelet_kit.node.podworkers import (
        PodSyncer,
        PodWorkers,
        SyncResult,
        UpdateType,
        WorkerPhase,
    )

__all__ = [
    "HOUSEKEEPING_PERIOD",
    "Housekeeping",
    "InstrumentedRuntime",
    "KubeletCore",
    "KubeletMetrics",
    "NodeStatus",
    "NodeStatusProvider",
    "PodSyncer",
    "PodWorkers",
    "SyncResult",
    "TimedPodSyncer",
    "UpdateType",
    "WorkerPhase",
    "admit_pod",
    "default_node_name",
    "default_pod_logs_dir",
    "default_root_dir",
    "host_addresses",
]

# Loaded on first use: the pod-sync logic imports node.podworkers' types, and an
# eager package init would import the composer (and podsync) back.
_LAZY = {
    "HOUSEKEEPING_PERIOD": "kubelet_kit.node.housekeeping",
    "Housekeeping": "kubelet_kit.node.housekeeping",
    "InstrumentedRuntime": "kubelet_kit.node.instrumented",
    "KubeletCore": "kubelet_kit.node.kubelet",
    "KubeletMetrics": "kubelet_kit.node.metrics",
    "NodeStatus": "kubelet_kit.node.nodestatus",
    "NodeStatusProvider": "kubelet_kit.node.nodestatus",
    "PodSyncer": "kubelet_kit.node.podworkers",
    "PodWorkers": "kubelet_kit.node.podworkers",
    "SyncResult": "kubelet_kit.node.podworkers",
    "TimedPodSyncer": "kubelet_kit.node.metrics",
    "UpdateType": "kubelet_kit.node.podworkers",
    "WorkerPhase": "kubelet_kit.node.podworkers",
    "admit_pod": "kubelet_kit.node.admission",
    "default_node_name": "kubelet_kit.node.defaults",
    "default_pod_logs_dir": "kubelet_kit.node.defaults",
    "default_root_dir": "kubelet_kit.node.defaults",
    "host_addresses": "kubelet_kit.node.nodestatus",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
