"""The Kubelet composer on fakes: sources, admission, PLEG, housekeeping, adoption.

Every test runs the real composer (pod workers, PLEG, pod sync, status) over a
FakeRuntime on a FakeClock, through KubeletEnv: minutes pass in milliseconds.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from kubelet_kit.cm import StubContainerManager
from kubelet_kit.container import (
    ContainerConfig,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
    labels,
)
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.testing.fake_runtime import FakeRuntime


def manifest(
    name: str, *, command: str = "sleep infinity", restart: str = "Always", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", command]}],
            **spec,
        },
    }


async def no_containers(env: KubeletEnv, uid: str) -> bool:
    return await env.running_containers(uid) == []


def leftover_sandbox_config(name: str) -> PodSandboxConfig:
    """The sandbox config of pod ``name`` (uid ``uid-NAME``) as an earlier agent made it."""
    meta = PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}")
    pod_labels = {
        labels.POD_NAME: name,
        labels.POD_NAMESPACE: "default",
        labels.POD_UID: f"uid-{name}",
    }
    return PodSandboxConfig(metadata=meta, labels=pod_labels)


async def start_leftover(runtime: FakeRuntime, name: str, *command: str) -> tuple[str, str]:
    """Start pod ``name`` in ``runtime`` as an earlier agent left it: its sandbox and a
    container ``c`` of busybox running ``command``. The sandbox's id and the container's."""
    sandbox_config = leftover_sandbox_config(name)
    sandbox = await runtime.run_pod_sandbox(sandbox_config)
    cid = await runtime.create_container(
        sandbox,
        ContainerConfig(
            metadata=ContainerMetadata("c"),
            image=ImageSpec("busybox"),
            command=command,
            labels={**sandbox_config.labels, labels.CONTAINER_NAME: "c"},
        ),
        sandbox_config,
    )
    await runtime.start_container(cid)
    return sandbox, cid


async def test_a_pod_runs_and_its_status_is_published() -> None:
    async with KubeletEnv() as env:
        updates = env.kubelet.subscribe()
        env.add_pod(manifest("web"))
        await env.wait_for(lambda: env.phase("web") == "Running", what="web Running")
        status = env.status("web")
        assert status.container_statuses[0].state.running is not None
        assert env.status("web").condition("Ready") is not None
        pod, _published = await anext(updates)
        assert pod.metadata.uid == "uid-web"
        assert env.kubelet.pod_statuses()["uid-web"].phase == "Running"


async def test_a_completed_job_succeeds_and_is_not_restarted() -> None:
    async with KubeletEnv() as env:
        env.add_pod(manifest("job", command="echo done; exit 0", restart="Never"))
        await env.wait_for(lambda: env.phase("job") == "Succeeded", what="job Succeeded")
        starts = len(env.runtime.calls_to("start_container"))
        await env.sleep(120)
        assert len(env.runtime.calls_to("start_container")) == starts
        assert env.status("job").container_statuses[0].state.terminated.reason == "Completed"


async def test_a_refused_pod_fails_and_the_others_keep_running() -> None:
    async with KubeletEnv(container_manager=StubContainerManager(max_pods=1)) as env:
        env.add_pod(manifest("first"))
        await env.wait_for(lambda: env.phase("first") == "Running")
        env.add_pod(manifest("second"))
        await env.wait_for(lambda: env.phase("second") == "Failed")
        status = env.status("second")
        assert status.reason == "OutOfpods"
        assert status.message.startswith("Pod was rejected: ")
        assert env.phase("first") == "Running"
        assert await env.running_containers("uid-second") == []


async def test_graceful_deletion_stops_the_containers() -> None:
    async with KubeletEnv() as env:
        env.add_pod(manifest("web"))
        await env.wait_for(lambda: env.phase("web") == "Running")
        env.delete_pod("web", grace_period_seconds=3)
        await env.wait_for(lambda: no_containers(env, "uid-web"), what="containers stopped")
        stops = env.runtime.calls_to("stop_container")
        assert stops and all(call.args[1] <= 3 for call in stops)


async def test_a_pod_removed_from_its_source_is_stopped_and_forgotten() -> None:
    async with KubeletEnv() as env:
        env.add_pod(manifest("web"))
        await env.wait_for(lambda: env.phase("web") == "Running")
        env.remove_pod("web")
        await env.wait_for(lambda: no_containers(env, "uid-web"), what="stopped")
        await env.wait_for(
            lambda: env.kubelet.workers.phase("uid-web") is None,
            what="worker forgotten by housekeeping",
        )


async def test_orphaned_runtime_pods_are_stopped_by_housekeeping() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox"])
    await start_leftover(runtime, "ghost", "sleep", "infinity")
    async with KubeletEnv(clock=clock, runtime=runtime) as env:
        await env.wait_for(lambda: no_containers(env, "uid-ghost"), what="orphan stopped")


async def test_a_restarted_agent_adopts_running_containers() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    async with KubeletEnv(clock=clock, runtime=runtime) as env:
        env.add_pod(manifest("web"))
        await env.wait_for(lambda: env.phase("web") == "Running")
        started = len(runtime.calls_to("start_container"))
        sandboxes = len(runtime.calls_to("run_pod_sandbox"))
    # The first agent is gone; its containers still run in the runtime.
    assert await env.running_containers("uid-web") == ["main"]
    async with KubeletEnv(clock=clock, runtime=runtime) as env2:
        env2.add_pod(manifest("web"))
        await env2.wait_for(lambda: env2.phase("web") == "Running")
        await env2.sleep(30)
        assert len(runtime.calls_to("start_container")) == started
        assert len(runtime.calls_to("run_pod_sandbox")) == sandboxes
        assert env2.status("web").container_statuses[0].restart_count == 0


async def test_kill_pod_marks_the_pod_evicted() -> None:
    async with KubeletEnv() as env:
        pod = env.add_pod(manifest("victim"))
        await env.wait_for(lambda: env.phase("victim") == "Running")
        stored = next(p for p in env.kubelet.pods() if p.metadata.uid == pod.metadata.uid)
        kill = asyncio.ensure_future(
            env.kubelet.kill_pod(stored, 0, "Evicted", "The node was low on resource: memory. ")
        )
        await env.wait_for(kill.done, what="kill_pod returned")
        status = env.status("victim")
        assert (status.phase, status.reason) == ("Failed", "Evicted")
        assert await env.running_containers("uid-victim") == []


def test_kubelet_builds_from_a_configuration(tmp_path: Any) -> None:
    from kubelet_kit.api.kubeletconfig import load_kubelet_config
    from kubelet_kit.config import FileSource, HTTPSource

    config = load_kubelet_config(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "staticPodPath": str(tmp_path),
            "staticPodURL": "http://127.0.0.1:1/pods",
            "fileCheckFrequency": "5s",
            "syncFrequency": "30s",
            "maxPods": 7,
        }
    )
    kubelet = Kubelet.from_config(config, node_name="n1", root_dir=tmp_path / "state")
    kinds = {type(s): s for s in kubelet.sources}
    assert kinds[FileSource].check_frequency == 5.0
    assert FileSource in kinds and HTTPSource in kinds
    assert kubelet.sync_frequency == 30.0
    assert kubelet.container_manager.node_capacity()["pods"].value() == 7


async def test_crash_loop_restarts_follow_the_kubelets_back_off_timeline() -> None:
    """The first restart comes at the next PLEG relist (1 s); then the back-off
    doubles from 10 s: starts at 0, 1, 11, 31, 71, 151 s."""
    # Container GC off: every start is read back from the runtime's containers.
    async with KubeletEnv(container_gc_period=float("inf")) as env:
        env.add_pod(manifest("crasher", command="exit 1"))
        await env.sleep(200)
        containers = await env.runtime.list_containers()
        starts = sorted([(await env.runtime.container_status(c.id)).started_at for c in containers])
        gaps = [round(b - a) for a, b in itertools.pairwise(starts)]
        assert gaps[:5] == [1, 10, 20, 40, 80], starts


async def test_a_user_written_pleg_plugs_into_the_agent() -> None:
    """examples/custom_pleg.py: pod changes announced on a bus instead of relisted."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "custom_pleg.py"
    spec = importlib.util.spec_from_file_location("custom_pleg", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    clock = FakeClock()
    runtime = FakeRuntime(clock)
    bus: asyncio.Queue[str] = asyncio.Queue()
    async with KubeletEnv(
        clock=clock, runtime=runtime, pleg=module.BusPLEG(runtime, bus, clock)
    ) as env:
        env.add_pod(manifest("job", command="sleep 5; exit 3", restart="Never"))
        await env.wait_for(lambda: env.phase("job") == "Running")
        await env.sleep(10)
        # The container exited at 5 s, but nobody announced it: no relisting here.
        assert env.phase("job") == "Running"
        await bus.put("uid-job")
        await env.wait_for(
            lambda: env.phase("job") == "Failed",
            timeout=5,
            what="the announced change seen at once",
        )


def probed(name: str) -> dict[str, Any]:
    pod = manifest(name, command="touch /tmp/healthy; touch /tmp/ready; sleep infinity")
    pod["spec"]["containers"][0]["livenessProbe"] = {
        "exec": {"command": ["cat", "/tmp/healthy"]},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    pod["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["cat", "/tmp/ready"]},
        "periodSeconds": 5,
    }
    return pod


async def running_id(env: KubeletEnv, uid: str) -> str:
    (info,) = await env.runtime.list_containers(
        ContainerFilter(state=ContainerState.RUNNING, label_selector={labels.POD_UID: uid})
    )
    return info.id


async def test_readiness_probe_flips_the_ready_condition_both_ways() -> None:
    async with KubeletEnv() as env:
        env.add_pod(probed("web"))

        def ready() -> str:
            condition = env.status("web").condition("Ready")
            return condition.status if condition else ""

        await env.wait_for(lambda: ready() == "True", what="Ready")
        env.runtime.remove_file(await running_id(env, "uid-web"), "/tmp/ready")
        await env.wait_for(lambda: ready() == "False", timeout=30, what="not Ready")
        assert env.phase("web") == "Running"
        env.runtime.write_file(await running_id(env, "uid-web"), "/tmp/ready", "")
        await env.wait_for(lambda: ready() == "True", timeout=30, what="Ready again")


async def test_a_failing_liveness_probe_restarts_the_container() -> None:
    async with KubeletEnv() as env:
        env.add_pod(probed("web"))
        await env.wait_for(lambda: env.phase("web") == "Running")
        first = await running_id(env, "uid-web")
        await env.sleep(30)
        assert await running_id(env, "uid-web") == first  # healthy: left alone
        env.runtime.remove_file(first, "/tmp/healthy")
        took = await env.wait_for(
            lambda: env.status("web").container_statuses[0].restart_count == 1,
            timeout=120,
            what="restart after three failures",
        )
        assert took <= 45  # three failures 10 s apart, then the kill and restart
        assert await running_id(env, "uid-web") != first
        killing = [e for e in env.kubelet.events.events() if e.reason == "Killing"]
        assert any("failed liveness probe, will be restarted" in e.message for e in killing)


async def test_a_completed_job_is_not_run_again_after_an_agent_restart() -> None:
    """Its exited container stays in the runtime while the source still wants the
    pod, so the next agent sees that the job finished."""
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    async with KubeletEnv(clock=clock, runtime=runtime) as env:
        env.add_pod(manifest("job", command="echo done; exit 0", restart="Never"))
        await env.wait_for(lambda: env.phase("job") == "Succeeded")
        await env.sleep(5)
        starts = len(runtime.calls_to("start_container"))
    async with KubeletEnv(clock=clock, runtime=runtime) as env2:
        env2.add_pod(manifest("job", command="echo done; exit 0", restart="Never"))
        await env2.wait_for(lambda: env2.phase("job") == "Succeeded")
        await env2.sleep(30)
        assert len(runtime.calls_to("start_container")) == starts
        assert env2.status("job").container_statuses[0].restart_count == 0
        # Once no source wants it, housekeeping removes what was kept.
        env2.remove_pod("job")
        await env2.wait_for(
            lambda: runtime.calls_to("remove_pod_sandbox") != [], timeout=30, what="sandbox removed"
        )
        assert await runtime.list_containers() == []


def test_from_config_runs_pods_without_cgroups_when_it_cannot_make_them(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.cm import CgroupContainerManager
    from kubelet_kit.cm import manager as cm_manager

    monkeypatch.setattr(cm_manager, "cgroups_unavailable", lambda: "making cgroups needs root")
    with caplog.at_level("WARNING", logger="kubelet_kit"):
        kubelet = Kubelet.from_config(
            KubeletConfiguration(), node_name="n1", root_dir=tmp_path / "state"
        )
    cm = kubelet.container_manager
    assert isinstance(cm, CgroupContainerManager) and not cm.config.cgroups_per_qos
    assert "cgroupsPerQOS: making cgroups needs root: pods run without pod cgroups" in caplog.text

    caplog.clear()
    with caplog.at_level("WARNING", logger="kubelet_kit"):
        off = Kubelet.from_config(
            KubeletConfiguration(cgroups_per_qos=False), node_name="n1", root_dir=tmp_path / "state"
        )
    assert not off.container_manager.config.cgroups_per_qos  # type: ignore[attr-defined]
    assert "cgroupsPerQOS" not in caplog.text


async def test_from_config_measures_pods_for_eviction_by_their_disk_volumes(
    tmp_path: Any,
) -> None:
    from kubelet_kit.api import load_pod
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.eviction.manager import ThresholdEvictionManager
    from kubelet_kit.testing import FakeRuntime

    root = tmp_path / "state"
    kubelet = Kubelet.from_config(
        KubeletConfiguration(cgroups_per_qos=False),
        node_name="n1",
        root_dir=root,
        runtime=FakeRuntime(),
    )
    pod = load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "ram", "emptyDir": {"medium": "Memory"}},
                    {"name": "host", "hostPath": {"path": "/"}},
                ],
            },
        }
    )
    scratch = root / "pods/u1/volumes/kubernetes.io~empty-dir/scratch"
    scratch.mkdir(parents=True)
    (scratch / "blob").write_bytes(b"x" * (256 << 10))
    eviction = kubelet.eviction_manager
    assert isinstance(eviction, ThresholdEvictionManager)
    (usage,) = (await eviction.stats.summary([pod])).pods
    # The emptyDir on disk counts; the host's own files and memory-backed volumes do not.
    assert set(usage.volumes) == {"scratch"}
    assert usage.volumes["scratch"].used_bytes >= 256 << 10


