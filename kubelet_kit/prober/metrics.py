"""Prober metrics, with the kubelet's names and labels.

``prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`` counts
probe runs by result (``successful``, ``failed``, ``unknown``);
``prober_probe_duration_seconds{probe_type,container,pod,namespace}`` observes the
duration of successful (and unknown) runs, as the kubelet does. Both live in the
registry the manager is given (a fresh one by default), never in
prometheus_client's global registry; whoever serves ``/metrics/probes`` mounts it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from kubelet_kit.prober.interfaces import ProbeKind

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["RESULT_FAILED", "RESULT_SUCCESSFUL", "RESULT_UNKNOWN", "ProberMetrics"]

RESULT_SUCCESSFUL: Final = "successful"
RESULT_FAILED: Final = "failed"
RESULT_UNKNOWN: Final = "unknown"

# prometheus' default buckets, which the kubelet's metrics.DefBuckets equal.
_DEF_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ProberMetrics:
    """The two prober metrics, registered in ``registry``.

    Args:
        registry: Where to register; a fresh ``CollectorRegistry`` if None
            (reachable as :attr:`registry`).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # prometheus_client is imported when metrics are made, not with the module
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.probe_total = Counter(
            "prober_probe_total",
            "Cumulative number of a liveness, readiness or startup probe for a container "
            "by result.",
            ["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            registry=self.registry,
        )
        self.probe_duration = Histogram(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            ["probe_type", "container", "pod", "namespace"],
            buckets=_DEF_BUCKETS,
            registry=self.registry,
        )

        # labels() validates and locks on every call; a node runs thousands of
        # probes a minute, so each worker's children are looked up once.
        self._children: dict[tuple[str, ...], Any] = {}

    def observe(
        self,
        kind: ProbeKind,
        result: str,
        *,
        container: str,
        pod: str,
        namespace: str,
        pod_uid: str,
        duration: float,
    ) -> None:
        """Count one run; observe its duration unless it failed (as the kubelet)."""
        key = (kind.value, result, container, pod, namespace, pod_uid)
        counter = self._children.get(key)
        if counter is None:
            counter = self._children[key] = self.probe_total.labels(*key)
        counter.inc()
        if result != RESULT_FAILED:
            hkey = ("duration", kind.value, container, pod, namespace)
            hist = self._children.get(hkey)
            if hist is None:
                hist = self._children[hkey] = self.probe_duration.labels(*hkey[1:])
            hist.observe(duration)

    def forget(
        self, kind: ProbeKind, *, container: str, pod: str, namespace: str, pod_uid: str
    ) -> None:
        """Drop the series of one worker (when it stops). Idempotent."""
        for result in (RESULT_SUCCESSFUL, RESULT_FAILED, RESULT_UNKNOWN):
            key = (kind.value, result, container, pod, namespace, pod_uid)
            self._children.pop(key, None)
            with contextlib.suppress(KeyError):
                self.probe_total.remove(*key)
        self._children.pop(("duration", kind.value, container, pod, namespace), None)
        with contextlib.suppress(KeyError):
            self.probe_duration.remove(kind.value, container, pod, namespace)
