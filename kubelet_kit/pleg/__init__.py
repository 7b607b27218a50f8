"""Pod lifecycle event generators: the PLEG protocol, PodCache, GenericPLEG.

A PLEG tells the agent which pods changed in the runtime and keeps the
:class:`PodCache` of their statuses current. :class:`GenericPLEG` relists the
runtime every second; :class:`EventedPLEG` follows the runtime's event stream and
relists rarely. Any class with the methods of :class:`PLEG` plugs in.

:class:`PLEGMetrics` is loaded on first use, with prometheus_client: importing
the package alone does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubelet_kit.pleg.cache import PodCache, PodCacheEntry
from kubelet_kit.pleg.channel import EventChannel
from kubelet_kit.pleg.evented import EventedPLEG
from kubelet_kit.pleg.generic import GenericPLEG
from kubelet_kit.pleg.interfaces import (
    EVENT_CHANNEL_CAPACITY,
    PLEG,
    PodLifecycleEvent,
    PodLifecycleEventType,
)

if TYPE_CHECKING:
    from kubelet_kit.pleg.metrics import PLEGMetrics

__all__ = [
    "EVENT_CHANNEL_CAPACITY",
    "PLEG",
    "EventChannel",
    "EventedPLEG",
    "GenericPLEG",
    "PLEGMetrics",
    "PodCache",
    "PodCacheEntry",
    "PodLifecycleEvent",
    "PodLifecycleEventType",
]


def __getattr__(name: str) -> Any:
    """Load :class:`PLEGMetrics` (and prometheus_client) when it is first asked for."""
    if name == "PLEGMetrics":
        from kubelet_kit.pleg.metrics import PLEGMetrics

        globals()[name] = PLEGMetrics
        return PLEGMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, :class:`PLEGMetrics` included before it is loaded."""
    return sorted(set(globals()) | set(__all__))
