"""Loading pods: defaults, round trips, multi-document files, generated uids."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from kubelet_kit.api import (
    Container,
    Pod,
    PodSpec,
    Quantity,
    default_image_pull_policy,
    load_manifests,
    load_pod,
    read_manifests,
    static_pod_uid,
)
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.errors import ValidationError

DATA = Path(__file__).parent / "data" / "manifests"

MINIMAL = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web"},
    "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
}


def assert_contains(actual: Any, expected: Any, path: str = "") -> None:
    """Every field set in ``expected`` is in ``actual`` with the same value."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} lost"
            assert_contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def test_defaults_applied_at_load() -> None:
    pod = load_pod(MINIMAL)
    assert pod.metadata.namespace == "default"
    assert pod.spec.restart_policy == "Always"
    assert pod.spec.termination_grace_period_seconds == 30
    assert pod.spec.dns_policy == "ClusterFirst"
    assert pod.spec.enable_service_links is True
    assert pod.spec.scheduler_name == "default-scheduler"
    c = pod.spec.containers[0]
    assert c.image_pull_policy == "IfNotPresent"
    assert c.termination_message_path == "/dev/termination-log"
    assert c.termination_message_policy == "File"


def test_probe_and_port_defaults() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["containers"][0].update(
        {
            "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": 80}},
            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 0},
        }
    )
    c = load_pod(data).spec.containers[0]
    assert c.ports[0].protocol == "TCP"
    assert c.ports[0].host_port is None
    live = c.liveness_probe
    assert live is not None and live.http_get is not None
    assert (
        live.timeout_seconds,
        live.period_seconds,
        live.success_threshold,
        live.failure_threshold,
        live.initial_delay_seconds,
    ) == (1, 10, 1, 3, 0)
    assert (live.http_get.path, live.http_get.scheme) == ("/", "HTTP")
    # Kubernetes treats an explicit 0 as "not set".
    assert c.readiness_probe is not None and c.readiness_probe.period_seconds == 10


def test_missing_request_defaults_to_limit() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "500m", "memory": "128Mi"},
        "requests": {"cpu": "100m"},
    }
    res = load_pod(data).spec.containers[0].resources
    assert res.requests == {"cpu": Quantity.parse("100m"), "memory": Quantity.parse("128Mi")}


