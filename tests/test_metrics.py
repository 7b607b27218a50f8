"""Agent metrics: the instrumented Runtime's counts, errors and durations, the
running gauges and pod start duration from a running agent, and /metrics of a
running agent checked by ``promtool check metrics``."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from kubelet_kit.container import ImageSpec
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.node.metrics import KubeletMetrics
from kubelet_kit.prober import ReferenceProbeManager
from kubelet_kit.server import KubeletServer
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.env import KubeletEnv

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "command": ["sh", "-c", "sleep 3600"],
                "readinessProbe": {"exec": {"command": ["echo", "ok"]}, "periodSeconds": 5},
            }
        ]
    },
}


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_instrumented_runtime_counts_calls_errors_and_clock_durations() -> None:
    clock = FakeClock()
    fake = FakeRuntime(clock)
    fake.add_image("busybox")
    fake.pull_latency = 2.0
    metrics = KubeletMetrics()
    runtime = InstrumentedRuntime(fake, metrics, clock)
    r = metrics.registry

    await runtime.version()
    await runtime.list_containers()
    await runtime.list_containers()
    pull = asyncio.create_task(runtime.pull_image(ImageSpec("busybox")))
    await clock.run_for(5)
    await pull
    assert sample(r, "kubelet_runtime_operations_total", operation_type="list_containers") == 2
    assert sample(r, "kubelet_runtime_operations_total", operation_type="version") == 1
    assert sample(
        r, "kubelet_runtime_operations_duration_seconds_sum", operation_type="pull_image"
    ) == pytest.approx(2.0)
    # The kubelet's buckets are 0.005 * 2.5**i: 2 s falls between 1.22 s and 3.05 s.
    assert (
        sample(
            r,
            "kubelet_runtime_operations_duration_seconds_bucket",
            operation_type="pull_image",
            le="1.220703125",
        )
        == 0
    )
    assert (
        sample(
            r,
            "kubelet_runtime_operations_duration_seconds_bucket",
            operation_type="pull_image",
            le="3.0517578125",
        )
        == 1
    )

    fake.inject_error("list_pod_sandboxes", RuntimeUnavailableError("down"))
    with pytest.raises(RuntimeUnavailableError):
        await runtime.list_pod_sandboxes()
    assert (
        sample(r, "kubelet_runtime_operations_errors_total", operation_type="list_podsandbox") == 1
    )
    assert sample(r, "kubelet_runtime_operations_total", operation_type="list_podsandbox") == 1
    assert (
        sample(r, "kubelet_runtime_operations_errors_total", operation_type="list_containers") == 0
    )


def test_one_metrics_object_per_registry() -> None:
    registry = CollectorRegistry()
    a = KubeletMetrics.for_registry(registry, node_name="n1")
    assert KubeletMetrics.for_registry(registry) is a
    direct = KubeletMetrics(CollectorRegistry())
    assert KubeletMetrics.for_registry(direct.registry) is direct
    assert sample(registry, "kubelet_node_name", node="n1") == 1


async def _agent_with_server(clock: FakeClock) -> tuple[KubeletEnv, KubeletServer]:
    fake = FakeRuntime(clock)
    env = KubeletEnv(clock=clock, runtime=fake, probe_manager=ReferenceProbeManager(fake, clock))
    kubelet = env.kubelet
    # The wiring root wraps every runtime in the metrics wrapper.
    assert isinstance(kubelet.runtime, InstrumentedRuntime)
    assert kubelet.runtime.inner is fake
    server = KubeletServer(kubelet, address="127.0.0.1", port=None, read_only_port=0)
    return env, server


async def _scrape(server: KubeletServer, path: str) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.read_only_port}{path}") as resp,
    ):
        assert resp.status == 200
        return await resp.text()


async def test_running_agent_metrics() -> None:
    clock = FakeClock()
    env, server = await _agent_with_server(clock)
    async with env, server:
        env.add_pod(POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        await env.sleep(20)
        text = await _scrape(server, "/metrics")
        probes = await _scrape(server, "/metrics/probes")
    assert "kubelet_running_pods 1.0" in text
    assert 'kubelet_running_containers{container_state="running"} 1.0' in text
    assert "kubelet_pod_start_duration_seconds_count 1.0" in text
    assert 'kubelet_pod_worker_duration_seconds_count{operation="create"} 1.0' in text
    assert 'kubelet_pod_worker_duration_seconds_count{operation="sync"}' in text
    assert 'kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1.0' in text
    assert 'kubelet_runtime_operations_total{operation_type="start_container"} 1.0' in text
    assert "kubelet_pleg_relist_duration_seconds_count" in text
    # The kubelet's name and help, without the _total prometheus_client would add.
    assert "# HELP kubelet_pleg_discard_events The number of discard events in PLEG." in text
    assert "\nkubelet_pleg_discard_events 0.0\n" in text
    assert (
        'prober_probe_total{container="app",namespace="default",pod="web",'
        'pod_uid="uid-web",probe_type="Readiness",result="successful"}'
    ) in probes


def _promtool() -> str | None:
    return shutil.which("promtool")


async def test_metrics_pass_promtool(require_real: Callable[[bool, str], None]) -> None:
    promtool = _promtool()
    require_real(promtool is not None, "promtool (Debian package prometheus)")
    assert promtool is not None
    clock = FakeClock()
    env, server = await _agent_with_server(clock)
    async with env, server:
        env.add_pod(POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        await env.sleep(20)
        pages = {
            path: await _scrape(server, path)
            for path in ("/metrics", "/metrics/probes", "/metrics/resource")
        }
    for path, text in pages.items():
        assert text.strip(), path
        proc = subprocess.run(
            [promtool, "check", "metrics"],
            input=text,
            text=True,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, f"{path}: {proc.stdout}{proc.stderr}"
        assert proc.stdout.strip() == "" and proc.stderr.strip() == "", (
            path,
            proc.stdout,
            proc.stderr,
        )
