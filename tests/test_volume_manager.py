"""ReconcilingVolumeManager on a FakeClock: desired/actual state, waits, refresh,
orphans, container mounts and metrics. File work runs inline, so each pass is
deterministic; the file system is real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import kubelet_kit.volume as volume_pkg
from kubelet_kit.api import Pod
from kubelet_kit.container import Mount, MountPropagation
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.volume import (
    ReconcilingVolumeManager,
    StaticConfigSource,
    StubVolumeManager,
    VolumeManager,
)


async def inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def make_pod(
    uid: str = "u1",
    labels: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    **container: Any,
) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "name": f"pod-{uid}",
                "namespace": "ns",
                "uid": uid,
                "labels": labels or {"v": "1"},
            },
            "spec": {
                "volumes": volumes
                if volumes is not None
                else [
                    {"name": "cfg", "configMap": {"name": "cm"}},
                    {"name": "scratch", "emptyDir": {}},
                    {
                        "name": "info",
                        "downwardAPI": {
                            "items": [
                                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                            ]
                        },
                    },
                ],
                "containers": [
                    {"name": "app", "image": "busybox", "volumeMounts": mounts or [], **container}
                ],
            },
        }
    )


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = FakeClock()
        self.source = StaticConfigSource()
        self.source.set_config_map("ns", "cm", {"key": "v1"})
        self.manager = ReconcilingVolumeManager(
            root,
            config_source=self.source,
            clock=self.clock,
            offload=inline,
            may_mount=False,
            refresh_period=60,
            orphan_grace_period=30,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.manager.run())

    def vol(self, uid: str, plugin: str, name: str) -> Path:
        return self.root / "pods" / uid / "volumes" / f"kubernetes.io~{plugin}" / name


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e = Env(tmp_path)
    yield e
    await e.manager.stop()
    if e.task is not None:
        await asyncio.wait_for(e.task, 5)


def test_is_a_volume_manager(tmp_path: Path) -> None:
    assert isinstance(ReconcilingVolumeManager(tmp_path), VolumeManager)
    assert isinstance(StubVolumeManager(), VolumeManager)


def test_all_names_what_the_package_exports() -> None:
    for name in volume_pkg.__all__:
        assert getattr(volume_pkg, name).__module__.startswith("kubelet_kit.volume")


async def test_mounts_then_unmounts_and_cleans_up(env: Env) -> None:
    env.start()
    pod = make_pod()
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    assert (env.vol("u1", "configmap", "cfg") / "key").read_text() == "v1"
    assert env.vol("u1", "empty-dir", "scratch").is_dir()
    assert (env.vol("u1", "downward-api", "info") / "labels").read_text() == 'v="1"'
    assert not env.manager.errors
    env.manager.remove_pod(pod)
    await env.manager.wait_for_unmount(pod, 10)
    assert not (env.root / "pods" / "u1").exists()
    assert env.manager.actual.volumes == {}


async def test_a_pod_without_volumes_needs_no_wait(env: Env) -> None:
    pod = make_pod(volumes=[])
    env.manager.add_pod(pod)  # run() not even started: nothing to wait for
    await env.manager.wait_for_mounts(pod, 0)


async def test_wait_for_mounts_times_out_naming_the_volume_then_recovers(env: Env) -> None:
    env.start()
    pod = make_pod(
        volumes=[
            {"name": "cfg", "configMap": {"name": "later"}},
            {"name": "scratch", "emptyDir": {}},
        ]
    )
    env.manager.add_pod(pod)
    waiter = asyncio.create_task(env.manager.wait_for_mounts(pod, 5))
    await env.clock.settle()
    assert not waiter.done()
    await env.clock.run_for(5)
    with pytest.raises(TimeoutError) as err:
        await waiter
    text = str(err.value)
    assert "unmounted volumes=[cfg]" in text
    assert "failed to process volumes=[cfg]" in text
    assert 'configmap "ns/later" not found' in text
    assert env.vol("u1", "empty-dir", "scratch").is_dir()  # the good volume is there
    # The source appears: the next retry (back-off 0.5 s doubling, capped) mounts it.
    env.source.set_config_map("ns", "later", {"k": "now"})
    waiter = asyncio.create_task(env.manager.wait_for_mounts(pod, 300))
    await env.clock.run_for(130)
    await waiter
    assert (env.vol("u1", "configmap", "cfg") / "k").read_text() == "now"
    assert env.manager.errors == {}


async def test_source_changes_reach_the_volume_on_refresh(env: Env) -> None:
    env.start()
    pod = make_pod()
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    cfg = env.vol("u1", "configmap", "cfg") / "key"
    env.source.set_config_map("ns", "cm", {"key": "v2"})
    await env.clock.run_for(30)
    assert cfg.read_text() == "v1"  # not yet: refresh period is 60 s
    await env.clock.run_for(31)
    assert cfg.read_text() == "v2"


async def test_pod_update_refreshes_downward_api_at_once(env: Env) -> None:
    env.start()
    pod = make_pod()
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    env.manager.add_pod(make_pod(labels={"v": "2"}))
    await env.clock.run_for(0.2)
    assert (env.vol("u1", "downward-api", "info") / "labels").read_text() == 'v="2"'


async def test_orphans_are_removed_after_the_grace_period_and_claimed_ones_adopted(
    env: Env,
) -> None:
    orphan = env.vol("gone", "empty-dir", "data")
    orphan.mkdir(parents=True)
    (orphan / "f").write_text("old")
    kept = env.vol("u1", "empty-dir", "scratch")
    kept.mkdir(parents=True)
    (kept / "survives").write_text("restart")
    env.start()
    await env.clock.run_for(1)
    pod = make_pod()
    env.manager.add_pod(pod)  # the agent found its pod again within the grace period
    await env.manager.wait_for_mounts(pod, 10)
    assert orphan.exists()
    await env.clock.run_for(30)
    assert not (env.root / "pods" / "gone").exists()
    assert (kept / "survives").read_text() == "restart"  # emptyDir content kept


async def test_container_mounts(env: Env) -> None:
    pod = make_pod(
        mounts=[
            {"name": "cfg", "mountPath": "/etc/config"},
            {
                "name": "scratch",
                "mountPath": "/data",
                "subPath": "app/logs",
                "mountPropagation": "HostToContainer",
            },
            {"name": "scratch", "mountPath": "/ro", "readOnly": True},
            {"name": "scratch", "mountPath": "/by-env", "subPathExpr": "$(POD)/x"},
        ],
        env=[{"name": "POD", "value": "p1"}],
    )
    env.start()
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    scratch = env.vol("u1", "empty-dir", "scratch")
    mounts = env.manager.container_mounts(pod, pod.spec.containers[0])
    assert mounts == [
        Mount("/etc/config", str(env.vol("u1", "configmap", "cfg")), readonly=True),
        Mount(
            "/data", str(scratch / "app" / "logs"), propagation=MountPropagation.HOST_TO_CONTAINER
        ),
        Mount("/ro", str(scratch), readonly=True),
        Mount("/by-env", str(scratch / "p1" / "x")),
    ]
    assert (scratch / "app" / "logs").is_dir()


def test_container_mount_errors_name_the_field(tmp_path: Path) -> None:
    manager = ReconcilingVolumeManager(tmp_path, may_mount=False)
    pod = make_pod(
        mounts=[
            {"name": "missing", "mountPath": "/m"},
            {"name": "scratch", "mountPath": "/b", "mountPropagation": "Bidirectional"},
            {"name": "scratch", "mountPath": "/e", "subPathExpr": "$(NOPE)"},
            {"name": "scratch", "mountPath": "/s", "subPath": "../../etc"},
            {"name": "scratch", "mountPath": "/p", "mountPropagation": "Sideways"},
        ]
    )
    (tmp_path / "pods/u1/volumes/kubernetes.io~empty-dir/scratch").mkdir(parents=True)
    with pytest.raises(ValidationError) as err:
        manager.container_mounts(pod, pod.spec.containers[0])
    found = {e.path: e.message for e in err.value.errors}
    base = "spec.containers[0].volumeMounts"
    assert found[f"{base}[0].name"] == 'volume "missing" not found in spec.volumes'
    assert "only to privileged containers" in found[f"{base}[1].mountPropagation"]
    assert found[f"{base}[2].subPathExpr"] == "missing value for NOPE"
    assert "must not contain" in found[f"{base}[3].subPath"]
    assert "Sideways" in found[f"{base}[4].mountPropagation"]
    privileged = make_pod(
        mounts=[{"name": "scratch", "mountPath": "/b", "mountPropagation": "Bidirectional"}],
        securityContext={"privileged": True},
    )
    [mount] = manager.container_mounts(privileged, privileged.spec.containers[0])
    assert mount.propagation is MountPropagation.BIDIRECTIONAL


async def test_metrics_have_the_kubelet_names(env: Env) -> None:
    env.start()
    pod = make_pod()
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    reg = env.manager.metrics.registry

    def total(plugin: str, state: str) -> float | None:
        return reg.get_sample_value(
            "volume_manager_total_volumes", {"plugin_name": plugin, "state": state}
        )

    for plugin in (
        "kubernetes.io/configmap",
        "kubernetes.io/empty-dir",
        "kubernetes.io/downward-api",
    ):
        assert total(plugin, "desired_state_of_world") == 1
        assert total(plugin, "actual_state_of_world") == 1
    assert (
        reg.get_sample_value(
            "storage_operation_duration_seconds_count",
            {
                "volume_plugin": "kubernetes.io/configmap",
                "operation_name": "volume_mount",
                "status": "success",
                "migrated": "false",
            },
        )
        == 1
    )
    env.manager.remove_pod(pod)
    await env.manager.wait_for_unmount(pod, 10)
    assert total("kubernetes.io/configmap", "actual_state_of_world") is None
    assert (
        reg.get_sample_value(
            "storage_operation_duration_seconds_count",
            {
                "volume_plugin": "kubernetes.io/empty-dir",
                "operation_name": "volume_unmount",
                "status": "success",
                "migrated": "false",
            },
        )
        == 1
    )


async def test_real_threads_and_real_clock(tmp_path: Path) -> None:
    """The default offload (worker threads) and clock work too."""
    source = StaticConfigSource()
    source.set_config_map("ns", "cm", {"key": "v"})
    manager = ReconcilingVolumeManager(tmp_path, config_source=source, may_mount=False)
    task = asyncio.create_task(manager.run())
    try:
        pod = make_pod()
        manager.add_pod(pod)
        await manager.wait_for_mounts(pod, 10)
        manager.remove_pod(pod)
        await manager.wait_for_unmount(pod, 10)
        assert not (tmp_path / "pods" / "u1").exists()
    finally:
        await manager.stop()
        await asyncio.wait_for(task, 5)


async def test_a_volume_whose_source_kind_changed_is_made_anew(env: Env) -> None:
    env.start()
    pod = make_pod(volumes=[{"name": "v", "emptyDir": {}}])
    env.manager.add_pod(pod)
    await env.manager.wait_for_mounts(pod, 10)
    old = env.vol("u1", "empty-dir", "v")
    assert old.is_dir()
    changed = make_pod(volumes=[{"name": "v", "configMap": {"name": "cm"}}])
    env.manager.add_pod(changed)
    await env.clock.run_for(0.2)
    await env.manager.wait_for_mounts(changed, 10)
    assert not old.exists()
    assert (env.vol("u1", "configmap", "v") / "key").read_text() == "v1"
    assert env.manager.actual.volumes[("u1", "v")].plugin == "kubernetes.io/configmap"


class BrokenSource(StaticConfigSource):
    def get_config_map(self, namespace: str, name: str) -> Any:
        raise RuntimeError("config server unreachable")


async def test_a_failing_source_fails_only_its_volume(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = ReconcilingVolumeManager(
        tmp_path, config_source=BrokenSource(), clock=clock, offload=inline, may_mount=False
    )
    task = asyncio.create_task(manager.run())
    try:
        pod = make_pod()
        manager.add_pod(pod)
        await clock.run_for(1)
        assert not task.done()  # the loop survived
        assert manager.errors == {
            ("u1", "cfg"): 'volume "cfg": RuntimeError: config server unreachable'
        }
        assert ("u1", "scratch") in manager.actual.volumes
        # The pod drops the volume: its retry and error go too, and the loop idles.
        manager.add_pod(make_pod(volumes=[{"name": "scratch", "emptyDir": {}}]))
        await clock.run_for(1)
        assert manager.errors == {}
        assert manager._next_delay() == manager.reconcile_period
    finally:
        await manager.stop()
        await asyncio.wait_for(task, 5)