def test_from_config_measures_pods_by_their_cgroups_when_it_makes_them(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.cm import manager as cm_manager
    from kubelet_kit.eviction.host_stats import HostStatsProvider
    from kubelet_kit.eviction.manager import ThresholdEvictionManager
    from kubelet_kit.testing import FakeRuntime

    monkeypatch.setattr(cm_manager, "cgroups_unavailable", lambda: None)
    monkeypatch.setattr(cm_manager, "memory_hierarchy", lambda: "/mem")
    kubelet = Kubelet.from_config(
        KubeletConfiguration(cgroup_root="/edge"),
        node_name="n1",
        root_dir=tmp_path / "state",
        runtime=FakeRuntime(),
    )
    eviction = kubelet.eviction_manager
    assert isinstance(eviction, ThresholdEvictionManager)
    stats = eviction.stats
    assert isinstance(stats, HostStatsProvider)
    assert str(stats.pods_cgroup) == "/mem/edge/kubepods"
    assert str(stats.memory_cgroup_root) == "/mem"
    from kubelet_kit.api import load_pod

    pod = load_pod(manifest("p", command="sleep 1"))
    cgroup = stats.pod_cgroup(pod) if stats.pod_cgroup is not None else None
    assert cgroup is not None and cgroup.startswith("/mem/edge/kubepods/")


@pytest.mark.parametrize("step", ["run_pod_sandbox", "create_container", "start_container"])
async def test_a_pod_removed_while_being_made_is_only_stopped(step: str) -> None:
    # The kubelet's rule: a pod told to terminate is never started again. The call
    # in flight when the removal comes is let finish (abandoning it would leave a
    # half-made sandbox or container: containerd kills a shim it is starting), and
    # then the termination stops what it made; nothing else is created.
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.set_latency(step, 3.0)
    async with KubeletEnv(clock=clock, runtime=runtime, step=0.5) as env:
        env.add_pod(manifest("web", restart="Always"))
        await env.wait_for(lambda: bool(runtime.calls_to(step)), what=f"{step} sent")
        env.remove_pod("web")
        await env.wait_for(
            lambda: env.kubelet.workers.phase("uid-web") is None,
            what="pod terminated and forgotten",
        )
        assert len(runtime.calls_to("run_pod_sandbox")) == 1
        made = runtime.calls_to("create_container")
        assert len(made) <= 1  # the one in flight at most: never a second container
        started = runtime.calls_to("start_container")
        assert len(started) == (1 if step == "start_container" else 0)
        if step == "start_container":
            # Started to the end, then stopped, not left half-started.
            [cid] = [call.args[0] for call in started]
            assert [call.args[0] for call in runtime.calls_to("stop_container")] == [cid]
        sandboxes = await runtime.list_pod_sandboxes()
        assert all(s.state.name == "NOTREADY" for s in sandboxes), sandboxes
        reasons = [e.reason for e in env.kubelet.events.events("uid-web")]
        assert "Failed" not in reasons, env.kubelet.events.events("uid-web")


async def test_wait_started_returns_once_the_loops_run_and_blocks_again_after_stop() -> None:
    from kubelet_kit.testing.env import stub_parts

    clock = FakeClock()
    kubelet = Kubelet(**stub_parts(runtime=FakeRuntime(clock), clock=clock, host_ip="10.0.0.1"))
    waiter = asyncio.create_task(kubelet.wait_started())
    await asyncio.sleep(0)
    assert not waiter.done()  # not running yet
    task = asyncio.create_task(kubelet.run())
    await asyncio.wait_for(waiter, 5)
    await asyncio.wait_for(kubelet.wait_started(), 1)  # at once while it runs
    kubelet.stop()
    await task
    again = asyncio.create_task(kubelet.wait_started())
    await asyncio.sleep(0.01)
    assert not again.done()
    again.cancel()
