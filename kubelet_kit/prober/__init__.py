"""Probe manager: liveness, readiness and startup probes.

``ProbeManager`` is the protocol the composer codes against;
:class:`ReferenceProbeManager` is the kubelet's manager (a worker per container
and probe kind on an injected clock); :class:`StubProbeManager` runs no probes.
The handlers (exec, HTTP, TCP, gRPC health) are usable on their own from
:mod:`kubelet_kit.prober.probers`.
"""

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.prober.interfaces import ProbeKind, ProbeManager, ProbeResult, ProbeUpdate

if TYPE_CHECKING:
    from kubelet_kit.prober.manager import ContainerView, ReferenceProbeManager, runtime_id
    from kubelet_kit.prober.metrics import ProberMetrics
    from kubelet_kit.prober.probers import (
        ProbeOutcome,
        Prober,
        ProbeStatus,
        exec_probe,
        grpc_probe,
        http_probe,
        tcp_probe,
    )
    from kubelet_kit.prober.stub import StubProbeManager

__all__ = [
    "ContainerView",
    "ProbeKind",
    "ProbeManager",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeStatus",
    "ProbeUpdate",
    "Prober",
    "ProberMetrics",
    "ReferenceProbeManager",
    "StubProbeManager",
    "exec_probe",
    "grpc_probe",
    "http_probe",
    "runtime_id",
    "tcp_probe",
]

# The protocol and its value types load with the package; the manager (and with it
# prometheus_client) and the handlers (aiohttp, grpc) when first asked for.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ContainerView": "kubelet_kit.prober.manager",
        "ReferenceProbeManager": "kubelet_kit.prober.manager",
        "runtime_id": "kubelet_kit.prober.manager",
        "ProberMetrics": "kubelet_kit.prober.metrics",
        "ProbeOutcome": "kubelet_kit.prober.probers",
        "Prober": "kubelet_kit.prober.probers",
        "ProbeStatus": "kubelet_kit.prober.probers",
        "exec_probe": "kubelet_kit.prober.probers",
        "tcp_probe": "kubelet_kit.prober.probers",
        "grpc_probe": "kubelet_kit.prober._grpc",
        "http_probe": "kubelet_kit.prober._http",
        "StubProbeManager": "kubelet_kit.prober.stub",
    },
    __all__,
)
