"""The agent's metrics under their first module name; they live in
:mod:`kubelet_kit.node.metrics` and :mod:`kubelet_kit.node.instrumented`."""

from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.node.metrics import (
    POD_START_BUCKETS,
    RUNTIME_OPERATION_BUCKETS,
    KubeletMetrics,
    TimedPodSyncer,
)

__all__ = [
    "POD_START_BUCKETS",
    "RUNTIME_OPERATION_BUCKETS",
    "InstrumentedRuntime",
    "KubeletMetrics",
    "TimedPodSyncer",
]
