"""The installed pytest plugin, in a project of its own: tests that do not use the
plugin are left alone. (The README's node-policy test runs, in a fresh project with
the checkout pip-installed, with every other documented example: tests/test_docs_run.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    # A project of its own: no pytest configuration, no conftest, default
    # (strict) pytest-asyncio mode.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_tests_without_the_plugins_fixtures_are_left_to_the_project(tmp_path: Path) -> None:
    (tmp_path / "test_mixed.py").write_text(
        "async def test_plain_async():\n"
        "    pass\n"
        "\n"
        "def test_sync_with_a_fixture(fake_clock):\n"
        "    fake_clock.advance(5)\n"
        "    assert fake_clock.monotonic() >= 5\n"
        "\n"
        "async def test_async_with_a_fixture(fake_runtime):\n"
        "    assert await fake_runtime.list_containers() == []\n"
    )
    result = run_pytest(tmp_path)
    out = result.stdout
    assert "PASSED test_mixed.py::test_sync_with_a_fixture" in out, out
    assert "PASSED test_mixed.py::test_async_with_a_fixture" in out, out
    # Not the plugin's to run: pytest says so, as it would without kubelet-kit.
    assert "FAILED test_mixed.py::test_plain_async" in out, out
    assert "async def functions are not natively supported" in out, out


POLICY_TESTS = """
import asyncio

from kubelet_kit.api import Pod


def test_the_builder_and_the_fakes_in_a_sync_test(
    pod, fake_clock, fake_runtime, fake_stats, fake_pleg, fake_probes,
    fake_eviction, fake_cm, fake_volumes, fake_events,
):
    web = pod("web", image="nginx", requests={"cpu": "100m"}, host_port=8080)
    assert isinstance(web, Pod)
    assert web.spec.containers[0].ports[0].host_port == 8080
    for fake in (fake_runtime, fake_pleg, fake_probes, fake_eviction, fake_volumes, fake_events):
        assert fake.clock is fake_clock, fake
    assert fake_eviction.stats is fake_stats
    assert fake_cm.admit_pod(web, []).admit
    fake_clock.advance(5)


async def test_advance_without_a_node_runs_the_clock(advance, fake_clock):
    start = fake_clock.monotonic()
    woke = []

    async def sleeper():
        await fake_clock.sleep(30)
        woke.append(fake_clock.monotonic() - start)

    task = asyncio.create_task(sleeper())
    await advance(60)
    assert task.done() and woke == [30]
    assert fake_clock.monotonic() - start == 60


async def test_crash_loop_backs_off(node, pod, advance):
    node.add_pod(pod("crasher", command=["sh", "-c", "exit 1"]))
    await advance(300)
    status = node.status("crasher").container_statuses[0]
    assert status.state.waiting.reason == "CrashLoopBackOff"
    # The kubelet's back-off: restarted at once, then after 10, 20, 40 and 80 s;
    # now waiting 160 s.
    assert status.restart_count == 5
    assert status.state.waiting.message.startswith(
        "back-off 2m40s restarting failed container=crasher pod=crasher_default("
    )


async def test_a_failing_liveness_probe_restarts_the_container(node, pod, advance):
    node.add_pod(pod("web", liveness=["cat", "/tmp/healthy"]))
    # Probed every 10 s: two failures are not yet the three that restart it.
    await advance(15)
    assert node.status("web").container_statuses[0].restart_count == 0
    await advance(30)
    assert node.status("web").container_statuses[0].restart_count == 1
    reasons = [e.reason for e in node.kubelet.events.events()]
    assert "Unhealthy" in reasons and "Killing" in reasons


async def test_node_is_kubelet_env_on_the_tests_clock(
    node, kubelet_env, fake_clock, fake_runtime, advance
):
    assert node is kubelet_env
    assert node.clock is fake_clock and node.runtime is fake_runtime
    start = fake_clock.monotonic()
    await advance(90)
    assert fake_clock.monotonic() - start == 90


async def test_the_node_is_built_with_the_fakes_the_test_asks_for(
    node, pod, advance, fake_pleg, fake_probes, fake_eviction, fake_cm, fake_volumes, fake_events
):
    agent = node.kubelet
    assert agent.pleg is fake_pleg and agent.probe_manager is fake_probes
    assert agent.eviction_manager is fake_eviction and agent.container_manager is fake_cm
    assert agent.volume_manager is fake_volumes and agent.events is fake_events
    hog = node.add_pod(pod("hog"))
    await advance(5)
    assert node.phase("hog") == "Running"
    assert hog.metadata.uid in fake_cm.pod_cgroups
    assert fake_events.reasons(hog)[:2] == ["Pulling", "Pulled"]
    fake_eviction.set_pressure("MemoryPressure")
    await advance(10)
    assert fake_eviction.evicted == ["hog"]
    assert node.phase("hog") == "Failed"
