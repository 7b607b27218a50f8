"""Container manager: node resources, QoS and pod cgroups, admission.

``ContainerManager`` is the protocol the composer calls; ``CgroupContainerManager``
is the reference implementation on cgroups (v2 through ``CgroupV2Driver``, v1
through ``CgroupV1Driver``), ``StubContainerManager`` the no-cgroup one. The
kubelet's conversions are public for users' own policy code.
"""

from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver
from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.cpumanager import CPUManager
from kubelet_kit.cm.driver import CgroupDriver, CgroupStats, PressureStats
from kubelet_kit.cm.helpers import (
    ResourceConfig,
    cpu_shares_to_weight,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    qos_oom_score_adj,
    resource_config_for_pod,
)
from kubelet_kit.cm.interfaces import ContainerManager, ContainerRunOptions
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.cm.stub import StubContainerManager

__all__ = [
    "CPUManager",
    "CgroupContainerManager",
    "CgroupDriver",
    "CgroupStats",
    "CgroupV1Driver",
    "CgroupV2Driver",
    "ContainerManager",
    "ContainerRunOptions",
    "PressureStats",
    "ResourceConfig",
    "StubContainerManager",
    "cpu_shares_to_weight",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "qos_oom_score_adj",
    "resource_config_for_pod",
]
