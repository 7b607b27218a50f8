"""Runtime implementations that are not CRI clients.

``HostProcessRuntime`` (:mod:`kubelet_kit.runtimes.host`) runs containers as
plain host processes, for machines without a container daemon.

The runtime is imported on first use, so that ``python -m
kubelet_kit.runtimes._shim`` (one process per container) starts quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_kit.runtimes.host import HostProcessRuntime

__all__ = ["HostProcessRuntime"]


__getattr__, __dir__ = lazy_exports(
    __name__, {"HostProcessRuntime": "kubelet_kit.runtimes.host"}, __all__
)
