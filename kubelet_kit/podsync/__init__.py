"""Runtime-neutral pod sync: what to start, kill or restart for a pod, and doing it.

The kubelet's per-pod logic, decided once for every Runtime: sandbox (re)creation,
init containers in order, sidecars, restart policies, spec-hash restarts, crash-loop
and image-pull back-off, lifecycle hooks, graceful termination.

* :mod:`~kubelet_kit.podsync.backoff`: keyed exponential back-off;
* :mod:`~kubelet_kit.podsync.actions`: pure ``compute_pod_actions``;
* :mod:`~kubelet_kit.podsync.configs`: pod -> sandbox/container configs;
* :mod:`~kubelet_kit.podsync.podfiles`: the kubelet's own files in a pod's
  containers (managed ``/etc/hosts``, termination-message files);
* :mod:`~kubelet_kit.podsync.images`: image pull policy and pull back-off;
* :mod:`~kubelet_kit.podsync.hooks`: postStart/preStop handlers;
* :mod:`~kubelet_kit.podsync.syncer`: ``RuntimePodSyncer``, the PodSyncer.

``RuntimePodSyncer`` is importable from here too; it is loaded on first use, since
it brings in the status package and the manager stubs.
"""

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.podsync.actions import ContainerToKill, PodActions, compute_pod_actions
from kubelet_kit.podsync.backoff import Backoff, stable_key
from kubelet_kit.podsync.hooks import HandlerRunner
from kubelet_kit.podsync.images import ImagePuller

if TYPE_CHECKING:
    from kubelet_kit.podsync.syncer import RuntimePodSyncer

__all__ = [
    "Backoff",
    "ContainerToKill",
    "HandlerRunner",
    "ImagePuller",
    "PodActions",
    "RuntimePodSyncer",
    "compute_pod_actions",
    "stable_key",
]


# Lazy, so importing the pure parts does not import the syncer's dependencies.
__getattr__, __dir__ = lazy_exports(
    __name__, {"RuntimePodSyncer": "kubelet_kit.podsync.syncer"}, __all__
)
