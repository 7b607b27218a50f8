"""Pod status: phase, conditions, container statuses, and the status manager.

``pod_phase`` is the kubelet's ``getPhase``; ``generate_pod_status`` builds the API
``PodStatus`` from what the runtime reports; :class:`StatusManager` keeps the
latest status per pod and feeds subscribers (an agent reporting upstream).
This package imports only ``kubelet_kit.api``, ``kubelet_kit.container`` and
``kubelet_kit.clock``.
"""

from kubelet_kit.status.generate import (
    CONTAINER_CREATING,
    CONTAINER_STATUS_UNKNOWN,
    POD_INITIALIZING,
    container_should_be_restarted,
    container_statuses,
    generate_pod_status,
    merge_transition_times,
    pod_conditions,
    pod_ready_to_start_containers,
)
from kubelet_kit.status.manager import (
    StatusManager,
    StatusSubscription,
    illegal_container_transition,
)
from kubelet_kit.status.phase import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    TERMINAL_PHASES,
    UNKNOWN,
    has_any_regular_container_started,
    is_static_pod,
    pod_phase,
)

__all__ = [
    "CONTAINER_CREATING",
    "CONTAINER_STATUS_UNKNOWN",
    "FAILED",
    "PENDING",
    "POD_INITIALIZING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "UNKNOWN",
    "StatusManager",
    "StatusSubscription",
    "container_should_be_restarted",
    "container_statuses",
    "generate_pod_status",
    "has_any_regular_container_started",
    "illegal_container_transition",
    "is_static_pod",
    "merge_transition_times",
    "pod_conditions",
    "pod_phase",
    "pod_ready_to_start_containers",
]
