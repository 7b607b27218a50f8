"""Volume manager metrics, with the kubelet's names.

* ``volume_manager_total_volumes{plugin_name, state}``: volumes in the desired
  (``desired_state_of_world``) and actual (``actual_state_of_world``) state, by
  plugin, recomputed after every reconcile, as the kubelet's collector reports them.
* ``storage_operation_duration_seconds{volume_plugin, operation_name, status,
  migrated}``: duration of each set-up (``volume_mount``) and tear-down
  (``volume_unmount``); ``status`` is ``success`` or ``fail-unknown``, ``migrated``
  always ``false`` (no CSI migration here).

Metrics are registered in the registry given, or a fresh one, never in
prometheus_client's global registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "ACTUAL_STATE",
    "DESIRED_STATE",
    "OPERATION_MOUNT",
    "OPERATION_UNMOUNT",
    "VolumeMetrics",
]

DESIRED_STATE = "desired_state_of_world"
ACTUAL_STATE = "actual_state_of_world"
OPERATION_MOUNT = "volume_mount"
OPERATION_UNMOUNT = "volume_unmount"

# The buckets of the kubelet's storage_operation_duration_seconds.
_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0)


class VolumeMetrics:
    """The volume manager's metrics.

    Args:
        registry: Where to register them; default a fresh registry.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # prometheus_client is imported when metrics are made, not with the module
        from prometheus_client import CollectorRegistry, Gauge, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        self.total_volumes = Gauge(
            "volume_manager_total_volumes",
            "Number of volumes in Volume Manager",
            ["plugin_name", "state"],
            registry=self.registry,
        )
        self.operation_duration = Histogram(
            "storage_operation_duration_seconds",
            "Storage operation duration",
            ["volume_plugin", "operation_name", "status", "migrated"],
            buckets=_BUCKETS,
            registry=self.registry,
        )

    def set_totals(self, desired: Mapping[str, int], actual: Mapping[str, int]) -> None:
        """Replace the volume counts by plugin for both states."""
        self.total_volumes.clear()
        for state, counts in ((DESIRED_STATE, desired), (ACTUAL_STATE, actual)):
            for plugin, count in counts.items():
                self.total_volumes.labels(plugin or "N/A", state).set(count)

    def observe_operation(self, plugin: str, operation: str, ok: bool, seconds: float) -> None:
        """Record one set-up or tear-down."""
        self.operation_duration.labels(
            plugin or "N/A", operation, "success" if ok else "fail-unknown", "false"
        ).observe(max(0.0, seconds))
