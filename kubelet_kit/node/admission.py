"""Pod admission: whether a new pod may run beside the active ones (the kubelet's
``canAdmitPod``, which asks each admit handler in turn)."""

from __future__ import annotations

from collections.abc import Sequence

from kubelet_kit.api import Pod
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.cm import ContainerManager
from kubelet_kit.eviction import EvictionManager

__all__ = ["admit_pod"]


def admit_pod(
    pod: Pod,
    active_pods: Sequence[Pod],
    *,
    eviction_manager: EvictionManager,
    container_manager: ContainerManager,
    pod_is_new: bool = False,
) -> AdmitResult:
    """Ask the eviction manager (node pressure), then the container manager
    (resources, pod count, devices, topology), whether ``pod`` may run beside
    ``active_pods``; the first refusal is the answer. ``pod`` itself is left out of
    ``active_pods`` if it is there (an update of an admitted pod), unless
    ``pod_is_new`` says it cannot be (a pod being added: the list is then not
    copied, which in a burst of additions would cost time growing with the
    square of their number). A pod served with values the agent could not read
    (``Pod.problems``) is refused before either."""
    if pod.problems:
        return AdmitResult.refuse(
            "UnexpectedAdmissionError", "; ".join(str(e) for e in pod.problems)
        )
    result = eviction_manager.admit(pod)
    if not result.admit:
        return result
    if pod_is_new:
        return container_manager.admit_pod(pod, active_pods)
    uid = pod.metadata.uid
    others = [p for p in active_pods if p.metadata.uid != uid]
    return container_manager.admit_pod(pod, others)
