"""Probe manager: liveness, readiness and startup probes.

``ProbeManager`` is the protocol the composer codes against;
:class:`ReferenceProbeManager` is the kubelet's manager (a worker per container
and probe kind on an injected clock); :class:`StubProbeManager` runs no probes.
The handlers (exec, HTTP, TCP, gRPC health) are usable on their own from
:mod:`kubelet_kit.prober.probers`.
"""

from kubelet_kit.prober.interfaces import ProbeKind, ProbeManager, ProbeResult, ProbeUpdate
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
