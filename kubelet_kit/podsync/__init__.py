"""Runtime-neutral pod sync: what to start, kill or restart for a pod, and doing it.

The kubelet's per-pod logic, decided once for every Runtime: sandbox (re)creation,
init containers in order, sidecars, restart policies, spec-hash restarts, crash-loop
and image-pull back-off, lifecycle hooks, graceful termination.

* :mod:`~kubelet_kit.podsync.backoff`: keyed exponential back-off;
* :mod:`~kubelet_kit.podsync.actions`: pure ``compute_pod_actions``;
* :mod:`~kubelet_kit.podsync.images`: image pull policy and pull back-off;
* :mod:`~kubelet_kit.podsync.hooks`: postStart/preStop handlers;
* :mod:`~kubelet_kit.podsync.syncer`: ``RuntimePodSyncer``, the PodSyncer.
"""

from kubelet_kit.podsync.backoff import Backoff, format_duration, stable_key

__all__ = ["Backoff", "format_duration", "stable_key"]
