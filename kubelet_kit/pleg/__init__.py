"""Pod lifecycle event generators: the PLEG protocol, PodCache, GenericPLEG.

A PLEG tells the agent which pods changed in the runtime and keeps the
:class:`PodCache` of their statuses current. :class:`GenericPLEG` relists the
runtime every second; :class:`EventedPLEG` follows the runtime's event stream and
relists rarely. Any class with the methods of :class:`PLEG` plugs in.

:class:`PLEGMetrics` is loaded on first use, with prometheus_client: importing
the package alone does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
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


# PLEGMetrics (and prometheus_client with it) loads when first asked for.
__getattr__, __dir__ = lazy_exports(__name__, {"PLEGMetrics": "kubelet_kit.pleg.metrics"}, __all__)
