"""Pod status: phase, conditions, container statuses, and the status manager.

``pod_phase`` is the kubelet's ``getPhase``; ``generate_pod_status`` builds the API
``PodStatus`` from what the runtime reports; :class:`StatusManager` keeps the
latest status per pod and feeds subscribers (an agent reporting upstream).
This package imports only ``kubelet_kit.api``, ``kubelet_kit.container`` and
``kubelet_kit.clock``.
"""

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
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "UNKNOWN",
    "has_any_regular_container_started",
    "is_static_pod",
    "pod_phase",
]
