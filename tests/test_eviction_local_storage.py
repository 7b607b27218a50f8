"""Eviction for local-storage limits (upstream ``localStorageEviction``): an emptyDir
over its sizeLimit, a pod over its ephemeral-storage limit, a container over its own;
the kubelet's messages, immediate grace, no DisruptionTarget, and the composer."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import pytest
from _eviction_helpers import Killer, Mi, make_pod, manager

from kubelet_kit.api import (
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Volume,
)
from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
from kubelet_kit.eviction import ContainerUsage, EvictionConfig, ThresholdEvictionManager
from kubelet_kit.eviction.local_storage import (
    SIGNAL_EMPTY_DIR_FS_LIMIT,
    SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT,
    SIGNAL_EPHEMERAL_POD_FS_LIMIT,
    local_storage_violation,
)
from kubelet_kit.eviction.stats import PodUsage, VolumeUsage
from kubelet_kit.testing import FakeClock, KubeletEnv
from kubelet_kit.testing.fake_stats import FakeStatsProvider


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def storage_pod(
    name: str,
    *,
    size_limit: str | None = None,
    limits: Mapping[str, str] | None = None,
    containers: tuple[str, ...] = ("app",),
    annotations: Mapping[str, str] | None = None,
) -> Pod:
    """A pod with an emptyDir ``data`` (of ``size_limit``) and containers each
    limited to ``limits``."""
    res = ResourceRequirements(limits={k: Quantity.parse(v) for k, v in (limits or {}).items()})
    limit = Quantity.parse(size_limit) if size_limit is not None else None
    return Pod(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}", annotations=dict(annotations or {})),
        spec=PodSpec(
            volumes=(Volume(name="data", empty_dir=EmptyDirVolumeSource(size_limit=limit)),),
            containers=tuple(
                Container(name=c, image="busybox:1.36", resources=res) for c in containers
            ),
        ),
    )


def usage(
    pod: Pod, *, data: int = 0, rootfs: int = 0, logs: int = 0, containers: tuple[str, ...] = ()
) -> PodUsage:
    names = containers or tuple(c.name for c in pod.spec.containers)
    return PodUsage(
        uid=pod.uid,
        containers=tuple(
            ContainerUsage(n, rootfs_used_bytes=rootfs, logs_used_bytes=logs) for n in names
        ),
        volumes={"data": VolumeUsage(used_bytes=data)},
    )


# -- which limit, and the kubelet's message ----------------------------------------------


def test_empty_dir_over_its_size_limit() -> None:
    pod = storage_pod("p", size_limit="1Mi")
    over = local_storage_violation(pod, usage(pod, data=Mi + 1), dedicated_image_fs=False)
    assert over is not None
    assert over.signal == SIGNAL_EMPTY_DIR_FS_LIMIT
    assert over.message == 'Usage of EmptyDir volume "data" exceeds the limit "1Mi". '
    # At the limit is within it; a limit of 0 (or none) is no limit.
    assert local_storage_violation(pod, usage(pod, data=Mi), dedicated_image_fs=False) is None
    for unlimited in (storage_pod("z", size_limit="0"), storage_pod("n")):
        big = usage(unlimited, data=100 * Mi)
        assert local_storage_violation(unlimited, big, dedicated_image_fs=False) is None


def test_pod_over_the_sum_of_its_containers_limits() -> None:
    pod = storage_pod("p", limits={"ephemeral-storage": "1Mi"}, containers=("a", "b"))
    # Each container within its own 1Mi, but together with the volume over 2Mi.
    measured = usage(pod, data=Mi, rootfs=Mi // 2, logs=Mi // 4)
    over = local_storage_violation(pod, measured, dedicated_image_fs=False)
    assert over is not None
    assert over.signal == SIGNAL_EPHEMERAL_POD_FS_LIMIT
    assert over.message == (
        "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
    )
    within = usage(pod, data=Mi // 2, rootfs=Mi // 2, logs=Mi // 4)
    assert local_storage_violation(pod, within, dedicated_image_fs=False) is None


def test_container_over_its_own_limit() -> None:
    pod = storage_pod("p", containers=("app", "side"))
    pod = attrs.evolve(
        pod,
        spec=attrs.evolve(
            pod.spec,
            containers=(
                attrs.evolve(
                    pod.spec.containers[0],
                    resources=ResourceRequirements(
                        limits={"ephemeral-storage": Quantity.parse("4Mi")}
                    ),
                ),
                pod.spec.containers[1],
            ),
        ),
    )
    # The pod's limit is only app's 4Mi (side has none), and app's use is over it.
    measured = PodUsage(
        uid=pod.uid,
        containers=(
            ContainerUsage("app", rootfs_used_bytes=3 * Mi, logs_used_bytes=2 * Mi),
            ContainerUsage("side", rootfs_used_bytes=0, logs_used_bytes=0),
        ),
    )
    over = local_storage_violation(pod, measured, dedicated_image_fs=False)
    assert over is not None and over.signal == SIGNAL_EPHEMERAL_POD_FS_LIMIT
    # Only the container check: with the pod total under the limit (the volume is
    # not counted twice), the container's own use decides.
    pod_limit_high = attrs.evolve(
        pod,
        spec=attrs.evolve(
            pod.spec,
            containers=(
                pod.spec.containers[0],
                attrs.evolve(
                    pod.spec.containers[1],
                    resources=ResourceRequirements(
                        limits={"ephemeral-storage": Quantity.parse("10Mi")}
                    ),
                ),
            ),
        ),
    )
    over = local_storage_violation(pod_limit_high, measured, dedicated_image_fs=False)
    assert over is not None
    assert over.signal == SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT
    assert over.message == 'Container app exceeded its local ephemeral storage limit "4Mi". '
    # With images on a filesystem of their own, the writable layer is not the
    # node's: only the 2Mi of logs count, within the limit.
    assert local_storage_violation(pod_limit_high, measured, dedicated_image_fs=True) is None


# -- the manager -------------------------------------------------------------------------


async def test_manager_evicts_at_once_without_a_disruption_target(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    stats.set_memory(available="8Gi", capacity="16Gi")  # no node pressure at all
    full = storage_pod("full", size_limit="1Mi")
    fine = storage_pod("fine", size_limit="1Mi")
    stats.set_pod(full, volumes={"data": 2 * Mi})
    stats.set_pod(fine, volumes={"data": Mi // 2})
    kill = Killer([full, fine], stats)
    m = manager(stats, clock)
    assert await m.synchronize(kill, kill.active) is full
    assert kill.calls == [
        ("full", 0.0, "Evicted", 'Usage of EmptyDir volume "data" exceeds the limit "1Mi". ')
    ]
    assert kill.conditions == [None]  # upstream sets DisruptionTarget for node pressure only
    assert m.node_conditions() == frozenset()
    assert m.metrics.evictions.get(SIGNAL_EMPTY_DIR_FS_LIMIT) == 1
    assert await m.synchronize(kill, kill.active) is None
    assert kill.evicted == ["full"]


async def test_every_pod_over_a_limit_goes_in_one_round(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    pods = [storage_pod(n, size_limit="1Mi") for n in ("a", "b", "c")]
    for p in pods:
        stats.set_pod(p, volumes={"data": 2 * Mi if p.name != "b" else 0})
    kill = Killer(list(pods), stats)
    # No node thresholds at all: the limits are still enforced, as upstream.
    m = manager(stats, clock, thresholds=(), hard_eviction_grace_period=1)
    assert await m.synchronize(kill, kill.active) is pods[0]
    assert [(c[0], c[1]) for c in kill.calls] == [("a", 1.0), ("c", 1.0)]


async def test_critical_pods_and_isolation_off_are_left_alone(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    static = storage_pod(
        "static", size_limit="1Mi", annotations={"kubernetes.io/config.source": "file"}
    )
    stats.set_pod(static, volumes={"data": 5 * Mi})
    kill = Killer([static], stats)
    assert await manager(stats, clock).synchronize(kill, kill.active) is None
    other = storage_pod("other", size_limit="1Mi")
    stats.set_pod(other, volumes={"data": 5 * Mi})
    kill = Killer([other], stats)
    off = manager(stats, clock, thresholds=(), local_storage_capacity_isolation=False)
    assert await off.synchronize(kill, kill.active) is None
    assert kill.calls == []


def test_local_storage_capacity_isolation_is_read_from_the_configuration() -> None:
    config = load_kubelet_config(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "localStorageCapacityIsolation": False,
        }
    )
    assert EvictionConfig.from_kubelet_config(config).local_storage_capacity_isolation is False
    assert EvictionConfig.from_kubelet_config(
        KubeletConfiguration()
    ).local_storage_capacity_isolation
    m = ThresholdEvictionManager(stats=FakeStatsProvider(), config=config)
    assert m.local_storage_capacity_isolation is False


async def test_threshold_evictions_carry_a_disruption_target(clock: FakeClock) -> None:
    stats = FakeStatsProvider(clock=clock)
    stats.set_memory(available="100Mi", capacity="4Gi")
    hog = make_pod("hog", requests={"memory": "100Mi"})
    stats.set_pod(hog, memory="3Gi")
    kill = Killer([hog], stats)
    await manager(stats, clock).synchronize(kill, kill.active)
    [(_, _, reason, message)] = kill.calls
    [condition] = kill.conditions
    assert condition is not None
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "DisruptionTarget",
        "True",
        "TerminationByKubelet",
        message,
    )
    assert reason == "Evicted"


# -- through the composer ----------------------------------------------------------------


async def test_composer_evicts_a_pod_whose_empty_dir_is_over_its_limit() -> None:
    clock = FakeClock()
    stats = FakeStatsProvider(clock=clock)
    m = ThresholdEvictionManager(stats=stats, clock=clock, thresholds=())
    async with KubeletEnv(clock=clock, eviction_manager=m) as env:
        for name in ("writer", "quiet"):
            pod = env.add_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "uid": f"uid-{name}"},
                    "spec": {
                        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Mi"}}],
                        "containers": [
                            {"name": "main", "image": "busybox:1.36", "command": ["sleep", "1h"]}
                        ],
                    },
                }
            )
            stats.set_pod(pod, volumes={"data": 3 * Mi if name == "writer" else 0})
        await env.wait_for(lambda: env.phase("writer") == "Failed", what="writer evicted")
        status = env.status("writer")
        message = 'Usage of EmptyDir volume "data" exceeds the limit "1Mi". '
        assert (status.reason, status.message) == ("Evicted", message)
        assert "DisruptionTarget" not in [c.type for c in status.conditions]
        [event] = [e for e in env.kubelet.events.events("uid-writer") if e.reason == "Evicted"]
        assert (event.type, event.message) == ("Warning", message)
        assert await env.running_containers("uid-writer") == []
        await env.sleep(30)
        assert env.phase("quiet") == "Running"
