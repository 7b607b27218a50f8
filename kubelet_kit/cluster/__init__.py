"""Cluster mode: a kubelet-kit agent joined to a Kubernetes API server as a Node.

Needs the optional extra ``kubelet-kit[cluster]`` (the ``kubernetes_asyncio``
client). The pod source is :class:`kubelet_kit.config.apiserver.APIServerSource`;
this package reports back: the Node and its status, the Lease, pod statuses and
final deletes, events, mirror pods, and ConfigMaps/Secrets for volumes.
"""

from kubelet_kit.cluster.agent import ClusterNode
from kubelet_kit.cluster.client import api_status, connect
from kubelet_kit.cluster.configsource import APIConfigSource
from kubelet_kit.cluster.events import EventSink, SpamFilter, event_object
from kubelet_kit.cluster.lease import LEASE_NAMESPACE, LeaseController
from kubelet_kit.cluster.mirror import MirrorPods, mirror_pod_object
from kubelet_kit.cluster.node import NodeController, default_labels, status_changed
from kubelet_kit.cluster.podstatus import KUBELET_POD_CONDITIONS, PodStatusSync, node_status_patch
from kubelet_kit.cluster.services import APIServices, ServicesNotSyncedError

__all__ = [
    "KUBELET_POD_CONDITIONS",
    "LEASE_NAMESPACE",
    "APIConfigSource",
    "APIServices",
    "ClusterNode",
    "EventSink",
    "LeaseController",
    "MirrorPods",
    "NodeController",
    "PodStatusSync",
    "ServicesNotSyncedError",
    "SpamFilter",
    "api_status",
    "connect",
    "default_labels",
    "event_object",
    "mirror_pod_object",
    "node_status_patch",
    "status_changed",
]
