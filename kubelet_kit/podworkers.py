"""Pod workers under their first module name; they live in :mod:`kubelet_kit.node.podworkers`."""

from kubelet_kit.node.podworkers import PodSyncer, PodWorkers, SyncResult, UpdateType, WorkerPhase

__all__ = ["PodSyncer", "PodWorkers", "SyncResult", "UpdateType", "WorkerPhase"]
