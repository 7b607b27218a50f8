"""CNI networking for runtimes: the caller side of the CNI spec, and named
network namespaces.

:class:`CNINetwork` gives a sandbox a namespace and an address from a CNI
configuration; :class:`CNIInvoker` runs a configuration list (ADD, DEL, CHECK,
STATUS, VERSION) as libcni does; :mod:`kubelet_kit.cni` is the plugin side.
"""

from __future__ import annotations

from kubelet_kit.network.cni import (
    CNIExec,
    CNIInvoker,
    NetworkConfigList,
    RuntimeConf,
    load_conf_dir,
    load_conflist,
)
from kubelet_kit.network.manager import CNINetwork, NetworkStatus, PodRef, port_mappings_arg
from kubelet_kit.network.netns import DEFAULT_NETNS_DIR, create_netns, is_netns, remove_netns

__all__ = [
    "DEFAULT_NETNS_DIR",
    "CNIExec",
    "CNIInvoker",
    "CNINetwork",
    "NetworkConfigList",
    "NetworkStatus",
    "PodRef",
    "RuntimeConf",
    "create_netns",
    "is_netns",
    "load_conf_dir",
    "load_conflist",
    "port_mappings_arg",
    "remove_netns",
]
