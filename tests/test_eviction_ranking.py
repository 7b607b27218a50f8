"""Ranking and eviction messages, on upstream's own test cases.

The pods, usages and expected orders are ported as data from Kubernetes'
pkg/kubelet/eviction/helpers_test.go (TestOrderedByExceedsRequestMemory,
TestOrderedByExceedsRequestDisk, TestOrderedByPriority, TestOrderedbyDisk,
TestOrderedbyInodes, TestOrderedByPriorityDisk, TestOrderedByPriorityInodes,
TestOrderedByMemory, TestOrderedByPriorityMemory, TestOrderedByPriorityProcess).
Upstream sorts with single comparators in some of these; each expected order is
also the order of the full ranking, which is what is tested here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import pytest

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
from kubelet_kit.eviction import ContainerUsage, PodUsage, VolumeUsage
from kubelet_kit.eviction.policy import eviction_message
from kubelet_kit.eviction.ranking import (
    FS_LOCAL_VOLUMES,
    FS_LOGS,
    FS_ROOT,
    RequestCache,
    disk_measures,
    pod_request,
    rank_disk_pressure,
    rank_for_signal,
    rank_memory_pressure,
    rank_pid_pressure,
)
from kubelet_kit.eviction.thresholds import (
    IMAGEFS_AVAILABLE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    Observation,
    parse_threshold_config,
)

LOW, DEFAULT, HIGH = -1, 0, 1
ALL_FS = {FS_ROOT, FS_LOGS, FS_LOCAL_VOLUMES}
Res = Mapping[str, str]


def q(text: str) -> int:
    return Quantity.parse(text).value()


def make_pod(
    name: str,
    priority: int | None,
    requests: Res | None = None,
    limits: Res | None = None,
    *,
    local_volume: bool = False,
) -> Pod:
    """A pod of one container named after it (upstream's newPod + newContainer)."""
    res = ResourceRequirements(
        requests={k: Quantity.parse(v) for k, v in (requests or {}).items()},
        limits={k: Quantity.parse(v) for k, v in (limits or {}).items()},
    )
    volumes = (
        (Volume(name="local-volume", empty_dir=EmptyDirVolumeSource()),) if local_volume else ()
    )
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PodSpec(
            priority=priority,
            containers=(Container(name=name, image="busybox:1.36", resources=res),),
            volumes=volumes,
        ),
    )


def memory_stats(pod: Pod, working_set: str) -> PodUsage:
    """upstream newPodMemoryStats: the pod and its containers at ``working_set``."""
    ws = q(working_set)
    return PodUsage(
        uid=pod.uid,
        memory_working_set_bytes=ws,
        containers=tuple(
            ContainerUsage(c.name, memory_working_set_bytes=ws) for c in pod.spec.containers
        ),
    )


def disk_stats(pod: Pod, rootfs: str, logs: str, per_volume: str) -> PodUsage:
    """upstream newPodDiskStats: bytes in each container's rootfs and logs, and in
    each local volume."""
    return PodUsage(
        uid=pod.uid,
        containers=tuple(
            ContainerUsage(c.name, rootfs_used_bytes=q(rootfs), logs_used_bytes=q(logs))
            for c in pod.spec.containers
        ),
        volumes={v.name: VolumeUsage(used_bytes=q(per_volume)) for v in pod.spec.volumes},
    )


def inode_stats(pod: Pod, rootfs: str, logs: str, per_volume: str) -> PodUsage:
    """upstream newPodInodeStats: inodes instead of bytes."""
    return PodUsage(
        uid=pod.uid,
        containers=tuple(
            ContainerUsage(c.name, rootfs_inodes_used=q(rootfs), logs_inodes_used=q(logs))
            for c in pod.spec.containers
        ),
        volumes={v.name: VolumeUsage(inodes_used=q(per_volume)) for v in pod.spec.volumes},
    )


def by_uid(stats: Sequence[PodUsage]) -> dict[str, PodUsage]:
    return {s.uid: s for s in stats}


