"""Eviction manager: pressure signals, thresholds, ranking and eviction.

``EvictionManager`` is the protocol the composer drives;
:class:`ThresholdEvictionManager` is the kubelet's control loop on an injected
clock, :class:`HostStatsProvider` measures this machine, and the pure helpers
(threshold parsing, ranking, admission, messages, local-storage limits) can be
used on their own, for instance in a unit test of a node policy.
"""

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.eviction.host_stats import HostStatsProvider
from kubelet_kit.eviction.interfaces import ActivePodsFunc, EvictionManager, KillPodFunc
from kubelet_kit.eviction.local_storage import (
    LocalStorageViolation,
    local_storage_violation,
    local_storage_violations,
)
from kubelet_kit.eviction.manager import IMMEDIATE_EVICTION_GRACE_PERIOD, ThresholdEvictionManager
from kubelet_kit.eviction.policy import (
    EVICTED_REASON,
    admit_under_pressure,
    eviction_message,
    is_critical_pod,
)
from kubelet_kit.eviction.ranking import (
    RequestCache,
    rank_disk_pressure,
    rank_for_signal,
    rank_memory_pressure,
    rank_pid_pressure,
)
from kubelet_kit.eviction.reclaim import delete_dead_containers, delete_unused_images
from kubelet_kit.eviction.stats import (
    ContainerUsage,
    FsStats,
    MemoryStats,
    NodeSummary,
    PodUsage,
    StatsProvider,
    VolumeUsage,
    make_observations,
)
from kubelet_kit.eviction.stub import StubEvictionManager
from kubelet_kit.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    DEFAULT_EVICTION_HARD,
    DISK_PRESSURE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    PID_PRESSURE,
    SIGNALS,
    EvictionConfig,
    Observation,
    Threshold,
    ThresholdValue,
    parse_threshold_config,
    thresholds_met,
)

if TYPE_CHECKING:
    from kubelet_kit.eviction.metrics import EvictionMetrics

__all__ = [
    "ALLOCATABLE_MEMORY_AVAILABLE",
    "DEFAULT_EVICTION_HARD",
    "DISK_PRESSURE",
    "EVICTED_REASON",
    "IMAGEFS_AVAILABLE",
    "IMAGEFS_INODES_FREE",
    "IMMEDIATE_EVICTION_GRACE_PERIOD",
    "MEMORY_AVAILABLE",
    "MEMORY_PRESSURE",
    "NODEFS_AVAILABLE",
    "NODEFS_INODES_FREE",
    "PID_AVAILABLE",
    "PID_PRESSURE",
    "SIGNALS",
    "ActivePodsFunc",
    "ContainerUsage",
    "EvictionConfig",
    "EvictionManager",
    "EvictionMetrics",
    "FsStats",
    "HostStatsProvider",
    "KillPodFunc",
    "LocalStorageViolation",
    "MemoryStats",
    "NodeSummary",
    "Observation",
    "PodUsage",
    "RequestCache",
    "StatsProvider",
    "StubEvictionManager",
    "Threshold",
    "ThresholdEvictionManager",
    "ThresholdValue",
    "VolumeUsage",
    "admit_under_pressure",
    "delete_dead_containers",
    "delete_unused_images",
    "eviction_message",
    "is_critical_pod",
    "local_storage_violation",
    "local_storage_violations",
    "make_observations",
    "parse_threshold_config",
    "rank_disk_pressure",
    "rank_for_signal",
    "rank_memory_pressure",
    "rank_pid_pressure",
    "thresholds_met",
]

# EvictionMetrics (and prometheus_client with it) loads when first asked for.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EvictionMetrics": "kubelet_kit.eviction.metrics",
    },
    __all__,
)
