"""Eviction manager: pressure signals, thresholds, ranking and eviction."""

from kubelet_kit.eviction.interfaces import ActivePodsFunc, EvictionManager, KillPodFunc
from kubelet_kit.eviction.stub import StubEvictionManager

__all__ = ["ActivePodsFunc", "EvictionManager", "KillPodFunc", "StubEvictionManager"]
