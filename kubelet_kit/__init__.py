"""kubelet-kit: the kubelet's subsystems as importable, swappable, testable parts.

The composer and the six interfaces are available from here::

    from kubelet_kit import Kubelet, Runtime, PLEG, ContainerManager, VolumeManager
    from kubelet_kit import ProbeManager, EvictionManager

They are imported on first use, so ``import kubelet_kit`` stays light and importing
one subsystem (``kubelet_kit.pleg``) pulls in no other.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit._version import __version__

# gRPC's fork handlers (on by default in its core) run in every child forked while
# gRPC threads are busy, and crash some of them (SIGSEGV before exec): the
# host-process runtime forks for every exec, probe and container, beside a gRPC
# server or client. The package's children always exec at once and never use
# gRPC, so the handlers are turned off before gRPC is first imported, unless the
# process set the variable itself.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

if TYPE_CHECKING:
    from kubelet_kit.agent import Kubelet
    from kubelet_kit.cm import ContainerManager
    from kubelet_kit.container import Runtime
    from kubelet_kit.eviction import EvictionManager
    from kubelet_kit.pleg import PLEG
    from kubelet_kit.prober import ProbeManager
    from kubelet_kit.volume import VolumeManager

__all__ = [
    "PLEG",
    "ContainerManager",
    "EvictionManager",
    "Kubelet",
    "ProbeManager",
    "Runtime",
    "VolumeManager",
    "__version__",
]

_LAZY = {
    "Kubelet": "kubelet_kit.agent",
    "Runtime": "kubelet_kit.container",
    "PLEG": "kubelet_kit.pleg",
    "ContainerManager": "kubelet_kit.cm",
    "VolumeManager": "kubelet_kit.volume",
    "ProbeManager": "kubelet_kit.prober",
    "EvictionManager": "kubelet_kit.eviction",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
