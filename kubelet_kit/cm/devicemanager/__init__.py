"""The kubelet's device manager: device plugins (API v1beta1) on this node.

:class:`DeviceManager` serves the ``Registration`` service on
``<plugins_dir>/kubelet.sock``, connects back to each plugin, turns its
``ListAndWatch`` reports into extended resources (capacity: every device,
allocatable: the healthy ones), admits pods against the free devices, allocates
devices when a container starts and keeps the assignments in a checkpoint. A
ContainerManager given ``device_manager=`` forwards to it; see
:class:`kubelet_kit.cm.ContainerManager`.

The protocol is the project's own ``api.proto`` (package ``v1beta1``),
wire-compatible with upstream; its generated modules are in ``gen``.
"""

from kubelet_kit.cm.devicemanager.checkpoint import CheckpointData, PodDevicesEntry
from kubelet_kit.cm.devicemanager.constants import (
    CHECKPOINT_NAME,
    DEVICE_PLUGIN_PATH,
    ENDPOINT_STOP_GRACE_PERIOD,
    HEALTHY,
    KUBELET_SOCKET,
    PRE_START_CONTAINER_TIMEOUT,
    SUPPORTED_VERSIONS,
    UNHEALTHY,
    VERSION,
)
from kubelet_kit.cm.devicemanager.logic import (
    choose_devices,
    container_device_requests,
    is_extended_resource_name,
    pod_device_needs,
)
from kubelet_kit.cm.devicemanager.manager import DeviceManager, PluginInfo
from kubelet_kit.cm.devicemanager.metrics import DeviceManagerMetrics

__all__ = [
    "CHECKPOINT_NAME",
    "DEVICE_PLUGIN_PATH",
    "ENDPOINT_STOP_GRACE_PERIOD",
    "HEALTHY",
    "KUBELET_SOCKET",
    "PRE_START_CONTAINER_TIMEOUT",
    "SUPPORTED_VERSIONS",
    "UNHEALTHY",
    "VERSION",
    "CheckpointData",
    "DeviceManager",
    "DeviceManagerMetrics",
    "PluginInfo",
    "PodDevicesEntry",
    "choose_devices",
    "container_device_requests",
    "is_extended_resource_name",
    "pod_device_needs",
]
