"""Volume manager: desired and actual state of the pods' volumes, plugins, reconciler.

``VolumeManager`` is the protocol the composer drives;
:class:`ReconcilingVolumeManager` is the kubelet's reference manager (desired and
actual state, a reconciler on the injected clock, orphan clean-up at start), with
the emptyDir, hostPath, configMap, secret, downwardAPI and projected plugins on the
kubelet's directory layout. ConfigMap and Secret data come from a
:class:`ConfigSource`; :class:`ManifestConfigSource` reads manifests from a
directory. The atomic writer and the safe ``subPath`` resolution can be used on
their own.
"""

from kubelet_kit.volume.atomic_writer import AtomicWriter, FileProjection, PayloadError
from kubelet_kit.volume.interfaces import VolumeManager
from kubelet_kit.volume.metrics import VolumeMetrics
from kubelet_kit.volume.plugins import check_host_path
from kubelet_kit.volume.reconciler import ReconcilingVolumeManager
from kubelet_kit.volume.sources import ConfigSource, ManifestConfigSource, StaticConfigSource
from kubelet_kit.volume.stub import StubVolumeManager
from kubelet_kit.volume.subpath import resolve_sub_path

__all__ = [
    "AtomicWriter",
    "ConfigSource",
    "FileProjection",
    "ManifestConfigSource",
    "PayloadError",
    "ReconcilingVolumeManager",
    "StaticConfigSource",
    "StubVolumeManager",
    "VolumeManager",
    "VolumeMetrics",
    "check_host_path",
    "resolve_sub_path",
]
