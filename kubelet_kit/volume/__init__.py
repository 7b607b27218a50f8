"""Volume manager: desired and actual state of the pods' volumes, plugins, reconciler."""

from kubelet_kit.volume.interfaces import VolumeManager
from kubelet_kit.volume.stub import StubVolumeManager

__all__ = ["StubVolumeManager", "VolumeManager"]
