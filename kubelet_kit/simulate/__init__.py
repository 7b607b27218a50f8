"""Simulated nodes: many real-logic nodes in one process against a real API server.

``kubelet-kit simulate --kubeconfig F --nodes N`` (or :class:`Simulator` from
Python) joins N nodes to a cluster. Each runs the agent's real sync loop, PLEG,
status manager, prober and eviction manager over the fake runtime, registers
its Node, renews its Lease and reports pod statuses and events as a kubelet
does; all of them share one event loop, one API client and one pod watch. See
``docs/simulate.md``.

Needs the optional extra ``kubelet-kit[cluster]``.
"""

from kubelet_kit.simulate.fleet import Heartbeats, RequestLanes, SimulationReport, Simulator
from kubelet_kit.simulate.informer import NodePodSource, SharedPodInformer
from kubelet_kit.simulate.node import (
    MEMORY_ANNOTATION,
    PROBE_FAILURES_ANNOTATION,
    NodeTemplate,
    SimulatedNode,
    SimulatedProber,
    SimulatedStats,
)

__all__ = [
    "MEMORY_ANNOTATION",
    "PROBE_FAILURES_ANNOTATION",
    "Heartbeats",
    "NodePodSource",
    "NodeTemplate",
    "RequestLanes",
    "SharedPodInformer",
    "SimulatedNode",
    "SimulatedProber",
    "SimulatedStats",
    "SimulationReport",
    "Simulator",
]
