"""The kubelet's labels and annotations on runtime objects.

These keys are how a kubelet (or a kubelet-kit agent) recognises the sandboxes and
containers it made, so an agent that restarts adopts what it left running, and a
kubelet and a kubelet-kit agent can hand a node over to each other.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "CONTAINER_HASH",
    "CONTAINER_NAME",
    "CONTAINER_PORTS",
    "CONTAINER_PRESTOP_HANDLER",
    "CONTAINER_RESTART_COUNT",
    "CONTAINER_TERMINATION_MESSAGE_PATH",
    "CONTAINER_TERMINATION_MESSAGE_POLICY",
    "CONTAINER_TYPE",
    "POD_DELETION_GRACE_PERIOD",
    "POD_NAME",
    "POD_NAMESPACE",
    "POD_TERMINATION_GRACE_PERIOD",
    "POD_UID",
    "pod_uid_of",
]

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
CONTAINER_TYPE = "io.kubernetes.container.type"

CONTAINER_HASH = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT = "io.kubernetes.container.restartCount"
CONTAINER_TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
CONTAINER_TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
CONTAINER_PRESTOP_HANDLER = "io.kubernetes.container.preStopHandler"
CONTAINER_PORTS = "io.kubernetes.container.ports"
POD_DELETION_GRACE_PERIOD = "io.kubernetes.pod.deletionGracePeriod"
POD_TERMINATION_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod"


def pod_uid_of(labels: Mapping[str, str]) -> str:
    """The pod uid a runtime object belongs to, or "" if it carries none."""
    return labels.get(POD_UID, "")