"""


def test_the_fixtures_in_sync_and_async_tests_of_a_project_without_configuration(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_policy.py").write_text(POLICY_TESTS)
    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in re.findall(r"^(?:async )?def (test_\w+)", POLICY_TESTS, re.M):
        assert f"PASSED test_policy.py::{name}" in result.stdout, result.stdout


def test_a_projects_own_fixture_of_the_same_name_is_left_to_the_project(tmp_path: Path) -> None:
    # Common names (node, pod) may be the project's: its tests are not marked.
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "\n"
        "@pytest.fixture\n"
        "def node():\n"
        "    return 'my node'\n"
        "\n"
        "@pytest.fixture\n"
        "def pod():\n"
        "    return 'my pod'\n"
    )
    (tmp_path / "test_own.py").write_text(
        "import pytest\n"
        "\n"
        "async def test_own_node(node):\n"
        "    pass\n"
        "\n"
        "@pytest.mark.parametrize('advance', [1])\n"
        "async def test_parametrized_name(advance):\n"
        "    pass\n"
        "\n"
        "def test_own_pod(pod):\n"
        "    assert pod == 'my pod'\n"
    )
    result = run_pytest(tmp_path)
    out = result.stdout
    assert "PASSED test_own.py::test_own_pod" in out, out
    assert "FAILED test_own.py::test_own_node" in out, out
    assert "FAILED test_own.py::test_parametrized_name[1]" in out, out
    assert out.count("async def functions are not natively supported") >= 2, out


def test_make_pod_writes_the_manifest_a_user_would() -> None:
    from kubelet_kit.testing import KubeletEnv, make_pod

    web = make_pod(
        "web",
        image="nginx",
        command=["nginx", "-g", "daemon off;"],
        restart_policy="OnFailure",
        liveness={"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 5},
        readiness=["cat", "/ready"],
        requests={"cpu": "100m"},
        limits={"memory": "128Mi"},
        host_port=8080,
        container_port=80,
        env={"MODE": "prod"},
        labels={"app": "web"},
        container={"workingDir": "/srv"},
        spec={"hostname": "web-0"},
    )
    [c] = web.spec.containers
    assert (web.metadata.name, web.metadata.namespace, c.name) == ("web", "default", "web")
    assert web.spec.restart_policy == "OnFailure" and web.spec.hostname == "web-0"
    assert c.command == ("nginx", "-g", "daemon off;") and c.working_dir == "/srv"
    assert c.liveness_probe is not None and c.liveness_probe.period_seconds == 5
    assert c.readiness_probe is not None and c.readiness_probe.exec is not None
    assert c.readiness_probe.exec.command == ("cat", "/ready")
    assert c.readiness_probe.failure_threshold == 3  # Kubernetes' default
    assert str(c.resources.requests["memory"]) == "128Mi"  # the request a limit implies
    assert (c.ports[0].container_port, c.ports[0].host_port) == (80, 8080)
    assert dict(web.metadata.labels) == {"app": "web"}
    # The uid a manifest of the same pod gets through KubeletEnv.add_pod.
    env = KubeletEnv()
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "crasher"},
        "spec": {"containers": [{"name": "crasher", "image": "busybox"}]},
    }
    assert env.add_pod(manifest).metadata.uid == make_pod("crasher").metadata.uid
    assert make_pod("x", uid="u-1").metadata.uid == "u-1"


def test_make_pod_refuses_a_command_given_as_one_string() -> None:
    import pytest

    from kubelet_kit.testing import make_pod

    with pytest.raises(TypeError, match="list of words"):
        make_pod("x", command="sh -c 'exit 1'")
    with pytest.raises(TypeError, match="livenessProbe"):
        make_pod("x", liveness="cat /tmp/healthy")


async def test_the_agent_records_its_events_in_the_recorder_it_is_given() -> None:
    from kubelet_kit.testing import FakeClock, FakeEventRecorder, KubeletEnv, make_pod

    clock = FakeClock()
    events = FakeEventRecorder(clock)
    async with KubeletEnv(clock=clock, events=events) as env:
        web = env.add_pod(make_pod("web"))
        await env.sleep(5)
    assert env.kubelet.events is events
    assert events.reasons(web)[:4] == ["Pulling", "Pulled", "Created", "Started"]
