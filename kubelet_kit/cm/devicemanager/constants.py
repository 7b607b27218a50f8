"""Constants of the device plugin API v1beta1 (upstream ``constants.go``) and of
the kubelet's device manager."""

from __future__ import annotations

from typing import Final

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
]

#: A device that may be allocated.
HEALTHY: Final = "Healthy"
#: A device the plugin reports broken: counted in capacity, not in allocatable.
UNHEALTHY: Final = "Unhealthy"
#: The API version the kubelet and the plugins speak.
VERSION: Final = "v1beta1"
#: Versions the Registration service accepts.
SUPPORTED_VERSIONS: Final = ("v1beta1",)
#: The directory holding the kubelet's socket, the plugins' sockets and the checkpoint.
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
#: File name of the kubelet's Registration socket in that directory.
KUBELET_SOCKET: Final = "kubelet.sock"
#: File name of the device manager's checkpoint in that directory.
CHECKPOINT_NAME: Final = "kubelet_internal_checkpoint"
#: Seconds a PreStartContainer call may take.
PRE_START_CONTAINER_TIMEOUT: Final = 30.0
#: Seconds a resource whose plugin went away stays in capacity (all unhealthy)
#: before it is dropped, so a restarting plugin does not make it flap.
ENDPOINT_STOP_GRACE_PERIOD: Final = 300.0
