"""Container manager: node resources, QoS and pod cgroups, admission."""

from kubelet_kit.cm.helpers import (
    cpu_shares_to_weight,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    qos_oom_score_adj,
)
from kubelet_kit.cm.interfaces import ContainerManager
from kubelet_kit.cm.stub import StubContainerManager

__all__ = [
    "ContainerManager",
    "StubContainerManager",
    "cpu_shares_to_weight",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "qos_oom_score_adj",
]