def names(pods: Sequence[Pod]) -> list[str]:
    return [p.name for p in pods]


def test_ordered_by_exceeds_request_memory() -> None:
    below = make_pod("below-requests", -1, {"memory": "200Mi"})
    exceeds = make_pod("exceeds-requests", 1, {"memory": "100Mi"})
    stats = by_uid([memory_stats(below, "199Mi"), memory_stats(exceeds, "101Mi")])
    assert names(rank_memory_pressure([below, exceeds], stats)) == names([exceeds, below])


def test_ordered_by_exceeds_request_disk() -> None:
    below = make_pod("below-requests", -1, {"ephemeral-storage": "200Mi"})
    exceeds = make_pod("exceeds-requests", 1, {"ephemeral-storage": "100Mi"})
    stats = by_uid(
        [disk_stats(below, "100Mi", "99Mi", "0Mi"), disk_stats(exceeds, "90Mi", "11Mi", "0Mi")]
    )
    ranked = rank_disk_pressure([below, exceeds], stats, measure=ALL_FS)
    assert names(ranked) == names([exceeds, below])


def test_ordered_by_priority() -> None:
    low = make_pod("low-priority", -134)
    medium = make_pod(
        "medium-priority", 1, {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"}
    )
    high = make_pod(
        "high-priority",
        12534,
        {"cpu": "200m", "memory": "200Mi"},
        {"cpu": "200m", "memory": "200Mi"},
    )
    # no stats for anyone: priority alone decides
    assert names(rank_memory_pressure([high, medium, low], {})) == names([low, medium, high])


def test_ordered_by_disk() -> None:
    pods = [
        make_pod("best-effort-high", DEFAULT, local_volume=True),
        make_pod("best-effort-low", DEFAULT, local_volume=True),
        make_pod(
            "burstable-high",
            DEFAULT,
            {"ephemeral-storage": "100Mi"},
            {"ephemeral-storage": "400Mi"},
            local_volume=True,
        ),
        make_pod(
            "burstable-low",
            DEFAULT,
            {"ephemeral-storage": "100Mi"},
            {"ephemeral-storage": "400Mi"},
            local_volume=True,
        ),
        make_pod(
            "guaranteed-high",
            DEFAULT,
            {"ephemeral-storage": "400Mi"},
            {"ephemeral-storage": "400Mi"},
            local_volume=True,
        ),
        make_pod(
            "guaranteed-low",
            DEFAULT,
            {"ephemeral-storage": "400Mi"},
            {"ephemeral-storage": "400Mi"},
            local_volume=True,
        ),
    ]
    usage = [
        ("50Mi", "100Mi", "150Mi"),
        ("25Mi", "25Mi", "50Mi"),
        ("150Mi", "150Mi", "50Mi"),
        ("25Mi", "35Mi", "50Mi"),
        ("225Mi", "100Mi", "50Mi"),
        ("25Mi", "45Mi", "50Mi"),
    ]
    stats = by_uid([disk_stats(p, *u) for p, u in zip(pods, usage, strict=True)])
    p1, p2, p3, p4, p5, p6 = pods
    ranked = rank_disk_pressure(pods, stats, measure=ALL_FS)
    assert names(ranked) == names([p1, p3, p2, p4, p5, p6])


def test_ordered_by_inodes() -> None:
    low = make_pod("low", DEFAULT, local_volume=True)
    medium = make_pod("medium", DEFAULT, local_volume=True)
    high = make_pod("high", DEFAULT, local_volume=True)
    stats = by_uid(
        [
            inode_stats(low, "50000", "100000", "50000"),
            inode_stats(medium, "100000", "150000", "50000"),
            inode_stats(high, "200000", "150000", "50000"),
        ]
    )
    ranked = rank_disk_pressure([low, medium, high], stats, measure=ALL_FS, resource="inodes")
    assert names(ranked) == names([high, medium, low])


def test_ordered_by_priority_disk() -> None:
    spec = [
        ("above-requests-low-priority-high-usage", LOW, None, ("200Mi", "100Mi", "200Mi")),
        ("above-requests-low-priority-low-usage", LOW, None, ("10Mi", "10Mi", "30Mi")),
        ("above-requests-high-priority-high-usage", HIGH, "100Mi", ("200Mi", "150Mi", "250Mi")),
        ("above-requests-high-priority-low-usage", HIGH, "100Mi", ("90Mi", "50Mi", "10Mi")),
        ("below-requests-low-priority-high-usage", LOW, "1Gi", ("500Mi", "200Mi", "100Mi")),
        ("below-requests-low-priority-low-usage", LOW, "1Gi", ("50Mi", "100Mi", "50Mi")),
        ("below-requests-high-priority-high-usage", HIGH, "1Gi", ("250Mi", "500Mi", "50Mi")),
        ("below-requests-high-priority-low-usage", HIGH, "1Gi", ("100Mi", "60Mi", "40Mi")),
    ]
    pods = [
        make_pod(n, p, {"ephemeral-storage": r} if r else None, local_volume=True)
        for n, p, r, _ in spec
    ]
    stats = by_uid([disk_stats(pod, *s[3]) for pod, s in zip(pods, spec, strict=True)])
    ranked = rank_disk_pressure(list(reversed(pods)), stats, measure=ALL_FS)
    assert names(ranked) == names(pods)


def test_ordered_by_priority_inodes() -> None:
    spec = [
        ("low-priority-high-usage", LOW, ("50000", "100000", "250000")),
        ("low-priority-low-usage", LOW, ("60000", "30000", "10000")),
        ("high-priority-high-usage", HIGH, ("150000", "150000", "50000")),
        ("high-priority-low-usage", HIGH, ("10000", "40000", "100000")),
    ]
    pods = [make_pod(n, p, local_volume=True) for n, p, _ in spec]
    stats = by_uid([inode_stats(pod, *s[2]) for pod, s in zip(pods, spec, strict=True)])
    ranked = rank_disk_pressure(list(reversed(pods)), stats, measure=ALL_FS, resource="inodes")
    assert names(ranked) == names(pods)


def test_ordered_by_memory() -> None:
    pods = [
        make_pod("best-effort-high", DEFAULT),
        make_pod("best-effort-low", DEFAULT),
        make_pod("burstable-high", DEFAULT, {"memory": "100Mi"}, {"memory": "1Gi"}),
        make_pod("burstable-low", DEFAULT, {"memory": "100Mi"}, {"memory": "1Gi"}),
        make_pod("guaranteed-high", DEFAULT, {"memory": "1Gi"}, {"memory": "1Gi"}),
        make_pod("guaranteed-low", DEFAULT, {"memory": "1Gi"}, {"memory": "1Gi"}),
    ]
    usage = ["500Mi", "300Mi", "800Mi", "300Mi", "800Mi", "200Mi"]
    stats = by_uid([memory_stats(p, u) for p, u in zip(pods, usage, strict=True)])
    p1, p2, p3, p4, p5, p6 = pods
    assert names(rank_memory_pressure(pods, stats)) == names([p3, p1, p2, p4, p5, p6])


def test_ordered_by_priority_memory() -> None:
    spec = [
        ("above-requests-low-priority-high-usage", LOW, None, "500Mi"),
        ("above-requests-low-priority-low-usage", LOW, None, "50Mi"),
        ("above-requests-high-priority-high-usage", HIGH, "100Mi", "600Mi"),
        ("above-requests-high-priority-low-usage", HIGH, "100Mi", "150Mi"),
        ("below-requests-low-priority-high-usage", LOW, "1Gi", "800Mi"),
        ("below-requests-low-priority-low-usage", LOW, "1Gi", "200Mi"),
        ("below-requests-high-priority-high-usage", HIGH, "1Gi", "800Mi"),
        ("below-requests-high-priority-low-usage", HIGH, "1Gi", "200Mi"),
    ]
    pods = [make_pod(n, p, {"memory": r} if r else None) for n, p, r, _ in spec]
    stats = by_uid([memory_stats(pod, s[3]) for pod, s in zip(pods, spec, strict=True)])
    assert names(rank_memory_pressure(list(reversed(pods)), stats)) == names(pods)


def test_ordered_by_priority_process() -> None:
    spec = [
        ("low-priority-high-usage", LOW, 20),
        ("low-priority-low-usage", LOW, 6),
        ("high-priority-high-usage", HIGH, 20),
        ("high-priority-low-usage", HIGH, 5),
    ]
    pods = [make_pod(n, p) for n, p, _ in spec]
    stats = by_uid(
        [PodUsage(pod.uid, process_count=s[2]) for pod, s in zip(pods, spec, strict=True)]
    )
    assert names(rank_pid_pressure(list(reversed(pods)), stats)) == names(pods)


def test_pods_without_stats_are_ranked_first() -> None:
    measured = make_pod("measured", LOW)
    unmeasured = make_pod("unmeasured", HIGH, {"memory": "1Gi"})
    stats = by_uid([memory_stats(measured, "2Gi")])
    assert names(rank_memory_pressure([measured, unmeasured], stats)) == ["unmeasured", "measured"]
    disk = by_uid([disk_stats(measured, "1Gi", "1Gi", "0")])
    assert names(rank_disk_pressure([measured, unmeasured], disk, measure=ALL_FS)) == [
        "unmeasured",
        "measured",
    ]
    # for pids, priority comes first, then missing stats
    other = make_pod("other-low", LOW)
    pids = by_uid([PodUsage(measured.uid, process_count=500)])
    ranked = rank_pid_pressure([measured, unmeasured, other], pids)
    assert names(ranked) == ["other-low", "measured", "unmeasured"]


def test_disk_measures_follow_the_filesystem_layout() -> None:
    assert disk_measures(NODEFS_AVAILABLE, False) == ALL_FS
    assert disk_measures(IMAGEFS_AVAILABLE, False) == ALL_FS
    assert disk_measures(NODEFS_AVAILABLE, True) == {FS_LOGS, FS_LOCAL_VOLUMES}
    assert disk_measures(IMAGEFS_AVAILABLE, True) == {FS_ROOT}
    # with a dedicated imagefs, a pod whose writable layer is huge does not rank
    # first for nodefs pressure; its logs and volumes count instead
    layer = make_pod("big-layer", DEFAULT, local_volume=True)
    logs = make_pod("big-logs", DEFAULT, local_volume=True)
    stats = by_uid([disk_stats(layer, "5Gi", "1Mi", "0"), disk_stats(logs, "1Mi", "2Gi", "0")])
    nodefs_rank = rank_for_signal(NODEFS_AVAILABLE, True)
    imagefs_rank = rank_for_signal(IMAGEFS_AVAILABLE, True)
    assert nodefs_rank is not None and imagefs_rank is not None
    assert names(nodefs_rank([layer, logs], stats)) == ["big-logs", "big-layer"]
    assert names(imagefs_rank([layer, logs], stats)) == ["big-layer", "big-logs"]
    inodes = rank_for_signal(NODEFS_INODES_FREE, False)
    assert inodes is not None
    assert rank_for_signal("bogus.signal", False) is None


def test_pod_request_counts_init_sidecars_and_overhead() -> None:
    base = make_pod("p", None, {"memory": "100Mi"})
    init = Container(
        name="init",
        image="x:1",
        resources=ResourceRequirements(requests={"memory": Quantity.parse("300Mi")}),
    )
    sidecar = Container(
        name="side",
        image="x:1",
        restart_policy="Always",
        resources=ResourceRequirements(requests={"memory": Quantity.parse("50Mi")}),
    )
    with_init = attrs.evolve(base, spec=attrs.evolve(base.spec, init_containers=(init,)))
    assert pod_request(with_init, "memory") == q("300Mi")  # the init container's need wins
    with_side = attrs.evolve(
        base,
        spec=attrs.evolve(
            base.spec, init_containers=(sidecar,), overhead={"memory": Quantity.parse("10Mi")}
        ),
    )
    assert pod_request(with_side, "memory") == q("160Mi")
    assert pod_request(base, "ephemeral-storage") == 0


# -- the eviction message -------------------------------------------------------------


def test_eviction_message_names_resource_threshold_container_usage_and_request() -> None:
    pod = make_pod("hog", DEFAULT, {"memory": "100Mi"})
    usage = memory_stats(pod, "200Mi")
    thresholds = parse_threshold_config(eviction_hard={"memory.available": "100Mi"})
    observations = {MEMORY_AVAILABLE: Observation(q("50Mi"), q("2Gi"))}
    assert eviction_message("memory", pod, usage, thresholds, observations) == (
        "The node was low on resource: memory. "
        "Threshold quantity: 100Mi, available: 50Mi. "
        "Container hog was using 200Mi, request is 100Mi, has larger consumption of memory. "
    )


def test_eviction_message_for_disk_counts_rootfs_and_logs_and_skips_modest_containers() -> None:
    pod = make_pod("writer", DEFAULT, {"ephemeral-storage": "1Gi"})
    usage = disk_stats(pod, "512Mi", "256Mi", "0")  # 768Mi < 1Gi request: not named
    thresholds = parse_threshold_config(eviction_hard={"nodefs.available": "10%"})
    observations = {NODEFS_AVAILABLE: Observation(q("1Gi"), q("100Gi"))}
    assert eviction_message("ephemeral-storage", pod, usage, thresholds, observations) == (
        "The node was low on resource: ephemeral-storage. "
        "Threshold quantity: 10737418400, available: 1Gi. "
    )
    greedy = make_pod("greedy", DEFAULT)
    msg = eviction_message(
        "ephemeral-storage", greedy, disk_stats(greedy, "1Gi", "1Gi", "0"), thresholds, observations
    )
    assert msg.endswith(
        "Container greedy was using 2Gi, request is 0, has larger consumption "
        "of ephemeral-storage. "
    )


@pytest.mark.parametrize("resource", ["memory", "ephemeral-storage"])
def test_eviction_message_without_stats_names_only_the_resource(resource: str) -> None:
    pod = make_pod("p", DEFAULT)
    assert eviction_message(resource, pod, None, [], {}) == (
        f"The node was low on resource: {resource}. "
    )


def test_request_cache_remembers_per_pod_object_and_forgets_inactive_pods() -> None:
    small = make_pod("p", DEFAULT, {"memory": "100Mi"})
    cache = RequestCache()
    stats = by_uid([memory_stats(small, "150Mi")])
    other = make_pod("other", DEFAULT)
    stats[other.uid] = memory_stats(other, "120Mi")
    # small exceeds its 100Mi request by 50Mi, other (BestEffort) by 120Mi
    assert names(rank_memory_pressure([small, other], stats, cache=cache)) == ["other", "p"]
    assert len(cache) == 2
    # an updated pod is a new object with the same uid: its new request is used
    bigger = attrs.evolve(
        small,
        spec=attrs.evolve(
            small.spec,
            containers=(
                Container(
                    name="p",
                    image="busybox:1.36",
                    resources=ResourceRequirements(requests={"memory": Quantity.parse("1Gi")}),
                ),
            ),
        ),
    )
    assert names(rank_memory_pressure([bigger, other], stats, cache=cache)) == ["other", "p"]
    stats[bigger.uid] = memory_stats(bigger, "2Gi")  # now 1Gi over its request
    assert names(rank_memory_pressure([bigger, other], stats, cache=cache)) == ["p", "other"]
    cache.retain([bigger])
    assert len(cache) == 1
    assert cache.request(bigger, "memory") == q("1Gi")
