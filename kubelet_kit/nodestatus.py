"""Node status under its first module name; it lives in :mod:`kubelet_kit.node.nodestatus`."""

from kubelet_kit.node.nodestatus import (
    ContainerImage,
    NodeAddress,
    NodeCondition,
    NodeStatus,
    NodeStatusProvider,
    NodeSystemInfo,
    host_addresses,
)

__all__ = [
    "ContainerImage",
    "NodeAddress",
    "NodeCondition",
    "NodeStatus",
    "NodeStatusProvider",
    "NodeSystemInfo",
    "host_addresses",
]
