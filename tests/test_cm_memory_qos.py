"""MemoryQoS as the kubelet of v1.27 to v1.35 sets it on cgroup v2: memory.min at
container, pod and QoS level, memory.high for containers, from the configuration.

The container cases are upstream's TestGenerateContainerConfigWithMemoryQoSEnforced
(kuberuntime_container_linux_test.go); the tiers follow qos_container_manager_linux.go
setMemoryQoS. Expected byte counts are worked out by hand in the comments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Quantity, load_pod
from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver
from kubelet_kit.cm.cgroup_v2 import CgroupV2Driver
from kubelet_kit.cm.helpers import (
    container_linux_resources,
    container_memory_qos,
    qos_memory_min,
)
from kubelet_kit.cm.manager import QOS_UPDATE_PERIOD, CgroupContainerManager
from kubelet_kit.errors import ConfigurationError, ValidationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree

Q = Quantity.parse
MI = 1 << 20
GI = 1 << 30
CAPACITY = {"cpu": Q("4"), "memory": Q("8Gi"), "ephemeral-storage": Q("100Gi"), "pods": Q("10")}
MEMORY_QOS = {"MemoryQoS": True}


def pod(name: str, *containers: tuple[dict[str, str], dict[str, str]]) -> Any:
    """A pod whose containers have these (requests, limits)."""
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"{name}-uid"},
            "spec": {
                "containers": [
                    {
                        "name": f"c{i}",
                        "image": "busybox",
                        "resources": {"requests": req, "limits": lim},
                    }
                    for i, (req, lim) in enumerate(containers)
                ]
            },
        }
    )


# ----------------------------------------------------------------- container level

CONTAINERS = [
    # (requests, limits, allocatable, factor, page size, expected unified)
    pytest.param(
        {"memory": "128Mi"},
        {"memory": "256Mi"},
        32 * GI,
        0.9,
        4096,
        # 128Mi + 0.9 * 128Mi = 255013683.2 -> 62259 pages
        {"memory.min": str(128 * MI), "memory.high": "255012864"},
        id="Request128MBLimit256MB",
    ),
    pytest.param(
        {"memory": "128Mi"},
        {},
        32 * GI,
        0.9,
        4096,
        # 128Mi + 0.9 * (32Gi - 128Mi) = 30937186304, a whole number of pages
        {"memory.min": str(128 * MI), "memory.high": "30937186304"},
        id="Request128MBWithoutLimit",
    ),
    pytest.param(
        {"memory": "1Gi", "cpu": "1"},
        {"memory": "1Gi", "cpu": "1"},
        32 * GI,
        0.9,
        4096,
        {"memory.min": str(GI)},
        id="request-equals-limit-is-not-throttled",
    ),
    pytest.param(
        {},
        {"memory": "512Mi"},
        32 * GI,
        0.9,
        4096,
        # API defaulting makes the request the limit: protected, not throttled.
        {"memory.min": str(512 * MI)},
        id="limit-only",
    ),
    pytest.param({}, {}, 32 * GI, 0.9, 4096, {}, id="best-effort-gets-nothing"),
    pytest.param(
        {"memory": "128Mi"},
        {},
        0,
        0.9,
        4096,
        {"memory.min": str(128 * MI)},
        id="no-limit-and-no-allocatable-memory",
    ),
    pytest.param(
        {"memory": "100Mi"},
        {"memory": str(100 * MI + 4096)},
        32 * GI,
        0.9,
        4096,
        # 100Mi + 0.9 * 4096 rounds down to 100Mi: not above the request, not set.
        {"memory.min": str(100 * MI)},
        id="high-not-above-the-request",
    ),
    pytest.param(
        {"memory": "64Mi"},
        {"memory": "128Mi"},
        32 * GI,
        1.0,
        4096,
        {"memory.min": str(64 * MI), "memory.high": str(128 * MI)},
        id="factor-one-throttles-at-the-limit",
    ),
    pytest.param(
        {"memory": "100M"},
        {"memory": "200M"},
        32 * GI,
        0.9,
        65536,
        # 1e8 + 0.9e8 = 190000000 -> 2899 pages of 64 KiB
        {"memory.min": "100000000", "memory.high": "189988864"},
        id="64KiB-pages",
    ),
    pytest.param(
        {"memory": "100M"},
        {"memory": "200M"},
        32 * GI,
        0.9,
        4096,
        # the same with 4 KiB pages: 46386 pages
        {"memory.min": "100000000", "memory.high": "189997056"},
        id="4KiB-pages",
    ),
]


@pytest.mark.parametrize(
    ("requests", "limits", "allocatable", "factor", "page", "unified"), CONTAINERS
)
def test_container_memory_qos(
    requests: dict[str, str],
    limits: dict[str, str],
    allocatable: int,
    factor: float,
    page: int,
    unified: dict[str, str],
) -> None:
    p = pod("p", (requests, limits))
    got = container_memory_qos(
        p.spec.containers[0],
        allocatable_memory_bytes=allocatable,
        throttling_factor=factor,
        page_size=page,
    )
    assert got == unified


def test_container_linux_resources_carry_memory_qos_only_when_enforced() -> None:
    p = pod("p", ({"memory": "128Mi"}, {"memory": "256Mi"}))
    c = p.spec.containers[0]
    plain = container_linux_resources(p, c, memory_capacity_bytes=8 * GI)
    assert dict(plain.unified) == {}
    qos = container_linux_resources(
        p,
        c,
        memory_capacity_bytes=8 * GI,
        enforce_memory_qos=True,
        allocatable_memory_bytes=32 * GI,
        page_size=4096,
    )
    assert dict(qos.unified) == {"memory.min": str(128 * MI), "memory.high": "255012864"}
    # The rest is unchanged by MemoryQoS.
    assert qos.memory_limit_in_bytes == plain.memory_limit_in_bytes == 256 * MI


def test_qos_tier_memory_min() -> None:
    assert qos_memory_min({"Guaranteed": 3, "Burstable": 5}) == {"Guaranteed": 8, "Burstable": 5}
    assert qos_memory_min({"Guaranteed": 3}) == {"Guaranteed": 3, "Burstable": 0}
    assert qos_memory_min({}) == {"Guaranteed": 0, "Burstable": 0}


# ----------------------------------------------------------------- configuration


def test_configuration_reads_feature_gates_and_the_factor() -> None:
    config = load_kubelet_config(
        {"featureGates": {"MemoryQoS": True, "SomeOtherGate": False}, "memoryThrottlingFactor": 0.7}
    )
    assert config.feature_gate("MemoryQoS")
    assert not config.feature_gate("SomeOtherGate")
    assert not config.feature_gate("NotListed")
    assert config.memory_throttling_factor == 0.7
    assert load_kubelet_config({}).memory_throttling_factor == 0.9
    assert load_kubelet_config({"memoryThrottlingFactor": 1}).memory_throttling_factor == 1
    assert config.to_dict()["featureGates"] == {"MemoryQoS": True, "SomeOtherGate": False}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"memoryThrottlingFactor": 1.1},
            "memoryThrottlingFactor: Invalid value: 1.1: must be greater than 0 "
            "and less than or equal to 1.0",
        ),
        (
            {"memoryThrottlingFactor": 0},
            "memoryThrottlingFactor: Invalid value: 0: must be greater than 0",
        ),
        (
            {"memoryThrottlingFactor": "high"},
            'memoryThrottlingFactor: Invalid value: "high": expected a number',
        ),
        ({"featureGates": {"MemoryQoS": "yes"}}, "featureGates.MemoryQoS: Invalid value"),
    ],
)
def test_configuration_errors_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        load_kubelet_config(data)
    assert message in str(info.value)


def test_manager_needs_a_factor_when_memory_qos_is_on() -> None:
    with pytest.raises(ConfigurationError, match="memoryThrottlingFactor: Invalid value: None"):
        CgroupContainerManager(
            KubeletConfiguration(feature_gates=MEMORY_QOS, memory_throttling_factor=None),
            driver=CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()),
            capacity=CAPACITY,
        )
    # Off, a missing factor is no matter.
    mgr = CgroupContainerManager(
        KubeletConfiguration(memory_throttling_factor=None),
        driver=CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()),
        capacity=CAPACITY,
    )
    assert not mgr.enforce_memory_qos


def test_the_agent_builds_its_manager_from_the_feature_gate(tmp_path: Path) -> None:
    from kubelet_kit.agent.parts import container_manager_for

    on = container_manager_for(
        KubeletConfiguration(feature_gates=MEMORY_QOS, memory_throttling_factor=0.5),
        tmp_path,
        FakeClock(),
    )
    off = container_manager_for(KubeletConfiguration(), tmp_path, FakeClock())
    assert isinstance(on, CgroupContainerManager) and isinstance(off, CgroupContainerManager)
    assert (on.enforce_memory_qos, on.memory_throttling_factor) == (True, 0.5)
    assert (off.enforce_memory_qos, off.memory_throttling_factor) == (False, 0.9)


# ----------------------------------------------------------------- the manager on a tree


def make(
    tree: FakeCgroupTree, clock: FakeClock | None = None, **config: Any
) -> CgroupContainerManager:
    return CgroupContainerManager(
        KubeletConfiguration(**config),
        driver=CgroupV2Driver(files=tree, clock=FakeClock()),
        capacity=CAPACITY,
        clock=clock,
    )


def read(tree: FakeCgroupTree, cgroup: str, name: str = "memory.min") -> str:
    return tree.read(cgroup, name).strip()


GUARANTEED = pod("g", ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}))
BURSTABLE = pod(
    "b1",
    ({"memory": "256Mi"}, {"memory": "512Mi"}),
    ({"cpu": "100m"}, {}),  # a second container without a memory request
)
BURSTABLE_NO_LIMIT = pod("b2", ({"memory": "100M"}, {}))
BEST_EFFORT = pod("e", ({}, {}))


async def test_memory_min_at_pod_and_qos_level_as_pods_come_and_go() -> None:
    tree = FakeCgroupTree()
    mgr = make(tree, feature_gates=MEMORY_QOS)
    await mgr.start()
    assert read(tree, "kubepods") == "0"
    assert read(tree, "kubepods/burstable") == "0"
    paths = {
        p.metadata.name: (await mgr.ensure_pod_cgroup(p)).lstrip("/")
        for p in (
            GUARANTEED,
            BURSTABLE,
            BURSTABLE_NO_LIMIT,
            BEST_EFFORT,
        )
    }
    assert paths["g"] == "kubepods/podg-uid"
    # Each pod protects the sum of its containers' requests.
    assert read(tree, paths["g"]) == str(GI)
    assert read(tree, paths["b1"]) == str(256 * MI)
    assert read(tree, paths["b2"]) == "100000000"
    assert read(tree, paths["e"]) == "0"
    assert not [c for c in tree.calls if c == ("write", paths["e"], "memory.min")]
    # Burstable tier: its pods' requests; kubepods: Guaranteed plus Burstable.
    assert read(tree, "kubepods/burstable") == str(256 * MI + 100_000_000)
    assert read(tree, "kubepods") == str(GI + 256 * MI + 100_000_000)
    assert read(tree, "kubepods/besteffort") == "0"

    await mgr.remove_pod_cgroup(BURSTABLE)
    assert read(tree, "kubepods/burstable") == "100000000"
    assert read(tree, "kubepods") == str(GI + 100_000_000)
    await mgr.remove_pod_cgroup(GUARANTEED)
    assert read(tree, "kubepods") == "100000000"
    # Housekeeping removes the last Burstable pod: the protection goes with it.
    assert await mgr.remove_orphaned_pod_cgroups([BEST_EFFORT.uid]) == [BURSTABLE_NO_LIMIT.uid]
    assert read(tree, "kubepods/burstable") == "0"
    assert read(tree, "kubepods") == "0"


async def test_tiers_are_raised_before_a_new_pod_cgroup_is_made() -> None:
    tree = FakeCgroupTree()
    mgr = make(tree, feature_gates=MEMORY_QOS)
    await mgr.start()
    tree.calls.clear()
    await mgr.ensure_pod_cgroup(BURSTABLE)
    tier_write = tree.calls.index(("write", "kubepods/burstable", "memory.min"))
    pod_mkdir = tree.calls.index(("mkdir", "kubepods/burstable/podb1-uid", ""))
    assert tier_write < pod_mkdir
    # A second sync of the same pod rewrites no tier.
    tree.calls.clear()
    await mgr.ensure_pod_cgroup(BURSTABLE)
    assert ("write", "kubepods/burstable", "memory.min") not in tree.calls


async def test_container_resources_with_memory_qos() -> None:
    tree = FakeCgroupTree()
    # Allocatable for memory.high is capacity less reservations, without the
    # eviction threshold: 8Gi - 1Gi = 7516192768.
    mgr = make(tree, feature_gates=MEMORY_QOS, system_reserved={"memory": "1Gi"})
    await mgr.start()

    def unified(p: Any, i: int = 0) -> dict[str, str]:
        res = mgr.container_resources(p, p.spec.containers[i])
        assert res is not None
        return dict(res.unified)

    assert unified(GUARANTEED) == {"memory.min": str(GI)}
    # 256Mi + 0.9 * 256Mi = 510027366.4 -> 124518 pages
    assert unified(BURSTABLE) == {"memory.min": str(256 * MI), "memory.high": "510025728"}
    # No request, no limit: nothing (as in v1.27-v1.35).
    assert unified(BURSTABLE, 1) == {}
    # 1e8 + 0.9 * (7516192768 - 1e8) = 6774573491.2 -> 1653948 pages
    assert unified(BURSTABLE_NO_LIMIT) == {"memory.min": "100000000", "memory.high": "6774571008"}
    assert unified(BEST_EFFORT) == {}


async def test_the_throttling_factor_comes_from_the_configuration() -> None:
    mgr = make(FakeCgroupTree(), feature_gates=MEMORY_QOS, memory_throttling_factor=0.5)
    res = mgr.container_resources(BURSTABLE, BURSTABLE.spec.containers[0])
    assert res is not None
    # 256Mi + 0.5 * 256Mi = 384Mi
    assert res.unified["memory.high"] == str(384 * MI)


async def test_without_memory_qos_nothing_is_protected() -> None:
    tree = FakeCgroupTree()
    mgr = make(tree)
    await mgr.start()
    for p in (GUARANTEED, BURSTABLE):
        await mgr.ensure_pod_cgroup(p)
        res = mgr.container_resources(p, p.spec.containers[0])
        assert res is not None and dict(res.unified) == {}
    assert not [c for c in tree.calls if c[0] == "write" and c[2].startswith("memory.min")]


async def test_memory_qos_is_cgroup_v2_only(tmp_path: Path) -> None:
    mounts = {c: str(tmp_path / c) for c in ("cpu", "cpuacct", "memory", "pids")}
    for m in mounts.values():
        Path(m).mkdir()
    mgr = CgroupContainerManager(
        KubeletConfiguration(feature_gates=MEMORY_QOS),
        driver=CgroupV1Driver(mounts, use_cgroupspy=False),
        capacity=CAPACITY,
    )
    await mgr.start()
    path = await mgr.ensure_pod_cgroup(BURSTABLE)
    assert not mgr.memory_qos_enforced()
    res = mgr.container_resources(BURSTABLE, BURSTABLE.spec.containers[0])
    assert res is not None and dict(res.unified) == {}
    # Nothing written in the memory hierarchy (no limit either: one container has none).
    assert list(Path(mounts["memory"] + path).iterdir()) == []
    assert list(Path(mounts["memory"], "kubepods", "burstable").glob("memory.*")) == []


async def test_tiers_are_reapplied_periodically() -> None:
    tree = FakeCgroupTree()
    clock = FakeClock()
    mgr = make(tree, clock, feature_gates=MEMORY_QOS)
    await mgr.start()
    await mgr.ensure_pod_cgroup(BURSTABLE)
    # Something else resets the tier; housekeeping puts it back within a period.
    tree.write("kubepods/burstable", "memory.min", "0")
    await mgr.remove_orphaned_pod_cgroups([BURSTABLE.uid])
    assert read(tree, "kubepods/burstable") == "0"
    clock.advance(QOS_UPDATE_PERIOD)
    await mgr.remove_orphaned_pod_cgroups([BURSTABLE.uid])
    assert read(tree, "kubepods/burstable") == str(256 * MI)
    # And on demand.
    tree.write("kubepods", "memory.min", "0")
    await mgr.update_qos_cgroups()
    assert read(tree, "kubepods") == str(256 * MI)
