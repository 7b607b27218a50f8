"""The ``Kubelet`` composer under its first name.

The composer is :class:`kubelet_kit.agent.Kubelet` (the agent core it wires is
:class:`kubelet_kit.node.kubelet.KubeletCore`); this module keeps
``from kubelet_kit.kubelet import Kubelet`` working.
"""

from kubelet_kit.agent import Kubelet
from kubelet_kit.node.defaults import default_node_name, default_root_dir
from kubelet_kit.node.housekeeping import HOUSEKEEPING_PERIOD
from kubelet_kit.node.kubelet import KubeletCore

__all__ = ["HOUSEKEEPING_PERIOD", "Kubelet", "KubeletCore", "default_node_name", "default_root_dir"]
