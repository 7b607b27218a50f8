"""Probe manager: liveness, readiness and startup probes."""

from kubelet_kit.prober.interfaces import ProbeKind, ProbeManager, ProbeResult, ProbeUpdate
from kubelet_kit.prober.stub import StubProbeManager

__all__ = ["ProbeKind", "ProbeManager", "ProbeResult", "ProbeUpdate", "StubProbeManager"]
