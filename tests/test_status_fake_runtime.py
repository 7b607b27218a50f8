"""Configs -> FakeRuntime -> runtime view -> API status, end to end on a FakeClock."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from kubelet_kit.api import Container, EnvVar, ObjectMeta, Pod, PodSpec
from kubelet_kit.container.interfaces import DNSConfig
from kubelet_kit.container.pods import get_pod_status
from kubelet_kit.podsync.configs import container_config, resolve_env, sandbox_config
from kubelet_kit.status import StatusManager, generate_pod_status
from kubelet_kit.testing import FakeClock, FakeRuntime


def _now(clock: FakeClock) -> dt.datetime:
    return dt.datetime.fromtimestamp(clock.now(), dt.UTC)


async def test_run_once_pod_from_start_to_failed(tmp_path: Path) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    manager = StatusManager(clock)
    app = Container(
        name="app",
        image="busybox:1",
        command=("sh", "-c", "echo $(GREETING) $$(GREETING); sleep 5; exit 3"),
        env=(EnvVar(name="WHO", value="world"), EnvVar(name="GREETING", value="hello $(WHO)")),
    )
    pod = Pod(
        metadata=ObjectMeta(name="job", namespace="default", uid="uid-9"),
        spec=PodSpec(restart_policy="Never", containers=(app,)),
    )
    name = (await runtime.version()).runtime_name

    async def observe() -> None:
        view = await get_pod_status(runtime, pod.uid, pod.name, pod.namespace)
        status = generate_pod_status(
            pod,
            view,
            previous=manager.get_pod_status(pod.uid),
            now=_now(clock),
            host_ip="192.0.2.1",
            runtime_name=name,
        )
        manager.set_pod_status(pod, status)

    await observe()
    first = manager.get_pod_status(pod.uid)
    assert first is not None and first.phase == "Pending"

    # The fake writes the container's log there: the test's own directory.
    sb_config = sandbox_config(pod, attempt=0, pod_logs_dir=str(tmp_path), resolv_conf=DNSConfig())
    sandbox_id = await runtime.run_pod_sandbox(sb_config)
    env = resolve_env(pod, app, pod_ip="10.88.2.1")
    config = container_config(pod, app, restart_count=0, env=env)
    cid = await runtime.create_container(sandbox_id, config, sb_config)
    await runtime.start_container(cid)
    await clock.settle()

    await observe()
    running = manager.get_pod_status(pod.uid)
    assert running is not None and running.phase == "Running"
    assert running.pod_ip.startswith("10.88.")
    (cs,) = running.container_statuses
    assert cs.container_id == f"{name}://{cid}" and cs.state.running is not None
    ready_to_start = running.condition("PodReadyToStartContainers")
    assert ready_to_start is not None and ready_to_start.status == "True"
    assert [line.text for line in runtime.logs(cid)] == ["hello world $(GREETING)"]

    await clock.run_for(6)
    await observe()
    done = manager.get_pod_status(pod.uid)
    assert done is not None and done.phase == "Failed"
    (cs,) = done.container_statuses
    assert cs.state.terminated is not None
    assert (cs.state.terminated.exit_code, cs.state.terminated.reason) == (3, "Error")
    assert done.start_time == first.start_time
