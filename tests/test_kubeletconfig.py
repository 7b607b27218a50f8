"""KubeletConfiguration: the kubelet's field names, defaults and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
from kubelet_kit.errors import ValidationError

HEAD = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def test_defaults_are_the_kubelets() -> None:
    c = load_kubelet_config(HEAD)
    assert c.seconds("sync_frequency") == 60
    assert c.seconds("file_check_frequency") == 20
    assert c.seconds("runtime_request_timeout") == 120
    assert (c.max_pods, c.pod_logs_dir, c.cgroup_driver) == (110, "/var/log/pods", "cgroupfs")
    # Empty: the embedded host-process runtime (the kubelet's is containerd's socket).
    assert c.container_runtime_endpoint == ""
    assert c == KubeletConfiguration()


def test_a_real_kubelet_file_loads_and_keeps_unknown_fields(tmp_path: Path) -> None:
    f = tmp_path / "kubelet.yaml"
    f.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "staticPodPath: /etc/kubernetes/manifests\n"
        "staticPodURL: http://127.0.0.1:8080/pods\n"
        "syncFrequency: 30s\n"
        "cpuCFSQuota: false\n"
        "authentication: {anonymous: {enabled: false}}\n"
    )
    c = load_kubelet_config(f)
    assert c.static_pod_path == "/etc/kubernetes/manifests"
    assert c.static_pod_url == "http://127.0.0.1:8080/pods"
    assert c.seconds("sync_frequency") == 30 and c.cpu_cfs_quota is False
    assert c.extra["authentication"] == {"anonymous": {"enabled": False}}


def test_every_bad_field_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        load_kubelet_config(
            {
                **HEAD,
                "syncFrequency": "1 minute",
                "maxPods": "many",
                "cgroupDriver": "cgroupv3",
                "port": 70000,
            }
        )
    paths = sorted(e.path for e in info.value.errors)
    assert paths == ["cgroupDriver", "maxPods", "port", "syncFrequency"]
    text = str(info.value)
    assert 'syncFrequency: Invalid value: "1 minute": time: invalid duration "1 minute"' in text


def test_wrong_kind_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match='kind: Unsupported value: "Pod"'):
        load_kubelet_config({**HEAD, "kind": "Pod"})
    with pytest.raises(ValidationError, match="cannot read"):
        load_kubelet_config(tmp_path / "missing.yaml")


def test_fields_with_acronyms_use_the_kubelets_spelling() -> None:
    # The kubelet's Go JSON tags keep acronyms upper case (QOS, GC, URL, CFS);
    # a file written for a kubelet must set these, not land in ``extra``.
    config = load_kubelet_config(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "cgroupsPerQOS": False,
            "imageGCHighThresholdPercent": 90,
            "imageGCLowThresholdPercent": 70,
            "imageMinimumGCAge": "5m",
            "staticPodURL": "http://127.0.0.1/pods",
            "staticPodURLHeader": {"A": ["b"]},
            "cpuCFSQuota": False,
        }
    )
    assert dict(config.extra) == {}
    assert (
        config.cgroups_per_qos,
        config.image_gc_high_threshold_percent,
        config.image_gc_low_threshold_percent,
        config.seconds("image_minimum_gc_age"),
        config.static_pod_url,
        config.cpu_cfs_quota,
    ) == (False, 90, 70, 300.0, "http://127.0.0.1/pods", False)
    with pytest.raises(ValidationError, match='imageMinimumGCAge: Invalid value: "soon"'):
        load_kubelet_config(
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "imageMinimumGCAge": "soon",
            }
        )


def test_the_api_client_budget_loads_from_a_kubelet_file(tmp_path: Path) -> None:
    # kubeAPIQPS/kubeAPIBurst: the current kubelet's defaults (50 and 100), read
    # under the kubelet's JSON names.
    defaults = load_kubelet_config(HEAD)
    assert (defaults.kube_api_qps, defaults.kube_api_burst) == (50, 100)
    f = tmp_path / "kubelet.yaml"
    f.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "kubeAPIQPS: 20\n"
        "kubeAPIBurst: 40\n"
    )
    c = load_kubelet_config(f)
    assert (c.kube_api_qps, c.kube_api_burst) == (20, 40) and dict(c.extra) == {}
    # Zero passes validation, as in the kubelet (client-go reads it as 5 and 10).
    zero = load_kubelet_config({**HEAD, "kubeAPIQPS": 0, "kubeAPIBurst": 0})
    assert (zero.kube_api_qps, zero.kube_api_burst) == (0, 0)


def test_a_bad_api_client_budget_names_its_field() -> None:
    # The kubelet's validation: neither may be negative; both are int32 fields.
    with pytest.raises(ValidationError) as info:
        load_kubelet_config({**HEAD, "kubeAPIQPS": -1, "kubeAPIBurst": -5})
    assert sorted(e.path for e in info.value.errors) == ["kubeAPIBurst", "kubeAPIQPS"]
    assert "kubeAPIQPS: Invalid value: -1: must not be a negative number" in str(info.value)
    with pytest.raises(ValidationError, match=r"kubeAPIBurst: .*expected an integer"):
        load_kubelet_config({**HEAD, "kubeAPIBurst": "lots"})
