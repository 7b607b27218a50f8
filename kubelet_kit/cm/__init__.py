"""Container manager: node resources, QoS and pod cgroups, admission."""

from kubelet_kit.cm.interfaces import ContainerManager
from kubelet_kit.cm.stub import StubContainerManager

__all__ = ["ContainerManager", "StubContainerManager"]
