"""``python -m kubelet_kit.cluster``'s pieces: taints from flags, and an agent built
from a KubeletConfiguration joined to the API server stand-in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cluster.run import main, parse_taint, run_cluster_node
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        (
            "dedicated=edge:NoSchedule",
            {"key": "dedicated", "value": "edge", "effect": "NoSchedule"},
        ),
        ("gpu:NoExecute", {"key": "gpu", "effect": "NoExecute"}),
        (
            "example.com/k=a:b:PreferNoSchedule",
            {"key": "example.com/k", "value": "a:b", "effect": "PreferNoSchedule"},
        ),
    ],
)
def test_parse_taint(text: str, taint: dict[str, str]) -> None:
    assert parse_taint(text) == taint


@pytest.mark.parametrize("text", ["gpu", "gpu:Sometimes", ":NoSchedule"])
def test_parse_taint_rejects_and_names_the_text(text: str) -> None:
    with pytest.raises(ConfigurationError, match="register-with-taints"):
        parse_taint(text)


def test_main_without_credentials_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["--node-name", "n"]) == 2


async def test_an_agent_from_a_kubelet_configuration_joins_and_reads_configmaps(
    standin: StandInAPIServer, tmp_path: Path
) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("busybox")
    standin.put(
        "configmaps",
        {"metadata": {"name": "settings", "namespace": "default"}, "data": {"mode": "fast"}},
    )
    pod = pod_object("web")
    # A volume, read from a worker thread. (Env lookups are made on the agent's
    # loop and block it for one request: against this in-process stand-in, which
    # answers on that same loop, they could not finish.)
    pod["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/cfg"}]
    standin.put("pods", pod)
    standin.put(
        "services",
        {
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]},
        },
    )
    # cgroupsPerQOS off: the host's cgroups stay as they are; the node API off, as
    # this test reads the API server only.
    config = KubeletConfiguration(
        node_labels={"pool": "edge"}, cgroups_per_qos=False, port=0, healthz_port=0
    )
    task = asyncio.create_task(
        run_cluster_node(
            standin.kubeconfig(),
            config,
            taints=[parse_taint("edge:NoSchedule")],
            node_name="node-1",
            clock=clock,
            runtime=runtime,
            root_dir=tmp_path,
            pod_logs_dir=tmp_path / "logs",
        )
    )
    try:

        def phase() -> str:
            obj = standin.get("pods", "default", "web") or {}
            return str(obj.get("status", {}).get("phase", ""))

        await eventually(lambda: phase() == "Running", clock=clock, timeout=20, what="web Running")
        await eventually(
            lambda: standin.get("nodes", "", "node-1") is not None,
            clock=clock,
            timeout=20,
            what="node registered",
        )
        node = standin.get("nodes", "", "node-1")
        assert node is not None
        assert node["metadata"]["labels"]["pool"] == "edge"
        assert node["spec"]["taints"] == [{"key": "edge", "effect": "NoSchedule"}]
        uid = standin.get("pods", "default", "web")["metadata"]["uid"]  # type: ignore[index]
        written = tmp_path / "pods" / uid / "volumes" / "kubernetes.io~configmap" / "cfg" / "mode"
        assert written.read_text() == "fast"
        # The API server's services give the container its service-link variables.
        (created,) = runtime.calls_to("create_container")
        env = {kv.key: kv.value for kv in created.args[1].envs}
        assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == (
            "10.96.0.1",
            "443",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_connect_with_a_kubeconfig_file(standin: StandInAPIServer, tmp_path: Path) -> None:
    import yaml
    from kubernetes_asyncio import client as k8s

    from kubelet_kit.cluster import connect

    path = tmp_path / "node.kubeconfig"
    path.write_text(yaml.safe_dump(standin.kubeconfig()))
    api = await connect(path)
    try:
        standin.put("nodes", {"metadata": {"name": "n1"}})
        nodes = await k8s.CoreV1Api(api).list_node()
        assert [n.metadata.name for n in nodes.items] == ["n1"]
    finally:
        await api.close()
    # The kubeconfig's credentials go with the request.
    assert standin.count("GET", "/api/v1/nodes") == 1
    assert standin.authorizations[-1] == "Bearer standin-token"


async def test_connect_names_a_bad_kubeconfig(tmp_path: Path) -> None:
    from kubelet_kit.cluster import connect

    missing = tmp_path / "missing.kubeconfig"
    with pytest.raises(ConfigurationError, match=r"missing\.kubeconfig: no such kubeconfig"):
        await connect(missing)
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(ConfigurationError, match=r"broken\.kubeconfig: "):
        await connect(broken)
