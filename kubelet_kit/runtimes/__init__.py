"""Runtime implementations that are not CRI clients.

``HostProcessRuntime`` (:mod:`kubelet_kit.runtimes.host`) runs containers as
plain host processes, for machines without a container daemon.

The runtime is imported on first use, so that ``python -m
kubelet_kit.runtimes._shim`` (one process per container) starts quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubelet_kit.runtimes.host import HostProcessRuntime

__all__ = ["HostProcessRuntime"]


def __getattr__(name: str) -> Any:
    if name == "HostProcessRuntime":
        from kubelet_kit.runtimes.host import HostProcessRuntime

        return HostProcessRuntime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