def test_host_network_defaults_host_port() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["hostNetwork"] = True
    data["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert load_pod(data).spec.containers[0].ports[0].host_port == 8080


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("registry.local:5000/nginx", "Always"),
        ("registry.local:5000/nginx:1.0", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
        ("nginx:latest@sha256:" + "a" * 64, "Always"),
        ("", "IfNotPresent"),
    ],
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    assert default_image_pull_policy(image) == policy
    assert Container(name="c", image=image).image_pull_policy == policy


def test_explicit_pull_policy_kept() -> None:
    assert Container(image="nginx", image_pull_policy="Never").image_pull_policy == "Never"


def test_round_trip_keeps_every_field() -> None:
    raw = yaml.safe_load((DATA / "good" / "full.yaml").read_text())
    pod = load_pod(raw, source="full.yaml")
    out = pod.to_dict()
    assert_contains(out, raw)
    # And the output loads back to the same pod.
    assert load_pod(out, source="full.yaml") == pod


def test_round_trip_keeps_unknown_fields() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["schedulingGates"] = [{"name": "gate"}]
    data["spec"]["containers"][0]["futureField"] = {"x": 1}
    pod = load_pod(data)
    assert pod.spec.extra == {"schedulingGates": [{"name": "gate"}]}
    out = pod.to_dict()
    assert out["spec"]["schedulingGates"] == [{"name": "gate"}]
    assert out["spec"]["containers"][0]["futureField"] == {"x": 1}


def test_strict_reports_unknown_fields() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["containers"][0]["imagePolicy"] = "Always"
    data["spec"]["schedulingGates"] = [{"name": "gate"}]  # a real field, kept as data
    with pytest.raises(ValidationError) as info:
        load_pod(data, strict=True)
    assert [str(e) for e in info.value.errors] == [
        'spec.containers[0].imagePolicy: unknown field "spec.containers[0].imagePolicy"'
    ]


def test_full_manifest_model() -> None:
    pod = load_pod((DATA / "good" / "full.yaml").read_text())
    assert pod.metadata.creation_timestamp == dt.datetime(2024, 5, 1, 10, 20, 30, tzinfo=dt.UTC)
    vols = {v.name: v for v in pod.spec.volumes}
    assert vols["scratch"].kind == "emptyDir"
    assert vols["scratch"].empty_dir is not None
    assert vols["scratch"].empty_dir.size_limit == Quantity.parse("64Mi")
    assert vols["share"].kind == "nfs"
    assert vols["config"].config_map is not None
    assert vols["config"].config_map.items[0].mode == 0o400
    assert vols["creds"].secret is not None and vols["creds"].secret.default_mode == 0o440
    assert vols["all"].projected is not None and vols["all"].projected.default_mode == 0o644
    assert [c.name for c in pod.spec.sidecars] == ["proxy"]
    assert [c.name for c in pod.spec.all_containers()] == ["setup", "proxy", "app"]
    app = pod.spec.containers[0]
    assert app.liveness_probe is not None and app.liveness_probe.http_get is not None
    assert app.liveness_probe.http_get.port == "http"
    assert app.startup_probe is not None and app.startup_probe.grpc is not None
    assert app.startup_probe.grpc.service == "app.Health"
    assert app.lifecycle is not None and app.lifecycle.pre_stop is not None
    assert app.lifecycle.pre_stop.sleep is not None
    assert app.lifecycle.pre_stop.sleep.seconds == 5
    assert app.env[1].value_from is not None
    assert app.env[1].value_from.field_ref is not None
    assert app.env[1].value_from.field_ref.field_path == "metadata.name"
    st = pod.status.container_statuses[0]
    assert st.state.running is not None
    assert st.last_state.terminated is not None
    assert st.last_state.terminated.reason == "OOMKilled"
    assert pod.status.condition("Ready") is not None


def test_load_pod_from_json_text() -> None:
    pod = load_pod(json.dumps(MINIMAL), source="web.json")
    assert pod.name == "web" and pod.source == "web.json"


def test_load_pod_rejects_several_documents() -> None:
    text = (DATA / "good" / "two-pods.yaml").read_text()
    with pytest.raises(ValidationError, match="expected exactly one pod"):
        load_pod(text)


def test_load_manifests_directory() -> None:
    pods = load_manifests(DATA / "good")
    names = [p.name for p in pods]
    assert names == ["full", "json-a", "json-b", "first", "second"]
    by_name = {p.name: p for p in pods}
    assert by_name["json-b"].source == str(DATA / "good" / "list.json")
    assert by_name["second"].source == str(DATA / "good" / "two-pods.yaml")


def test_load_manifests_reports_each_document() -> None:
    results = read_manifests(DATA / "good" / "two-pods.yaml")
    assert [r.location for r in results] == [
        f"{DATA / 'good' / 'two-pods.yaml'}[0]",
        f"{DATA / 'good' / 'two-pods.yaml'}[1]",
    ]


def test_generated_uid_is_deterministic() -> None:
    a = load_pod(MINIMAL, source="/etc/kubernetes/manifests/web.yaml", node_name="node-1")
    b = load_pod(MINIMAL, source="/etc/kubernetes/manifests/web.yaml", node_name="node-1")
    assert a.uid == b.uid
    assert len(a.uid) == 32 and int(a.uid, 16) >= 0
    other_source = load_pod(MINIMAL, source="/etc/kubernetes/manifests/x.yaml", node_name="node-1")
    other_node = load_pod(MINIMAL, source="/etc/kubernetes/manifests/web.yaml", node_name="node-2")
    changed = json.loads(json.dumps(MINIMAL))
    changed["spec"]["containers"][0]["image"] = "nginx:1.26"
    other_content = load_pod(
        changed, source="/etc/kubernetes/manifests/web.yaml", node_name="node-1"
    )
    assert len({a.uid, other_source.uid, other_node.uid, other_content.uid}) == 4


def test_generated_uid_ignores_explicit_defaults() -> None:
    # The hash is over the defaulted pod, so spelling out a default changes nothing.
    explicit = json.loads(json.dumps(MINIMAL))
    explicit["spec"]["restartPolicy"] = "Always"
    assert load_pod(explicit, source="s").uid == load_pod(MINIMAL, source="s").uid


def test_url_uid_differs_from_file_uid() -> None:
    pod = load_pod(MINIMAL, source="s")
    assert static_pod_uid(pod, source="s", is_file=False) != static_pod_uid(pod, source="s")


def test_given_uid_is_kept() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["metadata"]["uid"] = "abc-123"
    assert load_pod(data).uid == "abc-123"


def test_models_are_frozen_values() -> None:
    pod = Pod(metadata=ObjectMeta(name="a"), spec=PodSpec(containers=(Container(name="c"),)))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        pod.metadata.name = "b"  # type: ignore[misc]
    renamed = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, name="b"))
    assert renamed.name == "b" and pod.name == "a"
    # The source is where a pod came from, not part of its value.
    assert attrs.evolve(pod, source="x") == pod


def test_timestamps_written_as_rfc3339() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["metadata"]["creationTimestamp"] = "2024-05-01T12:20:30+02:00"
    pod = load_pod(data)
    assert pod.to_dict()["metadata"]["creationTimestamp"] == "2024-05-01T10:20:30Z"


def test_strict_accepts_every_kubernetes_field_kept_as_data() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["spec"]["volumes"] = [{"name": "share", "nfs": {"server": "s", "path": "/x"}}]
    data["spec"]["hostUsers"] = False
    data["spec"]["containers"][0]["lifecycle"] = {"stopSignal": "SIGTERM"}
    data["metadata"]["finalizers"] = ["x"]
    pod = load_pod(data, strict=True)
    assert pod.spec.volumes[0].kind == "nfs"
    assert pod.to_dict()["spec"]["volumes"][0]["nfs"] == {"server": "s", "path": "/x"}


def test_model_from_dict_decodes_parts() -> None:
    from kubelet_kit.api import ContainerStatus

    st = ContainerStatus.from_dict(
        {"name": "c", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    )
    assert st.restart_count == 3
    assert st.state.waiting is not None and st.state.waiting.reason == "CrashLoopBackOff"
    assert ContainerStatus.from_dict(st.to_dict()) == st
    with pytest.raises(ValidationError) as info:
        ContainerStatus.from_dict({"restartCount": "three"})
    assert [e.path for e in info.value.errors] == ["restartCount"]


def test_status_fields_without_omitempty_are_always_written() -> None:
    from kubelet_kit.api import ContainerStatus, PodCondition

    assert ContainerStatus(name="c").to_dict() == {
        "name": "c",
        "state": {},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": "",
        "imageID": "",
    }
    assert PodCondition(type="Ready", status="False").to_dict() == {
        "type": "Ready",
        "status": "False",
    }


def test_container_resolves_named_ports() -> None:
    from kubelet_kit.api import ContainerPort

    c = Container(name="c", ports=(ContainerPort(name="http", container_port=8080),))
    assert c.resolve_port("http") == 8080
    assert c.resolve_port(9090) == 9090
    assert c.resolve_port("9091") == 9091
    assert c.resolve_port("metrics") is None
    assert c.resolve_port(70000) is None
