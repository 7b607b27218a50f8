"""Device plugin SDK: write a device plugin for the kubelet (API v1beta1) in Python.

Subclass :class:`DevicePlugin`, fill in ``list_devices`` and ``allocate``, and
``await plugin.run()``; see :mod:`kubelet_kit.deviceplugin.plugin`. The same
protocol is spoken by upstream's kubelet and by
:class:`kubelet_kit.cm.devicemanager.DeviceManager`.
"""

from kubelet_kit.cm.devicemanager.constants import (
    DEVICE_PLUGIN_PATH,
    HEALTHY,
    KUBELET_SOCKET,
    UNHEALTHY,
    VERSION,
)
from kubelet_kit.deviceplugin.plugin import (
    ContainerAllocation,
    Device,
    DevicePlugin,
    DeviceSpec,
    Mount,
)

__all__ = [
    "DEVICE_PLUGIN_PATH",
    "HEALTHY",
    "KUBELET_SOCKET",
    "UNHEALTHY",
    "VERSION",
    "ContainerAllocation",
    "Device",
    "DevicePlugin",
    "DeviceSpec",
    "Mount",
]
