"""Pure rules of cluster mode: what a node may write to a pod's status, the
event spam filter, Event objects, mirror pod objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_kit.api.loading import load_pod
from kubelet_kit.cluster import SpamFilter, event_object, mirror_pod_object, node_status_patch
from kubelet_kit.podsync.syncer import RecordedEvent
from kubelet_kit.testing import FakeClock


def cond(kind: str, status: str = "True", **more: str) -> dict[str, Any]:
    return {"type": kind, "status": status, **more}


# (case, api status, agent status, containers stopped, expected status in the patch)
STATUS_CASES = [
    (
        "others' conditions are not written; the kubelet's are",
        {"phase": "Running", "conditions": [cond("example.com/gate")]},
        {"phase": "Running", "conditions": [cond("Ready"), cond("example.com/gate", "False")]},
        False,
        {"phase": "Running", "conditions": [cond("Ready")]},
    ),
    (
        "terminal phase waits while containers may run",
        {"phase": "Running", "conditions": []},
        {
            "phase": "Failed",
            "reason": "Evicted",
            "message": "low on memory",
            "conditions": [cond("Ready", "False")],
        },
        False,
        {"phase": "Running", "conditions": [cond("Ready", "False")]},
    ),
    (
        "terminal phase once stopped; ready conditions forced False",
        {"phase": "Running"},
        {
            "phase": "Succeeded",
            "conditions": [cond("Ready"), cond("ContainersReady"), cond("Initialized")],
        },
        True,
        {
            "phase": "Succeeded",
            "conditions": [
                cond("Ready", "False", reason="PodCompleted"),
                cond("ContainersReady", "False", reason="PodCompleted"),
                cond("Initialized"),
            ],
        },
    ),
    (
        "failed pods: reason PodFailed",
        {"phase": "Running"},
        {"phase": "Failed", "conditions": [cond("Ready")]},
        True,
        {"phase": "Failed", "conditions": [cond("Ready", "False", reason="PodFailed")]},
    ),
    (
        "DisruptionTarget only with the move to terminal, once stopped",
        {"phase": "Running"},
        {
            "phase": "Failed",
            "conditions": [cond("DisruptionTarget", reason="TerminationByKubelet")],
        },
        True,
        {
            "phase": "Failed",
            "conditions": [cond("DisruptionTarget", reason="TerminationByKubelet")],
        },
    ),
    (
        "DisruptionTarget held back while containers may run",
        {"phase": "Running"},
        {"phase": "Failed", "conditions": [cond("DisruptionTarget")]},
        False,
        {"phase": "Running", "conditions": []},
    ),
    (
        "DisruptionTarget not re-sent for an already terminal pod",
        {"phase": "Failed"},
        {"phase": "Failed", "conditions": [cond("DisruptionTarget")]},
        True,
        {"phase": "Failed", "conditions": []},
    ),
    (
        "resource claim statuses are never the node's",
        {"phase": "Pending"},
        {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu"}], "conditions": []},
        False,
        {"phase": "Pending", "conditions": []},
    ),
]


@pytest.mark.parametrize(
    ("api", "new", "stopped", "expected"),
    [c[1:] for c in STATUS_CASES],
    ids=[c[0] for c in STATUS_CASES],
)
def test_what_a_node_may_write(
    api: dict[str, Any], new: dict[str, Any], stopped: bool, expected: dict[str, Any]
) -> None:
    patch = node_status_patch("uid-1", api, new, containers_stopped=stopped)
    assert patch == {"metadata": {"uid": "uid-1"}, "status": expected}


def test_spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() -> None:
    clock = FakeClock()
    spam = SpamFilter(clock)
    assert [spam.allow("pod-a") for _ in range(26)] == [True] * 25 + [False]
    assert spam.allow("pod-b")  # each object has its own bucket
    clock.advance(299)
    assert not spam.allow("pod-a")
    clock.advance(1)
    assert spam.allow("pod-a")
    assert not spam.allow("pod-a")


def test_event_object_is_the_kubelets() -> None:
    event = RecordedEvent(
        1_767_225_600.0,
        "ns",
        "web",
        "uid-1",
        "main",
        "Warning",
        "BackOff",
        "Back-off restarting failed container main",
    )
    obj = event_object(event, node_name="node-1", name="web.1")
    assert obj["involvedObject"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "ns",
        "name": "web",
        "uid": "uid-1",
        "fieldPath": "spec.containers{main}",
    }
    assert obj["source"] == {"component": "kubelet", "host": "node-1"}
    assert (obj["reason"], obj["type"], obj["count"]) == ("BackOff", "Warning", 1)
    assert obj["firstTimestamp"] == obj["lastTimestamp"] == "2026-01-01T00:00:00Z"
    pod_event = RecordedEvent(
        1_767_225_600.0, "ns", "web", "uid-1", "", "Normal", "Killing", "Stopping pod"
    )
    assert "fieldPath" not in event_object(pod_event, node_name="n", name="x")["involvedObject"]


def test_mirror_pod_object() -> None:
    pod = load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "etcd-node-1",
                "namespace": "kube-system",
                "uid": "hash-1",
                "labels": {"tier": "control"},
                "annotations": {
                    "kubernetes.io/config.hash": "hash-1",
                    "kubernetes.io/config.source": "file",
                    "kubernetes.io/config.seen": "t",
                },
            },
            "spec": {"containers": [{"name": "etcd", "image": "etcd"}]},
        }
    )
    obj = mirror_pod_object(pod, node_name="node-1", node_uid="node-uid")
    md = obj["metadata"]
    assert md["annotations"]["kubernetes.io/config.mirror"] == "hash-1"
    assert "kubernetes.io/config.seen" not in md["annotations"]
    assert md["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "node-1",
            "uid": "node-uid",
            "controller": True,
        }
    ]
    assert obj["spec"]["nodeName"] == "node-1"
    assert obj["spec"]["containers"][0]["image"] == "etcd"


def test_cluster_all_lists_real_names() -> None:
    import kubelet_kit.cluster as cluster

    assert sorted(cluster.__all__) == sorted(set(cluster.__all__))
    assert [n for n in cluster.__all__ if not hasattr(cluster, n)] == []


def test_the_core_does_not_import_the_client_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kubelet_kit, kubelet_kit.config, kubelet_kit.kubelet, "
        "kubelet_kit.node.nodestatus\nprint('kubernetes_asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_new_pod_ip_replaces_the_old_one_instead_of_joining_it() -> None:
    # podIPs and hostIPs merge by ip: a sandbox made again (a new IP) must not
    # leave the old IP beside it, which the API server refuses with 422.
    api = {"phase": "Running", "podIP": "10.88.2.1", "podIPs": [{"ip": "10.88.2.1"}]}
    new = {"phase": "Running", "podIP": "10.88.3.1", "podIPs": [{"ip": "10.88.3.1"}]}
    status = node_status_patch("uid-1", api, new, containers_stopped=False)["status"]
    assert status["podIP"] == "10.88.3.1"
    assert status["podIPs"] == [{"ip": "10.88.3.1"}, {"$patch": "delete", "ip": "10.88.2.1"}]
    assert status["$setElementOrder/podIPs"] == [{"ip": "10.88.3.1"}]


def test_unchanged_ips_are_sent_as_they_are() -> None:
    api = {"podIPs": [{"ip": "10.0.0.5"}], "hostIPs": [{"ip": "192.0.2.1"}]}
    new = {"podIPs": [{"ip": "10.0.0.5"}], "hostIPs": [{"ip": "192.0.2.1"}]}
    status = node_status_patch("uid-1", api, new, containers_stopped=False)["status"]
    assert status["podIPs"] == [{"ip": "10.0.0.5"}]
    assert status["hostIPs"] == [{"ip": "192.0.2.1"}]
    assert not any(k.startswith("$setElementOrder") for k in status)
