"""The cluster face of the one wiring: ``build_agent`` with a kubeconfig takes the
same parts as the other faces, serves the node API and publishes its port."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

import aiohttp
import pytest

from kubelet_kit.agent import ClusterOptions, build_agent
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.pleg import GenericPLEG
from kubelet_kit.testing import FakeRuntime

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for the cert")
async def test_cluster_mode_serves_the_node_api_and_publishes_its_port(
    standin: StandInAPIServer, tmp_path: Path
) -> None:
    runtime = FakeRuntime()
    runtime.add_image("busybox")
    pleg = GenericPLEG(runtime, runtime.clock)
    port = free_port()
    config = KubeletConfiguration(
        cgroups_per_qos=False, address="127.0.0.1", port=port, healthz_port=0
    )
    standin.put("pods", pod_object("web", node="node-1"))
    agent = await build_agent(
        config,
        cluster=ClusterOptions(kubeconfig=standin.kubeconfig()),
        node_ip="127.0.0.1",
        runtime=runtime,
        pleg=pleg,
        node_name="node-1",
        root_dir=tmp_path / "root",
        pod_logs_dir=tmp_path / "logs",
    )
    assert agent.kubelet.pleg is pleg
    assert agent.cluster is not None and agent.server is not None
    async with agent:
        await eventually(
            lambda: standin.get("nodes", "", "node-1") is not None,
            timeout=20,
            what="node registered",
        )
        node = standin.get("nodes", "", "node-1")
        assert node is not None
        assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port
        assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]

        def phase() -> str:
            obj = standin.get("pods", "default", "web") or {}
            return str(obj.get("status", {}).get("phase", ""))

        await eventually(lambda: phase() == "Running", timeout=20, what="web Running")
        assert (await runtime.list_containers())[0].labels["io.kubernetes.pod.name"] == "web"
        # The published port answers with the node API, behind its authentication.
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{port}/pods", ssl=False) as resp,
        ):
            assert resp.status == 401
    # Stopped: the port is closed again.
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
